/**
 * The inlining of a compiled method (`nmethod`): which methods, at which bytecode, a pc of its code runs.
 * C1 and C2 record it for deoptimization as a table of `PcDesc`s (a pc offset from the code's start, and
 * where its scope is in the scopes data) and the scopes data itself: per scope, in HotSpot's compressed
 * stream coding, the offset of its caller's scope (0: none), the index of its `Method*` in the nmethod's
 * metadata (from 1), and its bytecode index plus one.
 *
 * Where these live moved: up to JDK 22 inside the nmethod (offsets from it, `_scopes_data_begin` a
 * pointer); from JDK 23 in a separate immutable data block, and from JDK 25 the metadata in the mutable
 * data block after the relocations. {@linkcode compiledScopesLayout} decides from the tables which.
 *
 * @example
 * ```ts ignore
 * import { compiledScopesLayout, readCompiledScopes, scopesAt } from "./compiled_scopes.ts";
 * const scopes = readCompiledScopes(memory, compiledScopesLayout(vm), blob);
 * for (const frame of scopesAt(scopes, pc - blob.codeBegin, excluded)) console.log(frame.method, frame.bci);
 * ```
 *
 * @module
 */
import type { RemoteMemory } from "../remote_memory.ts";
import type { CodeBlob } from "./code_cache.ts";
import { type VmStructs, VmStructsError } from "./vm_structs.ts";

/** The most bytes of scopes and metadata read for one method (C2's largest are a few hundred KiB). */
const MAX_SCOPES_BYTES = 4 << 20;
/** Deepest inlining followed (C2's MaxInlineLevel is 15; a loop in hostile data ends here). */
const MAX_INLINE_DEPTH = 64;

/** Where an nmethod keeps its scopes, pc descriptors and metadata. */
export type CompiledScopesLayout =
  & { pcDescSize: number; pcDescPcOffset: number; pcDescScopeOffset: number }
  & (
    | {
      /** Up to JDK 22: offsets from the nmethod, `_scopes_data_begin` a pointer. */
      kind: "inline";
      metadataOffset: number;
      scopesDataBegin: number;
      scopesPcsOffset: number;
      dependenciesOffset: number;
    }
    | {
      /** JDK 23 and later: the immutable data block; the metadata after the relocations (JDK 25). */
      kind: "immutable";
      immutableData: number;
      immutableDataSize: number;
      scopesPcsOffset: number;
      scopesDataOffset: number;
      mutableData: number;
      mutableDataSize: number;
      relocationSize: number;
    }
  );

/**
 * The scopes' layout in `vm`'s tables.
 *
 * @throws {VmStructsError} when the tables have neither layout (JDK 23 and 24 keep the metadata after the
 *   code, which is not read).
 */
export function compiledScopesLayout(vm: VmStructs): CompiledScopesLayout {
  const offset = (type: string, name: string): number => {
    const field = vm.field(type, name);
    if (field === null) throw new VmStructsError(`no field ${type}.${name} in the tables`);
    return field.offset;
  };
  const pcDescSize = vm.size("PcDesc");
  if (pcDescSize === null || pcDescSize < 8) throw new VmStructsError("no size of PcDesc in the tables");
  const pcDesc = {
    pcDescSize,
    pcDescPcOffset: offset("PcDesc", "_pc_offset"),
    pcDescScopeOffset: offset("PcDesc", "_scope_decode_offset"),
  };
  if (vm.field("nmethod", "_immutable_data") === null) {
    return {
      ...pcDesc,
      kind: "inline",
      metadataOffset: offset("nmethod", "_metadata_offset"),
      scopesDataBegin: offset("nmethod", "_scopes_data_begin"),
      scopesPcsOffset: offset("nmethod", "_scopes_pcs_offset"),
      dependenciesOffset: offset("nmethod", "_dependencies_offset"),
    };
  }
  return {
    ...pcDesc,
    kind: "immutable",
    immutableData: offset("nmethod", "_immutable_data"),
    immutableDataSize: offset("nmethod", "_immutable_data_size"),
    scopesPcsOffset: offset("nmethod", "_scopes_pcs_offset"),
    scopesDataOffset: offset("nmethod", "_scopes_data_offset"),
    mutableData: offset("CodeBlob", "_mutable_data"),
    mutableDataSize: offset("CodeBlob", "_mutable_data_size"),
    relocationSize: offset("CodeBlob", "_relocation_size"),
  };
}

/** One nmethod's scopes, copied out of the JVM. */
export interface CompiledScopes {
  /** Per `PcDesc`, in the JVM's (ascending) order: its pc offset from the code's start, and its scope. */
  pcOffsets: Int32Array;
  scopeOffsets: Int32Array;
  scopesData: Uint8Array;
  /** The nmethod's metadata: `Method*`s (and `Klass*`s) the scopes name by index. */
  metadata: number[];
}

/**
 * Copies the scopes of the nmethod `blob` out of the JVM.
 *
 * @throws {VmStructsError} when its layout is malformed or too large.
 */
export function readCompiledScopes(
  memory: RemoteMemory,
  layout: CompiledScopesLayout,
  blob: CodeBlob,
): CompiledScopes {
  const at = blob.address;
  let pcs: [number, number];
  let data: [number, number];
  let metadata: [number, number];
  if (layout.kind === "inline") {
    const metadataStart = at + memory.i32(at + layout.metadataOffset);
    const dataStart = memory.pointer(at + layout.scopesDataBegin);
    const pcsStart = at + memory.i32(at + layout.scopesPcsOffset);
    const pcsEnd = at + memory.i32(at + layout.dependenciesOffset);
    metadata = [metadataStart, dataStart];
    data = [dataStart, pcsStart];
    pcs = [pcsStart, pcsEnd];
  } else {
    const immutable = memory.pointer(at + layout.immutableData);
    const size = memory.i32(at + layout.immutableDataSize);
    const pcsOffset = memory.i32(at + layout.scopesPcsOffset);
    const dataOffset = memory.i32(at + layout.scopesDataOffset);
    pcs = [immutable + pcsOffset, immutable + dataOffset];
    data = [immutable + dataOffset, immutable + size];
    const mutable = memory.pointer(at + layout.mutableData);
    const mutableSize = memory.i32(at + layout.mutableDataSize);
    const relocations = memory.i32(at + layout.relocationSize);
    metadata = [mutable + relocations, mutable + mutableSize];
  }
  for (const [start, end] of [pcs, data, metadata]) {
    if (!(start > 0 && end >= start && end - start <= MAX_SCOPES_BYTES)) {
      throw new VmStructsError(`nmethod 0x${at.toString(16)} has a malformed scopes layout`);
    }
  }
  const pcBytes = memory.read(pcs[0], pcs[1] - pcs[0]);
  const count = Math.floor(pcBytes.length / layout.pcDescSize);
  const view = new DataView(pcBytes.buffer);
  const pcOffsets = new Int32Array(count);
  const scopeOffsets = new Int32Array(count);
  for (let i = 0; i < count; i++) {
    pcOffsets[i] = view.getInt32(i * layout.pcDescSize + layout.pcDescPcOffset, true);
    scopeOffsets[i] = view.getInt32(i * layout.pcDescSize + layout.pcDescScopeOffset, true);
  }
  const metadataBytes = memory.read(metadata[0], metadata[1] - metadata[0]);
  const metadataView = new DataView(metadataBytes.buffer);
  const entries: number[] = [];
  for (let i = 0; i + 8 <= metadataBytes.length; i += 8) {
    entries.push(Number(metadataView.getBigUint64(i, true) & 0x7fffffffffffn));
  }
  return { pcOffsets, scopeOffsets, scopesData: memory.read(data[0], data[1] - data[0]), metadata: entries };
}

/** One frame of a compiled pc's scopes. */
export interface ScopeFrame {
  /** The `Method*` running there. */
  method: number;
  /** Its bytecode index; -1 at the method's entry (before its first bytecode). */
  bci: number;
}

/**
 * The frames the code at `pcOffset` (from the code's start) runs, innermost first: the scope of the
 * `PcDesc` at that offset, or else of the first one after it (the code up to a call or safepoint belongs
 * to it, as the JVM's own `pc_desc_near` has it). Empty when no `PcDesc` has a scope there.
 *
 * @throws {VmStructsError} when the scopes data is malformed.
 */
export function scopesAt(scopes: CompiledScopes, pcOffset: number, excluded: number): ScopeFrame[] {
  const { pcOffsets, scopeOffsets } = scopes;
  let found = -1;
  for (let i = 0; i < pcOffsets.length; i++) {
    if (pcOffsets[i]! >= pcOffset) {
      found = i;
      break;
    }
  }
  if (found < 0) return [];
  const frames: ScopeFrame[] = [];
  let offset = scopeOffsets[found]!;
  const reader = new CompressedReader(scopes.scopesData, excluded);
  while (offset > 0) {
    if (frames.length >= MAX_INLINE_DEPTH || offset >= scopes.scopesData.length) {
      throw new VmStructsError(
        `scope at ${offset} of ${scopes.scopesData.length} bytes, ${frames.length} deep`,
      );
    }
    reader.at = offset;
    const sender = reader.uint();
    const index = reader.uint();
    const bci = reader.uint() - 1;
    if (index < 1 || index > scopes.metadata.length) {
      throw new VmStructsError(`scope method ${index} of ${scopes.metadata.length}`);
    }
    frames.push({ method: scopes.metadata[index - 1]!, bci });
    // A caller's scope is written before its callee's: the offsets go down, so the walk ends.
    if (sender >= offset) throw new VmStructsError(`scope at ${offset} has its caller at ${sender}`);
    offset = sender;
  }
  return frames;
}

/** HotSpot's `CompressedReadStream` over bytes: UNSIGNED5 numbers, `excluded` bytes left out (JDK 20+). */
class CompressedReader {
  at = 0;
  constructor(readonly bytes: Uint8Array, readonly excluded: number) {}

  uint(): number {
    let value = 0;
    let multiplier = 1;
    for (let i = 0; i < 5; i++) {
      if (this.at >= this.bytes.length) throw new VmStructsError("a scope past the end of the scopes data");
      const byte = this.bytes[this.at++]! - this.excluded;
      if (byte < 0) throw new VmStructsError("an excluded byte in the scopes data");
      value += byte * multiplier;
      if (byte < 192) break;
      multiplier *= 64;
    }
    return value;
  }
}

/**
 * HotSpot's code cache: where the interpreter, the stubs and the compiled methods (`nmethod`s) live, in
 * a few code heaps (`CodeCache::_heaps`: non-nmethods, profiled and non-profiled nmethods). Each heap is
 * an anonymous mapping cut into segments of 2^`log2SegmentSize` bytes, with a segment map beside it: one
 * byte per segment, 0 where a block starts, otherwise how many segments to go back towards the start
 * (0xff: unused). A block starts with a `HeapBlock` header (its length in segments, whether it is used),
 * then the `CodeBlob`.
 *
 * This is the host's reading of it, from the JVM's memory: the heaps' ranges and segment maps (which the
 * BPF unwinder walks the same way), the blob at a pc, and what a blob is. Everything is bounded: the
 * number of heaps, the hops back through a segment map, a blob's name.
 *
 * @example
 * ```ts ignore
 * import { codeCacheLayout, findCodeBlob, readCodeBlob, readCodeHeaps } from "./code_cache.ts";
 * const layout = codeCacheLayout(vm);
 * const heaps = readCodeHeaps(memory, layout, bias);
 * const blob = findCodeBlob(memory, layout, heaps, pc);
 * if (blob !== null) console.log(readCodeBlob(memory, layout, blob).name); // "nmethod"
 * ```
 *
 * @module
 */
import type { RemoteMemory } from "../remote_memory.ts";
import { VmNotReadyError, type VmStructs, VmStructsError } from "./vm_structs.ts";

/** Most code heaps read (JDK 9+ has three with segmented code cache, one without). */
const MAX_HEAPS = 8;
/** Most hops back through a segment map (each hop goes back up to 254 segments). */
const MAX_SEGMAP_HOPS = 4096;
/** Longest blob name read. */
const MAX_NAME_BYTES = 128;
/** The segment map's mark of a segment no block uses. */
const FREE_SEGMENT = 0xff;

/** Where a code blob's code begins and ends: pointers up to JDK 22, offsets from the blob since 23. */
type CodeBound = { kind: "pointer"; offset: number } | { kind: "offset"; offset: number };

/** Offsets of the code cache's classes in one `libjvm.so`. */
export interface CodeCacheLayout {
  /** ELF address of the static `CodeCache::_heaps` (a `GrowableArray<CodeHeap*>*`). */
  heapsAddress: number;
  growableLength: number;
  growableData: number;
  /** `CodeHeap::_memory._low_boundary`, `_high_boundary`, `_segmap._low_boundary`, `_log2_segment_size`. */
  heapLow: number;
  heapHigh: number;
  heapSegmap: number;
  heapLog2SegmentSize: number;
  /** The `HeapBlock` header: its size (the blob follows it) and where it says it is used. */
  heapBlockSize: number;
  heapBlockUsed: number;
  blobName: number;
  blobSize: number;
  blobFrameSize: number;
  blobFrameComplete: { offset: number; bytes: 2 | 4 };
  blobCodeBegin: CodeBound;
  blobCodeEnd: CodeBound;
  nmethodMethod: number;
  nmethodCompileId: number;
}

/**
 * The code cache's layout in `vm`'s tables (JDK 9 and later: segmented code cache).
 *
 * @throws {VmStructsError} when the tables lack a field this reads.
 */
export function codeCacheLayout(vm: VmStructs): CodeCacheLayout {
  const find = (type: string, ...names: string[]) => {
    for (const name of names) {
      const field = vm.field(type, name);
      if (field !== null) return { name, field };
    }
    throw new VmStructsError(`no field ${type}.${names.join(" or ")} in the tables`);
  };
  const offset = (type: string, ...names: string[]) => find(type, ...names).field.offset;
  const size = (type: string) => {
    const value = vm.size(type);
    if (value === null) throw new VmStructsError(`no size of ${type} in the tables`);
    return value;
  };
  const heaps = find("CodeCache", "_heaps").field.address;
  if (heaps === null) throw new VmStructsError("CodeCache._heaps is not static");
  const bound = (pointer: string, fromBlob: string): CodeBound => {
    const found = find("CodeBlob", pointer, fromBlob);
    return { kind: found.name === pointer ? "pointer" : "offset", offset: found.field.offset };
  };
  const frameComplete = find("CodeBlob", "_frame_complete_offset").field;
  const virtualLow = offset("VirtualSpace", "_low_boundary");
  return {
    heapsAddress: heaps,
    growableLength: offset("GrowableArrayBase", "_len"),
    growableData: offset("GrowableArray<int>", "_data"),
    heapLow: offset("CodeHeap", "_memory") + virtualLow,
    heapHigh: offset("CodeHeap", "_memory") + offset("VirtualSpace", "_high_boundary"),
    heapSegmap: offset("CodeHeap", "_segmap") + virtualLow,
    heapLog2SegmentSize: offset("CodeHeap", "_log2_segment_size"),
    heapBlockSize: size("HeapBlock"),
    heapBlockUsed: offset("HeapBlock::Header", "_used"),
    blobName: offset("CodeBlob", "_name"),
    blobSize: offset("CodeBlob", "_size"),
    blobFrameSize: offset("CodeBlob", "_frame_size"),
    blobFrameComplete: {
      offset: frameComplete.offset,
      bytes: frameComplete.typeString === "int16_t" ? 2 : 4,
    },
    blobCodeBegin: bound("_code_begin", "_code_offset"),
    blobCodeEnd: bound("_code_end", "_data_offset"),
    nmethodMethod: offset("nmethod", "_method"),
    nmethodCompileId: offset("nmethod", "_compile_id"),
  };
}

/** One code heap: its code [low, high), and its segment map (a byte per segment). */
export interface CodeHeap {
  low: number;
  high: number;
  segmap: number;
  log2SegmentSize: number;
}

/**
 * The code heaps of the JVM (with `libjvm.so` at load bias `bias`), in the order the JVM lists them.
 *
 * @throws {VmNotReadyError} while the JVM has not set them up.
 * @throws {VmStructsError} when the list or a heap is malformed.
 */
export function readCodeHeaps(memory: RemoteMemory, layout: CodeCacheLayout, bias: number): CodeHeap[] {
  const array = memory.pointer(layout.heapsAddress + bias);
  if (array === 0) throw new VmNotReadyError("CodeCache._heaps is NULL (has the JVM started?)");
  const count = memory.i32(array + layout.growableLength);
  if (count === 0) throw new VmNotReadyError("no code heaps yet");
  if (count < 1 || count > MAX_HEAPS) throw new VmStructsError(`${count} code heaps`);
  const data = memory.pointer(array + layout.growableData);
  const heaps: CodeHeap[] = [];
  for (let i = 0; i < count; i++) {
    const heap = memory.pointer(data + 8 * i);
    if (heap === 0) throw new VmNotReadyError(`code heap ${i} is not there yet`);
    const low = memory.pointer(heap + layout.heapLow);
    const high = memory.pointer(heap + layout.heapHigh);
    const segmap = memory.pointer(heap + layout.heapSegmap);
    const log2SegmentSize = memory.i32(heap + layout.heapLog2SegmentSize);
    if (!(low > 0 && high > low && segmap > 0 && log2SegmentSize >= 4 && log2SegmentSize <= 16)) {
      throw new VmStructsError(`code heap ${i} at 0x${heap.toString(16)} is malformed`);
    }
    heaps.push({ low, high, segmap, log2SegmentSize });
  }
  return heaps;
}

/**
 * The address of the code blob that holds `pc`, found through its heap's segment map; null when `pc` is
 * in no heap, in an unused segment, or the map does not lead to a used block within its bounds.
 */
export function findCodeBlob(
  memory: RemoteMemory,
  layout: CodeCacheLayout,
  heaps: readonly CodeHeap[],
  pc: number,
): number | null {
  const heap = heaps.find((h) => pc >= h.low && pc < h.high);
  if (heap === undefined) return null;
  let segment = Math.floor((pc - heap.low) / 2 ** heap.log2SegmentSize);
  for (let hop = 0; hop < MAX_SEGMAP_HOPS; hop++) {
    const tag = memory.u8(heap.segmap + segment);
    if (tag === FREE_SEGMENT) return null;
    if (tag === 0) {
      const block = heap.low + segment * 2 ** heap.log2SegmentSize;
      return memory.u8(block + layout.heapBlockUsed) === 0 ? null : block + layout.heapBlockSize;
    }
    segment -= tag;
    if (segment < 0) return null;
  }
  return null;
}

/** What a code blob is, for unwinding and naming its frames. */
export type CodeBlobKind = "nmethod" | "native nmethod" | "interpreter" | "stub";

/** A code blob's header. */
export interface CodeBlob {
  address: number;
  /** The JVM's name of it: `nmethod`, `Interpreter`, `StubRoutines (1)`, `I2C/C2I adapters`, ... */
  name: string;
  kind: CodeBlobKind;
  /** Its code [codeBegin, codeEnd). */
  codeBegin: number;
  codeEnd: number;
  /** Its frame's size in bytes (return address included); 0 for the interpreter's, which vary. */
  frameSize: number;
  /** Where in its code the frame is complete (prologue done), from `codeBegin`; -1 when unknown. */
  frameComplete: number;
  /** For an nmethod: its `Method*` and its compile id (unique to this compilation); else 0. */
  method: number;
  compileId: number;
}

/**
 * Reads the code blob at `address`.
 *
 * @throws {VmStructsError} when it is not a well-formed blob.
 */
export function readCodeBlob(memory: RemoteMemory, layout: CodeCacheLayout, address: number): CodeBlob {
  const name = memory.cString(memory.pointer(address + layout.blobName), MAX_NAME_BYTES);
  const size = memory.i32(address + layout.blobSize);
  const bound = (b: CodeBound) =>
    b.kind === "pointer" ? memory.pointer(address + b.offset) : address + memory.i32(address + b.offset);
  const codeBegin = bound(layout.blobCodeBegin);
  const codeEnd = bound(layout.blobCodeEnd);
  if (!(size > 0 && codeBegin >= address && codeEnd >= codeBegin && codeEnd <= address + size)) {
    throw new VmStructsError(`code blob 0x${address.toString(16)} (${name}) is malformed`);
  }
  const kind: CodeBlobKind = name === "nmethod"
    ? "nmethod"
    : name === "native nmethod"
    ? "native nmethod"
    : name === "Interpreter"
    ? "interpreter"
    : "stub";
  const isMethod = kind === "nmethod" || kind === "native nmethod";
  const { offset, bytes } = layout.blobFrameComplete;
  const frameComplete = bytes === 2
    ? (memory.u16(address + offset) << 16) >> 16
    : memory.i32(address + offset);
  return {
    address,
    name,
    kind,
    codeBegin,
    codeEnd,
    frameSize: 8 * memory.i32(address + layout.blobFrameSize),
    frameComplete,
    method: isMethod ? memory.pointer(address + layout.nmethodMethod) : 0,
    compileId: isMethod ? memory.i32(address + layout.nmethodCompileId) : 0,
  };
}

/**
 * Every used block of `heap`, walking its blocks by their lengths (the segment map's other reading): the
 * blob addresses in address order, up to the first block of length 0 (where nothing was allocated yet).
 * Bounded by the heap's size in segments.
 */
export function* codeBlobsOf(
  memory: RemoteMemory,
  layout: CodeCacheLayout,
  heap: CodeHeap,
): Generator<number> {
  const segments = Math.floor((heap.high - heap.low) / 2 ** heap.log2SegmentSize);
  let segment = 0;
  while (segment < segments) {
    const tag = memory.u8(heap.segmap + segment);
    if (tag === FREE_SEGMENT) {
      segment++;
      continue;
    }
    if (tag !== 0) throw new VmStructsError(`segment ${segment} of a code heap starts no block`);
    const block = heap.low + segment * 2 ** heap.log2SegmentSize;
    const length = Number(memory.u32(block));
    // Past the last block the map and the headers are zero (committed, never allocated).
    if (length === 0) return;
    if (memory.u8(block + layout.heapBlockUsed) !== 0) yield block + layout.heapBlockSize;
    segment += length;
  }
}

/**
 * Turns the aggregated stacks of a session into a {@linkcode Profile}: one location per distinct frame,
 * symbolized once, on the host: kernel frames by the symbolizer given (the kernel's own names through BPF
 * during a recording, else /proc/kallsyms), native frames from the ELF symbol
 * tables of the mapped files (or their separate debug files), demangled, and Go code from its
 * `.gopclntab` with source files and lines: a frame in inlined code becomes one location per inlined call,
 * innermost first, each but the last marked `inlined`; frames in anonymous executable memory (JIT code)
 * from the process's jitdump, with source file and line, in the pseudo mapping {@linkcode JITDUMP_MAPPING},
 * else from its perf map, in the pseudo mapping {@linkcode PERF_MAP_MAPPING}. A frame that cannot be
 * named reads `[binary+0xoffset]` so that it can still be looked up later by hand (JIT code: the memory's
 * name, `[anonymous]`, at its address).
 *
 * @example
 * ```ts ignore
 * import { buildProfile } from "./profile_builder.ts";
 * const profile = buildProfile(table.stacks(), { startTimeNs, durationNs, periodNs });
 * ```
 *
 * @module
 */
import { frameKindOf } from "../profile/frame_kinds.ts";
import type { Profile, ProfileLocation, ProfileMapping, ProfileSample } from "../profile/profile.ts";
import type { MappedFile } from "../process/mapped_file.ts";
import { type KernelSymbolLookup, KernelSymbols } from "../symbolize/kallsyms.ts";
import { formatUnknownFrame, NativeSymbolizer } from "../symbolize/native.ts";
import type { JitNames, JitNameSource } from "../symbolize/jit_names.ts";
import type { PerfMaps } from "../symbolize/perf_maps.ts";
import type { Address, FileOffset, KernelAddress } from "../types.ts";
import type { Stack, StackFrame } from "./stack_table.ts";
import { delay } from "../sys/timer.ts";

/** Session facts that go into the profile as they are. */
export interface ProfileInfo {
  startTimeNs: number;
  durationNs: number;
  periodNs: number;
  /** Off-CPU time was recorded (see Profile.offCpu); absent otherwise. */
  offCpu?: boolean;
  /** The probe events recorded instead of CPU samples (see Profile.events); absent otherwise. */
  events?: readonly string[];
}

/** Symbolizers to use instead of fresh ones (tests, or reuse across profiles). */
export interface Symbolizers {
  native?: NativeSymbolizer;
  /** Kernel symbols, or how to get them when the first kernel frame needs them. */
  kernel?: KernelSymbolLookup | null | (() => KernelSymbolLookup | null);
  /** Counts the JIT frames of the samples, named from a perf map or jitdump, or not. */
  perfMaps?: Pick<PerfMaps, "countFrames">;
}

/**
 * The file name of the mapping of JIT frames named from a perf map: like every mapping of the profile it
 * is shared by the processes, and its locations hold process addresses.
 */
export const PERF_MAP_MAPPING = "[perf-map]";

/** The file name of the mapping of JIT frames named from a jitdump, shared as {@linkcode PERF_MAP_MAPPING}. */
export const JITDUMP_MAPPING = "[jitdump]";

const JIT_MAPPING_NAMES: Record<JitNameSource, string> = {
  "perf-map": PERF_MAP_MAPPING,
  jitdump: JITDUMP_MAPPING,
};

/** x86-64 user space ends at 2^47. */
const USER_SPACE_END = 0x800000000000;

/** How long symbolizing runs between two turns of the event loop, in which a Ctrl-C can be seen. */
const YIELD_EVERY_MS = 50;

/** Builds and symbolizes the profile. */
export function buildProfile(
  stacks: readonly Stack[],
  info: ProfileInfo,
  symbolizers: Symbolizers = {},
): Profile {
  const builder = new Builder(symbolizers);
  try {
    const samples = stacks.map((stack) => builder.sample(stack));
    return { ...info, mappings: builder.mappings, locations: builder.locations, samples };
  } finally {
    builder.close();
  }
}

/**
 * As {@linkcode buildProfile}, but letting the event loop turn every `yieldEveryMs` ms; once
 * `interrupt` aborts, the frames not named yet keep their addresses and are not looked up
 * (`[binary+0xADDRESS]`, `[kernel+0xADDRESS]`): `complete` is then false.
 */
export async function buildProfileInterruptibly(
  stacks: readonly Stack[],
  info: ProfileInfo,
  symbolizers: Symbolizers,
  interrupt: AbortSignal,
  yieldEveryMs = YIELD_EVERY_MS,
): Promise<{ profile: Profile; complete: boolean }> {
  const builder = new Builder(symbolizers);
  try {
    const samples: ProfileSample[] = [];
    let turned = performance.now();
    for (const stack of stacks) {
      if (builder.symbolizing && performance.now() - turned >= yieldEveryMs) {
        // Two turns: a signal that came during the last stretch is seen by the turn after the one that
        // wakes for it (as when a session starts), and the rest may take less than another stretch.
        await delay(0);
        await delay(0);
        turned = performance.now();
        if (interrupt.aborted) builder.symbolizing = false;
      }
      samples.push(builder.sample(stack));
    }
    const profile = { ...info, mappings: builder.mappings, locations: builder.locations, samples };
    return { profile, complete: builder.symbolizing };
  } finally {
    builder.close();
  }
}

class Builder {
  readonly mappings: ProfileMapping[] = [];
  readonly locations: ProfileLocation[] = [];
  /** The locations of each distinct frame: one, or one per inlined call and the function holding it. */
  #locationIndex = new Map<string, number | number[]>();
  #mappingIndex = new Map<MappedFile, number>();
  #native: NativeSymbolizer;
  #ownsNative: boolean;
  #kernel: KernelSymbolLookup | null | undefined | (() => KernelSymbolLookup | null);
  #perfMaps: Pick<PerfMaps, "countFrames"> | undefined;
  /** Each process's JIT names met, numbered for location keys. */
  #jitIds = new Map<JitNames, number>();
  /** Index of the mapping of JIT frames named by each kind of file, once it has a location. */
  #jitMappings = new Map<JitNameSource, number>();
  /** False: new locations are named by their addresses alone, without reading a symbol table. */
  symbolizing = true;

  constructor(symbolizers: Symbolizers) {
    this.#native = symbolizers.native ?? new NativeSymbolizer();
    this.#ownsNative = symbolizers.native === undefined;
    this.#kernel = symbolizers.kernel;
    this.#perfMaps = symbolizers.perfMaps;
  }

  sample(stack: Stack): ProfileSample {
    const perFrame = stack.frames.map((frame) => this.location(frame));
    if (this.#perfMaps !== undefined) {
      for (let i = 0; i < perFrame.length; i++) {
        if (stack.frames[i]!.addressKind !== "jit") continue;
        // A JIT frame is one location: only native code has inlined calls.
        const location = perFrame[i]!;
        let source: JitNameSource | null = null;
        if (typeof location === "number") {
          const mapping = this.locations[location]!.mapping;
          for (const [kind, index] of this.#jitMappings) if (index === mapping) source = kind;
        }
        this.#perfMaps.countFrames(source, stack.count);
      }
    }
    return {
      locations: perFrame.flat(),
      // An off-CPU stack's count is its number of waits: its weight is the time.
      count: stack.offCpu ? 0 : stack.count,
      ...(stack.offCpu ? { offCpuNs: stack.offCpuNs } : {}),
      ...(stack.probe === undefined ? {} : { event: stack.probe }),
      pid: stack.pid,
      tid: stack.tid,
      comm: stack.comm,
      ...(stack.labels === undefined ? {} : { labels: stack.labels }),
    };
  }

  /** The location of `frame`, or its locations innermost first when it stands for inlined calls. */
  location(frame: StackFrame): number | number[] {
    // A return address points after the call; the call itself (address - 1) names the right function
    // and line, even when the call is the last instruction of a function.
    const lookup = frame.returnAddress ? frame.address - 1 : frame.address;
    const file = frame.file;
    const symbol = frame.symbol;
    if (symbol) {
      const key = `i${symbol.kind}\0${symbol.functionName}\0${symbol.sourceFile}\0${symbol.line}` +
        (symbol.inlined ? "\0i" : "");
      let index = this.#locationIndex.get(key);
      if (index === undefined) {
        index = this.locations.length;
        this.locations.push({ ...symbol, mapping: -1, address: 0 });
        this.#locationIndex.set(key, index);
      }
      return index;
    }
    const key = frame.addressKind === "kernel"
      ? `k${lookup}`
      : frame.jit !== undefined
      ? `j${this.#jitId(frame.jit)}\0${lookup}`
      : file
      ? `${file.key}\0${frame.addressKind}${lookup}${frame.signalTrampoline ? "s" : ""}`
      : `?${frame.kind}:${lookup}`;
    let index = this.#locationIndex.get(key);
    if (index === undefined) {
      const symbolized = this.#symbolize(frame, lookup);
      index = symbolized.map((location) => this.locations.push(location) - 1);
      if (index.length === 1) index = index[0]!;
      this.#locationIndex.set(key, index);
    }
    return index;
  }

  close(): void {
    if (this.#ownsNative) this.#native.close();
  }

  /** The locations of one frame, innermost first. */
  #symbolize(frame: StackFrame, lookup: number): ProfileLocation[] {
    const kind = frameKindOf(frame.kind);
    if (frame.addressKind === "kernel") return [this.#kernelLocation(lookup as KernelAddress)];
    const jit = frame.jit !== undefined && this.symbolizing ? frame.jit.frame(lookup) : null;
    if (jit !== null) {
      const mapping = this.#jitMappingIndex(jit.source);
      const { functionName, sourceFile, line } = jit;
      return [{ kind, mapping, address: lookup, functionName, sourceFile, line }];
    }
    const file = frame.file;
    if (!file) {
      return [{ kind, mapping: -1, address: lookup, functionName: "[unknown]", sourceFile: "", line: 0 }];
    }
    const mappingIndex = this.#mapping(file);
    if (!file.readable) {
      const name = file.kind === "file"
        ? formatUnknownFrame(file.path, lookup)
        : `[${file.path.replace(/^\[|\]$/g, "")}]`;
      return [{ kind, mapping: mappingIndex, address: lookup, functionName: name, sourceFile: "", line: 0 }];
    }
    const vaddr = frame.addressKind === "vaddr"
      ? lookup as Address
      : this.#native.fileOffsetToVaddr(file, lookup as FileOffset);
    const address = vaddr ?? lookup;
    if (!this.symbolizing) {
      const name = formatUnknownFrame(file.path, address);
      return [{ kind, mapping: mappingIndex, address, functionName: name, sourceFile: "", line: 0 }];
    }
    const frames = vaddr === null ? null : this.#native.frames(file, vaddr);
    if (frames !== null) {
      this.mappings[mappingIndex]!.hasFunctions = true;
      return frames.map((f, i) => ({
        kind,
        mapping: mappingIndex,
        address,
        ...f,
        ...(i < frames.length - 1 ? { inlined: true } : {}),
      }));
    }
    let functionName: string;
    if (frame.signalTrampoline) functionName = "[signal trampoline]";
    else {
      // Unnamed code is named after the start of its function (its FDE), so that its samples add up.
      const start = vaddr === null ? undefined : this.#native.functionAt(file, vaddr)?.start;
      functionName = formatUnknownFrame(file.path, start ?? address);
    }
    return [{ kind, mapping: mappingIndex, address, functionName, sourceFile: "", line: 0 }];
  }

  #jitId(names: JitNames): number {
    let id = this.#jitIds.get(names);
    if (id === undefined) {
      id = this.#jitIds.size;
      this.#jitIds.set(names, id);
    }
    return id;
  }

  #jitMappingIndex(source: JitNameSource): number {
    let index = this.#jitMappings.get(source);
    if (index === undefined) {
      index = this.mappings.length;
      this.#jitMappings.set(source, index);
      this.mappings.push({
        start: 0,
        end: USER_SPACE_END,
        fileOffset: 0,
        fileName: JIT_MAPPING_NAMES[source],
        buildId: "",
        hasFunctions: true,
      });
    }
    return index;
  }

  #kernelLocation(address: KernelAddress): ProfileLocation {
    // Unsymbolized, kernel frames go without names too: naming them reads /proc/kallsyms or runs BPF.
    const symbol = this.symbolizing ? this.#kernelSymbols()?.lookup(address) ?? null : null;
    // As text: 0xffffffff00000000 + address as a double would round to a multiple of 2048.
    const hex = `ffffffff${address.toString(16).padStart(8, "0")}`;
    const name = symbol === null
      ? `[kernel+0x${hex}]`
      : symbol.module === null
      ? symbol.name
      : `${symbol.name} [${symbol.module}]`;
    return { kind: "kernel", mapping: -1, address, functionName: name, sourceFile: "", line: 0 };
  }

  #kernelSymbols(): KernelSymbolLookup | null {
    if (typeof this.#kernel === "function") {
      this.#kernel = this.#kernel();
    } else if (this.#kernel === undefined) {
      try {
        this.#kernel = KernelSymbols.load();
      } catch {
        this.#kernel = null;
      }
    }
    return this.#kernel;
  }

  /**
   * One mapping per file, shared by every process that maps it, so its range cannot be any one process's:
   * it spans user space from 0, and locations hold ELF virtual addresses of the file.
   */
  #mapping(file: MappedFile): number {
    let index = this.#mappingIndex.get(file);
    if (index === undefined) {
      index = this.mappings.length;
      this.mappings.push({
        start: 0,
        end: USER_SPACE_END,
        fileOffset: 0,
        fileName: file.path,
        buildId: file.readable ? this.#native.buildId(file) : "",
        hasFunctions: false,
      });
      this.#mappingIndex.set(file, index);
    }
    return index;
  }
}

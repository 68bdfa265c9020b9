/**
 * The interpreter plug-in interface: how a language runtime teaches the profiler to unwind and name its
 * frames. A runtime is one folder under `lib/interpreter/` (README.md there has the checklist), one BPF
 * program, and one line in the runtime list (runtimes.ts); the process manager, the file registry and the
 * BPF maps know no runtime by name.
 *
 * Life cycle, for each process the profiler sees:
 *
 * 1. **Loader, per executable or library file.** The file registry (lib/process/file_registry.ts) offers
 *    each file that processes map executable to every runtime's {@linkcode Loader}, with a
 *    {@linkcode LoaderInfo}, the first time a process maps it. A loader that recognises its runtime (by
 *    symbols, version data) returns a {@linkcode Data}; otherwise null. It also declares where the
 *    runtime's interpreter loop lies in the file ({@linkcode EbpfHandler.updateInterpreterOffsets}); the
 *    registry writes that to BPF, so the native unwinder hands frames in those ranges to the runtime's
 *    unwinder.
 * 2. **Data, per file.** What is true of the file whatever process maps it: the version, symbol
 *    addresses, struct offsets from tables. The registry keeps it with the file's other state while any
 *    process maps the file, so a file mapped by a thousand processes is analysed once.
 * 3. **Instance, per process.** {@linkcode Data.attach} adds what is true of one process: the load bias,
 *    offsets the runtime publishes in its own memory, thread-lookup keys. It writes the per-process record
 *    the BPF unwinder reads ({@linkcode EbpfHandler.updateProcData}). The process manager keeps the
 *    instance with the process's other state, tells it of every new reading of the process's mappings,
 *    and has it symbolize the frames BPF recorded for that process (reading the process's memory while it
 *    lives); {@linkcode Instance.detach} removes its BPF state when the process exits or execs.
 *
 * Plug-ins touch BPF maps only through {@linkcode EbpfHandler}; tests and host-only tools use
 * {@linkcode MemoryEbpfHandler} from `memory_ebpf_handler.ts`.
 *
 * @example
 * ```ts ignore
 * import { LoaderInfo } from "./interpreter.ts";
 * using info = new LoaderInfo({ fileId, fileName: mapping.path, open: () => file.open() });
 * const data = runtime.loader(ebpf, info); // null: not this runtime's file
 * const instance = data?.attach(ebpf, pid, bias, RemoteMemory.open(pid), mappings);
 * const frame = instance?.symbolize({ kind, fileId, addrOrLine });
 * ```
 *
 * @module
 */
import { ElfFile } from "../elf/elf_file.ts";
import type { Prefix } from "../lpm/prefixes.ts";
import type { ResolvedMapping } from "../process/mapped_file.ts";
import type { FrameKind, RuntimeKind } from "../profile/profile.ts";
import { RegularFile } from "../sys/regular_file.ts";
import type { FileId, Pid } from "../types.ts";
import type { RemoteMemory } from "./remote_memory.ts";
import { findElfSymbols } from "./elf_symbols.ts";

/**
 * How many functions an interpreter keeps symbolized (least recently used out): the number of hot
 * functions that are seen often in a profile.
 */
export const LRU_FUNCTION_CACHE_SIZE = 1024;
/** The source file name to use when the real one is not available. */
export const UNKNOWN_SOURCE_FILE = "<unknown>";
/**
 * The function name to use when a function has no name but is known to be at the outermost scope (e.g. a
 * script's top-level code).
 */
export const TOP_LEVEL_FUNCTION_NAME = "<top-level>";

/**
 * A frame, or a request, of another runtime than the instance's (the OpenTelemetry eBPF profiler's
 * ErrMismatchInterpreterType).
 */
export class InterpreterMismatchError extends Error {
  constructor(message = "mismatched interpreter type") {
    super(message);
    this.name = "InterpreterMismatchError";
  }
}

/** How a process was started, as /proc keeps it: its arguments and its initial environment. */
export interface ProcessLaunch {
  readonly argv: readonly string[];
  readonly environ: ReadonlyMap<string, string>;
}

/**
 * Flags without which a runtime's frames cannot be named (a runtime whose file holds no layouts, named
 * only from the perf map it writes when asked): what tells whether a process has them, and what to tell
 * the user of one that has not.
 */
export interface FlagsRequirement {
  /** Whether a process started so has the flags. */
  satisfiedBy(launch: ProcessLaunch): boolean;
  /** What to tell the user of process `pid`, which maps the runtime's file `path` without the flags. */
  advice(pid: Pid, path: string): string;
}

/**
 * A loader's refusal of a file that is its runtime's but whose frames only the runtime itself can name,
 * when its processes are started with flags: the file stays unclaimed, and a process without the flags
 * is named to the user once, with the flags to add.
 */
export class FlagsRequiredError extends Error {
  readonly requirement: FlagsRequirement;

  constructor(message: string, requirement: FlagsRequirement) {
    super(message);
    this.name = "FlagsRequiredError";
    this.requirement = requirement;
  }
}

/** A half-open range [start, end) of ELF virtual addresses of one file. */
export interface AddressRange {
  readonly start: number;
  readonly end: number;
}

/** The runtimes that can own per-process BPF data: the frame kinds of interpreters and JIT compilers. */
export type InterpreterType = RuntimeKind;

/**
 * Where the C library keeps a thread's thread-specific data (`pthread_getspecific`), relative to the
 * thread pointer (x86-64: the fs base, which glibc's `pthread_self()` also returns). The value of key
 * `k` is at `tp + offset + k * multiplier`, or with `indirect` at `*(tp + offset) + k * multiplier`.
 * The OpenTelemetry eBPF profiler's `TSDInfo`.
 */
export interface TsdInfo {
  readonly offset: number;
  readonly multiplier: number;
  readonly indirect: boolean;
}

/** The only way a plug-in changes BPF maps. */
export interface EbpfHandler {
  /**
   * Declares `ranges` (ELF virtual addresses of `fileId`) as interpreter loop code: when the native
   * unwinder meets a return address there, it tail-calls `program` (an `UnwindProgram` value). Writes
   * the `interpreter_offsets` map.
   */
  updateInterpreterOffsets(program: number, fileId: FileId, ranges: readonly AddressRange[]): void;
  /** Removes what {@linkcode updateInterpreterOffsets} stored for `fileId`. */
  deleteInterpreterOffsets(fileId: FileId): void;
  /** Stores the runtime's per-process record (a C struct the runtime's BPF program reads) for `pid`. */
  updateProcData(type: InterpreterType, pid: Pid, data: Uint8Array): void;
  /** Removes the per-process record of `pid`. */
  deleteProcData(type: InterpreterType, pid: Pid): void;
  /**
   * Routes addresses of `pid` in `prefix` (e.g. anonymous JIT memory) to `program`, with `fileId` and
   * `bias` as the frames' file and bias. Writes the `pid_page_to_mapping_info` trie.
   */
  updatePidInterpreterMapping(pid: Pid, prefix: Prefix, program: number, fileId: FileId, bias: number): void;
  /** Removes what {@linkcode updatePidInterpreterMapping} added for `prefix`. */
  deletePidInterpreterMapping(pid: Pid, prefix: Prefix): void;
}

/**
 * An interpreter frame as the BPF unwinder recorded it (`struct frame`). What `fileId` and `addrOrLine`
 * hold is up to the runtime's BPF program; both are the u64 fields as numbers (exact below 2^53).
 */
export interface InterpreterFrame {
  /** A `FrameMarker` value. */
  readonly kind: number;
  readonly fileId: number;
  readonly addrOrLine: number;
}

/** A named frame, ready to become a profile location. */
export interface SymbolizedFrame {
  readonly kind: FrameKind;
  readonly functionName: string;
  /** The source file, or {@linkcode UNKNOWN_SOURCE_FILE}. */
  readonly sourceFile: string;
  /** 1-based source line, 0 when unknown. */
  readonly line: number;
  /**
   * True for a call a JIT compiler inlined into its caller, which is the next frame of the same recorded
   * frame (pprof writes such a run as one location with a line per call). Absent for a frame of its own.
   */
  readonly inlined?: boolean;
}

/** One counter an instance reports; `id` is dotted, the runtime's name first (`<runtime>.code_cache.hits`). */
export interface Metric {
  readonly id: string;
  readonly value: number;
}

/** Per-process state of a runtime (the OpenTelemetry eBPF profiler's `Instance`). */
export interface Instance {
  /**
   * Removes the process's data from the BPF maps (it exited or exec'd). `pid` is passed so a simple
   * runtime can use one object as both Data and Instance. Idempotent.
   */
  detach(ebpf: EbpfHandler, pid: Pid): void;
  /** The process manager re-read the process's mappings (dlopen, JIT code); most runtimes ignore it. */
  synchronizeMappings(ebpf: EbpfHandler, pid: Pid, mappings: readonly ResolvedMapping[]): void;
  /** The process's C library thread-specific-data layout is known (or changed). */
  updateTsdInfo(ebpf: EbpfHandler, pid: Pid, info: TsdInfo): void;
  /**
   * Names a frame this runtime's BPF program recorded: one source frame, or for code a JIT compiler
   * inlined calls into, the inlined calls innermost first (marked `inlined`) and then the function.
   *
   * @throws {InterpreterMismatchError} when the frame is of another kind.
   */
  symbolize(frame: InterpreterFrame): readonly SymbolizedFrame[];
  /** Counters since the last call; they restart from zero. */
  getAndResetMetrics(): Metric[];
}

/**
 * No-op implementations of the optional {@linkcode Instance} hooks; a runtime extends it and writes
 * `detach` and `symbolize` at least.
 */
export abstract class InstanceStubs implements Instance {
  abstract detach(ebpf: EbpfHandler, pid: Pid): void;

  synchronizeMappings(_ebpf: EbpfHandler, _pid: Pid, _mappings: readonly ResolvedMapping[]): void {}

  updateTsdInfo(_ebpf: EbpfHandler, _pid: Pid, _info: TsdInfo): void {}

  symbolize(_frame: InterpreterFrame): readonly SymbolizedFrame[] {
    throw new InterpreterMismatchError();
  }

  getAndResetMetrics(): Metric[] {
    return [];
  }
}

/** Per-file state of a runtime (the OpenTelemetry eBPF profiler's `Data`). */
export interface Data {
  /**
   * Sets up the runtime for one process that maps the file with load bias `bias` (process address =
   * ELF virtual address + bias), reading what it needs through `memory` and `mappings` (the process's
   * executable mappings as the process manager read them; later reads come through
   * {@linkcode Instance.synchronizeMappings}), and writes the process's BPF record. The instance does not
   * own `memory`: the caller closes it after detaching.
   *
   * @throws {RemoteMemoryError} when the process is gone or its memory is unreadable.
   */
  attach(
    ebpf: EbpfHandler,
    pid: Pid,
    bias: number,
    memory: RemoteMemory,
    mappings: readonly ResolvedMapping[],
  ): Instance;
}

/**
 * Recognises a runtime in a file. Returns Data when the file is the runtime's (its executable or
 * library), null when it is not; throws when it is but cannot be supported (a permanent failure for this
 * file, to be logged once).
 */
export type Loader = (ebpf: EbpfHandler, info: LoaderInfo) => Data | null;

/** What {@linkcode LoaderInfo} is made from. */
export interface LoaderInfoInit {
  fileId: FileId;
  /** The path as the process saw it (what loaders match names against). */
  fileName: string;
  /**
   * Opens this very file (e.g. the file registry's handle of the mapped file); by default `fileName`
   * is opened, for files the caller names itself.
   */
  open?: () => RegularFile;
  /** Ranges of the file's code without unwind information. */
  gaps?: readonly AddressRange[];
}

/**
 * What a loader gets to know about a file. The ELF is opened on first use and kept until
 * {@linkcode LoaderInfo.close}, so several loaders share one parse.
 */
export class LoaderInfo implements Disposable {
  readonly fileId: FileId;
  readonly fileName: string;
  readonly gaps: readonly AddressRange[];
  readonly #open: () => RegularFile;
  #elf: ElfFile | null = null;

  constructor(init: LoaderInfoInit) {
    this.fileId = init.fileId;
    this.fileName = init.fileName;
    this.gaps = init.gaps ?? [];
    const fileName = init.fileName;
    this.#open = init.open ?? (() => RegularFile.open(fileName));
  }

  /**
   * The file's ELF, opened once.
   *
   * @throws {RangeError} when the file is not a valid ELF; a FileRefusedError when it cannot be opened.
   */
  getElf(): ElfFile {
    if (this.#elf === null) this.#elf = ElfFile.fromFile(this.#open(), this.fileName);
    return this.#elf;
  }

  /**
   * The ELF virtual address ranges of the symbol `name` (one range: [value, value + size)).
   *
   * @throws {RangeError} when the file does not define the symbol or it has no size.
   */
  getSymbolAsRanges(name: string): AddressRange[] {
    const symbol = findElfSymbols(this.getElf(), [name]).get(name);
    if (symbol === undefined || symbol.size === 0) {
      throw new RangeError(`Cannot find symbol ${name} in ${this.fileName}: not defined or without size`);
    }
    return [{ start: symbol.value, end: symbol.value + symbol.size }];
  }

  /** Closes the ELF if it was opened. Idempotent. */
  close(): void {
    this.#elf?.close();
    this.#elf = null;
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/**
 * Per-process CPython state: where this process's `_PyRuntime` is, how its threads' `PyThreadState`s are
 * found (the runtime's interpreter and thread lists on the host; per thread through glibc TSD or TLS, as
 * BPF does), the current frame of each thread, and the symbolization of the frames BPF recorded.
 *
 * The host-side walk ({@linkcode PythonInstance.stack}) follows exactly the steps the BPF unwinder takes
 * (README.md), so it is both a reference for the BPF program and a way to check the offsets against a
 * live process. Frames change while the process runs: for a consistent picture, read while the thread
 * is stopped (or compare two reads).
 *
 * @example
 * ```ts ignore
 * const instance = data.attach(ebpf, pid, bias, memory);
 * for (const thread of instance.threadStates()) {
 *   for (const frame of instance.stack(thread.address)) {
 *     console.log(instance.symbolizer.symbolize(frame.code, frame.byteOffset));
 *   }
 * }
 * ```
 *
 * @module
 */
import { getLogger } from "../../log/logger.ts";
import type { ResolvedMapping } from "../../process/mapped_file.ts";
import { ElfFile } from "../../elf/elf_file.ts";
import type { Address, Pid } from "../../types.ts";
import { FileRefusedError } from "../../sys/regular_file.ts";
import { PythonFrameMarker } from "../../../support/types.ts";
import { findElfSymbols } from "../elf_symbols.ts";
import {
  type GlibcThreadLayout,
  readGlibcThreadLayout,
  readLinkMaps,
  readThreadSpecific,
  staticTlsOffset,
} from "../glibc_threads.ts";
import {
  type EbpfHandler,
  InstanceStubs,
  type InterpreterFrame,
  InterpreterMismatchError,
  type Metric,
  type SymbolizedFrame,
  type TsdInfo,
} from "../interpreter.ts";
import { findProcessLibraries, mappingBias } from "../process_libraries.ts";
import { type RemoteMemory, RemoteMemoryError } from "../remote_memory.ts";
import type { PythonFileFacts } from "./file_facts.ts";
import { FRAME_OWNED_BY_CSTACK, type PythonOffsets, type PythonVersion } from "./offsets.ts";
import { encodePythonProcInfo, type PythonProcInfo } from "./proc_info.ts";
import { decodePythonAddrOrLine, FIRST_LINE_STAMP_MASK, PythonSymbolizer } from "./symbolize.ts";

const logger = getLogger(["omniprof", "interpreter", "python"]);

/** One thread's `PyThreadState`, as listed by its interpreter. */
export interface PythonThreadState {
  /** The `PyThreadState` itself. */
  readonly address: Address;
  /** Its `PyInterpreterState`. */
  readonly interpreter: Address;
  /** `thread_id`: `pthread_self()` of the thread, which with glibc on x86-64 is its thread pointer. */
  readonly threadPointer: Address;
  /** The kernel thread id (`native_thread_id` in 3.11+, glibc's `struct pthread` tid before), or null. */
  readonly tid: number | null;
}

/** One Python frame as the unwinder sees it. */
export interface PythonFrame {
  /** The frame's address (`PyFrameObject` or `_PyInterpreterFrame`). */
  readonly address: Address;
  /** Its code object. */
  readonly code: Address;
  /** Byte offset of the current (3.13) or last started (before) instruction in the bytecode. */
  readonly byteOffset: number;
  /** `co_firstlineno & FIRST_LINE_STAMP_MASK`: the stamp BPF records. */
  readonly firstLineStamp: number;
  /**
   * This frame was entered from C: the C call of the eval loop running it runs no older frame, so a
   * native unwinder continues below that C call after this frame. Always true before 3.11 (one eval
   * loop call per frame).
   */
  readonly entry: boolean;
}

/** What {@linkcode PythonInstance} is made of (see {@linkcode PythonData.attach}). */
export interface PythonInstanceInit {
  pid: Pid;
  bias: number;
  runtime: Address;
  memory: RemoteMemory;
  /** The process's executable mappings, where its C library and dynamic loader are found. */
  mappings: readonly ResolvedMapping[];
  facts: PythonFileFacts;
  offsets: PythonOffsets;
  glibc?: GlibcThreadLayout | null;
}

/** Most interpreters and threads listed; real processes have a handful. */
const MAX_INTERPRETERS = 256;
const MAX_THREADS = 65536;
/** The BPF unwinder's frame budget (`MAX_FRAME_UNWINDS`). */
const DEFAULT_MAX_FRAMES = 128;
/** glibc's PTHREAD_KEY_2NDLEVEL_SIZE, for when the process's libc could not be read. */
const GLIBC_KEYS_PER_BLOCK = 32;
/**
 * How long after attach a record that cannot find thread states yet is marked "not ready" (BPF then asks
 * again every few milliseconds). CPython creates its thread-state key within milliseconds of exec; past
 * this, a process whose key stays unreadable is asked about at BPF's normal rate.
 */
const NOT_READY_WINDOW_MS = 2000;

/** CPython state of one process. */
export class PythonInstance extends InstanceStubs {
  readonly pid: Pid;
  readonly bias: number;
  /** The address of `_PyRuntime` in the process. */
  readonly runtime: Address;
  readonly version: PythonVersion;
  readonly offsets: PythonOffsets;
  readonly symbolizer: PythonSymbolizer;
  readonly #memory: RemoteMemory;
  readonly #facts: PythonFileFacts;
  #mappings: readonly ResolvedMapping[];
  #glibc: GlibcThreadLayout | null | undefined;
  #tsdInfo: TsdInfo | null = null;
  #tsdKey: number | null = null;
  #tls: number | null | undefined;
  #detached = false;
  #published: Uint8Array | null = null;
  #symbolized = 0;
  readonly #attachedAt = performance.now();

  constructor(init: PythonInstanceInit) {
    super();
    this.pid = init.pid;
    this.bias = init.bias;
    this.runtime = init.runtime;
    this.version = init.facts.version;
    this.offsets = init.offsets;
    this.#memory = init.memory;
    this.#facts = init.facts;
    this.#mappings = init.mappings;
    this.#glibc = init.glibc;
    this.symbolizer = new PythonSymbolizer(init.memory, init.offsets);
  }

  /**
   * The thread states of every interpreter of the process, newest first, as the runtime lists them.
   * Empty before the runtime is initialized.
   *
   * @throws {RemoteMemoryError} when the process is gone or the lists cannot be read.
   */
  threadStates(): PythonThreadState[] {
    const memory = this.#memory;
    const o = this.offsets;
    memory.clearCache();
    const out: PythonThreadState[] = [];
    let interpreter = memory.pointer(this.runtime + o.runtimeInterpretersHead);
    for (let i = 0; interpreter !== 0 && i < MAX_INTERPRETERS; i++) {
      let tstate = memory.pointer(interpreter + o.interpThreadsHead);
      for (let t = 0; tstate !== 0 && t < MAX_THREADS && out.length < MAX_THREADS; t++) {
        const threadPointer = memory.pointer(tstate + o.tstateThreadId);
        out.push({ address: tstate, interpreter, threadPointer, tid: this.#tidOf(tstate, threadPointer) });
        tstate = memory.pointer(tstate + o.tstateNext);
      }
      interpreter = memory.pointer(interpreter + o.interpNext);
    }
    return out;
  }

  /**
   * The current frame of a thread state (0 when it runs no Python code): `tstate->frame` (3.8-3.10),
   * `tstate->cframe->current_frame` (3.11-3.12), `tstate->current_frame` (3.13).
   */
  currentFrame(tstate: Address): Address {
    const o = this.offsets;
    const frame = this.#memory.pointer(tstate + o.tstateFrame);
    if (o.cframeCurrentFrame === null || frame === 0) return frame;
    return this.#memory.pointer(frame + o.cframeCurrentFrame);
  }

  /**
   * The Python frames from `frame` outwards (innermost first), at most `maxFrames`. Frames that only mark
   * a C call of the eval loop (3.12+) are not listed; they set `entry` on the frame before them.
   *
   * @throws {RemoteMemoryError} when a frame cannot be read (the process exited, or the frame went away
   * while the thread ran).
   */
  walk(frame: Address, maxFrames = DEFAULT_MAX_FRAMES): PythonFrame[] {
    const memory = this.#memory;
    const o = this.offsets;
    const out: PythonFrame[] = [];
    const seen = new Set<number>();
    let at = frame;
    while (at !== 0 && out.length < maxFrames && !seen.has(at)) {
      seen.add(at);
      const code = memory.pointer(at + o.frameCode);
      const previous = memory.pointer(at + o.framePrevious);
      if (o.frameOwner !== null && memory.u8(at + o.frameOwner) === FRAME_OWNED_BY_CSTACK) {
        const last = out.length - 1;
        if (last >= 0) out[last] = { ...(out[last] as PythonFrame), entry: true };
        at = previous;
        continue;
      }
      let byteOffset: number;
      switch (o.instructionModel) {
        case "lasti-bytes":
          byteOffset = memory.i32(at + o.frameInstruction);
          break;
        case "lasti-units":
          byteOffset = memory.i32(at + o.frameInstruction) * 2;
          break;
        default: {
          const instruction = memory.pointer(at + o.frameInstruction);
          byteOffset = instruction - (code + (o.codeCodeAdaptive ?? 0));
        }
      }
      const entry = o.frameModel === "frame-object" ||
        (o.frameIsEntry !== null && memory.u8(at + o.frameIsEntry) !== 0);
      const firstLineStamp = code === 0 ? 0 : memory.i32(code + o.codeFirstLineNo) & FIRST_LINE_STAMP_MASK;
      out.push({ address: at, code, byteOffset, firstLineStamp, entry });
      at = previous;
    }
    return out;
  }

  /** The Python frames of a thread state, innermost first (empty when it runs no Python code). */
  stack(tstate: Address, maxFrames = DEFAULT_MAX_FRAMES): PythonFrame[] {
    this.#memory.clearCache();
    const frame = this.currentFrame(tstate);
    return frame === 0 ? [] : this.walk(frame, maxFrames);
  }

  /**
   * The pthread key under which the runtime stores each thread's `PyThreadState` (`autoTSSkey`), or null
   * while the runtime has not created it.
   */
  tsdKey(): number | null {
    if (this.#tsdKey !== null) return this.#tsdKey;
    const tss = this.runtime + this.offsets.runtimeAutoTssKey;
    if (this.#memory.i32(tss + this.offsets.tssIsInitialized) === 0) return null;
    this.#tsdKey = this.#memory.u32(tss + this.offsets.tssKey);
    return this.#tsdKey;
  }

  /**
   * glibc's thread layout for this process (read from the libc it maps), or null when not glibc, or
   * not yet: a process caught at exec maps its C library only once the dynamic loader ran, so that case
   * is asked again next time.
   */
  glibc(): GlibcThreadLayout | null {
    if (this.#glibc !== undefined) return this.#glibc;
    try {
      const { libc } = findProcessLibraries(this.#mappings);
      if (libc === null) return null;
      this.#glibc = null;
      using elf = ElfFile.fromFile(libc.open(), libc.path);
      this.#glibc = readGlibcThreadLayout(elf);
    } catch (error) {
      this.#glibc = null;
      logger.debug("Cannot read the C library of {pid}: {error}", { pid: this.pid, error: String(error) });
    }
    return this.#glibc;
  }

  /** The TSD layout BPF uses: the one the process manager gave, else glibc's. */
  tsdInfo(): TsdInfo | null {
    return this.#tsdInfo ?? this.glibc()?.tsd ?? null;
  }

  /**
   * The `PyThreadState` of the thread whose thread pointer is `threadPointer`, the way BPF finds it:
   * through the TSD layout and the autoTSSkey (0 when the thread has none).
   *
   * @throws {RemoteMemoryError} when memory cannot be read, or "invalid" when the key or layout is unknown.
   */
  threadStateByTsd(threadPointer: Address): Address {
    const key = this.tsdKey();
    const info = this.tsdInfo();
    if (key === null || info === null) {
      throw new RemoteMemoryError(this.pid, threadPointer, 0, "invalid", "the TSD key or layout is unknown");
    }
    const glibc = this.glibc();
    if (!info.indirect && glibc !== null && key >= glibc.keysPerBlock) {
      // Keys past glibc's first block live behind a pointer; the flat formula does not reach them.
      return readThreadSpecific(this.#memory, glibc, threadPointer, key);
    }
    let slot = threadPointer + info.offset;
    if (info.indirect) slot = this.#memory.pointer(slot);
    return this.#memory.pointer(slot + key * info.multiplier);
  }

  /**
   * Where `_Py_tss_tstate` is relative to a thread pointer (3.12+): tstate = *(tp + offset). Null when
   * the file has no such symbol (stripped, or before 3.12) or the module has no static TLS block.
   */
  tlsThreadStateOffset(): number | null {
    if (this.#tls !== undefined) return this.#tls;
    const symbol = this.#facts.tssTstateOffset;
    if (symbol === null || this.#facts.dynamicVaddr === null) {
      this.#tls = null;
      return null;
    }
    // Until the dynamic loader has mapped the C library and listed the module (a process caught at
    // exec), the answer is "not yet": nothing is cached.
    const glibc = this.glibc();
    if (glibc === null) return null;
    try {
      const { loader } = findProcessLibraries(this.#mappings);
      if (loader === null) return null;
      using elf = ElfFile.fromFile(loader.open(), loader.path);
      const rDebug = findElfSymbols(elf, ["_r_debug"]).get("_r_debug");
      const loaderBias = mappingBias(loader.mapping, elf.loadSegments);
      this.#tls = null;
      if (rDebug === undefined || loaderBias === null) return null;
      const dynamic = this.bias + this.#facts.dynamicVaddr;
      const module = readLinkMaps(this.#memory, (loaderBias + rDebug.value) as Address)
        .find((entry) => entry.bias === this.bias && entry.dynamic === dynamic);
      if (module === undefined) {
        this.#tls = undefined;
        return null;
      }
      const blockOffset = staticTlsOffset(this.#memory, glibc, module.address);
      if (blockOffset !== null) this.#tls = symbol - blockOffset;
    } catch (error) {
      const expected = error instanceof RemoteMemoryError || error instanceof RangeError ||
        error instanceof FileRefusedError;
      if (!expected) throw error;
      logger.debug("Cannot find the TLS block of {pid}: {error}", { pid: this.pid, error: String(error) });
    }
    return this.#tls ?? null;
  }

  /**
   * The `PyThreadState` in `_Py_tss_tstate` of the thread at `threadPointer` (0 while it does not hold
   * the GIL), or null when the TLS offset is unknown.
   */
  threadStateByTls(threadPointer: Address): Address | null {
    const offset = this.tlsThreadStateOffset();
    return offset === null ? null : this.#memory.pointer(threadPointer + offset);
  }

  /** The record BPF reads for this process. */
  procInfo(): PythonProcInfo {
    const o = this.offsets;
    const tsd = this.tsdInfo();
    let key: number | null = null;
    try {
      key = this.tsdKey();
    } catch (error) {
      if (!(error instanceof RemoteMemoryError)) throw error;
    }
    // The flat formula reaches only glibc's first key block; a later key needs the two-level lookup,
    // which BPF does not do: leave TSD off then (TLS may still work).
    const keysPerBlock = this.glibc()?.keysPerBlock ?? GLIBC_KEYS_PER_BLOCK;
    const keyPending = key === null;
    if (key !== null && tsd !== null && !tsd.indirect && key >= keysPerBlock) key = null;
    const tls = this.tlsThreadStateOffset();
    // No route to the thread state yet, only because the runtime or the dynamic loader has not got that
    // far: samples in the eval loop meanwhile have BPF ask for this record again at once.
    const libcPending = tsd === null && this.#glibc === undefined;
    const notReady = tls === null && (key === null || tsd === null) && (keyPending || libcPending) &&
      performance.now() - this.#attachedAt < NOT_READY_WINDOW_MS;
    return {
      version: (this.version.major << 8) | this.version.minor,
      frameModel: o.frameModel === "frame-object" ? 0 : 1,
      instructionModel: o.instructionModel,
      tlsThreadState: tls,
      tsdKey: key,
      notReady,
      tsdOffset: tsd?.offset ?? null,
      tsdMultiplier: tsd?.multiplier ?? 0,
      tsdIndirect: tsd?.indirect ?? false,
      tstateFrame: o.tstateFrame,
      cframeCurrentFrame: o.cframeCurrentFrame,
      framePrevious: o.framePrevious,
      frameCode: o.frameCode,
      frameInstruction: o.frameInstruction,
      frameOwner: o.frameOwner,
      frameIsEntry: o.frameIsEntry,
      codeFirstLineNo: o.codeFirstLineNo,
      codeCodeAdaptive: o.codeCodeAdaptive,
    };
  }

  /** Writes (or rewrites, when it changed) the process's BPF record. */
  publish(ebpf: EbpfHandler): void {
    if (this.#detached) return;
    // The runtime's state changes under us (the thread-state key appears once it initialized): read it
    // as it is now, not from pages cached by an earlier read.
    this.#memory.clearCache();
    const record = encodePythonProcInfo(this.procInfo());
    const previous = this.#published;
    if (previous !== null && previous.length === record.length && previous.every((b, i) => b === record[i])) {
      return;
    }
    ebpf.updateProcData("python", this.pid, record);
    this.#published = record;
    logger.debug("Published the Python record of {pid}: TSD key {key}, TLS offset {tls}", {
      pid: this.pid,
      key: this.#tsdKey,
      tls: this.#tls ?? null,
    });
  }

  override detach(ebpf: EbpfHandler, _pid: Pid): void {
    if (this.#detached) return;
    this.#detached = true;
    ebpf.deleteProcData("python", this.pid);
    this.symbolizer.clear();
  }

  /**
   * The mappings changed: the runtime may have initialized since attach (the TSD key), and a process
   * caught at exec has mapped its C library since, so republish.
   */
  override synchronizeMappings(ebpf: EbpfHandler, _pid: Pid, mappings: readonly ResolvedMapping[]): void {
    this.#mappings = mappings;
    try {
      this.publish(ebpf);
    } catch (error) {
      if (!(error instanceof RemoteMemoryError)) throw error;
    }
  }

  override updateTsdInfo(ebpf: EbpfHandler, _pid: Pid, info: TsdInfo): void {
    this.#tsdInfo = info;
    this.publish(ebpf);
  }

  override symbolize(frame: InterpreterFrame): readonly SymbolizedFrame[] {
    if (frame.kind !== PythonFrameMarker.Python) throw new InterpreterMismatchError();
    this.#symbolized++;
    const { firstLine, byteOffset } = decodePythonAddrOrLine(frame.addrOrLine);
    const symbol = this.symbolizer.symbolize(frame.fileId as Address, byteOffset, firstLine);
    return [{ kind: "python", ...symbol }];
  }

  override getAndResetMetrics(): Metric[] {
    const stats = this.symbolizer.stats;
    const metrics: Metric[] = [
      { id: "python.frames_symbolized", value: this.#symbolized },
      { id: "python.code_cache.hits", value: stats.hits },
      { id: "python.code_cache.misses", value: stats.misses },
      { id: "python.code_cache.stale", value: stats.stale },
      { id: "python.code_read_failures", value: stats.failures },
    ];
    this.#symbolized = 0;
    this.symbolizer.resetStats();
    return metrics;
  }

  #tidOf(tstate: Address, threadPointer: Address): number | null {
    const o = this.offsets;
    if (o.tstateNativeThreadId !== null) return this.#memory.u64(tstate + o.tstateNativeThreadId);
    const glibc = this.glibc();
    if (glibc === null || threadPointer === 0) return null;
    try {
      return this.#memory.i32(threadPointer + glibc.tidOffset);
    } catch (error) {
      if (error instanceof RemoteMemoryError && error.failure !== "gone") return null;
      throw error;
    }
  }
}

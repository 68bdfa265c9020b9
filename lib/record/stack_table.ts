/**
 * Aggregates traces as they are drained: identical traces (same thread, command name and frames) are
 * counted once. This is the hot path of a recording, so a known trace costs a hash and a compare over
 * the record's words in place, and allocates nothing; only a trace never seen before is copied and
 * resolved (its user addresses turned into file offsets while the process is still alive).
 *
 * When the process manager follows the kernel's records ({@linkcode ProcessManager.kernelRecords}), the
 * table is also their sink, drained before the traces: exec, fork and mappings go to the process manager
 * at once, exits wait for {@linkcode StackTable.endDrain} like BPF's, and BPF's own exec, fork and exit
 * events are not needed for mappings (an exec still has the process installed in BPF).
 *
 * @example
 * ```ts ignore
 * import { StackTable } from "./stack_table.ts";
 * const table = new StackTable(processes, files);
 * tracer.drain(table); // RecordSink
 * for (const stack of table.stacks()) console.log(stack.comm, stack.count);
 * ```
 *
 * @module
 */
import type { RecordSink } from "../bpf/ring_buffer.ts";
import type { ExecutableMapping, MappingEventSink } from "../perf/perf_records.ts";
import type { MappedFile } from "../process/mapped_file.ts";
import type { ProcessManager } from "../process/process_manager.ts";
import type { Address, KernelAddress, Pid, Tid } from "../types.ts";
import { EventKind, FrameFlag, FrameMarker, TraceFlag, TraceOrigin } from "../../support/types.ts";
import {
  type CopiedFrameSink,
  type CopiedStack,
  type CopiedStackFiles,
  type CopiedStackStats,
  CopiedStackUnwinder,
} from "../unwind/copied_stack_unwinder.ts";
import { type SymbolizedFrame, UNKNOWN_SOURCE_FILE } from "../interpreter/interpreter.ts";
import type { JitNames } from "../symbolize/jit_names.ts";
import { frameKindOf } from "../profile/frame_kinds.ts";
import type { SampleLabel } from "../profile/profile.ts";
import type { OffCpuStacks } from "./off_cpu_stacks.ts";
import {
  COMM_LENGTH,
  COPY_DATA,
  COPY_FP,
  COPY_LENGTH,
  COPY_PC,
  COPY_RETURN_ADDRESS,
  COPY_SKIPPED,
  COPY_SP,
  FRAME_ADDRESS,
  FRAME_FILE_ID,
  FRAME_FLAGS,
  FRAME_KIND,
  FRAME_SIZE,
  LABEL_BYTES,
  LABEL_KEY,
  LABEL_KEY_LENGTH,
  LABEL_SIZE,
  LABEL_VALUE,
  LABEL_VALUE_LENGTH,
  PROCESS_EVENT_ADDRESS,
  PROCESS_EVENT_FILE_ID,
  PROCESS_EVENT_PARENT,
  RECORD_KIND,
  RECORD_KTIME,
  RECORD_OFF_CPU_NS,
  RECORD_OFF_CPU_STACK,
  RECORD_PID,
  RECORD_TID,
  TRACE_COMM,
  TRACE_FLAGS,
  TRACE_FRAMES,
  TRACE_KERNEL_FRAMES,
  TRACE_NUM_FRAMES,
  TRACE_NUM_LABELS,
  TRACE_ORIGIN,
  TRACE_STOP_REASON,
} from "./trace_format.ts";

/** What the `address` of a {@linkcode StackFrame} is. */
export type AddressKind =
  /** a KernelAddress */
  | "kernel"
  /** an ELF virtual address of `file` (resolved in BPF) */
  | "vaddr"
  /** an offset into `file` (resolved on the host from the process's mappings) */
  | "offset"
  /** a process address that no known mapping holds */
  | "absolute"
  /** an interpreter frame, already named (`symbol`); `address` is the frame's raw addr_or_line */
  | "interpreter"
  /**
   * a process address in anonymous executable memory (JIT code), named by the process's `jit` names;
   * `file` is the memory's pseudo file
   */
  | "jit";

/** One frame of a stored stack, with user addresses already resolved. */
export interface StackFrame {
  /** A FrameMarker value. */
  readonly kind: number;
  /** The address was a return address (the call is just before it). */
  readonly returnAddress: boolean;
  readonly addressKind: AddressKind;
  readonly address: number;
  /** The file of "vaddr" and "offset" frames. */
  readonly file: MappedFile | null;
  /** The unwinder found a signal trampoline here. */
  readonly signalTrampoline?: boolean;
  /** An interpreter frame's name, file and line, read from the process when the stack was first seen. */
  readonly symbol?: SymbolizedFrame;
  /** The JIT names (perf map and jitdump) of the process of a "jit" frame. */
  readonly jit?: JitNames;
  /** Unwound on the host from a stack BPF copied (its process was not known to BPF yet). */
  readonly hostUnwound?: boolean;
}

/** A distinct stack of one thread and how often it was sampled. */
export interface Stack {
  readonly pid: Pid;
  readonly tid: Tid;
  readonly comm: string;
  /** Leaf first: kernel frames, then user frames. */
  readonly frames: readonly StackFrame[];
  /** A FrameMarker-free UnwindStopReason value: why the user unwind ended. */
  readonly stopReason: number;
  /** The labels the runtime gave the sampled code (Go's pprof labels); absent when none. */
  readonly labels?: readonly SampleLabel[];
  /** The user frames were unwound on the host from a copy of the stack (see StackFrame.hostUnwound). */
  readonly hostUnwound?: boolean;
  /**
   * The thread was switched out here (off-CPU time) rather than sampled on a CPU: `count` is then the
   * number of waits and `offCpuNs` their total length.
   */
  readonly offCpu?: boolean;
  /** The probe (`record -e`, its index among the session's) whose hits these are; absent for samples. */
  readonly probe?: number;
  /** Traces with exactly this stack: CPU samples, or waits of an off-CPU stack. */
  count: number;
  /** ns the thread spent switched out with this stack; 0 for CPU samples. */
  offCpuNs: number;
}

interface Entry {
  stack: Stack;
  /** The record's words from the pid onwards, to compare candidates with equal hashes. */
  words: Uint32Array;
  next: Entry | null;
}

/**
 * What the table needs of the file registry: the files BPF frames refer to by id, and the rules to
 * unwind copied stacks with.
 */
export interface TraceFiles extends CopiedStackFiles {
  fileByBpfId(bpfId: number): MappedFile | undefined;
  /** The unwinder met code of file `bpfId` at ELF address `address` that it has no deltas for. */
  onFileNeeded(bpfId: number, address: number): void;
}

/** What an interpreter frame reads as when its process could not name it. */
const UNKNOWN_INTERPRETER_FRAME = {
  functionName: UNKNOWN_SOURCE_FILE,
  sourceFile: UNKNOWN_SOURCE_FILE,
  line: 0,
} as const;

const KEY_START = RECORD_PID;
/**
 * Raw traces with interpreter frames kept for the fast path (about 1 KB each); past it, such a trace is
 * decoded and named again each time it is seen, and merged into its stack by name.
 */
const MAX_INTERPRETER_ENTRIES = 20_000;
/** High half of 2^47, where x86-64 user space ends. */
const USER_SPACE_HIGH = 0x8000;
const decoder = new TextDecoder();

/**
 * Aggregated stacks plus process bookkeeping; a RecordSink for RingBufferReader.drain(), and a
 * MappingEventSink for the kernel's records.
 */
export class StackTable implements RecordSink, MappingEventSink {
  #processes: ProcessManager;
  #files: TraceFiles;
  /** The ids of off-CPU stacks whose waits the kernel adds up, or null without off-CPU time. */
  #offCpuStacks: OffCpuStacks | null;
  /** This table's stack of each off-CPU stack id. */
  #offCpuById: Stack[] = [];
  #buckets = new Map<number, Entry>();
  /** Stacks with interpreter frames, by what they name (see decodedKey). */
  #interpreterStacks = new Map<string, Stack>();
  /** Raw traces with interpreter frames remembered in #buckets. */
  #interpreterEntries = 0;
  /** Stacks unwound on the host from copies, by a hash of their frames (each copy's bytes differ). */
  #copiedStacks = new Map<number, Stack[]>();
  #copiedStackUnwinder: CopiedStackUnwinder;
  /** The copy being unwound, reused for every one. */
  #copy: CopiedStack = {
    takenAtNs: -1,
    pc: 0,
    sp: 0,
    fp: 0,
    returnAddress: false,
    framesBefore: 0,
    view: new DataView(new ArrayBuffer(0)),
    data: 0,
    length: 0,
    start: 0,
  };
  /** Where the host-unwound frames of the trace being decoded go, and the process's JIT names. */
  #copiedFrames: StackFrame[] = [];
  #copiedJit: JitNames | null | undefined;
  #copiedPid = 0 as Pid;
  readonly #copiedSink: CopiedFrameSink;
  #stacks: Stack[] = [];
  #words: Uint32Array | null = null;
  /** Processes that exited in the current drain, forgotten at its end. */
  #exited = new Set<Pid>();
  /** CPU samples seen (sum of the counts of the stacks that are not off-CPU). */
  samples = 0;
  /** Off-CPU waits seen, and their total ns. */
  offCpuWaits = 0;
  offCpuNs = 0;
  /** CLOCK_MONOTONIC time of the first sample in ns, or -1 before it. */
  firstSampleKtimeNs = -1;

  /**
   * `processes` handles process events, resolves addresses and names interpreter frames; `files` names
   * the files behind the file ids of frames unwound in BPF, and loads a file's unwind tables when BPF asks
   * for them; `offCpuStacks` gives ids to the off-CPU stacks that ask for one.
   */
  constructor(processes: ProcessManager, files: TraceFiles, offCpuStacks: OffCpuStacks | null = null) {
    this.#processes = processes;
    this.#files = files;
    this.#offCpuStacks = offCpuStacks;
    this.#copiedStackUnwinder = new CopiedStackUnwinder(processes, files);
    this.#copiedSink = (address, returnAddress, resolved, signalTrampoline) => {
      const kind = FrameMarker.Native;
      if (resolved?.mapping.file.kind === "anonymous") {
        this.#copiedJit ??= this.#processes.jitNamesOf(this.#copiedPid);
        if (this.#copiedJit) {
          this.#copiedFrames.push({
            kind,
            returnAddress,
            addressKind: "jit",
            address,
            file: resolved.mapping.file,
            jit: this.#copiedJit,
            hostUnwound: true,
          });
          return;
        }
      }
      this.#copiedFrames.push(
        resolved
          ? {
            kind,
            returnAddress,
            addressKind: "offset",
            address: resolved.fileOffset,
            file: resolved.mapping.file,
            signalTrampoline,
            hostUnwound: true,
          }
          : { kind, returnAddress, addressKind: "absolute", address, file: null, hostUnwound: true },
      );
    };
  }

  /** Counters of the stacks BPF copied for the host to unwind. */
  get copiedStackStats(): CopiedStackStats {
    return this.#copiedStackUnwinder.stats;
  }

  /** Distinct stacks, in order of first appearance. */
  stacks(): readonly Stack[] {
    return this.#stacks;
  }

  onRecord(view: DataView, offset: number, length: number): void {
    switch (view.getUint32(offset + RECORD_KIND, true)) {
      case EventKind.Trace:
        this.#addTrace(view, offset, length);
        break;
      case EventKind.ProcessExec: {
        const pid = view.getUint32(offset + RECORD_PID, true) as Pid;
        // With the kernel's records, a process whose exit is already known needs nothing in BPF.
        if (!this.#exited.has(pid)) this.#processes.onExec(pid);
        break;
      }
      case EventKind.ProcessFork: {
        if (this.#processes.kernelRecords) break;
        const child = view.getUint32(offset + RECORD_PID, true) as Pid;
        this.#settleExit(child);
        this.#processes.onFork(view.getUint32(offset + PROCESS_EVENT_PARENT, true) as Pid, child);
        break;
      }
      case EventKind.ProcessUnknown: {
        const pid = view.getUint32(offset + RECORD_PID, true) as Pid;
        if (!this.#exited.has(pid)) this.#processes.onUnknown(pid);
        break;
      }
      case EventKind.FileNeeded:
        this.#files.onFileNeeded(
          view.getUint32(offset + PROCESS_EVENT_FILE_ID, true),
          // ELF addresses of user code stay below 2^53.
          view.getUint32(offset + PROCESS_EVENT_ADDRESS, true) +
            view.getUint32(offset + PROCESS_EVENT_ADDRESS + 4, true) * 2 ** 32,
        );
        break;
      case EventKind.ProcessStale:
        this.#processes.onStale(view.getUint32(offset + RECORD_PID, true) as Pid);
        break;
      case EventKind.ProcessExit:
        if (this.#processes.kernelRecords) break;
        // Records of the process may still follow in this drain (from other CPUs); forget it after.
        this.#exited.add(view.getUint32(offset + RECORD_PID, true) as Pid);
        break;
    }
  }

  onMmap(event: ExecutableMapping): void {
    this.#processes.onMappingRecord(event);
  }

  onExec(pid: Pid, _comm: string, timeNs: number): void {
    // Another thread than the main one exec'd: the main thread's exit came just before, and the process
    // lives on.
    this.#exited.delete(pid);
    this.#processes.onExecRecord(pid, timeNs);
  }

  onFork(pid: Pid, parentPid: Pid, timeNs: number): void {
    this.#settleExit(pid);
    this.#processes.onForkRecord(pid, parentPid, timeNs);
  }

  onExit(pid: Pid, _timeNs: number): void {
    // Its samples taken before are still to be drained: forget it at the end of the drain.
    this.#exited.add(pid);
  }

  /** The kernel's records of this drain are handled: the trie gets what they changed. */
  endRecords(): void {
    this.#processes.installChanged(this.#exited);
  }

  /** Forgets the processes that exited during the last drain. Call after each drain. */
  endDrain(): void {
    for (const pid of this.#exited) this.#processes.onExit(pid);
    this.#exited.clear();
  }

  /**
   * The PID of a process that exited in this drain, handed out again: that exit is settled now, or it
   * would later remove the new process's state.
   */
  #settleExit(pid: Pid): void {
    if (this.#exited.delete(pid)) this.#processes.onExit(pid);
  }

  #addTrace(view: DataView, offset: number, length: number): void {
    if (view.getUint8(offset + TRACE_FLAGS) & TraceFlag.CopiedStack) {
      this.#addCopiedTrace(view, offset, length);
      return;
    }
    const offCpuNs = this.#countTrace(view, offset);
    const stack = this.#addStack(view, offset, length, 1, offCpuNs);
    // The first wait of a stack new to the kernel asks for the id its later waits are added up under.
    if (this.#offCpuStacks !== null && readU64(view, offset + RECORD_OFF_CPU_STACK) !== 0) {
      const id = this.#offCpuStacks.define(view, offset, length);
      if (id >= 0) this.#offCpuById[id] = stack;
    }
  }

  /**
   * Adds `waits` off-CPU waits of `ns` in all to the stack of off-CPU stack `id`, whose defining trace
   * record is `record` (see lib/record/off_cpu_stacks.ts).
   */
  addOffCpuWaits(id: number, record: Uint8Array<ArrayBuffer>, ns: number, waits: number): void {
    this.offCpuWaits += waits;
    this.offCpuNs += ns;
    const stack = this.#offCpuById[id];
    if (stack !== undefined) {
      stack.count += waits;
      stack.offCpuNs += ns;
      return;
    }
    // A table started after the stack was defined (an interval's): decoded once more, from its record.
    const view = new DataView(record.buffer, record.byteOffset, record.byteLength);
    this.#offCpuById[id] = this.#addStack(view, 0, record.byteLength, waits, ns);
  }

  /**
   * Adds `count` traces like the one at `offset` (`offCpuNs` of waits in all) to its stack, which it finds
   * by the record's bytes from the pid on, or decodes; returns the stack.
   */
  #addStack(view: DataView, offset: number, length: number, count: number, offCpuNs: number): Stack {
    if (this.#words === null || this.#words.buffer !== view.buffer) {
      this.#words = new Uint32Array(view.buffer, view.byteOffset, view.byteLength >>> 2);
    }
    const words = this.#words;
    const first = (offset + KEY_START) >>> 2;
    const wordCount = (length - KEY_START) >>> 2;
    let hash = 0x811c9dc5;
    for (let i = 0; i < wordCount; i++) hash = Math.imul(hash ^ words[first + i]!, 0x01000193);
    for (let entry = this.#buckets.get(hash) ?? null; entry !== null; entry = entry.next) {
      const stored = entry.words;
      if (stored.length !== wordCount) continue;
      let equal = true;
      for (let i = 0; i < wordCount; i++) {
        if (stored[i] !== words[first + i]) {
          equal = false;
          break;
        }
      }
      if (equal) {
        entry.stack.count += count;
        entry.stack.offCpuNs += offCpuNs;
        return entry.stack;
      }
    }
    let stack = this.#decode(view, offset, length);
    stack.count = count;
    stack.offCpuNs = offCpuNs;
    if (stack.frames.some((frame) => frame.symbol !== undefined)) {
      // Interpreter frames carry the instruction offset, so nearly every sample is a new trace: merge
      // traces that name the same functions and lines, and stop remembering raw forms past a budget so
      // that a long recording of a busy interpreter does not grow without bound.
      const key = decodedKey(stack);
      const known = this.#interpreterStacks.get(key);
      if (known !== undefined) {
        known.count += count;
        known.offCpuNs += offCpuNs;
        stack = known;
      } else {
        this.#interpreterStacks.set(key, stack);
        this.#stacks.push(stack);
      }
      if (this.#interpreterEntries >= MAX_INTERPRETER_ENTRIES) return stack;
      this.#interpreterEntries++;
    } else {
      this.#stacks.push(stack);
    }
    const entry: Entry = {
      stack,
      words: words.slice(first, first + wordCount),
      next: this.#buckets.get(hash) ?? null,
    };
    this.#buckets.set(hash, entry);
    return stack;
  }

  /** Counts the trace at `offset` as a CPU sample or an off-CPU wait; returns the wait's ns (0 for a sample). */
  #countTrace(view: DataView, offset: number): number {
    if (view.getUint8(offset + TRACE_ORIGIN) === TraceOrigin.OffCpu) {
      const ns = readU64(view, offset + RECORD_OFF_CPU_NS);
      this.offCpuWaits++;
      this.offCpuNs += ns;
      return ns;
    }
    if (this.samples++ === 0) {
      this.firstSampleKtimeNs = view.getUint32(offset + RECORD_KTIME + 4, true) * 0x100000000 +
        view.getUint32(offset + RECORD_KTIME, true);
    }
    return 0;
  }

  /**
   * A trace whose user stack BPF copied: never the same bytes twice, so it is decoded (unwound) every
   * time and merged into its stack by what it names.
   */
  #addCopiedTrace(view: DataView, offset: number, length: number): void {
    this.#countTrace(view, offset);
    const stack = this.#decode(view, offset, length);
    const hash = framesHash(stack);
    const bucket = this.#copiedStacks.get(hash);
    if (bucket === undefined) this.#copiedStacks.set(hash, [stack]);
    else {
      for (const known of bucket) {
        if (sameStack(known, stack)) {
          known.count++;
          return;
        }
      }
      bucket.push(stack);
    }
    this.#stacks.push(stack);
  }

  /**
   * Unwinds the copied stack behind the frames of the trace at `offset` into `frames`, after the frames
   * BPF unwound; returns the UnwindStopReason.
   */
  #unwindCopy(view: DataView, offset: number, length: number, pid: Pid, frames: StackFrame[]): number {
    const numFrames = view.getUint16(offset + TRACE_NUM_FRAMES, true);
    const at = offset + TRACE_FRAMES + numFrames * FRAME_SIZE;
    const copy = this.#copy;
    copy.view = view;
    copy.takenAtNs = readU64(view, offset + RECORD_KTIME);
    copy.pc = readU64(view, at + COPY_PC);
    copy.sp = readU64(view, at + COPY_SP);
    copy.fp = readU64(view, at + COPY_FP);
    copy.returnAddress = view.getUint8(at + COPY_RETURN_ADDRESS) !== 0;
    copy.framesBefore = numFrames - view.getUint16(offset + TRACE_KERNEL_FRAMES, true);
    copy.data = at + COPY_DATA;
    copy.start = copy.sp + view.getUint32(at + COPY_SKIPPED, true);
    // Never past the record, whatever the length field says.
    copy.length = Math.max(0, Math.min(view.getUint32(at + COPY_LENGTH, true), offset + length - copy.data));
    this.#copiedFrames = frames;
    this.#copiedJit = undefined;
    this.#copiedPid = pid;
    return this.#copiedStackUnwinder.unwind(pid, copy, this.#copiedSink);
  }

  #decode(view: DataView, offset: number, length: number): Stack {
    const pid = view.getUint32(offset + RECORD_PID, true) as Pid;
    const commBytes = new Uint8Array(view.buffer, view.byteOffset + offset + TRACE_COMM, COMM_LENGTH);
    const end = commBytes.indexOf(0);
    const comm = decoder.decode(commBytes.subarray(0, end < 0 ? COMM_LENGTH : end));
    const numFrames = view.getUint16(offset + TRACE_NUM_FRAMES, true);
    const takenAtNs = view.getUint32(offset + RECORD_KTIME + 4, true) * 0x100000000 +
      view.getUint32(offset + RECORD_KTIME, true);
    const frames: StackFrame[] = [];
    /** The process's JIT names, once a frame of the trace needs them. */
    let jit: JitNames | null | undefined;
    for (let i = 0; i < numFrames; i++) {
      const at = offset + TRACE_FRAMES + i * FRAME_SIZE;
      const kind = view.getUint8(at + FRAME_KIND);
      const flags = view.getUint8(at + FRAME_FLAGS);
      const low = view.getUint32(at + FRAME_ADDRESS, true);
      const high = view.getUint32(at + FRAME_ADDRESS + 4, true);
      const returnAddress = (flags & FrameFlag.ReturnAddress) !== 0;
      if (kind === FrameMarker.Kernel) {
        // Kernel text is in the top 2 GiB: the low half identifies it (see KernelAddress).
        const address = (high === 0xffffffff ? low : 0) as KernelAddress;
        frames.push({ kind, returnAddress, addressKind: "kernel", address, file: null });
        continue;
      }
      if (kind !== FrameMarker.Native) {
        // An interpreter frame: what file_id and addr_or_line hold is the runtime's; its instance reads
        // the names from the process now, while it lives.
        const fileId = view.getUint32(at + FRAME_FILE_ID + 4, true) * 0x100000000 +
          view.getUint32(at + FRAME_FILE_ID, true);
        const addrOrLine = high * 0x100000000 + low;
        const symbols = this.#processes.symbolize(pid, { kind, fileId, addrOrLine }) ??
          [{ kind: frameKindOf(kind), ...UNKNOWN_INTERPRETER_FRAME }];
        // More than one where a JIT compiler inlined calls: innermost first, as frames go.
        for (const symbol of symbols) {
          frames.push({
            kind,
            returnAddress: false,
            addressKind: "interpreter",
            address: addrOrLine,
            file: null,
            symbol,
          });
        }
        continue;
      }
      // Above user space (a frame-pointer walk that read garbage): not a code address; keep it exact
      // and recognizably invalid as 0.
      const address = high >= USER_SPACE_HIGH ? 0 : high * 0x100000000 + low;
      if (flags & FrameFlag.AbsoluteAddress) {
        const resolved = this.#processes.resolve(pid, address as Address, takenAtNs);
        if (resolved?.mapping.file.kind === "anonymous") {
          // JIT code: named later from the perf map or jitdump, looked for now, while the process runs.
          jit ??= this.#processes.jitNamesOf(pid);
          if (jit) {
            frames.push({
              kind,
              returnAddress,
              addressKind: "jit",
              address,
              file: resolved.mapping.file,
              jit,
            });
            continue;
          }
        }
        frames.push(
          resolved
            ? {
              kind,
              returnAddress,
              addressKind: "offset",
              address: resolved.fileOffset,
              file: resolved.mapping.file,
            }
            : { kind, returnAddress, addressKind: "absolute", address, file: null },
        );
      } else {
        const fileId = view.getUint32(at + FRAME_FILE_ID, true);
        const file = this.#files.fileByBpfId(fileId) ?? null;
        const signalTrampoline = (flags & FrameFlag.SignalTrampoline) !== 0;
        frames.push({
          kind,
          returnAddress,
          addressKind: file ? "vaddr" : "absolute",
          address,
          file,
          signalTrampoline,
        });
      }
    }
    if (view.getUint8(offset + TRACE_FLAGS) & TraceFlag.CopiedStack) {
      const stopReason = this.#unwindCopy(view, offset, length, pid, frames);
      const tid = view.getUint32(offset + RECORD_TID, true) as Tid;
      const origin = originOf(view.getUint8(offset + TRACE_ORIGIN));
      return { pid, tid, comm, frames, stopReason, hostUnwound: true, ...origin, count: 1, offCpuNs: 0 };
    }
    const labels = decodeLabels(
      view,
      offset + TRACE_FRAMES + numFrames * FRAME_SIZE,
      offset + length,
      view.getUint8(offset + TRACE_NUM_LABELS),
    );
    return {
      pid,
      tid: view.getUint32(offset + RECORD_TID, true) as Tid,
      comm,
      frames,
      stopReason: view.getUint8(offset + TRACE_STOP_REASON),
      ...(labels.length > 0 ? { labels } : {}),
      ...originOf(view.getUint8(offset + TRACE_ORIGIN)),
      count: 1,
      offCpuNs: 0,
    };
  }
}

/** What a trace's origin makes of its stack: an off-CPU wait, a probe's hit, or (nothing) a CPU sample. */
function originOf(origin: number): { offCpu?: true; probe?: number } {
  if (origin === TraceOrigin.OffCpu) return { offCpu: true };
  if (origin >= TraceOrigin.Probe) return { probe: origin - TraceOrigin.Probe };
  return {};
}

/**
 * The `count` labels (struct trace_label) at `at`, which BPF put behind a trace's frames; those past `end`,
 * the end of the record, are not there.
 */
function decodeLabels(view: DataView, at: number, end: number, count: number): SampleLabel[] {
  const labels: SampleLabel[] = [];
  for (let i = 0; i < count; i++) {
    const label = at + i * LABEL_SIZE;
    if (label + LABEL_SIZE > end) break;
    const text = (field: number, length: number) =>
      decoder.decode(
        new Uint8Array(
          view.buffer,
          view.byteOffset + label + field,
          Math.min(view.getUint8(length), LABEL_BYTES),
        ),
      );
    labels.push({
      key: text(LABEL_KEY, label + LABEL_KEY_LENGTH),
      value: text(LABEL_VALUE, label + LABEL_VALUE_LENGTH),
    });
  }
  return labels;
}

/** A hash of what a decoded stack's frames are (not their files: {@linkcode sameStack} compares those). */
function framesHash(stack: Stack): number {
  let hash = Math.imul(0x811c9dc5 ^ stack.tid, 0x01000193);
  hash = Math.imul(hash ^ stack.stopReason, 0x01000193);
  for (const frame of stack.frames) {
    hash = Math.imul(hash ^ frame.address, 0x01000193);
    hash = Math.imul(hash ^ Math.floor(frame.address / 0x100000000), 0x01000193);
    hash = Math.imul(hash ^ (frame.kind << 8 | frame.addressKind.charCodeAt(0)), 0x01000193);
  }
  return hash;
}

/** Whether two decoded stacks (of copies) name the same frames, and were taken of the same thread. */
function sameStack(a: Stack, b: Stack): boolean {
  if (
    a.pid !== b.pid || a.tid !== b.tid || a.comm !== b.comm || a.stopReason !== b.stopReason ||
    a.hostUnwound !== b.hostUnwound || a.probe !== b.probe || a.offCpu !== b.offCpu ||
    a.frames.length !== b.frames.length
  ) return false;
  for (let i = 0; i < a.frames.length; i++) {
    const x = a.frames[i]!;
    const y = b.frames[i]!;
    if (
      x.kind !== y.kind || x.addressKind !== y.addressKind || x.address !== y.address || x.file !== y.file ||
      x.returnAddress !== y.returnAddress || x.signalTrampoline !== y.signalTrampoline || x.jit !== y.jit
    ) return false;
  }
  return true;
}

/** The little-endian u64 at `at`; addresses stay below 2^53. */
function readU64(view: DataView, at: number): number {
  return view.getUint32(at + 4, true) * 0x100000000 + view.getUint32(at, true);
}

/** What a stack names: equal for two traces that differ only in where within a line an interpreter was. */
function decodedKey(stack: Stack): string {
  let key = `${stack.pid}\0${stack.tid}\0${stack.comm}\0${stack.stopReason}${stack.offCpu ? "\0o" : ""}` +
    (stack.probe === undefined ? "" : `\0p${stack.probe}`);
  for (const label of stack.labels ?? []) key += `\0l${label.key}\x01${label.value}`;
  for (const frame of stack.frames) {
    const symbol = frame.symbol;
    key += symbol !== undefined
      ? `\0i${symbol.kind}\x01${symbol.functionName}\x01${symbol.sourceFile}\x01${symbol.line}` +
        (symbol.inlined ? "\x01i" : "")
      : `\0${frame.kind}\x01${frame.addressKind}\x01${frame.address}\x01${frame.file?.key ?? ""}\x01` +
        `${frame.returnAddress ? 1 : 0}${frame.signalTrampoline ? 1 : 0}`;
  }
  return key;
}

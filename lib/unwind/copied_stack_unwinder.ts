/**
 * Unwinds, on the host, a user stack that BPF copied into a trace (struct copied_stack: the registers and
 * the stack from rsp up) because the process's mappings, or a file's deltas, were not in BPF yet: from
 * the leaf, or from the frame where BPF's own unwinding met them. Each frame is unwound
 * with the very stack deltas and rules the BPF unwinder would have used (bpf/native_unwinder.bpf.c):
 * the file's rows, loaded now if BPF never asked for them; the CFA from rsp or rbp, the PLT expression,
 * saved rbp, the frame-pointer command and walk, signal frames; it stops where BPF would, or where the
 * copy ends. Addresses are resolved through the process's mappings as the host knows them.
 *
 * Allocation-free per frame: the registers and the rule live in fields reused for every trace, and each
 * frame goes straight to the caller's sink.
 *
 * @example
 * ```ts ignore
 * import { CopiedStackUnwinder } from "./copied_stack_unwinder.ts";
 * const unwinder = new CopiedStackUnwinder(processes, files);
 * const copy = { pc, sp, fp, returnAddress: false, framesBefore: 0, view, data, length, start: sp };
 * const stop = unwinder.unwind(pid, copy, (address, returnAddress, at) => {
 *   frames.push(at ? `${at.mapping.file.path}+${at.fileOffset}` : `0x${address.toString(16)}`);
 * });
 * ```
 *
 * @module
 */
import type { MappedFile, ResolvedAddress, ResolvedMapping } from "../process/mapped_file.ts";
import type { Address, Pid } from "../types.ts";
import {
  Limits,
  StackDeltaConstants,
  UnwindCommand,
  UnwindFpOpcode,
  UnwindOpcode,
  UnwindStopReason,
} from "../../support/types.ts";
import { RuleLookup } from "./stack_delta_loader.ts";
import { emptyRule, type ResolvedRule } from "./stack_deltas.ts";

/** The registers and stack bytes of one copied stack, read in place from a ring buffer record. */
export interface CopiedStack {
  /** CLOCK_MONOTONIC ns of the sample: it picks the program the addresses belong to across an exec. */
  takenAtNs: number;
  pc: number;
  sp: number;
  fp: number;
  /** pc is a return address (BPF unwound the frames below it), not the interrupted instruction. */
  returnAddress: boolean;
  /** User frames BPF unwound before the copy: they count against the same limit. */
  framesBefore: number;
  /** The record's buffer; the copy's bytes are at [data, data + length). */
  view: DataView;
  data: number;
  length: number;
  /** The process address the copy's first byte came from: sp, or past sp's page when that was missing. */
  start: number;
}

/** Where the unwinder finds addresses' mappings (the process manager). */
export interface CopiedStackProcesses {
  /** Resolves `address` of a sample taken at `takenAtNs`, reading the process's mappings if needed. */
  resolve(pid: Pid, address: Address, takenAtNs: number): ResolvedAddress | null;
  /** Resolves `address` of a sample taken at `takenAtNs` with the mappings as last read. */
  resolveAsRead(pid: Pid, address: Address, takenAtNs: number): ResolvedAddress | null;
}

/** Where the unwinder finds the rules of files (the file registry). */
export interface CopiedStackFiles {
  elfAddress(mapping: ResolvedMapping, address: number): number | null;
  ruleAt(file: MappedFile, lookup: number, out: ResolvedRule): RuleLookup;
}

/**
 * Receives each frame, leaf first: its process address, whether it is a return address, its mapping and
 * file offset (null when no known mapping holds it), and whether a signal frame was crossed right above it.
 */
export type CopiedFrameSink = (
  address: number,
  returnAddress: boolean,
  resolved: ResolvedAddress | null,
  signalTrampoline: boolean,
) => void;

/** Counters for `--stats`. */
export interface CopiedStackStats {
  /** Copied stacks unwound on the host. */
  samples: number;
  /** User frames they gave. */
  frames: number;
  /** Why their unwinding stopped, by UnwindStopReason name. */
  stops: Record<string, number>;
}

// x86-64 signal frame, as bpf/native_unwinder.bpf.c reads it: rsp points at the ucontext, whose mcontext
// starts 40 bytes in.
const UCONTEXT_MCONTEXT = 40;
const SIGCONTEXT_RBP = 80;
const SIGCONTEXT_RSP = 120;
const SIGCONTEXT_RIP = 128;
/** Where x86-64 user space ends: a value at or above it is no user address. */
const USER_SPACE_END = 2 ** 47;
const STEP_CONTINUE = -1;
const STOP_NAMES = new Map<number, string>(
  Object.entries(UnwindStopReason).map(([name, value]) => [value, name]),
);

/** Unwinds copied stacks; one per stack table. */
export class CopiedStackUnwinder {
  readonly #processes: CopiedStackProcesses;
  readonly #files: CopiedStackFiles;
  readonly #rule = emptyRule();
  #pc = 0;
  #sp = 0;
  #fp = 0;
  #returnAddress = false;
  /** The copy being unwound. */
  #copy: CopiedStack | null = null;
  /** The value of the last successful read. */
  #value = 0;
  /** Why the last read failed: outside a full copy (the stack goes on) or outside a stack that ended. */
  #readStop: number = UnwindStopReason.ReadFailed;
  readonly stats: CopiedStackStats = { samples: 0, frames: 0, stops: {} };

  constructor(processes: CopiedStackProcesses, files: CopiedStackFiles) {
    this.#processes = processes;
    this.#files = files;
  }

  /** Unwinds `copy` of process `pid`, giving each frame to `sink`; returns the UnwindStopReason. */
  unwind(pid: Pid, copy: CopiedStack, sink: CopiedFrameSink): number {
    this.#copy = copy;
    this.#pc = copy.pc;
    this.#sp = copy.sp;
    this.#fp = copy.fp;
    this.#returnAddress = copy.returnAddress;
    let stop: number = UnwindStopReason.Truncated;
    let frames = 0;
    for (; frames < Limits.MaxFrameUnwinds - copy.framesBefore; frames++) {
      const result = this.#frame(pid, sink);
      if (result !== STEP_CONTINUE) {
        stop = result;
        frames++;
        break;
      }
    }
    this.#copy = null;
    this.stats.samples++;
    this.stats.frames += frames;
    const name = STOP_NAMES.get(stop) ?? String(stop);
    this.stats.stops[name] = (this.stats.stops[name] ?? 0) + 1;
    return stop;
  }

  /** Gives the frame at pc to `sink` and steps to its caller (unwind_frame in BPF). */
  #frame(pid: Pid, sink: CopiedFrameSink): number {
    const pc = this.#pc;
    const returnAddress = this.#returnAddress;
    // The interrupted instruction may be in code mapped since the process was read: read it again then.
    // A return address is resolved with what was read: one read up a garbage frame-pointer chain would
    // spend the process's re-reads (they are rationed) on addresses no read can resolve.
    const resolved = pc <= 0 || pc >= USER_SPACE_END
      ? null
      : returnAddress
      ? this.#processes.resolveAsRead(pid, pc as Address, this.#copy!.takenAtNs)
      : this.#processes.resolve(pid, pc as Address, this.#copy!.takenAtNs);
    const vaddr = resolved === null ? null : this.#files.elfAddress(resolved.mapping, pc);
    if (vaddr === null) {
      // No mapping, or one without tables (JIT code, the file unreadable): frame pointers, as BPF.
      sink(pc, returnAddress, resolved, false);
      return this.#stepFramePointer();
    }
    const lookup = returnAddress ? vaddr - 1 : vaddr;
    const rule = this.#rule;
    const found = this.#files.ruleAt(resolved!.mapping.file, lookup, rule);
    const signal = found === RuleLookup.Found &&
      rule.unwindInfo === (StackDeltaConstants.DeltaCommandFlag | UnwindCommand.Signal);
    sink(pc, returnAddress, resolved, signal);
    switch (found) {
      case RuleLookup.FramePointer:
        return this.#stepFramePointer();
      case RuleLookup.NoInfo:
        return UnwindStopReason.NoUnwindInfo;
      case RuleLookup.Bad:
        return UnwindStopReason.BadUnwindInfo;
    }
    return this.#stepNative(rule);
  }

  /** One step with a rule of the stack deltas (step_native in BPF). */
  #stepNative(rule: ResolvedRule): number {
    let cfa: number;
    let fpOpcode: number = UnwindFpOpcode.Unchanged;
    let fpParam = 0;
    if (rule.unwindInfo & StackDeltaConstants.DeltaCommandFlag) {
      switch (rule.unwindInfo & ~StackDeltaConstants.DeltaCommandFlag) {
        case UnwindCommand.Stop:
          return UnwindStopReason.EndOfStack;
        case UnwindCommand.Plt:
          cfa = this.#sp + 8 + ((this.#pc % 16) >= 11 ? 8 : 0);
          break;
        case UnwindCommand.Signal:
          return this.#stepSignalFrame();
        case UnwindCommand.FramePointer:
          return this.#stepFramePointer();
        default:
          return UnwindStopReason.NoUnwindInfo;
      }
    } else {
      if (rule.cfaOpcode === UnwindOpcode.BaseSp) cfa = this.#sp + rule.cfaParam;
      else if (rule.cfaOpcode === UnwindOpcode.BaseFp) cfa = this.#fp + rule.cfaParam;
      // asmcgocall's switch back needs the goroutine's g, which is not on the copied stack.
      else if (rule.cfaOpcode === UnwindOpcode.GoCgoCall) return UnwindStopReason.BadGoStack;
      else return UnwindStopReason.BadUnwindInfo;
      fpOpcode = rule.fpOpcode;
      fpParam = rule.fpParam;
    }
    if (!this.#read(cfa - 8)) return this.#readStop;
    const returnAddress = this.#value;
    if (fpOpcode === UnwindFpOpcode.CfaOffset) {
      if (!this.#read(cfa + fpParam)) return this.#readStop;
      this.#fp = this.#value;
    }
    if (returnAddress === 0) return UnwindStopReason.EndOfStack;
    this.#pc = returnAddress;
    this.#sp = cfa;
    this.#returnAddress = true;
    return STEP_CONTINUE;
  }

  /** One step along the frame-pointer chain: rbp -> [saved rbp, return address]. */
  #stepFramePointer(): number {
    const fp = this.#fp;
    if (fp === 0) return UnwindStopReason.EndOfStack;
    if (fp % 8 !== 0 || fp < this.#sp) return UnwindStopReason.BadFramePointer;
    if (!this.#read(fp)) return this.#readStop;
    const saved = this.#value;
    if (!this.#read(fp + 8)) return this.#readStop;
    const returnAddress = this.#value;
    if (returnAddress === 0) return UnwindStopReason.EndOfStack;
    if (saved !== 0 && saved <= fp) return UnwindStopReason.BadFramePointer;
    this.#pc = returnAddress;
    this.#sp = fp + 16;
    this.#fp = saved;
    this.#returnAddress = true;
    return STEP_CONTINUE;
  }

  /** Crosses a signal frame: the interrupted code's registers are in the ucontext at rsp. */
  #stepSignalFrame(): number {
    const mcontext = this.#sp + UCONTEXT_MCONTEXT;
    if (!this.#read(mcontext + SIGCONTEXT_RBP)) return this.#readStop;
    const rbp = this.#value;
    if (!this.#read(mcontext + SIGCONTEXT_RSP)) return this.#readStop;
    const rsp = this.#value;
    if (!this.#read(mcontext + SIGCONTEXT_RIP)) return this.#readStop;
    this.#pc = this.#value;
    this.#sp = rsp;
    this.#fp = rbp;
    // The interrupted instruction, not a return address.
    this.#returnAddress = false;
    return STEP_CONTINUE;
  }

  /**
   * Reads the 8 bytes at process address `address` from the copy into #value. A value beyond 2^53 (no
   * user address; a float would round it) reads as one above user space, which fails every later check
   * as the exact value would.
   */
  #read(address: number): boolean {
    const copy = this.#copy!;
    const offset = address - copy.start;
    if (offset < 0 || offset + 8 > copy.length) {
      // Past a full window the stack went on (BPF would have read it); otherwise it ended there, or the
      // address is no stack address at all, and BPF's read would have failed or found garbage.
      this.#readStop = offset >= 0 && copy.start - copy.sp + copy.length >= Limits.CopiedStackBytes
        ? UnwindStopReason.CopyExhausted
        : UnwindStopReason.ReadFailed;
      return false;
    }
    const at = copy.data + offset;
    const high = copy.view.getUint32(at + 4, true);
    this.#value = high >= 0x200000 ? USER_SPACE_END : high * 0x100000000 + copy.view.getUint32(at, true);
    return true;
  }
}

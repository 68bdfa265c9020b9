/**
 * The kernel side of a recording: loads the BPF object, sets it up, attaches the sampling program to a
 * cpu-clock perf event on every online CPU and the process-event programs to their tracepoints, and
 * hands out the ring buffer. Teardown runs in reverse order of set-up.
 *
 * @example
 * ```ts ignore
 * import { Tracer } from "./tracer.ts";
 * using tracer = Tracer.start({ frequencyHz: 99 });
 * while (running) {
 *   await tracer.waitForWakeup(200);
 *   tracer.drain(sink);
 * }
 * ```
 *
 * @module
 */
import type { BpfLink } from "../bpf/program.ts";
import type { BpfObject } from "../bpf/object.ts";
import { u32Key } from "../bpf/map.ts";
import { libbpf, LibbpfError } from "../bpf/libbpf.ts";
import { type RecordSink, RingBufferReader } from "../bpf/ring_buffer.ts";
import { RingBufferWaiter } from "../bpf/ring_buffer_waiter.ts";
import { UnwindProgramTable } from "../bpf/unwind_programs.ts";
import { RUNTIMES, runtimeUnwinders } from "../interpreter/runtimes.ts";
import { closePerfEvent, openContextSwitches, openCpuClock } from "../perf/perf_event.ts";
import { drainSwitchedOut, offCpuCapacity, type OffCpuOptions } from "./off_cpu.ts";
import { OffCpuStacks, type OffCpuWaitSink } from "./off_cpu_stacks.ts";
import { ProbeSet } from "./probes.ts";
import { openTracerObject } from "./tracer_object.ts";
import type { ResolvedProbe } from "../probe/probe_spec.ts";
import { monotonicNs } from "../sys/monotonic_clock.ts";
import { onlineCpus } from "../sys/cpus.ts";
import { EAGAIN } from "../sys/errno.ts";
import { writeKernelFields } from "./kernel_fields.ts";
import { allocateOnDemand } from "./map_allocation.ts";
import type { Pid } from "../types.ts";
import { BpfKernelNames, KERNEL_NAMES_PROGRAM, kernelNamesSupported } from "../symbolize/bpf_kernel_names.ts";
import {
  copiedStackLayout,
  frameLayout,
  Limits,
  MetricId,
  OffCpuConstants,
  PidFilterFlag,
  pidFilterValueLayout,
  rodataOffsets,
  StackCopyMode,
  traceLayout,
  tracerConfigLayout,
} from "../../support/types.ts";

/** How to sample. */
export interface TracerOptions {
  /** Samples per second per CPU. */
  frequencyHz: number;
  /** Only sample these processes (all their threads). Empty or absent: the whole system. */
  pids?: readonly Pid[];
  /**
   * Processes whose children (and their children) are sampled, but not the processes themselves:
   * `record -- COMMAND` marks omniprof itself so that the command it starts is followed from its first
   * instruction.
   */
  followChildrenOf?: readonly Pid[];
  /** Also record samples of idle CPUs (the idle task, pid 0). */
  sampleIdle?: boolean;
  /** Also record samples of the profiler's own process. */
  sampleSelf?: boolean;
  /** Files to prepare unwinding tables for before sampling starts (the command about to run). */
  preloadPaths?: readonly string[];
  /** Ring buffer size in bytes (a power of two, at least a page). */
  ringBufferBytes?: number;
  /**
   * Which user stacks BPF copies into the trace for the host to unwind: by default those of processes
   * whose mappings are not installed yet; StackCopyMode.All for tests that compare both unwinders.
   */
  stackCopy?: StackCopyMode;
  /**
   * Load and watch processes, but do not sample until {@linkcode Tracer.startSampling}: the caller
   * prepares unwind tables first, so that the first samples unwind completely.
   */
  paused?: boolean;
  /**
   * Also record off-CPU time: every thread in scope is unwound when it is switched out, and its trace sent
   * with how long it was away when it comes back (lib/record/off_cpu.ts).
   */
  offCpu?: OffCpuOptions;
  /**
   * Record stacks at these probes instead of CPU samples: each hit of probe i is a trace of origin
   * TraceOrigin.Probe + i (lib/record/probes.ts).
   */
  probes?: readonly ResolvedProbe[];
  /**
   * Verify and load every runtime's unwinder at start, not when the session first meets the runtime
   * (`omniprof check`: where a program this kernel's verifier refuses must show).
   */
  allUnwinders?: boolean;
}

/** The profiler's own BPF counters: `enum metric_id` but its count and the start of the runtimes' range. */
export type SharedMetricName = Exclude<keyof typeof MetricId, "Count" | "RuntimesFirst">;

/**
 * BPF-side counters, summed over CPUs: the profiler's own, and each runtime's by the name its descriptor
 * gives it (`Runtime.bpfMetrics`).
 */
export type TracerMetrics = Record<SharedMetricName, number> & { readonly [runtimeCounter: string]: number };

/** The programs of off-CPU time, loaded only when it is recorded. */
const OFF_CPU_PROGRAMS = ["off_cpu_switch_out", "off_cpu_switch_in"] as const;

/** The largest trace record without a stack copy: every frame and every label. */
const MAX_TRACE_RECORD = traceLayout.copy_room.offset;
/**
 * The largest trace record with a stack copy: every frame but the last and a whole copy (BPF copies the
 * rest of a stack where it meets code it has no mapping or deltas for yet).
 */
const MAX_COPY_RECORD = traceLayout.frames.offset + (Limits.MaxFrames - 1) * frameLayout.sizeof +
  copiedStackLayout.sizeof;
/**
 * The ring buffer holds what BPF writes between two drains. Sized for a quarter second of the worst case
 * (every CPU at the full rate with maximum-size traces), within 256 KiB..16 MiB: its pages are mapped
 * twice, at once, and count fully towards the profiler's memory.
 *
 * Stack copies need no room of their own. BPF makes none past half full, where it also wakes the host, so
 * the half that absorbs the host's wake-up latency only ever holds plain traces, as before copies existed;
 * copies in the first half only bring the wake-up sooner. Sizing for them too doubled the ring at 999 Hz
 * (4 -> 8 MiB, 8 MiB more resident) for a case that only short-lived processes meet; with the host free
 * to drain while the kernel loads tables (StackDeltaMaps), a `make -j2` at 499 Hz had no copy refused in
 * the smaller ring. Only when every stack is to be copied (a diagnostic mode) is the ring sized for copies.
 */
function ringBufferBytes(cpus: number, frequencyHz: number, stackCopy: StackCopyMode): number {
  const everyStackCopied = stackCopy === StackCopyMode.All || stackCopy === StackCopyMode.AboveLeaf;
  const record = everyStackCopied ? MAX_COPY_RECORD : MAX_TRACE_RECORD;
  const worst = cpus * frequencyHz * record * 0.25;
  let bytes = 256 << 10;
  while (bytes < worst && bytes < 16 << 20) bytes *= 2;
  return bytes;
}

/** A running BPF sampler. */
export class Tracer {
  readonly cpus: number[];
  readonly periodNs: number;
  /** The off-CPU settings, or null when only CPU samples are recorded. */
  readonly offCpu: OffCpuOptions | null;
  /** CLOCK_MONOTONIC ns when sampling stopped, or null while it runs. */
  #stoppedAtNs: number | null = null;
  /** The session's probes, loaded; null when it samples CPUs. */
  #probes: ProbeSet | null = null;
  #kernelNames: BpfKernelNames | null = null;
  #offCpuStacks: OffCpuStacks | null = null;
  #object: BpfObject;
  #unwinders: UnwindProgramTable;
  #links: BpfLink[] = [];
  #reader: RingBufferReader | null = null;
  #sampling = false;
  #waiter: RingBufferWaiter | null = null;
  #closed = false;

  private constructor(
    object: BpfObject,
    unwinders: UnwindProgramTable,
    cpus: number[],
    periodNs: number,
    offCpu: OffCpuOptions | null,
  ) {
    this.offCpu = offCpu;
    this.#object = object;
    this.#unwinders = unwinders;
    this.cpus = cpus;
    this.periodNs = periodNs;
  }

  /**
   * Loads, configures and attaches everything; on any failure undoes what was done and throws. A signal
   * that interrupts the verifier (EAGAIN: a profiler's SIGPROF, a busy terminal) makes it start over with
   * a fresh object, since libbpf cannot load one object twice.
   */
  static start(options: TracerOptions): Tracer {
    for (let attempt = 1;; attempt++) {
      try {
        return Tracer.#start(options);
      } catch (error) {
        if (!(error instanceof LibbpfError) || error.errno !== EAGAIN || attempt >= 3) throw error;
      }
    }
  }

  static #start(options: TracerOptions): Tracer {
    const periodNs = Math.round(1e9 / options.frequencyHz);
    const filtered = (options.pids?.length ?? 0) > 0 || (options.followChildrenOf?.length ?? 0) > 0;
    const cpus = onlineCpus();
    const stackCopy = options.stackCopy ?? StackCopyMode.Unknown;
    // Probes fire at any rate, in bursts: their ring is sized as for sampling at 999 Hz.
    const rate = (options.probes?.length ?? 0) > 0 ? Math.max(options.frequencyHz, 999) : options.frequencyHz;
    const ringBytes = options.ringBufferBytes ?? ringBufferBytes(cpus.length, rate, stackCopy);
    const object = openTracerObject();
    let unwinders: UnwindProgramTable;
    try {
      unwinders = new UnwindProgramTable(object, runtimeUnwinders(RUNTIMES), { lazy: !options.allUnwinders });
    } catch (error) {
      object.close();
      throw error;
    }
    const probes = (options.probes?.length ?? 0) > 0 ? options.probes! : null;
    const tracer = new Tracer(object, unwinders, cpus, periodNs, options.offCpu ?? null);
    try {
      const rodata = object.map(".rodata").initialValue();
      const config = rodataOffsets.tracer_config;
      rodata[config + tracerConfigLayout.filter_pids.offset] = filtered ? 1 : 0;
      rodata[config + tracerConfigLayout.sample_idle.offset] = options.sampleIdle ? 1 : 0;
      rodata[config + tracerConfigLayout.stack_copy.offset] = stackCopy;
      // Sampling itself would cost the most exactly when the profiler is busiest (symbolizing).
      new DataView(rodata.buffer, rodata.byteOffset).setUint32(
        config + tracerConfigLayout.self_pid.offset,
        options.sampleSelf ? 0 : Deno.pid,
        true,
      );
      writeKernelFields(rodata, config + tracerConfigLayout.kernel.offset);
      object.map("events").setMaxEntries(ringBytes);
      if (options.offCpu) {
        rodata[config + tracerConfigLayout.off_cpu.offset] = 1;
        new DataView(rodata.buffer, rodata.byteOffset).setBigUint64(
          config + tracerConfigLayout.off_cpu_min_ns.offset,
          BigInt(Math.round(options.offCpu.minNs)),
          true,
        );
        const wholeSystem = !filtered;
        const threads = offCpuCapacity(options.pids ?? [], wholeSystem);
        object.map("off_cpu_waits").setMaxEntries(threads);
        object.map("off_cpu_traces").setMaxEntries(threads);
        // Only now: the ids are 32,768 preallocated entries, which a session without off-CPU time does
        // not pay for.
        object.map("off_cpu_stack_ids").setMaxEntries(OffCpuConstants.MaxStacks);
        object.map("off_cpu_totals").setMaxEntries(OffCpuConstants.MaxStacks);
      } else {
        for (const name of OFF_CPU_PROGRAMS) object.program(name).setAutoload(false);
      }
      allocateOnDemand(object);
      const namesKernel = kernelNamesSupported();
      if (!namesKernel) object.program(KERNEL_NAMES_PROGRAM).setAutoload(false);
      object.load();
      if (namesKernel) tracer.#kernelNames = new BpfKernelNames(object);
      if (options.offCpu) {
        const totals = object.map("off_cpu_totals");
        tracer.#offCpuStacks = new OffCpuStacks(
          object.map("off_cpu_stack_ids"),
          totals.fd,
          totals.maxEntries,
        );
      }

      unwinders.fillLoaded();
      if (probes !== null) {
        tracer.#probes = ProbeSet.load(object, probes, runtimeUnwinders(RUNTIMES), {
          lazy: !options.allUnwinders,
        });
      }

      const filter = object.map("pid_filter");
      const setFilter = (pid: Pid, flags: number) => {
        const value = new Uint8Array(pidFilterValueLayout.sizeof);
        new DataView(value.buffer).setUint32(pidFilterValueLayout.flags.offset, flags, true);
        filter.update(u32Key(pid), value);
      };
      for (const pid of options.pids ?? []) setFilter(pid, PidFilterFlag.Sample);
      for (const pid of options.followChildrenOf ?? []) setFilter(pid, PidFilterFlag.FollowChildren);

      tracer.#reader = new RingBufferReader(object.map("events").fd, ringBytes);
      tracer.#waiter = new RingBufferWaiter(object.map("events").fd);
      // Process events first, so that no sampled process can start unseen.
      for (const name of ["on_process_exec", "on_process_exit", "on_process_fork"] as const) {
        tracer.#links.push(object.program(name).attach());
      }
      // The switch-in half before the switch-outs it pairs with (startSampling).
      if (options.offCpu) tracer.#links.push(object.program("off_cpu_switch_in").attach());
      if (!options.paused) tracer.startSampling();
    } catch (error) {
      tracer.close();
      throw error;
    }
    return tracer;
  }

  /** The probes recorded instead of CPU samples, or null. */
  get probes(): readonly ResolvedProbe[] | null {
    return this.#probes?.probes ?? null;
  }

  /** The loaded BPF object, for the parts that fill its maps (the native unwinder's tables). */
  get object(): BpfObject {
    return this.#object;
  }

  /**
   * The tail-call table: the native unwinders are in it from the start; a runtime's goes in when the
   * session first meets the runtime ({@linkcode UnwindProgramTable.require}), unless
   * {@linkcode TracerOptions.allUnwinders}.
   */
  get unwinders(): UnwindProgramTable {
    return this.#unwinders;
  }

  /**
   * What loads a runtime's unwinder when the session first meets the runtime: into the tracer's table and
   * into those of the probes' program types.
   */
  get runtimeUnwinders(): Pick<UnwindProgramTable, "require"> {
    return {
      require: (slot: number) => {
        this.#unwinders.require(slot);
        for (const table of this.#probes?.tables ?? []) table.require(slot);
      },
    };
  }

  /** With off-CPU time, the stacks whose waits BPF adds up; null without. */
  get offCpuStacks(): OffCpuStacks | null {
    return this.#offCpuStacks;
  }

  /** Names kernel addresses through BPF; null on kernels that cannot run the program (before 5.14). */
  get kernelNames(): BpfKernelNames | null {
    return this.#kernelNames;
  }

  /** Delivers the records waiting in the ring buffer to `sink`; returns how many. */
  drain(sink: RecordSink): number {
    return this.#reader?.drain(sink) ?? 0;
  }

  /**
   * Stops sampling process `pid` (given in {@linkcode TracerOptions.pids}): the process named has gone and
   * another one may now hold its PID. Its children already followed stay followed.
   */
  unfollowPid(pid: Pid): void {
    this.#object.map("pid_filter").delete(u32Key(pid));
  }

  /**
   * Attaches the sampling program to a cpu-clock event on every CPU, and with off-CPU time the switch-out
   * program to a context-switches event on every CPU. Once, after a paused start.
   */
  startSampling(): void {
    if (this.#sampling) return;
    this.#sampling = true;
    if (this.#probes !== null) {
      this.#probes.attach();
      return;
    }
    this.#attachPerCpu("sample_cpu", (cpu) => openCpuClock(cpu, this.periodNs));
    if (this.offCpu) this.#attachPerCpu("off_cpu_switch_out", openContextSwitches);
  }

  #attachPerCpu(program: "sample_cpu" | "off_cpu_switch_out", open: (cpu: number) => number): void {
    const bpf = this.#object.program(program);
    for (const cpu of this.cpus) {
      const fd = open(cpu);
      try {
        this.#links.push(bpf.attachPerfEvent(fd));
      } catch (error) {
        closePerfEvent(fd);
        throw error;
      }
    }
  }

  /**
   * Resolves when BPF asks for a drain (true: a process event the host must handle soon, or a ring buffer
   * half full), or after `timeoutMs` or {@linkcode interruptWait} (false). One wait at a time.
   */
  waitForWakeup(timeoutMs: number): Promise<boolean> {
    return this.#waiter?.wait(timeoutMs) ?? Promise.resolve(false);
  }

  /**
   * Makes {@linkcode waitForWakeup} return also when `fd` (a perf event's, kept open by the caller for
   * the tracer's life) polls readable.
   */
  wakeOn(fd: number): void {
    this.#waiter?.watch(fd);
  }

  /** Ends a pending {@linkcode waitForWakeup} and makes later ones return at once. */
  interruptWait(): void {
    this.#waiter?.interrupt();
  }

  /** Stops sampling (detaches the perf events) but keeps the ring buffer readable for a last drain. */
  stopSampling(): void {
    // Last attached, first detached: the switch-outs go before the switch-in half that ends their waits,
    // so every switch-out kept is either ended in BPF or still there for drainSwitchedOut, and the
    // process events go last, as they came first.
    for (const link of this.#links.toReversed()) link.close();
    this.#links = [];
    this.#probes?.detach();
    if (this.#sampling) this.#stoppedAtNs ??= monotonicNs();
  }

  /**
   * After {@linkcode stopSampling}, with off-CPU time: hands `sink` the threads still switched out then,
   * each with its wait up to then (lib/record/off_cpu.ts). Returns how many.
   */
  drainSwitchedOut(sink: RecordSink & OffCpuWaitSink): number {
    if (this.offCpu === null || this.#offCpuStacks === null || this.#stoppedAtNs === null || this.#closed) {
      return 0;
    }
    const maps = { waits: this.#object.map("off_cpu_waits"), traces: this.#object.map("off_cpu_traces") };
    return drainSwitchedOut(maps, this.#stoppedAtNs, this.offCpu.minNs, this.#offCpuStacks, sink);
  }

  /** Reads the BPF counters. */
  metrics(): TracerMetrics {
    const map = this.#object.map("metrics");
    const cpus = libbpf().fn.libbpf_num_possible_cpus();
    const values = new BigUint64Array(Math.max(1, cpus));
    const bytes = new Uint8Array(values.buffer);
    const result: Record<string, number> = {};
    const shared = Object.entries(MetricId).filter(([, id]) => id < MetricId.RuntimesFirst);
    for (
      const [name, id] of [
        ...shared,
        ...RUNTIMES.flatMap((runtime) => Object.entries(runtime.bpfMetrics)),
      ]
    ) {
      let sum = 0;
      if (map.lookup(u32Key(id), bytes)) { for (const value of values) sum += Number(value); }
      result[name] = sum;
    }
    return result as TracerMetrics;
  }

  /** Detaches and unloads everything. Safe to call twice. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.stopSampling();
    this.#waiter?.close();
    this.#waiter = null;
    this.#reader?.close();
    this.#reader = null;
    this.#probes?.close();
    this.#probes = null;
    this.#unwinders.close();
    this.#offCpuStacks?.close();
    this.#offCpuStacks = null;
    this.#object.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

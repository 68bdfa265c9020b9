/**
 * A running recording that can be read while it runs: the tracer, the two owners of state (the file
 * registry and the process manager, which fill the tracer's maps) and the stack table, drained when BPF
 * asks (process events) and on a slow timer (traces). Processes' mappings come from the kernel's records
 * (mapping_events.ts) where it allows them: each drain takes the records stamped before it began, then
 * the traces, then forgets the processes that exited (their traces are resolved by then). One-shot sessions (`record`) take one profile at the end; long-running ones
 * (`top`, `agent`) take a profile per interval with `takeProfile({ reset: true })`, which keeps the
 * symbol caches warm between intervals.
 *
 * @example
 * ```ts ignore
 * import { Recorder } from "./recorder.ts";
 * using recorder = Recorder.start({ frequencyHz: 20 });
 * setInterval(() => send(recorder.takeProfile({ reset: true })), 60_000);
 * ```
 *
 * @module
 */
import type { Profile } from "../profile/profile.ts";
import { FileRegistry } from "../process/file_registry.ts";
import { ProcessManager, type ProcessManagerStats } from "../process/process_manager.ts";
import { processBpf } from "../process/process_bpf.ts";
import { getLogger } from "../log/logger.ts";
import { type KernelSymbolLookup, KernelSymbols } from "../symbolize/kallsyms.ts";
import type { BpfKernelNames } from "../symbolize/bpf_kernel_names.ts";
import { NativeSymbolizer } from "../symbolize/native.ts";
import type { KernelAddress, Pid } from "../types.ts";
import {
  buildProfile,
  buildProfileInterruptibly,
  type ProfileInfo,
  type Symbolizers,
} from "./profile_builder.ts";
import { StackTable } from "./stack_table.ts";
import type { CopiedStackStats } from "../unwind/copied_stack_unwinder.ts";
import { Tracer, type TracerMetrics, type TracerOptions } from "./tracer.ts";
import { RUNTIMES } from "../interpreter/runtimes.ts";
import type { FileRefusal } from "../sys/regular_file.ts";
import { delay } from "../sys/timer.ts";
import { PerfMaps, type PerfMapsStats } from "../symbolize/perf_maps.ts";
import { MappingEvents } from "../perf/mapping_events.ts";
import { monotonicNs } from "../sys/monotonic_clock.ts";

const logger = getLogger(["omniprof", "record"]);

/** What {@linkcode Recorder.start} takes: the tracer's options, and where advice to the user goes. */
export interface RecorderOptions extends TracerOptions {
  /**
   * Told, once each, of a process whose runtime names its frames only with flags it was started without
   * (Deno without `--perf-basic-prof`): which flags to add. Default: logged at info level.
   */
  advise?: (advice: string) => void;
}

/** A snapshot while recording. */
export interface RecorderProgress {
  elapsedSeconds: number;
  samples: number;
  processes: number;
  lost: number;
  /** Bytes of BPF map memory holding unwind tables and process mappings. */
  unwindBytes: number;
}

// Traces wait this long at most; process events that must be handled while the process runs wake the
// recorder at once (and a ring buffer half full does too, so traces are not lost). Each wake-up of an
// idle Deno costs about 0.5 ms of CPU here, so a record sleeps as long as it can.
const DRAIN_INTERVAL_MS = 1000;
// Under a storm of process events, drains still happen at most this often. Without the kernel's mapping
// records the host has to read a new process from /proc before it exits, often within milliseconds.
const MIN_WAKEUP_GAP_MS = 2;
// With them, a process's mappings outlive it, and a prompt drain only brings BPF's own unwinding of a new
// process (and an interpreter's frames) sooner; the host unwinds its copied stacks meanwhile. Drains have
// a fixed cost: in a storm of /bin/true starts (1,400 a second) a 2 ms gap cost 101 ms of CPU per 1,000
// starts, 5 ms 80, 10 ms 71, 20 ms 62, with the same share of `true`'s samples named (98%).
const MIN_WAKEUP_GAP_WITH_RECORDS_MS = 20;
/** Records that fail in one drain before the rest waits for the next one. */
const MAX_DRAIN_ATTEMPTS = 64;
/** An LPM trie node: key (16 bytes) + value (16) + the kernel's node header (about 40). */
const TRIE_ENTRY_BYTES = 72;

/** Process-tracking counters, as `--stats` reports them. */
export interface ProcessStats extends ProcessManagerStats {
  /** Distinct mapped files opened. */
  filesOpened: number;
  /** Distinct mapped files not read, by reason: their frames stay unsymbolized. */
  filesRefused: Record<FileRefusal, number>;
  /** Whether mappings came from the kernel's records (else from /proc alone). */
  mappingRecords: boolean;
  /** The kernel's records read (process starts, exits, executable mappings), and their bytes. */
  mappingRecordsRead: number;
  mappingRecordBytes: number;
  /** Records the kernel dropped (a ring was full): the processes met next were read from /proc. */
  mappingRecordsLost: number;
  /** Records that failed a check and were skipped. */
  mappingRecordsMalformed: number;
}

/** The native unwinder's counters, as `--stats` reports them. */
export interface UnwindStats {
  /** Files with state: mapped by a process now, or within their grace period. */
  filesMapped: number;
  /** Files whose stack deltas were loaded (their code ran), whole or page by page. */
  filesLoaded: number;
  /** Pages loaded alone, of files loaded page by page. */
  pagesLoaded: number;
  filesFailed: number;
  /** Mappings left out of the pid/page trie (it was full, or refused them): they unwind by frame pointers. */
  mappingsNotInstalled: number;
  /** Bytes of BPF map memory for stack deltas. */
  deltaBytes: number;
  /** Entries in the pid/page trie. */
  trieEntries: number;
  /** Updates and deletes of those entries so far. */
  trieWrites: number;
  /** Total ms spent extracting and loading deltas. */
  loadMs: number;
  /**
   * Stacks BPF copied (their process was not known to it yet) and the host unwound: samples, frames, and
   * why each stopped.
   */
  hostUnwound: CopiedStackStats;
}

/** Sampling plus host-side aggregation, running until stopped. */
export class Recorder {
  readonly tracer: Tracer;
  readonly files: FileRegistry;
  readonly processes: ProcessManager;
  #table: StackTable;
  #draining = true;
  #started = performance.now();
  #setupStart: number;
  #intervalStartNs = Date.now() * 1e6;
  /** When {@linkcode stop} ended sampling: a profile's duration ends there, not when it is taken. */
  #stoppedAtNs: number | null = null;
  #firstSampleMs: number | null = null;
  #native = new NativeSymbolizer();
  #kernel: KernelSymbols | null | undefined;
  #kernelNames: BpfKernelNames | null;
  #closed = false;
  #failedRecords = 0;
  /** Owned (and closed) by the process manager. */
  #perfMaps: PerfMaps;
  /** The kernel's records of processes' mappings, or null where it refused them (then /proc alone). */
  #mappingEvents: MappingEvents | null;
  /** Records lost as of the last drain: more lost since means some processes' records are incomplete. */
  #mappingRecordsLost = 0;

  private constructor(
    tracer: Tracer,
    files: FileRegistry,
    processes: ProcessManager,
    perfMaps: PerfMaps,
    mappingEvents: MappingEvents | null,
    setupStart: number,
  ) {
    this.tracer = tracer;
    this.files = files;
    this.processes = processes;
    this.#perfMaps = perfMaps;
    this.#mappingEvents = mappingEvents;
    this.#table = this.#newTable();
    this.#setupStart = setupStart;
    this.#kernelNames = tracer.kernelNames;
    this.#drainLoop();
  }

  /** Starts sampling; the processes in `options.pids` are read at once so their first traces resolve. */
  static start(options: RecorderOptions): Recorder {
    const setupStart = performance.now();
    const tracer = Tracer.start({ ...options, paused: true });
    let mappingEvents: MappingEvents | null = null;
    try {
      mappingEvents = MappingEvents.open({ buildIds: false });
      for (const fd of mappingEvents.descriptors) tracer.wakeOn(fd);
    } catch (error) {
      mappingEvents?.close();
      mappingEvents = null;
      logger.warn("Reading processes' mappings from /proc only: short-lived ones may be missed ({error})", {
        error: error instanceof Error ? error.message : String(error),
      });
    }
    const files = new FileRegistry({
      object: tracer.object,
      unwinders: tracer.runtimeUnwinders,
      runtimes: RUNTIMES,
    });
    // The process manager owns the perf maps (it reads one to the end when its process exits); the
    // profile builder counts the JIT frames they name.
    const perfMaps = new PerfMaps();
    const processes = new ProcessManager({
      files,
      bpf: processBpf(tracer.object, files, RUNTIMES),
      perfMaps,
      kernelRecords: mappingEvents !== null,
      advise: options.advise,
    });
    const recorder = new Recorder(tracer, files, processes, perfMaps, mappingEvents, setupStart);
    try {
      for (const path of options.preloadPaths ?? []) {
        const file = files.openPath(path);
        if (file !== null) files.preload(file);
      }
      for (const pid of options.pids ?? []) processes.preloadProcess(pid as Pid);
      // Only now: samples taken before the tables above are in BPF would unwind by frame pointers.
      recorder.#intervalStartNs = Date.now() * 1e6;
      if (!options.paused) tracer.startSampling();
    } catch (error) {
      recorder.close();
      throw error;
    }
    return recorder;
  }

  /** Samples received since the last reset. */
  get samples(): number {
    return this.#table.samples;
  }

  /** Off-CPU waits received since the last reset, and their total ns. */
  get offCpu(): { waits: number; ns: number } {
    return { waits: this.#table.offCpuWaits, ns: this.#table.offCpuNs };
  }

  /** Records skipped because handling them failed (see {@linkcode drain}). */
  get failedRecords(): number {
    return this.#failedRecords;
  }

  /** ms from the start of set-up to the first sample drained, or null. */
  get firstSampleMs(): number | null {
    return this.#firstSampleMs;
  }

  /** CLOCK_MONOTONIC ns of the first sample since the last reset, or null. */
  get firstSampleKtimeNs(): number | null {
    return this.#table.firstSampleKtimeNs < 0 ? null : this.#table.firstSampleKtimeNs;
  }

  /** Drains whenever BPF wakes the recorder, and every DRAIN_INTERVAL_MS, until stopped. */
  async #drainLoop(): Promise<void> {
    let last = performance.now();
    const minGap = this.#mappingEvents !== null ? MIN_WAKEUP_GAP_WITH_RECORDS_MS : MIN_WAKEUP_GAP_MS;
    while (this.#draining) {
      const woken = await this.tracer.waitForWakeup(last + DRAIN_INTERVAL_MS - performance.now());
      if (!this.#draining) return;
      const gap = performance.now() - last;
      if (woken && gap < minGap) {
        await delay(minGap - gap);
        if (!this.#draining) return;
      }
      this.drain();
      last = performance.now();
    }
  }

  /**
   * Moves what BPF has recorded into the stack table. Runs by itself; call it to catch up now. A record
   * that cannot be handled (a bug, a kernel map that refuses an update) is counted, reported once and
   * skipped: the session and the rest of its samples go on.
   */
  drain(): void {
    // Read first: every trace in the ring buffer now was taken before it, so the records stamped before it
    // (the mappings those traces ran in, the exits that follow them) are all handled with them.
    const horizon = monotonicNs();
    if (this.#mappingEvents !== null) this.#drainMappingEvents(horizon);
    this.#drainSkippingFailures(() => this.tracer.drain(this.#table));
    this.tracer.offCpuStacks?.charge(this.#table);
    this.#table.endDrain();
    this.files.sweep();
    if (this.#firstSampleMs === null && this.#table.samples > 0) {
      this.#firstSampleMs = performance.now() - this.#setupStart;
    }
  }

  /**
   * Runs `drain` until it gets through: a record that throws was consumed by the ring it came from, so
   * the next attempt starts at the record after it. Failures are counted and the first one reported.
   */
  #drainSkippingFailures(drain: () => void): void {
    for (let attempt = 0; attempt <= MAX_DRAIN_ATTEMPTS; attempt++) {
      try {
        drain();
        return;
      } catch (error) {
        this.#failedRecords++;
        if (this.#failedRecords === 1) {
          logger.error("Cannot handle a record ({error}); skipping it and any others that fail", { error });
        }
      }
    }
  }

  /** Hands the kernel's records stamped before `horizon` to the stack table and the process manager. */
  #drainMappingEvents(horizon: number): void {
    const events = this.#mappingEvents!;
    this.#drainSkippingFailures(() => events.drain(this.#table, horizon));
    if (events.stats.lost > this.#mappingRecordsLost) {
      this.#mappingRecordsLost = events.stats.lost;
      this.processes.recordsLost();
    }
    this.#table.endRecords();
  }

  metrics(): TracerMetrics {
    return this.tracer.metrics();
  }

  progress(): RecorderProgress {
    const metrics = this.metrics();
    return {
      elapsedSeconds: (performance.now() - this.#started) / 1000,
      samples: this.#table.samples,
      processes: this.processes.processCount,
      lost: metrics.TracesLost + metrics.EventsLost,
      unwindBytes: this.files.stats.deltaBytes + this.processes.trieStats.trieEntries * TRIE_ENTRY_BYTES,
    };
  }

  /** Perf map counters: maps read, truncated and refused; JIT frames named. */
  perfMapStats(): PerfMapsStats {
    return this.#perfMaps.stats;
  }

  /** Process-tracking counters. */
  processStats(): ProcessStats {
    const { filesOpened, filesRefused } = this.files.stats;
    const records = this.#mappingEvents?.stats;
    return {
      ...this.processes.stats,
      filesOpened,
      filesRefused,
      mappingRecords: records !== undefined,
      mappingRecordsRead: records?.records ?? 0,
      mappingRecordBytes: records?.bytes ?? 0,
      mappingRecordsLost: records?.lost ?? 0,
      mappingRecordsMalformed: records?.malformed ?? 0,
    };
  }

  /** The native unwinder's counters: files loaded, BPF memory for tables, trie entries. */
  unwindStats(): UnwindStats {
    const { filesMapped, filesLoaded, pagesLoaded, filesFailed, deltaBytes, loadMs } = this.files.stats;
    const { mappingsNotInstalled, trieEntries, trieWrites } = this.processes.trieStats;
    return {
      filesMapped,
      filesLoaded,
      pagesLoaded,
      filesFailed,
      mappingsNotInstalled,
      deltaBytes,
      trieEntries,
      trieWrites,
      loadMs,
      hostUnwound: structuredClone(this.#table.copiedStackStats),
    };
  }

  /**
   * Symbolizes what was recorded since the start (or the last reset) into a profile; with `reset`, starts
   * a new interval.
   */
  takeProfile(options: { reset?: boolean } = {}): Profile {
    this.drain();
    const nowNs = this.#stoppedAtNs ?? Date.now() * 1e6;
    const profile = buildProfile(this.#table.stacks(), this.#profileInfo(nowNs), this.#symbolizers());
    if (options.reset) {
      this.#table = this.#newTable();
      this.#intervalStartNs = nowNs;
    }
    return profile;
  }

  /**
   * Symbolizes what was recorded since the start (or the last reset), letting the event loop turn; once
   * `interrupt` aborts, the frames not named yet keep their addresses (`complete` false).
   */
  takeProfileInterruptibly(interrupt: AbortSignal): Promise<{ profile: Profile; complete: boolean }> {
    this.drain();
    const info = this.#profileInfo(this.#stoppedAtNs ?? Date.now() * 1e6);
    return buildProfileInterruptibly(this.#table.stacks(), info, this.#symbolizers(), interrupt);
  }

  #profileInfo(nowNs: number): ProfileInfo {
    return {
      startTimeNs: this.#intervalStartNs,
      durationNs: nowNs - this.#intervalStartNs,
      // A profile of probe events has no sampling period.
      periodNs: this.tracer.probes === null ? this.tracer.periodNs : 0,
      ...(this.tracer.offCpu ? { offCpu: true } : {}),
      ...(this.tracer.probes === null ? {} : { events: this.tracer.probes.map((probe) => probe.name) }),
    };
  }

  #symbolizers(): Symbolizers {
    return { native: this.#native, kernel: () => this.#kernelSymbols(), perfMaps: this.#perfMaps };
  }

  /**
   * Names for this profile's kernel addresses: from the kernel through BPF where it can (a few ms), else
   * from /proc/kallsyms, read only when a profile has kernel frames (it is large): at first only the
   * symbols of this profile's kernel addresses; if a later profile needs others, the whole table, once.
   */
  #kernelSymbols(): KernelSymbolLookup | null {
    const addresses: KernelAddress[] = [];
    for (const stack of this.#table.stacks()) {
      for (const frame of stack.frames) {
        if (frame.addressKind !== "kernel") continue;
        // As the profile builder looks them up: a return address by its call.
        addresses.push((frame.returnAddress ? frame.address - 1 : frame.address) as KernelAddress);
      }
    }
    if (this.#kernelNames !== null) {
      try {
        this.#kernelNames.name(addresses);
        return this.#kernelNames;
      } catch (error) {
        logger.warn("Cannot name kernel frames through BPF ({error}): reading /proc/kallsyms", { error });
        this.#kernelNames = null;
      }
    }
    try {
      if (this.#kernel === undefined) {
        this.#kernel = KernelSymbols.loadFor(addresses);
      } else if (this.#kernel !== null && !addresses.every((address) => this.#kernel!.covers(address))) {
        this.#kernel = KernelSymbols.load();
      }
    } catch {
      this.#kernel = null;
    }
    return this.#kernel;
  }

  #newTable(): StackTable {
    return new StackTable(this.processes, this.files, this.tracer.offCpuStacks);
  }

  /** Stops sampling and drains what is left; the recorder stays readable. */
  stop(): void {
    this.#draining = false;
    this.tracer.interruptWait();
    this.tracer.stopSampling();
    // The command may take seconds to stop after this, and symbolizing longer: neither was sampled.
    this.#stoppedAtNs ??= Date.now() * 1e6;
    this.drain();
    // Threads still switched out: their waits so far, while their processes are still known.
    this.tracer.drainSwitchedOut(this.#table);
  }

  /** Stops and releases everything. Safe to call twice. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#draining = false;
    // Instances detach while the maps they write are still there; the files' handles go last.
    this.processes.close();
    // The tracer's waiter watches the records' descriptors: it goes first.
    this.tracer.close();
    this.#mappingEvents?.close();
    this.files.close();
    this.#native.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/**
 * One recording session, start to finish: start the recorder, (optionally) start the command to
 * profile, run until the duration ends, the command exits or the user interrupts, stop the command and
 * everything it started, then symbolize and return the profile. Nothing here blocks the event loop for
 * long, so Ctrl-C and SIGTERM are always handled: the first ends the recording (and is passed on to the
 * command), another one while the command stops kills it at once, another one while symbolizing leaves
 * the frames not named yet as addresses, and the profile of an interrupted session is still returned.
 *
 * @example
 * ```ts ignore
 * import { recordSession } from "./session.ts";
 * const { profile } = await recordSession({ frequencyHz: 99, durationSeconds: 5, processes: [] });
 * ```
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import type { Profile } from "../profile/profile.ts";
import type { CommandGroup } from "../process/command_group.ts";
import type { ProcessKey } from "../process/process_key.ts";
import type { Pid } from "../types.ts";
import { type ProcessStats, Recorder, type RecorderProgress, type UnwindStats } from "./recorder.ts";
import { after, delay, every } from "../sys/timer.ts";
import { InterruptedError, Interrupts } from "../sys/interrupts.ts";
import { processRunning } from "../process/liveness.ts";
import type { TracerMetrics } from "./tracer.ts";
import type { PerfMapsStats } from "../symbolize/perf_maps.ts";
import type { OffCpuOptions } from "./off_cpu.ts";
import type { ResolvedProbe } from "../probe/probe_spec.ts";

const logger = getLogger(["omniprof", "record"]);

/** How often a session of named processes looks whether they have all exited. */
const EXIT_CHECK_MS = 500;

/** What to record. */
export interface SessionOptions {
  frequencyHz: number;
  /** null: until stopped (signal, command exit or `signal` below). */
  durationSeconds: number | null;
  /**
   * Only these processes (and their threads); the session ends once all of them have exited. A PID that
   * another process holds by the time sampling starts is not sampled.
   */
  processes: readonly ProcessKey[];
  /**
   * Starts the workload to profile, in a session of its own (it and its children are sampled); called
   * once sampling is on. When the session ends, whatever of it still runs is stopped.
   */
  start?: () => CommandGroup;
  /** The workload's executable and libraries, if known: their tables are prepared before it starts. */
  executables?: readonly string[];
  sampleIdle?: boolean;
  /** Also record off-CPU time (lib/record/off_cpu.ts). */
  offCpu?: OffCpuOptions;
  /** Count these probes' hits instead of sampling CPUs (lib/record/probes.ts). */
  probes?: readonly ResolvedProbe[];
  /**
   * The stop signals caught for the caller's whole run (so that one during the caller's own work after the
   * session does no harm); by default the session catches them while it runs.
   */
  interrupts?: Interrupts;
  /** Aborting it stops the session (tests, embedding). */
  signal?: AbortSignal;
  /** Called about once a second while recording. */
  onProgress?: (progress: RecorderProgress) => void;
  /** Called when recording has stopped and the session stops the command, then when it symbolizes. */
  onPhase?: (phase: "stopping" | "symbolizing") => void;
  /**
   * Told, once each, of a process whose runtime names its frames only with flags it was started without:
   * which flags to add.
   */
  onAdvice?: (advice: string) => void;
}

/** What a session produced. */
export interface SessionResult {
  profile: Profile;
  /** False when a stop signal cut symbolizing short: some frames are addresses only. */
  symbolized: boolean;
  metrics: TracerMetrics;
  /** Samples received by the host. */
  samples: number;
  /** Off-CPU waits received by the host, and their total ns (0 without off-CPU time). */
  offCpu: { waits: number; ns: number };
  /** Records the host could not handle and skipped (each a sample or a process event). */
  failedRecords: number;
  /** How the started command's first process ended (`code` 128 + N for signal N), if one was started. */
  commandStatus: Deno.CommandStatus | null;
  /** Why the session ended ("exited": every process in `processes` has exited). */
  stoppedBy: "duration" | "signal" | "command" | "exited" | "abort";
  /** ms from the start of tracer set-up to the first sample drained, or null if none came. */
  firstSampleMs: number | null;
  /** CLOCK_MONOTONIC time of the first sample (ns), or null; comparable with other tools' clocks. */
  firstSampleKtimeNs: number | null;
  /** Process-tracking counters. */
  processStats: ProcessStats;
  /** Native unwinder counters (files loaded, BPF memory for tables). */
  unwindStats: UnwindStats;
  /** Perf map counters (maps read, truncated, refused; JIT frames named). */
  perfMapStats: PerfMapsStats;
}

/**
 * Runs a session; see the module doc.
 *
 * @throws {InterruptedError} when a stop signal came before sampling started: nothing was recorded, and
 *   no command was started.
 */
export async function recordSession(options: SessionOptions): Promise<SessionResult> {
  using owned = options.interrupts ? null : Interrupts.listen();
  return await run(options, options.interrupts ?? owned!);
}

async function run(options: SessionOptions, interrupts: Interrupts): Promise<SessionResult> {
  using recorder = Recorder.start({
    frequencyHz: options.frequencyHz,
    pids: options.processes.map((process) => process.pid),
    followChildrenOf: options.start ? [Deno.pid as Pid] : [],
    sampleIdle: options.sampleIdle,
    offCpu: options.offCpu,
    probes: options.probes,
    preloadPaths: options.executables ?? [],
    advise: options.onAdvice,
  });
  // Setting up (loading BPF) is synchronous: a signal sent meanwhile shows once the event loop turns,
  // and one that came just before the end of it once the turn after has seen the signal's wake-up.
  await delay(0);
  await delay(0);
  if (interrupts.last !== null) {
    throw new InterruptedError(interrupts.last, "before sampling started: nothing was recorded");
  }
  // A process that exited before its PID went into the filter may have left the PID to another.
  for (const process of options.processes) {
    if (!processRunning(process)) recorder.tracer.unfollowPid(process.pid);
  }

  const { promise: stopped, resolve: stop } = Promise.withResolvers<SessionResult["stoppedBy"]>();
  const stopRequested = interrupts.next(0);
  const onStopSignal = () => stop("signal");
  stopRequested.addEventListener("abort", onStopSignal);
  if (stopRequested.aborted) stop("signal");
  const onAbort = () => stop("abort");
  options.signal?.addEventListener("abort", onAbort);
  if (options.signal?.aborted) stop("abort");
  const durationTimer = options.durationSeconds === null
    ? undefined
    : after(options.durationSeconds * 1000, () => stop("duration"));
  const progressTimer = options.onProgress
    ? every(1000, () => options.onProgress!(recorder.progress()))
    : undefined;
  // As `perf record -p` does: nothing is left to sample once the named processes are gone.
  const allExited = () => !options.processes.some((process) => processRunning(process));
  const exitTimer = options.processes.length > 0
    ? every(EXIT_CHECK_MS, () => {
      if (allExited()) stop("exited");
    })
    : undefined;
  if (options.processes.length > 0 && allExited()) stop("exited");

  let command: CommandGroup | null = null;
  try {
    if (options.start) {
      command = options.start();
      command.status.then(() => stop("command"));
    }
    const stoppedBy = await stopped;
    const stopSignal = stoppedBy === "signal" ? interrupts.last : null;
    progressTimer?.[Symbol.dispose]();
    recorder.stop();
    if (command) {
      options.onPhase?.("stopping");
      // The command gets the signal omniprof was stopped with, as if the user had sent it there;
      // at -d's end (or after it exited, for what it left running) SIGTERM.
      await command.stop(stopSignal ?? "SIGTERM", { hurry: interrupts.next() });
    }
    options.onPhase?.("symbolizing");
    logger.debug("Symbolizing {samples} samples", { samples: recorder.samples });
    const symbolizing = performance.now();
    const { profile, complete } = await recorder.takeProfileInterruptibly(interrupts.next());
    logger.debug("Symbolized {locations} locations in {ms} ms{cut}", {
      locations: profile.locations.length,
      ms: Math.round(performance.now() - symbolizing),
      cut: complete ? "" : " (interrupted: the rest are addresses)",
    });
    return {
      profile,
      symbolized: complete,
      metrics: recorder.metrics(),
      samples: recorder.samples,
      offCpu: recorder.offCpu,
      failedRecords: recorder.failedRecords,
      commandStatus: command?.exitStatus ?? null,
      stoppedBy,
      firstSampleMs: recorder.firstSampleMs,
      firstSampleKtimeNs: recorder.firstSampleKtimeNs,
      processStats: recorder.processStats(),
      unwindStats: recorder.unwindStats(),
      perfMapStats: recorder.perfMapStats(),
    };
  } finally {
    progressTimer?.[Symbol.dispose]();
    exitTimer?.[Symbol.dispose]();
    durationTimer?.[Symbol.dispose]();
    stopRequested.removeEventListener("abort", onStopSignal);
    options.signal?.removeEventListener("abort", onAbort);
    // Left by an error on the way: the command must not outlive the session.
    if (command?.running()) await command.stop("SIGTERM", { hurry: interrupts.next() });
  }
}

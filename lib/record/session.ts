/**
 * One recording session, start to finish: start the recorder, (optionally) start the command to
 * profile, run until the duration ends, the command exits or the user interrupts, then symbolize and
 * return the profile. Nothing here blocks the event loop, so Ctrl-C and SIGTERM are always handled and
 * the profile of an interrupted session is still written.
 *
 * @example
 * ```ts ignore
 * import { recordSession } from "./session.ts";
 * const { profile } = await recordSession({ frequencyHz: 99, durationSeconds: 5, processes: [] });
 * ```
 *
 * @module
 */
import type { Profile } from "../profile/profile.ts";
import type { ProcessManager } from "../process/process_manager.ts";
import type { ProcessKey } from "../process/process_key.ts";
import type { Pid } from "../types.ts";
import { Recorder, type RecorderProgress } from "./recorder.ts";
import { after, delay, every } from "../sys/timer.ts";
import { processRunning } from "../process/liveness.ts";
import type { TracerMetrics } from "./tracer.ts";
import type { NativeUnwindingStats } from "../unwind/native_unwinding.ts";

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
  /** Starts the workload to profile (with its children); called once sampling is on. */
  spawn?: () => Deno.ChildProcess;
  /** The workload's executable and libraries, if known: their tables are prepared before it starts. */
  executables?: readonly string[];
  sampleIdle?: boolean;
  /** Aborting it stops the session (tests, embedding). */
  signal?: AbortSignal;
  /** Called about once a second while recording. */
  onProgress?: (progress: RecorderProgress) => void;
}

/** What a session produced. */
export interface SessionResult {
  profile: Profile;
  metrics: TracerMetrics;
  /** Samples received by the host. */
  samples: number;
  /** Records the host could not handle and skipped (each a sample or a process event). */
  failedRecords: number;
  /** Exit code of the spawned command, if any. */
  commandExitCode: number | null;
  /** Why the session ended ("exited": every process in `processes` has exited). */
  stoppedBy: "duration" | "signal" | "command" | "exited" | "abort";
  /** ms from the start of tracer set-up to the first sample drained, or null if none came. */
  firstSampleMs: number | null;
  /** CLOCK_MONOTONIC time of the first sample (ns), or null; comparable with other tools' clocks. */
  firstSampleKtimeNs: number | null;
  /** Process-tracking counters. */
  processStats: ProcessManager["stats"];
  /** Native unwinder counters (files loaded, BPF memory for tables). */
  unwindStats: NativeUnwindingStats;
}

/** Runs a session; see the module doc. */
export async function recordSession(options: SessionOptions): Promise<SessionResult> {
  using recorder = Recorder.start({
    frequencyHz: options.frequencyHz,
    pids: options.processes.map((process) => process.pid),
    followChildrenOf: options.spawn ? [Deno.pid as Pid] : [],
    sampleIdle: options.sampleIdle,
    preloadPaths: options.executables ?? [],
  });
  // A process that exited before its PID went into the filter may have left the PID to another.
  for (const process of options.processes) {
    if (!processRunning(process)) recorder.tracer.unfollowPid(process.pid);
  }

  const { promise: stopped, resolve: stop } = Promise.withResolvers<SessionResult["stoppedBy"]>();
  const onSignal = () => stop("signal");
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
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

  let child: Deno.ChildProcess | null = null;
  let commandExitCode: number | null = null;
  try {
    if (options.spawn) {
      child = options.spawn();
      child.status.then((status) => {
        commandExitCode = status.code;
        stop("command");
      });
    }
    const stoppedBy = await stopped;
    recorder.stop();
    if (child && commandExitCode === null) {
      // Interrupted: the command got the terminal's SIGINT too; give it a moment to finish.
      await Promise.race([child.status, delay(2000)]);
    }
    return {
      profile: recorder.takeProfile(),
      metrics: recorder.metrics(),
      samples: recorder.samples,
      failedRecords: recorder.failedRecords,
      commandExitCode,
      stoppedBy,
      firstSampleMs: recorder.firstSampleMs,
      firstSampleKtimeNs: recorder.firstSampleKtimeNs,
      processStats: { ...recorder.processes.stats },
      unwindStats: recorder.unwinding.stats,
    };
  } finally {
    progressTimer?.[Symbol.dispose]();
    exitTimer?.[Symbol.dispose]();
    durationTimer?.[Symbol.dispose]();
    Deno.removeSignalListener("SIGINT", onSignal);
    Deno.removeSignalListener("SIGTERM", onSignal);
    options.signal?.removeEventListener("abort", onAbort);
  }
}

/**
 * One recording session, start to finish: start the tracer, (optionally) start the command to profile,
 * drain the ring buffer on a timer until the duration ends, the command exits or the user interrupts,
 * then symbolize and return the profile. Nothing here blocks the event loop, so Ctrl-C and SIGTERM are
 * always handled and the profile of an interrupted session is still written.
 *
 * @example
 * ```ts ignore
 * import { recordSession } from "./session.ts";
 * const { profile } = await recordSession({ frequencyHz: 99, durationSeconds: 5, pids: [], command: [] });
 * ```
 *
 * @module
 */
import type { Profile } from "../profile/profile.ts";
import { ProcessManager } from "../process/process_manager.ts";
import type { Pid } from "../types.ts";
import { buildProfile } from "./profile_builder.ts";
import { StackTable } from "./stack_table.ts";
import { Tracer, type TracerMetrics } from "./tracer.ts";

/** What to record. */
export interface SessionOptions {
  frequencyHz: number;
  /** null: until stopped (signal, command exit or `signal` below). */
  durationSeconds: number | null;
  pids: readonly Pid[];
  /** Starts the workload to profile (with its children); called once sampling is on. */
  spawn?: () => Deno.ChildProcess;
  sampleIdle?: boolean;
  /** Aborting it stops the session (tests, embedding). */
  signal?: AbortSignal;
  /** Called about once a second while recording. */
  onProgress?: (progress: SessionProgress) => void;
}

/** A snapshot while recording. */
export interface SessionProgress {
  elapsedSeconds: number;
  samples: number;
  processes: number;
  lost: number;
}

/** What a session produced. */
export interface SessionResult {
  profile: Profile;
  metrics: TracerMetrics;
  /** Samples received by the host. */
  samples: number;
  /** Exit code of the spawned command, if any. */
  commandExitCode: number | null;
  /** Why the session ended. */
  stoppedBy: "duration" | "signal" | "command" | "abort";
  /** ms from the start of tracer set-up to the first sample drained, or null if none came. */
  firstSampleMs: number | null;
  /** CLOCK_MONOTONIC time of the first sample (ns), or null; comparable with other tools' clocks. */
  firstSampleKtimeNs: number | null;
  /** Process-tracking counters. */
  processStats: ProcessManager["stats"];
}

const DRAIN_INTERVAL_MS = 10;

/** Runs a session; see the module doc. */
export async function recordSession(options: SessionOptions): Promise<SessionResult> {
  const setupStart = performance.now();
  using processes = new ProcessManager();
  const table = new StackTable(processes);
  using tracer = Tracer.start({
    frequencyHz: options.frequencyHz,
    pids: options.pids,
    followChildrenOf: options.spawn ? [Deno.pid as Pid] : [],
    sampleIdle: options.sampleIdle,
  });
  // Read the target processes now, so their first traces resolve without a delay.
  for (const pid of options.pids) processes.onExec(pid);
  const startNs = Date.now() * 1e6;
  const started = performance.now();
  let firstSampleMs: number | null = null;

  const { promise: stopped, resolve: stop } = Promise.withResolvers<SessionResult["stoppedBy"]>();
  const onSignal = () => stop("signal");
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  const onAbort = () => stop("abort");
  options.signal?.addEventListener("abort", onAbort);
  if (options.signal?.aborted) stop("abort");
  const durationTimer = options.durationSeconds === null
    ? undefined
    : setTimeout(() => stop("duration"), options.durationSeconds * 1000);

  const drain = () => {
    tracer.drain(table);
    table.endDrain();
    if (firstSampleMs === null && table.samples > 0) firstSampleMs = performance.now() - setupStart;
  };
  const drainTimer = setInterval(drain, DRAIN_INTERVAL_MS);
  const progressTimer = options.onProgress
    ? setInterval(() => {
      const metrics = tracer.metrics();
      options.onProgress!({
        elapsedSeconds: (performance.now() - started) / 1000,
        samples: table.samples,
        processes: processes.processCount,
        lost: metrics.TracesLost + metrics.EventsLost,
      });
    }, 1000)
    : undefined;

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
    tracer.stopSampling();
    drain();
    const metrics = tracer.metrics();
    const endNs = Date.now() * 1e6;
    if (child && commandExitCode === null) {
      // Interrupted: the command got the terminal's SIGINT too; wait briefly so it can finish.
      await Promise.race([child.status, new Promise((resolve) => setTimeout(resolve, 2000))]);
    }
    const profile = buildProfile(table.stacks(), {
      startTimeNs: startNs,
      durationNs: endNs - startNs,
      periodNs: tracer.periodNs,
    });
    return {
      profile,
      metrics,
      samples: table.samples,
      commandExitCode,
      stoppedBy,
      firstSampleMs,
      firstSampleKtimeNs: table.firstSampleKtimeNs < 0 ? null : table.firstSampleKtimeNs,
      processStats: { ...processes.stats },
    };
  } finally {
    clearInterval(drainTimer);
    if (progressTimer !== undefined) clearInterval(progressTimer);
    if (durationTimer !== undefined) clearTimeout(durationTimer);
    Deno.removeSignalListener("SIGINT", onSignal);
    Deno.removeSignalListener("SIGTERM", onSignal);
    options.signal?.removeEventListener("abort", onAbort);
  }
}

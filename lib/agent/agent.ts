/**
 * The agent: samples the whole system continuously and, every interval, turns what was recorded into one
 * profile that it exports as OpenTelemetry profiles (through an {@linkcode ExportQueue} that retries with
 * backoff and keeps memory bounded) and/or writes as a pprof file. When stopped it stops sampling, takes
 * the last, partial interval and sends everything it still holds, for at most the shutdown timeout.
 *
 * Intervals are contiguous: each profile starts where the previous one ended (the recorder's reset), so a
 * backend can tell from the timestamps whether an interval is missing. Intervals without samples are not
 * exported.
 *
 * @example
 * ```ts ignore
 * import { runAgent } from "./agent.ts";
 * const stop = new AbortController();
 * Deno.addSignalListener("SIGTERM", () => stop.abort());
 * const summary = await runAgent({ frequencyHz: 20, intervalMs: 60_000, exporter, pprofDir: null,
 *   bufferLimit: 30, shutdownTimeoutMs: 10_000, signal: stop.signal });
 * ```
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import { gzipSync } from "node:zlib";
import { encodeOtlpProfiles } from "../output/otlp.ts";
import { encodePprof } from "../output/pprof.ts";
import { withoutKernelAddresses } from "../output/kernel_addresses.ts";
import type { Profile } from "../profile/profile.ts";
import type { OutputDirectory } from "../output/output_directory.ts";
import { Recorder } from "../record/recorder.ts";
import { Backoff } from "./backoff.ts";
import { ExportQueue, type QueueItem, type QueueStats } from "./export_queue.ts";
import type { ProfileExporter } from "./otlp_exporter.ts";
import { ResourceAttributes } from "./resource_attributes.ts";
import denoConfig from "../../deno.json" with { type: "json" };
import { sampleOffCpuNs } from "../profile/wall_time.ts";
import type { OffCpuOptions } from "../record/off_cpu.ts";

const logger = getLogger(["omniprof", "agent"]);

/** The instrumentation scope the agent reports. */
export const AGENT_SCOPE = { name: "omniprof", version: denoConfig.version };

/** How the agent runs. */
export interface AgentOptions {
  frequencyHz: number;
  /** Length of one exported profile, ms. */
  intervalMs: number;
  /** Where OTLP goes, or null (pprof files only). */
  exporter: ProfileExporter | null;
  /** Folder for one pprof file per interval, or null. */
  pprofDir: OutputDirectory | null;
  /** Most unsent profiles held in memory. */
  bufferLimit: number;
  /** Longest time spent sending what is held after a stop, ms. */
  shutdownTimeoutMs: number;
  /** Aborting it stops the agent. */
  signal: AbortSignal;
  /** Retry delays, ms (default: 0.5 s growing to the interval, at most 30 s). */
  backoff?: { initialMs: number; maxMs: number };
  /** Also sample idle CPUs. */
  sampleIdle?: boolean;
  /** Also record off-CPU time (lib/record/off_cpu.ts); absent: CPU samples only. */
  offCpu?: OffCpuOptions;
  /** Resource attributes source (default: this host's /proc). */
  resources?: ResourceAttributes;
}

/** What the agent did. */
export interface AgentSummary {
  /** Intervals taken (including empty ones and the last, partial one). */
  intervals: number;
  /** Intervals with samples. */
  profiles: number;
  /** Export queue counters (all zero without an exporter). */
  export: QueueStats;
  /** Profiles still unsent when the agent stopped. */
  unsent: number;
  /** pprof files written. */
  pprofFiles: number;
  /** Largest number of bytes the queue held at once. */
  peakQueuedBytes: number;
}

interface PendingProfile extends QueueItem {
  body: Uint8Array;
  seq: number;
}

/** Runs until `options.signal` aborts; see the module documentation. */
export async function runAgent(options: AgentOptions): Promise<AgentSummary> {
  const { exporter, pprofDir, intervalMs } = options;
  const resources = options.resources ?? new ResourceAttributes();
  const backoff = new Backoff(
    options.backoff ?? { initialMs: 500, maxMs: Math.max(500, Math.min(30_000, intervalMs)) },
  );
  let peakQueuedBytes = 0;
  let wasFailing = false;
  let intervals = 0;
  let profiles = 0;
  let pprofFiles = 0;
  const queue = exporter === null ? null : new ExportQueue<PendingProfile>({
    limit: options.bufferLimit,
    backoff,
    send: (item, signal) => exporter.send(item.body, signal),
    onSent: (item, result) => {
      if (wasFailing) {
        logger.warn("export to {target} works again; {held} profiles to catch up", {
          target: exporter.target,
          held: queue!.length,
        });
        wasFailing = false;
      }
      logger.debug("sent {label}", { label: item.label });
      if ((result.rejected ?? 0) > 0 || (result.message ?? "") !== "") {
        logger.warn("the endpoint rejected {rejected} profiles of {label}: {message}", {
          rejected: result.rejected ?? 0,
          label: item.label,
          message: result.message ?? "",
        });
      }
    },
    onRetry: (item, reason, delayMs, attempt) => {
      if (!wasFailing) {
        logger.warn(
          "export to {target} failed: {reason}; retrying with backoff, holding up to {limit} profiles",
          {
            target: exporter.target,
            reason,
            limit: options.bufferLimit,
          },
        );
        wasFailing = true;
      } else {
        logger.debug("retry {attempt} of {label} in {delayMs} ms: {reason}", {
          attempt,
          label: item.label,
          delayMs,
          reason,
        });
      }
    },
    onDropped: (item, stats) => {
      logger.warn(
        "buffer limit of {limit} profiles reached: dropped interval {seq} that started at {start}; " +
          "{dropped} dropped so far, {heldBytes} bytes held",
        {
          limit: options.bufferLimit,
          seq: item.seq,
          start: item.label,
          dropped: stats.dropped,
          heldBytes: queue!.bytes,
        },
      );
    },
    onRejected: (item, reason) => {
      logger.error("the endpoint refused interval {seq} that started at {start}: {reason}", {
        seq: item.seq,
        start: item.label,
        reason,
      });
    },
  });

  const collect = (recorded: Profile) => {
    const seq = ++intervals;
    // Kernel addresses reveal where the kernel is loaded: a service sends and keeps none.
    const profile = withoutKernelAddresses(recorded);
    const start = new Date(Math.round(profile.startTimeNs / 1e6)).toISOString();
    let samples = 0;
    for (const sample of profile.samples) samples += sample.count;
    // An interval of off-CPU samples alone (count 0: threads that only slept) still has time to export.
    if (samples === 0 && !profile.samples.some((sample) => sampleOffCpuNs(sample) > 0)) {
      logger.debug("interval {seq} has no samples: nothing to export", { seq });
      return;
    }
    profiles++;
    resources.update(profile);
    const processes = countPids(profile);
    // Each output on its own: a failure of one (a full disk, say) must not cost the other its interval.
    if (queue !== null) {
      try {
        const request = encodeOtlpProfiles(profile, {
          resourceAttributes: (pid) => resources.of(pid),
          scope: AGENT_SCOPE,
        });
        const body = gzipSync(request);
        queue.push({ label: start, bytes: body.length, body, seq });
        peakQueuedBytes = Math.max(peakQueuedBytes, queue.bytes);
        logger.info(
          "interval {seq} from {start}: {samples} samples of {processes} processes, {bytes} bytes to export " +
            "({raw} uncompressed)",
          { seq, start, samples, processes, bytes: body.length, raw: request.length },
        );
      } catch (error) {
        logger.error("interval {seq}: cannot encode it for export: {error}", { seq, error: String(error) });
      }
    }
    if (pprofDir !== null) {
      const name = `omniprof-${start.replace(/[-:]/g, "")}.pb.gz`;
      let path = `${pprofDir.path}/${name}`;
      try {
        // Synchronous gzip: the agent loads node:zlib for its OTLP bodies anyway.
        path = pprofDir.write(name, gzipSync(encodePprof(profile)));
        pprofFiles++;
        logger.info("interval {seq} from {start}: {samples} samples of {processes} processes, wrote {path}", {
          seq,
          start,
          samples,
          processes,
          path,
        });
      } catch (error) {
        logger.error("interval {seq}: cannot write {path}: {error}", { seq, path, error: String(error) });
      }
    }
  };

  const recorder = Recorder.start({
    frequencyHz: options.frequencyHz,
    sampleIdle: options.sampleIdle,
    offCpu: options.offCpu,
  });
  try {
    logger.info(
      "sampling all CPUs at {hz} Hz{offCpu}; a profile every {seconds} s to {target}",
      {
        hz: options.frequencyHz,
        offCpu: options.offCpu ? ", with off-CPU time" : "",
        seconds: intervalMs / 1000,
        target: [exporter?.target, pprofDir?.path].filter((t) => t != null).join(" and "),
      },
    );
    // Ticks at fixed times from the start, so intervals do not drift by the time taking a profile costs.
    const started = performance.now();
    let tick = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const { promise: stopped, resolve: stop } = Promise.withResolvers<void>();
    if (options.signal.aborted) stop();
    options.signal.addEventListener("abort", () => stop(), { once: true });
    const schedule = () => {
      // An interval that overran (a busy machine) skips the ticks it missed rather than following up
      // with tiny intervals.
      const now = performance.now();
      do tick++; while (started + tick * intervalMs <= now);
      timer = setTimeout(() => {
        if (options.signal.aborted) return;
        try {
          collect(recorder.takeProfile({ reset: true }));
        } catch (error) {
          logger.error("interval {seq} failed: {error}", { seq: intervals, error: String(error) });
        }
        schedule();
      }, Math.max(0, started + tick * intervalMs - performance.now()));
    };
    schedule();
    await stopped;
    clearTimeout(timer);

    recorder.stop();
    try {
      collect(recorder.takeProfile({ reset: true }));
    } catch (error) {
      logger.error("the last interval failed: {error}", { error: String(error) });
    }
    const lost = recorder.progress().lost;
    if (lost > 0) logger.warn("{lost} samples were lost (ring buffer full): try a lower -F", { lost });
    let unsent = 0;
    if (queue !== null && queue.length > 0) {
      logger.info("stopping: sending the {held} profiles held (for at most {seconds} s)", {
        held: queue.length,
        seconds: options.shutdownTimeoutMs / 1000,
      });
      unsent = await queue.drain(options.shutdownTimeoutMs);
      if (unsent > 0) {
        logger.warn("{unsent} profiles could not be sent before the shutdown timeout", { unsent });
      }
    }
    const stats = queue ? { ...queue.stats } : { queued: 0, sent: 0, dropped: 0, rejected: 0, retries: 0 };
    logger.info(
      "stopped after {intervals} intervals: {sent} profiles sent, {dropped} dropped, {rejected} rejected, " +
        "{unsent} unsent, {files} pprof files",
      {
        intervals,
        sent: stats.sent,
        dropped: stats.dropped,
        rejected: stats.rejected,
        unsent,
        files: pprofFiles,
      },
    );
    return { intervals, profiles, export: stats, unsent, pprofFiles, peakQueuedBytes };
  } finally {
    queue?.close();
    exporter?.close();
    recorder.close();
  }
}

function countPids(profile: Profile): number {
  const pids = new Set<number>();
  for (const sample of profile.samples) pids.add(sample.pid);
  return pids.size;
}

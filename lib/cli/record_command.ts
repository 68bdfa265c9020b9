/**
 * `omniprof record`: checks everything that can fail before sampling starts (privileges, libbpf, the
 * target processes, the output path), records, and writes the profile atomically.
 *
 * @module
 */
import { getLogger } from "@logtape/logtape";
import { libbpf } from "../bpf/libbpf.ts";
import { formatFolded } from "../output/folded.ts";
import { encodePprofGzip } from "../output/pprof.ts";
import { checkWritable, writeAtomically } from "../record/output_file.ts";
import type { RecorderProgress } from "../record/recorder.ts";
import { recordSession } from "../record/session.ts";
import { currentCapabilities, missingTracingCapabilities } from "../sys/capabilities.ts";
import { spawnDemo } from "../../support/demo/demo_workload.ts";
import { parseRecordArgs, RECORD_USAGE, type RecordArgs, UsageError } from "./record_args.ts";
import { StatusLine } from "./status_line.ts";

const logger = getLogger(["omniprof", "record"]);

/** A failure the user can act on; printed without a stack trace. */
export class CommandError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode = 1) {
    super(message);
    this.name = "CommandError";
    this.exitCode = exitCode;
  }
}

/** Checks that need no BPF: fail before anything starts. */
export function preflight(args: RecordArgs): void {
  const missing = missingTracingCapabilities(currentCapabilities());
  if (missing.length > 0) {
    throw new CommandError(
      `omniprof needs ${missing.join(" and ")} (or CAP_SYS_ADMIN) to load BPF programs and open perf ` +
        `events: run it as root, e.g. sudo omniprof record`,
    );
  }
  for (const pid of args.pids) {
    try {
      Deno.statSync(`/proc/${pid}`);
    } catch {
      throw new CommandError(`No process with PID ${pid}`);
    }
  }
  checkWritable(args.output);
  if (args.statsPath !== null) checkWritable(args.statsPath);
  libbpf();
}

/** Runs `record` with its arguments; returns the exit code. */
export async function recordCommand(argv: string[]): Promise<number> {
  let args: RecordArgs;
  try {
    args = parseRecordArgs(argv);
  } catch (error) {
    if (error instanceof UsageError) {
      if (error.message) console.error(`omniprof record: ${error.message}\n`);
      console.error(RECORD_USAGE);
      return error.message ? 2 : 0;
    }
    throw error;
  }
  preflight(args);

  const status = new StatusLine();
  const spawn = args.demo ? () => spawnDemo(args.durationSeconds ?? 5) : args.command.length > 0
    ? () => {
      try {
        return new Deno.Command(args.command[0]!, { args: args.command.slice(1), stdin: "inherit" }).spawn();
      } catch (error) {
        throw new CommandError(
          `Cannot start ${args.command[0]}: ${error instanceof Error ? error.message : error}`,
        );
      }
    }
    : undefined;
  const target = args.demo
    ? "the demo workload"
    : args.command.length > 0
    ? args.command.join(" ")
    : args.pids.length > 0
    ? `PID ${args.pids.join(", ")}`
    : "all CPUs";
  status.note(
    `recording ${target} at ${args.frequencyHz} Hz` +
      (args.durationSeconds === null ? ", Ctrl-C to stop" : ` for ${args.durationSeconds} s`),
  );
  const result = await recordSession({
    frequencyHz: args.frequencyHz,
    durationSeconds: args.durationSeconds,
    pids: args.pids,
    spawn,
    sampleIdle: args.idle,
    onProgress: (progress: RecorderProgress) =>
      status.update(
        `${
          progress.elapsedSeconds.toFixed(1)
        } s  samples ${progress.samples}  processes ${progress.processes}` +
          `  lost ${progress.lost}`,
      ),
  });
  status.clear();

  const data = args.format === "folded" ? formatFolded(result.profile) : encodePprofGzip(result.profile);
  writeAtomically(args.output, data);
  const lost = result.metrics.TracesLost + result.metrics.EventsLost;
  const stacks = result.profile.samples.length;
  status.note(
    `wrote ${args.output} (${args.format}): ${result.samples} samples, ${stacks} distinct stacks` +
      (lost > 0 ? `, ${lost} samples LOST (ring buffer full: try a lower -F)` : ", 0 lost"),
  );
  logger.debug("BPF metrics {metrics}", { metrics: result.metrics });
  if (args.statsPath !== null) {
    const stats = {
      samples: result.samples,
      distinctStacks: stacks,
      lost,
      stoppedBy: result.stoppedBy,
      firstSampleMs: result.firstSampleMs,
      firstSampleKtimeNs: result.firstSampleKtimeNs,
      bpf: result.metrics,
      processes: result.processStats,
    };
    writeAtomically(args.statsPath, JSON.stringify(stats, null, 2) + "\n");
  }
  if (result.commandExitCode !== null && result.commandExitCode !== 0) {
    status.note(`the command exited with code ${result.commandExitCode}`);
  }
  return 0;
}

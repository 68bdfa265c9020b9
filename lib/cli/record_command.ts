/**
 * `omniprof record`: checks everything that can fail before sampling starts (privileges, libbpf, the
 * target processes, the output path), records, and writes the profile atomically.
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import { libbpf } from "../bpf/libbpf.ts";
import { DEFAULT_LIBRARY_DIRS, dynamicInfo } from "../elf/dynamic.ts";
import { ElfFile } from "../elf/elf_file.ts";
import { formatFolded } from "../output/folded.ts";
import type { Profile } from "../profile/profile.ts";
import { OutputFile, STDOUT_PATH } from "../output/output_file.ts";
import { holdsKernelAddresses, withoutKernelAddresses } from "../output/kernel_addresses.ts";
import { runningProcess } from "../process/liveness.ts";
import type { ProcessKey } from "../process/process_key.ts";
import { CommandGroup, STOP_GRACE_MS } from "../process/command_group.ts";
import { CommandGuard } from "../process/command_guard.ts";
import type { RecorderProgress } from "../record/recorder.ts";
import { recordSession, type SessionResult } from "../record/session.ts";
import { exitCodeOf, InterruptedError, Interrupts } from "../sys/interrupts.ts";
import { currentCapabilities, missingTracingCapabilities } from "../sys/capabilities.ts";
import { isFile } from "../sys/files.ts";
import { parseRecordArgs, RECORD_USAGE, type RecordArgs, UsageError } from "./record_args.ts";
import { progressReporter, StatusLine } from "./status_line.ts";
import { CommandError } from "./command_error.ts";
import { ProbeError, type ResolvedProbe } from "../probe/probe_spec.ts";
import { SessionProbes } from "../probe/session_probes.ts";

const logger = getLogger(["omniprof", "record"]);

/** What a recording checked and opened before it starts. */
export interface RecordPreflight extends Disposable {
  /** The processes `-p` names, each with its start time, so that a PID taken over later is not mistaken. */
  processes: ProcessKey[];
  /** The files it writes, held open until written. */
  profile: OutputFile;
  stats: OutputFile | null;
  /** The probes `-e` names, resolved on this machine. */
  probes: readonly ResolvedProbe[];
}

/** Checks that need no BPF: fail before anything starts. */
export function preflight(args: RecordArgs): RecordPreflight {
  const missing = missingTracingCapabilities(currentCapabilities());
  if (missing.length > 0) {
    throw new CommandError(
      `omniprof needs ${missing.join(" and ")} (or CAP_SYS_ADMIN) to load BPF programs and open perf ` +
        `events: run it as root, e.g. sudo omniprof record`,
    );
  }
  const processes = args.pids.map((pid) => {
    const process = runningProcess(pid);
    if (process === null) throw new CommandError(`No process with PID ${pid}`);
    return process;
  });
  // tracefs is mounted (when it is not already) only if a tracepoint is asked for, and unmounted after.
  let probes: SessionProbes;
  try {
    probes = SessionProbes.resolve(args.probes);
  } catch (error) {
    if (error instanceof ProbeError) throw new CommandError(error.message, 2);
    throw error;
  }
  let profile: OutputFile;
  let stats: OutputFile | null = null;
  try {
    profile = OutputFile.open(args.output);
  } catch (error) {
    probes.close();
    throw error;
  }
  try {
    if (args.statsPath !== null) stats = OutputFile.open(args.statsPath);
    libbpf();
  } catch (error) {
    profile.close();
    probes.close();
    throw error;
  }
  return {
    processes,
    profile,
    stats,
    probes: probes.probes,
    [Symbol.dispose]() {
      profile.close();
      stats?.close();
      probes.close();
    },
  };
}

/** Where the shell would find `name`, or undefined. */
function findExecutable(name: string): string | undefined {
  const candidates = name.includes("/")
    ? [name]
    : (Deno.env.get("PATH") ?? "/usr/bin:/bin").split(":").map((dir) => `${dir}/${name}`);
  return candidates.find(isFile);
}

/**
 * The command's executable and the shared libraries it needs (a best effort: DT_NEEDED looked up in its
 * run paths and the default folders), so their unwind tables are ready when it starts.
 */
function programFiles(name: string, depth = 0): string[] {
  const executable = findExecutable(name);
  if (!executable) return [];
  let elf: ElfFile;
  try {
    elf = ElfFile.open(executable);
  } catch {
    // A script: prepare its interpreter instead (one level: `#!/usr/bin/env NAME` -> NAME).
    const interpreter = depth === 0 ? scriptInterpreter(executable) : null;
    return interpreter === null ? [] : programFiles(interpreter, depth + 1);
  }
  const files = [executable];
  try {
    const { needed, searchPaths } = dynamicInfo(elf);
    for (const library of needed) {
      const found = [...searchPaths, ...DEFAULT_LIBRARY_DIRS].map((dir) => `${dir}/${library}`).find(isFile);
      if (found !== undefined) files.push(found);
    }
  } catch {
    // no usable dynamic section: the libraries are found when they run
  } finally {
    elf.close();
  }
  return files;
}

/** The program a `#!` script runs (`#!/usr/bin/env NAME` gives NAME), or null for other files. */
function scriptInterpreter(path: string): string | null {
  let head: string;
  try {
    using file = Deno.openSync(path);
    const bytes = new Uint8Array(256);
    const read = file.readSync(bytes) ?? 0;
    head = new TextDecoder().decode(bytes.subarray(0, read));
  } catch {
    return null;
  }
  if (!head.startsWith("#!")) return null;
  const words = head.slice(2).split("\n")[0]!.trim().split(/\s+/).filter((word) => word.length > 0);
  if (words.length === 0) return null;
  if (/(^|\/)env$/.test(words[0]!)) return words.slice(1).find((word) => !word.startsWith("-")) ?? null;
  return words[0]!;
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
  // Caught from here to the end: a signal never ends omniprof halfway (a command left running, a
  // temporary file left behind); each phase decides what it means.
  using interrupts = Interrupts.listen();
  using outputs = preflight(args);
  const processes = outputs.processes;
  const status = new StatusLine();
  // Loaded only when used, like the output formats below: every module costs start-up time.
  const demo = args.demo ? await import("../../support/demo/demo_workload.ts") : null;
  // Started now, before sampling begins: the tracer follows omniprof's children, and the guard is none
  // of the profile's business.
  using guard = demo || args.command.length > 0 ? CommandGuard.start() : null;
  const start = demo
    ? () => demo.spawnDemo(args.durationSeconds ?? 5, guard)
    : args.command.length > 0
    ? () => startCommand(args.command, guard)
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
      (args.durationSeconds !== null
        ? ` for ${args.durationSeconds} s`
        : args.pids.length > 0
        ? `, until ${args.pids.length > 1 ? "they exit" : "it exits"} or Ctrl-C`
        : ", Ctrl-C to stop"),
  );
  let result: SessionResult;
  try {
    result = await recordSession({
      frequencyHz: args.frequencyHz,
      durationSeconds: args.durationSeconds,
      processes,
      start,
      executables: args.command.length > 0 ? programFiles(args.command[0]!) : [],
      sampleIdle: args.idle,
      ...(args.offCpuMinUs === null ? {} : { offCpu: { minNs: args.offCpuMinUs * 1000 } }),
      ...(outputs.probes.length === 0 ? {} : { probes: outputs.probes }),
      interrupts,
      onProgress: (progress: RecorderProgress) =>
        status.update(
          `${
            progress.elapsedSeconds.toFixed(1)
          } s  samples ${progress.samples}  processes ${progress.processes}` +
            `  lost ${progress.lost}  unwind tables ${(progress.unwindBytes / 1048576).toFixed(1)} MiB`,
        ),
      onAdvice: (advice) => status.note(advice),
      onPhase: (phase) =>
        status.update(
          phase === "stopping"
            ? `stopping the command (SIGKILL in ${STOP_GRACE_MS / 1000} s; Ctrl-C: now)`
            : "symbolizing (Ctrl-C: write the profile with addresses for the names not found yet)",
        ),
    });
  } catch (error) {
    status.clear();
    if (error instanceof InterruptedError) throw new CommandError(error.message, exitCodeOf(error.signal));
    throw error;
  }
  status.clear();

  if (result.stoppedBy === "exited") {
    status.note(`${args.pids.length > 1 ? "the processes" : `PID ${args.pids[0]}`} exited: stopped`);
  }
  // Kernel addresses reveal where the kernel is loaded: kept only when asked, and then for the owner only.
  const profile = args.kernelAddresses ? result.profile : withoutKernelAddresses(result.profile);
  const data = await encodeProfile(profile, args, target, status);
  const kernelAddresses = holdsKernelAddresses(profile, { namesOnly: args.format !== "pprof" });
  status.update(`writing ${args.output}`);
  try {
    await outputs.profile.write(data, { private: kernelAddresses });
  } finally {
    status.clear();
  }
  const lost = result.metrics.TracesLost + result.metrics.EventsLost;
  const stacks = result.profile.samples.length;
  status.note(
    `wrote ${args.output === STDOUT_PATH ? "standard output" : args.output} (${args.format}): ` +
      (outputs.probes.length > 0 ? `${result.samples} events` : `${result.samples} samples`) +
      `, ${stacks} distinct stacks` +
      (args.offCpuMinUs === null
        ? ""
        : `, ${result.offCpu.waits} off-CPU waits (${(result.offCpu.ns / 1e9).toFixed(2)} s` +
          (result.metrics.OffCpuStoreFull > 0
            ? `, ${result.metrics.OffCpuStoreFull} not kept: too many threads`
            : "") +
          ")") +
      (lost === 0
        ? ", 0 lost"
        : outputs.probes.length > 0
        ? `, ${lost} events LOST (ring buffer full: probe something less frequent, or filter with -p)`
        : `, ${lost} samples LOST (ring buffer full: try a lower -F)`) +
      (kernelAddresses && outputs.profile.kind === "file" ? "; it holds kernel addresses: mode 0600" : ""),
  );
  logger.debug("BPF metrics {metrics}", { metrics: result.metrics });
  if (args.statsPath !== null) {
    const stats = {
      samples: result.samples,
      offCpu: result.offCpu,
      // The sampled window, which an off-CPU recording's waits add up to for a thread that never ran.
      durationNs: result.profile.durationNs,
      distinctStacks: stacks,
      lost,
      failedRecords: result.failedRecords,
      stoppedBy: result.stoppedBy,
      firstSampleMs: result.firstSampleMs,
      firstSampleKtimeNs: result.firstSampleKtimeNs,
      bpf: result.metrics,
      processes: result.processStats,
      unwinding: result.unwindStats,
      perfMaps: result.perfMapStats,
    };
    await outputs.stats?.write(JSON.stringify(stats, null, 2) + "\n");
  }
  if (result.failedRecords > 0) {
    status.note(
      `${result.failedRecords} records could not be handled and were skipped (see the error above)`,
    );
  }
  if (!result.symbolized) {
    status.note("symbolizing was interrupted: the frames not named by then are written as addresses");
  }
  const code = exitCode(result);
  if (code !== 0) {
    const ended = result.commandStatus!.signal === null
      ? `exited with code ${code}`
      : `was ended by ${result.commandStatus!.signal}`;
    status.note(`the command ${ended}`);
  } else if (!args.demo && result.stoppedBy === "duration" && result.commandStatus?.success === false) {
    status.note(`the command was still running after ${args.durationSeconds} s: stopped`);
  }
  return code;
}

/**
 * omniprof's exit status: 0, or the command's when it failed (128 + N when signal N ended it, as a shell
 * reports it), so that `omniprof record -- make` fails where `make` would. A command that omniprof
 * itself stopped at -d's end did not fail.
 */
function exitCode(result: SessionResult): number {
  const status = result.commandStatus;
  if (status === null || status.success) return 0;
  if (result.stoppedBy === "duration" || result.stoppedBy === "abort") return 0;
  return status.code;
}

/** Starts `record -- COMMAND`'s command; a command that cannot start is the user's error to fix. */
function startCommand(command: readonly string[], guard: CommandGuard | null): CommandGroup {
  try {
    return CommandGroup.start(command[0]!, command.slice(1), {}, guard);
  } catch (error) {
    const reason = error instanceof Deno.errors.NotFound
      ? "no such command (not a path, and not found on PATH)"
      : error instanceof Deno.errors.PermissionDenied
      ? "permission denied (not executable?)"
      : error instanceof Error
      ? error.message
      : String(error);
    throw new CommandError(`Cannot start ${command[0]}: ${reason}`);
  }
}

/** The profile in the requested format; long conversions show progress on the status line. */
async function encodeProfile(
  profile: Profile,
  args: RecordArgs,
  target: string,
  status: StatusLine,
): Promise<Uint8Array | string> {
  switch (args.format) {
    case "pprof":
      return (await import("../output/pprof.ts")).encodePprofGzip(profile);
    case "folded":
      return formatFolded(profile);
    case "speedscope":
      return (await import("../output/speedscope.ts")).formatSpeedscope(profile, {
        name: `omniprof: ${target}`,
      });
    case "html": {
      const { formatFlamegraphHtml } = await import("../output/html/flamegraph.ts");
      const html = formatFlamegraphHtml(profile, {
        title: `CPU profile of ${target}`,
        onProgress: progressReporter(status, `writing ${args.output}`),
      });
      status.clear();
      return html;
    }
  }
}

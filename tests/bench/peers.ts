/**
 * How the benchmark runs each profiler: omniprof `record`, `perf record -g` + `perf script`, bpftrace
 * and bcc's `profile`, all sampling every CPU at the same frequency for the same time. Every process runs
 * under `/usr/bin/time`, which reports the CPU time and peak RSS of the tool's whole process tree from
 * start until the profile is written, while a {@linkcode ProgramWatcher} follows the tool's BPF programs.
 *
 * @example
 * ```ts ignore
 * import { PEERS } from "./peers.ts";
 * for (const peer of PEERS) {
 *   const missing = await peer.missing();
 *   if (missing === null) console.log(await peer.run({ dir: "/tmp/x", durationSeconds: 10, frequencyHz: 99 }));
 * }
 * ```
 *
 * @module
 */
import { DENO_RUN_ENV, omniprofArgs, REPO_ROOT } from "../helpers.ts";
import { type NamedProgram, processTree, ProgramWatcher } from "./bpf_programs.ts";
import { monotonicNs } from "./monotonic_clock.ts";
import {
  parseBpftraceMap,
  parseFoldedStacks,
  parsePerfScript,
  parseTimeOutput,
  type ResourceUsage,
  type Stack,
  TIME_FORMAT,
} from "./peer_output.ts";

/** The program that measures each tool's CPU time and peak RSS. */
export const TIME_PROGRAM = "/usr/bin/time";

/** What every peer gets. */
export interface RunOptions {
  /** A private directory for the tool's output. */
  dir: string;
  /** Seconds of sampling (whole seconds: bcc's `profile` takes no fraction). */
  durationSeconds: number;
  frequencyHz: number;
  /** Told about every process tree started (the `/usr/bin/time` pid), so an interrupt can end it. */
  onSpawn?: (pid: number) => void;
}

/** One measured process run. */
export interface Step {
  label: string;
  usage: ResourceUsage;
  exitCode: number;
}

/** What one peer's run measured and captured. */
export interface PeerResult {
  /** The processes whose CPU time counts for the tool (perf: record, then script). */
  steps: Step[];
  /** The separate post-processing step's usage (perf script), or null when the tool has none. */
  postProcessing: ResourceUsage | null;
  stacks: Stack[];
  /** CLOCK_MONOTONIC ns just before the tool was spawned. */
  startNs: number;
  /** CLOCK_MONOTONIC ns of the tool's first sample, or null when unknown. */
  firstSampleNs: number | null;
  /** Where firstSampleNs comes from. */
  firstSampleSource: string;
  /** The tool's BPF programs with their counters (empty for perf). */
  programs: NamedProgram[];
  /** The program the perf event starts, when known by name. */
  entryProgram?: string;
  notes: string[];
}

/** One profiler the benchmark compares. */
export interface Peer {
  key: "omniprof" | "perf" | "bpftrace" | "bcc";
  /** The row label. */
  label: string;
  /** Null when it can run here, else what is missing and how to install it. */
  missing(): Promise<string | null>;
  run(options: RunOptions): Promise<PeerResult>;
}

export const INSTALL_ALL = "OMNIPROF_PEERS=1 support/bootstrap.sh deno task bench";

/** Whether `program --version` (or the given arguments) runs and exits 0. */
export async function runs(program: string, args = ["--version"]): Promise<boolean> {
  try {
    const output = await new Deno.Command(program, { args, stdout: "null", stderr: "null", stdin: "null" })
      .output();
    return output.success;
  } catch {
    return false;
  }
}

/** Null when `/usr/bin/time` is there, else how to install it. */
export async function timeMissing(): Promise<string | null> {
  return await runs(TIME_PROGRAM, ["-f", "%e", "true"])
    ? null
    : `${TIME_PROGRAM}: apt-get install time (or ${INSTALL_ALL})`;
}

/** Options of {@linkcode timedRun}. */
export interface TimedRunOptions {
  label: string;
  dir: string;
  /** Where the tool's standard output goes; discarded when absent. */
  stdoutPath?: string;
  cwd?: string;
  /** Added to the environment the tool inherits. */
  env?: Record<string, string>;
  onSpawn?: (pid: number) => void;
  /** Watch the tool's BPF programs. */
  watchPrograms?: boolean;
  /** Called on every poll (CLOCK_MONOTONIC ns times); return true to send the tool SIGINT. */
  interruptWhen?: (times: { startNs: number; firstRunNs: number | null; nowNs: number }) => boolean;
  /**
   * Called after every poll of the tool's BPF programs (with watchPrograms), CLOCK_MONOTONIC ns: lets a
   * caller follow the run counters over time, e.g. to tell when the tool's programs stopped running.
   */
  onPoll?: (watcher: ProgramWatcher, nowNs: number) => void;
  /** Ends the tool with SIGKILL after this long. */
  timeoutSeconds: number;
}

/** What {@linkcode timedRun} returns. */
export interface TimedRun {
  step: Step;
  startNs: number;
  stderr: string;
  watcher: ProgramWatcher | null;
}

const FAST_POLL_MS = 5;
const SLOW_POLL_MS = 200;

/**
 * Runs `argv` under `/usr/bin/time` and waits for it, watching its BPF programs: every 5 ms until a
 * sampling program has run (so its first run is timed to within a poll), then every 200 ms.
 */
export async function timedRun(argv: string[], options: TimedRunOptions): Promise<TimedRun> {
  const timePath = `${options.dir}/${options.label}.time`;
  const stderrPath = `${options.dir}/${options.label}.stderr`;
  const startNs = monotonicNs();
  const child = new Deno.Command(TIME_PROGRAM, {
    args: ["-f", TIME_FORMAT, "-o", timePath, ...argv],
    cwd: options.cwd,
    env: options.env,
    stdin: "null",
    stdout: options.stdoutPath === undefined ? "null" : "piped",
    stderr: "piped",
  }).spawn();
  options.onSpawn?.(child.pid);
  const stdoutDone = options.stdoutPath === undefined ? Promise.resolve() : child.stdout.pipeTo(
    Deno.openSync(options.stdoutPath, { write: true, create: true, truncate: true }).writable,
  );
  const stderrDone = child.stderr.pipeTo(
    Deno.openSync(stderrPath, { write: true, create: true, truncate: true }).writable,
  );
  let exited = false;
  const status = child.status.finally(() => exited = true);

  const watcher = options.watchPrograms ? new ProgramWatcher(child.pid) : null;
  let named = false;
  let interruptedAtNs: number | null = null;
  let timedOut = false;
  let lastNaming = 0;
  const deadline = startNs + options.timeoutSeconds * 1e9;
  while (!exited) {
    const sampling = watcher?.poll() ?? false;
    const now = monotonicNs();
    if (watcher !== null) options.onPoll?.(watcher, now);
    // Naming costs a few system calls: not while the first run is being timed, and again later for late loads.
    if (watcher !== null && sampling && (!named || now - lastNaming > 1e9)) {
      watcher.nameNewPrograms();
      named = true;
      lastNaming = now;
    }
    if (
      interruptedAtNs === null &&
      options.interruptWhen?.({ startNs, firstRunNs: watcher?.firstRunNs ?? null, nowNs: now })
    ) {
      interruptedAtNs = now;
      signalTree(child.pid, "SIGINT", false);
    }
    if (now > deadline) {
      // Kill the tool, not /usr/bin/time, which then still writes what the tool used until then.
      timedOut = true;
      signalTree(child.pid, "SIGKILL", false);
      break;
    }
    await Promise.race([status, sleep(watcher !== null && !sampling ? FAST_POLL_MS : SLOW_POLL_MS)]);
  }
  const { code } = await status;
  await Promise.allSettled([stdoutDone, stderrDone]);
  const stderr = Deno.readTextFileSync(stderrPath);
  if (timedOut) {
    const at = (ns: number | null | undefined) =>
      ns == null ? "never" : `at ${((ns - startNs) / 1e9).toFixed(1)} s`;
    let used = "";
    try {
      const usage = parseTimeOutput(Deno.readTextFileSync(timePath));
      used = `, having used ${(usage.userSeconds + usage.systemSeconds).toFixed(2)} CPU s`;
    } catch {
      // killed before it could say
    }
    throw new Error(
      `${options.label} ran past ${options.timeoutSeconds} s and was killed${used} (first sample ` +
        `${at(watcher?.firstRunNs)}, SIGINT ${at(interruptedAtNs)}); its stderr ends: ${stderr.slice(-300)}`,
    );
  }
  let usage: ResourceUsage;
  try {
    usage = parseTimeOutput(Deno.readTextFileSync(timePath));
  } catch (error) {
    throw new Error(
      `${options.label} exited with ${code} and no time summary (${
        error instanceof Error ? error.message : error
      }); its stderr: ${stderr.slice(-500)}`,
    );
  }
  return { step: { label: options.label, usage, exitCode: code }, startNs, stderr, watcher };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Sends `signal` to `root` and the processes below it, or only to those below (the tools under
 * `/usr/bin/time`, which ignores SIGINT and should live to report what they used).
 */
export function signalTree(root: number, signal: Deno.Signal, includeRoot = true): void {
  for (const pid of processTree(root)) {
    if (pid === root && !includeRoot) continue;
    try {
      Deno.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

/**
 * The result of a one-step tool whose first sample is known only from polling its sampling program's run
 * counter (bpftrace, bcc), with the sample count first among `notes`.
 */
function polledResult(run: TimedRun, stacks: Stack[], notes: string[]): PeerResult {
  return {
    steps: [run.step],
    postProcessing: null,
    stacks,
    startNs: run.startNs,
    firstSampleNs: run.watcher?.firstRunNs ?? null,
    firstSampleSource: `first run of its perf_event program, polled every ${FAST_POLL_MS} ms`,
    programs: run.watcher?.programs() ?? [],
    notes: [`${stacks.reduce((sum, stack) => sum + stack.count, 0)} samples`, ...notes],
  };
}

function failedStep(run: TimedRun, what: string): Error {
  return new Error(`${what} exited with code ${run.step.exitCode}: ${run.stderr.trim().slice(-500)}`);
}

/** omniprof `record` on every CPU, folded output, with `--stats` for the first sample's time. */
export const omniprof: Peer = {
  key: "omniprof",
  label: "omniprof",
  missing: () => Promise.resolve(null),
  async run(options) {
    const output = `${options.dir}/omniprof.folded`;
    const statsPath = `${options.dir}/omniprof.stats.json`;
    const run = await timedRun([
      Deno.execPath(),
      ...omniprofArgs([
        "record",
        "-d",
        String(options.durationSeconds),
        "-F",
        String(options.frequencyHz),
        "-o",
        output,
        "--stats",
        statsPath,
      ]),
    ], {
      label: "omniprof",
      dir: options.dir,
      cwd: REPO_ROOT,
      // As the compiled executable runs: `deno run` would also look for a newer Deno in the background.
      env: DENO_RUN_ENV,
      onSpawn: options.onSpawn,
      watchPrograms: true,
      timeoutSeconds: options.durationSeconds + 120,
    });
    if (run.step.exitCode !== 0) throw failedStep(run, "omniprof record");
    const stats = JSON.parse(Deno.readTextFileSync(statsPath)) as Record<string, unknown>;
    const first = typeof stats.firstSampleKtimeNs === "number" ? stats.firstSampleKtimeNs : null;
    const notes = [`samples ${stats.samples}, lost ${stats.lost}`];
    const polled = run.watcher?.firstRunNs ?? null;
    if (polled !== null) {
      notes.push(`first run seen by polling: ${((polled - run.startNs) / 1e6).toFixed(0)} ms`);
    }
    return {
      steps: [run.step],
      postProcessing: null,
      stacks: parseFoldedStacks(Deno.readTextFileSync(output)),
      startNs: run.startNs,
      firstSampleNs: first,
      firstSampleSource: "--stats firstSampleKtimeNs",
      programs: run.watcher?.programs() ?? [],
      entryProgram: "sample_cpu",
      notes,
    };
  },
};

/** `perf record -g` (frame pointers) on every CPU, then `perf script` to text. */
export const perf: Peer = {
  key: "perf",
  label: "perf -g",
  async missing() {
    return await runs("perf") ? null : `perf: apt-get install linux-perf (or ${INSTALL_ALL})`;
  },
  async run(options) {
    const data = `${options.dir}/perf.data`;
    const text = `${options.dir}/perf.txt`;
    const record = await timedRun(
      [
        "perf",
        "record",
        "-F",
        String(options.frequencyHz),
        "-a",
        "-g",
        "-k",
        "CLOCK_MONOTONIC",
        "-o",
        data,
        "--",
        "sleep",
        String(options.durationSeconds),
      ],
      {
        label: "perf-record",
        dir: options.dir,
        onSpawn: options.onSpawn,
        timeoutSeconds: options.durationSeconds + 120,
      },
    );
    if (record.step.exitCode !== 0) throw failedStep(record, "perf record");
    const script = await timedRun(
      ["perf", "script", "-F", "comm,pid,tid,time,ip,sym,dso", "--ns", "-i", data],
      {
        label: "perf-script",
        dir: options.dir,
        stdoutPath: text,
        onSpawn: options.onSpawn,
        timeoutSeconds: 600,
      },
    );
    if (script.step.exitCode !== 0) throw failedStep(script, "perf script");
    const parsed = parsePerfScript(Deno.readTextFileSync(text));
    return {
      steps: [record.step, script.step],
      postProcessing: script.step.usage,
      stacks: parsed.stacks,
      startNs: record.startNs,
      firstSampleNs: parsed.firstSampleNs,
      firstSampleSource: "earliest perf script timestamp (perf record -k CLOCK_MONOTONIC)",
      programs: [],
      notes: [`${parsed.stacks.length} samples`],
    };
  },
};

/**
 * bpftrace counting `[comm, ustack, kstack]` at the frequency, interrupted (as a user would with Ctrl-C)
 * once its sampling program has been running for the duration.
 */
export const bpftrace: Peer = {
  key: "bpftrace",
  label: "bpftrace",
  async missing() {
    return await runs("bpftrace") ? null : `bpftrace: apt-get install bpftrace (or ${INSTALL_ALL})`;
  },
  async run(options) {
    const output = `${options.dir}/bpftrace.txt`;
    const durationNs = options.durationSeconds * 1e9;
    const run = await timedRun(
      ["bpftrace", "-e", `profile:hz:${options.frequencyHz} { @[comm, ustack, kstack] = count(); }`],
      {
        label: "bpftrace",
        dir: options.dir,
        stdoutPath: output,
        onSpawn: options.onSpawn,
        watchPrograms: true,
        // Without a first run (attach failed, or no sampling program seen) stop it after a minute more.
        interruptWhen: ({ startNs, firstRunNs, nowNs }) =>
          firstRunNs !== null ? nowNs >= firstRunNs + durationNs : nowNs >= startNs + durationNs + 60e9,
        timeoutSeconds: options.durationSeconds + 240,
      },
    );
    if (run.step.exitCode !== 0) throw failedStep(run, "bpftrace");
    const lookupErrors =
      run.stderr.split("\n").filter((line) => /failed to look up stack id/.test(line)).length;
    const stacks = parseBpftraceMap(Deno.readTextFileSync(output));
    return polledResult(
      run,
      stacks,
      lookupErrors > 0 ? [`${lookupErrors} "failed to look up stack id" errors (stacks printed empty)`] : [],
    );
  },
};

/** Where bcc looks for the running kernel's headers (or the in-kernel copy it can use instead). */
function kernelHeadersPresent(): boolean {
  const release = Deno.osRelease();
  for (const path of [`/lib/modules/${release}/build`, "/sys/kernel/kheaders.tar.xz"]) {
    try {
      Deno.statSync(path);
      return true;
    } catch {
      // try the next
    }
  }
  return false;
}

/** bcc's `profile -F HZ -f SECONDS`: folded output after the duration. */
export const bcc: Peer = {
  key: "bcc",
  label: "bcc profile",
  async missing() {
    if (!await runs("profile-bpfcc", ["--help"])) {
      return `bcc profile: apt-get install bpfcc-tools (or ${INSTALL_ALL})`;
    }
    if (!kernelHeadersPresent()) {
      return `bcc profile: kernel headers for ${Deno.osRelease()} (${INSTALL_ALL} installs and links them)`;
    }
    return null;
  },
  async run(options) {
    const output = `${options.dir}/bcc.folded`;
    const run = await timedRun(
      ["profile-bpfcc", "-F", String(options.frequencyHz), "-f", String(options.durationSeconds)],
      {
        label: "bcc",
        dir: options.dir,
        stdoutPath: output,
        onSpawn: options.onSpawn,
        watchPrograms: true,
        timeoutSeconds: options.durationSeconds + 240,
      },
    );
    if (run.step.exitCode !== 0) throw failedStep(run, "profile-bpfcc");
    const stacks = parseFoldedStacks(Deno.readTextFileSync(output));
    const missed = stacks.filter((stack) =>
      stack.frames.some((frame) => /^\[Missed (User|Kernel) Stack\]$/.test(frame))
    )
      .reduce((sum, stack) => sum + stack.count, 0);
    return polledResult(
      run,
      stacks,
      missed > 0 ? [`${missed} samples with a missed stack (stack-id collisions or a full map)`] : [],
    );
  },
};

/** The peers in the order the benchmark runs them. */
export const PEERS: readonly Peer[] = [omniprof, perf, bpftrace, bcc];

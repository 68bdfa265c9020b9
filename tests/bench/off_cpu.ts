/**
 * `deno task bench --workload offcpu`: what recording off-CPU time costs, omniprof next to bcc's
 * `offcputime`, perf's `record --off-cpu` and a bpftrace script, on a process that switches context tens
 * of thousands of times a second.
 *
 * The workload (tests/workloads/switches.c) is two threads of one process, both pinned to the last CPU,
 * passing a byte back and forth through two pipes with a fixed amount of work at each handoff: every
 * handoff is a context switch, and that CPU stays busy. It prints, every 100 ms, its CLOCK_MONOTONIC time,
 * its round trips, its context switches and its CPU time so far, so the rate of any window comes from the
 * workload itself: a tool that costs the workload time (in the kernel at each switch, or on its CPU) shows
 * as fewer round trips per second than with no tool at all (the baseline), measured by the
 * same code in every case.
 *
 * Each tool follows the workload's PID for the duration: `omniprof record --off-cpu -p PID -d D`,
 * bcc's `offcputime -p PID D` (its libbpf build; `offcputime-bpfcc -p PID -f D` where only the Python one is
 * installed), `perf record --off-cpu -p PID -- sleep D` and bpftrace with the script
 * of {@linkcode bpftraceOffCpuScript}. The window judged is from the first poll that saw one of the
 * tool's BPF programs run to the last poll that saw their run counters grow (every 5 ms until the first
 * run, then every 200 ms): the span of it the tool was attached for, whatever its start-up took. With no
 * BPF (perf without its BPF skeleton, the baseline) the window is the tool's whole run.
 *
 * @example
 * ```ts ignore
 * import { runOffCpu } from "./off_cpu.ts";
 * const report = await runOffCpu({ dir: "/tmp/x", durationSeconds: 5, rounds: 2, minMicroseconds: 1,
 *   tools: ["omniprof", "bcc"] });
 * ```
 *
 * @module
 */
import { DENO_RUN_ENV, omniprofArgs, REPO_ROOT } from "../helpers.ts";
import { decodePprof } from "../../lib/output/pprof_reader.ts";
import type { NamedProgram, ProgramWatcher } from "./bpf_programs.ts";
import { monotonicNs } from "./monotonic_clock.ts";
import {
  parseBpftraceMap,
  parseFoldedStacks,
  parseOffcputimeListing,
  type ResourceUsage,
} from "./peer_output.ts";
import { INSTALL_ALL, runs, signalTree, type Step, timedRun } from "./peers.ts";
import { alignColumns, oneLine } from "./results.ts";

/** The tools the section compares, in the order each round runs them (after the baseline). */
export const OFF_CPU_TOOLS = ["omniprof", "bcc", "perf", "bpftrace"] as const;
export type OffCpuToolKey = (typeof OFF_CPU_TOOLS)[number];

/** The workload's thread name (its executable's name) and its threads. */
export const SWITCHES_COMM = "switches_bench";
const SWITCHES_THREADS = 2;

/** One line of the workload's progress: `t_ns=NS round_trips=N switches=S cpu_ns=C`. */
export interface SwitchesReport {
  /** CLOCK_MONOTONIC ns. */
  tNs: number;
  roundTrips: number;
  /** The process's context switches so far, voluntary and involuntary, every thread. */
  switches: number;
  /** The process's CPU time so far, every thread, ns. */
  cpuNs: number;
}

/** The workload's progress lines, in order; other lines (its final summary) are skipped. */
export function parseSwitchesReports(text: string): SwitchesReport[] {
  const reports: SwitchesReport[] = [];
  for (const line of text.split("\n")) {
    const match = /^t_ns=(\d+) round_trips=(\d+) switches=(\d+) cpu_ns=(\d+)$/.exec(line.trim());
    if (match === null) continue;
    reports.push({
      tNs: Number(match[1]),
      roundTrips: Number(match[2]),
      switches: Number(match[3]),
      cpuNs: Number(match[4]),
    });
  }
  return reports;
}

/** The workload's rates over a window of its progress lines. */
export interface WindowFigures {
  /** From the first progress line in the window to the last, seconds. */
  seconds: number;
  roundTripsPerSecond: number;
  switchesPerSecond: number;
  /** The workload's CPU seconds between those two lines. */
  cpuSeconds: number;
}

/**
 * The rates between the first and the last progress line within [startNs, endNs]: the lines come every
 * 100 ms, so the window measured is at most 0.2 s shorter than the one asked for and never reaches
 * outside it (where the tool was not attached yet, or any more). Null when fewer than two lines fall in.
 */
export function windowFigures(
  reports: readonly SwitchesReport[],
  startNs: number,
  endNs: number,
): WindowFigures | null {
  const inside = reports.filter((report) => report.tNs >= startNs && report.tNs <= endNs);
  if (inside.length < 2) return null;
  const first = inside[0]!;
  const last = inside[inside.length - 1]!;
  const seconds = (last.tNs - first.tNs) / 1e9;
  if (!(seconds > 0)) return null;
  return {
    seconds,
    roundTripsPerSecond: (last.roundTrips - first.roundTrips) / seconds,
    switchesPerSecond: (last.switches - first.switches) / seconds,
    cpuSeconds: (last.cpuNs - first.cpuNs) / 1e9,
  };
}

/**
 * BPF ns per switch: the run time of all the tool's programs divided by the runs of its busiest one,
 * the program every context switch enters (bcc's kprobe, bpftrace's and omniprof's context-switch
 * programs). Tail-called programs run inside their caller's accounting, so the sum covers each chain
 * once; programs that run on other events (omniprof's CPU sampling and process events, a tool's BEGIN
 * and END) add their time, which is small next to tens of thousands of switches a second. Null when
 * nothing ran.
 */
export function perSwitchNs(
  programs: readonly Pick<NamedProgram, "runTimeNs" | "runCount">[],
): number | null {
  const busiest = Math.max(0, ...programs.map((program) => program.runCount));
  if (busiest === 0) return null;
  return programs.reduce((sum, program) => sum + program.runTimeNs, 0) / busiest;
}

/**
 * The bpftrace program: off-CPU time of process `pid` by user and kernel stack, from the
 * `context-switches` software event alone. That event fires on the CPU switching, in the context of the
 * thread switching out, for every switch (the idle task's included), so the CPU's previous switch is
 * when the thread now switching out was switched in. At each switch-out of a thread of `pid` the script
 * adds the time from its previous switch-out to its last switch-in under the stack it blocked in, then
 * keeps the new stack and time: the way libbpf-tools' offcputime pairs sched_switch's two sides, with
 * the switch-in seen one switch later. bpftrace's `tracepoint:sched:sched_switch` needs tracefs mounted
 * and a kprobe needs CONFIG_KPROBES, which a machine may lack; the software event needs neither. The map
 * `@[comm, ustack, kstack]` prints as {@linkcode parseBpftraceMap} reads it; the helper maps are cleared
 * at exit so they do not print.
 */
export function bpftraceOffCpuScript(pid: number, minMicroseconds: number): string {
  const minNs = Math.round(minMicroseconds * 1000);
  return `software:context-switches:1 {
  $in = @switched[cpu];
  @switched[cpu] = nsecs;
  if (pid == ${pid}) {
    $out = @out[tid];
    if ($out > 0 && $in > $out && $in - $out >= ${minNs}) {
      @[comm, @ustk[tid], @kstk[tid]] = sum($in - $out);
    }
    @out[tid] = nsecs;
    @ustk[tid] = ustack;
    @kstk[tid] = kstack;
  }
}
END { clear(@switched); clear(@out); clear(@ustk); clear(@kstk); }
`;
}

/**
 * Why `perf record --off-cpu` does not record here, from what perf printed, or null when it printed no
 * such warning. A perf built without BPF skeletons (Debian's) accepts the option and ignores it:
 * "Warning: option `off-cpu' is being ignored because no BUILD_BPF_SKEL=1".
 */
export function perfOffCpuIgnored(stderr: string): string | null {
  const line = stderr.split("\n").find((text) => /option .off-cpu. is being ignored/.test(text));
  return line === undefined ? null : line.replace(/\[ perf record:.*$/, "").trim();
}

/**
 * Off-CPU time of `perf script -F event,period` output: perf's off-CPU samples are `offcpu-time` events
 * whose period is the ns the thread was switched out. Returns ns.
 */
export function perfOffCpuNs(text: string): number {
  let ns = 0;
  for (const line of text.split("\n")) {
    const match = /^\s*(\d+)\s+offcpu-time:?\s*$/.exec(line) ?? /^\s*offcpu-time:?\s+(\d+)\s*$/.exec(line);
    if (match !== null) ns += Number(match[1]);
  }
  return ns;
}

/** Off-CPU time of one stack, ns, frames root first. */
export interface OffCpuStack {
  frames: string[];
  ns: number;
}

/** How much of `stacks`' time holds one of `functions` (the workload's ping and pong), ns. */
export function timeUnder(stacks: readonly OffCpuStack[], functions: readonly string[]): number {
  return stacks.reduce(
    (sum, stack) => sum + (stack.frames.some((frame) => functions.includes(frame)) ? stack.ns : 0),
    0,
  );
}

/** The functions the workload's threads block under (tests/workloads/switches.c). */
const WORKLOAD_FUNCTIONS = ["ping", "pong"];

/** One round of one tool (or of the baseline). */
export interface OffCpuRound {
  /** "baseline" or a tool. */
  key: "baseline" | OffCpuToolKey;
  label: string;
  status: "ok" | "not installed" | "not available" | "failed";
  reason: string | null;
  cpuSeconds: number | null;
  maxRssMb: number | null;
  /** The workload's rates in the window the tool was attached (the baseline: its whole run). */
  window: WindowFigures | null;
  bpfNsPerSwitch: number | null;
  /** Run time of all the tool's BPF programs over its run, seconds. */
  bpfSeconds: number | null;
  bpfPrograms: string[];
  /** Off-CPU time the tool recorded for the workload's process, seconds (null: not read). */
  offCpuSeconds: number | null;
  /** Of that, the share under ping or pong. */
  underWorkloadShare: number | null;
  notes: string[];
}

/** A tool's line of the table: its median round, with the figures derived from the baseline. */
export interface OffCpuRow extends OffCpuRound {
  /** (1 - rate / baseline rate) x 100: how much slower the workload went under the tool. */
  slowdownPercent: number | null;
  /** (recorded off-CPU + the workload's CPU) / (threads x window): 1.0 when every wait was recorded. */
  accountedShare: number | null;
  /** Every round's CPU seconds and round trips per second, in order. */
  byRound: { cpuSeconds: number | null; roundTripsPerSecond: number | null }[];
}

/** One target of the issue, judged on this run. */
export interface OffCpuTarget {
  target: string;
  value: string;
  verdict: "PASS" | "FAIL" | "n/a";
}

/** What {@linkcode runOffCpu} returns. */
export interface OffCpuReport {
  description: string;
  durationSeconds: number;
  minMicroseconds: number;
  rows: OffCpuRow[];
  targets: OffCpuTarget[];
}

/** A round that did not run. */
export function notRunRound(
  key: OffCpuRound["key"],
  label: string,
  status: Exclude<OffCpuRound["status"], "ok">,
  reason: string,
): OffCpuRound {
  return {
    key,
    label,
    status,
    reason,
    cpuSeconds: null,
    maxRssMb: null,
    window: null,
    bpfNsPerSwitch: null,
    bpfSeconds: null,
    bpfPrograms: [],
    offCpuSeconds: null,
    underWorkloadShare: null,
    notes: [],
  };
}

function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

/**
 * The table's rows from every round: the baseline's round of median rate, each tool's round of median
 * CPU (the lower middle one for an even count; all of that round's figures, not a mix), and the slowdown
 * against the baseline's median rate. A tool that failed in any round keeps that round's row.
 */
export function offCpuRows(rounds: readonly OffCpuRound[]): OffCpuRow[] {
  const keys = [...new Set(rounds.map((round) => round.key))];
  const baselineRate = median(
    rounds.filter((round) => round.key === "baseline" && round.window !== null).map((round) =>
      round.window!.roundTripsPerSecond
    ),
  );
  return keys.map((key) => {
    const own = rounds.filter((round) => round.key === key);
    const byRound = own.map((round) => ({
      cpuSeconds: round.cpuSeconds,
      roundTripsPerSecond: round.window?.roundTripsPerSecond ?? null,
    }));
    const failed = own.find((round) => round.status !== "ok");
    let chosen: OffCpuRound;
    if (failed !== undefined) {
      chosen = failed;
    } else if (key === "baseline") {
      const sorted = [...own].sort((a, b) =>
        (a.window?.roundTripsPerSecond ?? 0) - (b.window?.roundTripsPerSecond ?? 0)
      );
      chosen = sorted[Math.floor((sorted.length - 1) / 2)]!;
    } else {
      const sorted = [...own].sort((a, b) => (a.cpuSeconds ?? 0) - (b.cpuSeconds ?? 0));
      chosen = sorted[Math.floor((sorted.length - 1) / 2)]!;
    }
    const rate = chosen.window?.roundTripsPerSecond ?? null;
    const slowdownPercent = key === "baseline" || rate === null || baselineRate === null || baselineRate === 0
      ? null
      : (1 - rate / baselineRate) * 100;
    const accountedShare = chosen.offCpuSeconds === null || chosen.window === null
      ? null
      : (chosen.offCpuSeconds + chosen.window.cpuSeconds) / (SWITCHES_THREADS * chosen.window.seconds);
    return { ...chosen, slowdownPercent, accountedShare, byRound };
  });
}

/**
 * The issue's target: omniprof's CPU and the workload's slowdown under it no more than under bcc's
 * offcputime. Judged only when both ran; else n/a and why.
 */
export function offCpuTargets(rows: readonly OffCpuRow[]): OffCpuTarget[] {
  const own = rows.find((row) => row.key === "omniprof");
  const bcc = rows.find((row) => row.key === "bcc");
  const cpuTarget = "omniprof CPU <= bcc offcputime CPU";
  const slowTarget = "workload slowdown under omniprof <= under bcc offcputime";
  const cannot = own === undefined || own.status !== "ok"
    ? `omniprof did not run${own?.reason ? `: ${own.reason}` : ""}`
    : bcc === undefined
    ? "bcc offcputime was not asked for (--tools)"
    : bcc.status !== "ok"
    ? `bcc offcputime ${bcc.status} (its row says why)`
    : null;
  if (cannot !== null) {
    return [cpuTarget, slowTarget].map((target) => ({
      target,
      value: `cannot be judged: ${cannot}`,
      verdict: "n/a",
    }));
  }
  const targets: OffCpuTarget[] = [];
  targets.push(
    own!.cpuSeconds === null || bcc!.cpuSeconds === null
      ? { target: cpuTarget, value: "no CPU time measured", verdict: "n/a" }
      : {
        target: cpuTarget,
        value: `${own!.cpuSeconds.toFixed(2)} vs ${bcc!.cpuSeconds.toFixed(2)} s`,
        verdict: own!.cpuSeconds <= bcc!.cpuSeconds ? "PASS" : "FAIL",
      },
  );
  targets.push(
    own!.slowdownPercent === null || bcc!.slowdownPercent === null
      ? { target: slowTarget, value: "no baseline rate", verdict: "n/a" }
      : {
        target: slowTarget,
        value: `${own!.slowdownPercent.toFixed(1)}% vs ${bcc!.slowdownPercent.toFixed(1)}%`,
        verdict: own!.slowdownPercent <= bcc!.slowdownPercent ? "PASS" : "FAIL",
      },
  );
  return targets;
}

const fixed = (value: number | null, digits: number, suffix = "") =>
  value === null ? "-" : `${value.toFixed(digits)}${suffix}`;
const thousands = (value: number | null) => value === null ? "-" : Math.round(value).toLocaleString("en-US");

/** The table, every round's figures, the ratios against omniprof, the targets and a details line per tool. */
export function formatOffCpuReport(report: OffCpuReport): string {
  const header = [
    "tool",
    "CPU s",
    "max RSS MB",
    "round trips/s",
    "slowdown",
    "switches/s",
    "BPF ns/switch",
    "BPF CPU s",
    "off-CPU s",
    "in ping/pong",
    "(off+on CPU)/wall",
  ];
  const lines = report.rows.map((row) =>
    row.status !== "ok" ? [row.label, `${row.status}: ${oneLine(row.reason ?? "")}`] : [
      row.label,
      fixed(row.cpuSeconds, 2),
      fixed(row.maxRssMb, 1),
      thousands(row.window?.roundTripsPerSecond ?? null),
      fixed(row.slowdownPercent, 1, "%"),
      thousands(row.window?.switchesPerSecond ?? null),
      thousands(row.bpfNsPerSwitch),
      fixed(row.bpfSeconds, 3),
      fixed(row.offCpuSeconds, 2),
      row.underWorkloadShare === null ? "-" : `${(row.underWorkloadShare * 100).toFixed(1)}%`,
      row.accountedShare === null ? "-" : `${(row.accountedShare * 100).toFixed(1)}%`,
    ]
  );
  // Rows of tools that did not run hold one long message: align only the full rows.
  const aligned = alignColumns([header, ...lines.filter((line) => line.length === header.length)]).split(
    "\n",
  );
  let next = 1;
  const table = [
    aligned[0]!,
    ...lines.map((line) => line.length === header.length ? aligned[next++]! : line.join("  ")),
  ];
  const roundCount = Math.max(0, ...report.rows.map((row) => row.byRound.length));
  const rounds = alignColumns([
    ["by round (CPU s, round trips/s)", ...Array.from({ length: roundCount }, (_, i) => String(i + 1))],
    ...report.rows.filter((row) => row.status === "ok").map((row) => [
      row.label,
      ...row.byRound.map((round) =>
        row.key === "baseline"
          ? thousands(round.roundTripsPerSecond)
          : `${fixed(round.cpuSeconds, 2)}, ${thousands(round.roundTripsPerSecond)}`
      ),
    ]),
  ]);
  const own = report.rows.find((row) => row.key === "omniprof" && row.status === "ok");
  const ratio = (value: number | null, base: number | null | undefined) =>
    value === null || base == null || base === 0 ? "-" : `${(base / value).toFixed(2)}x`;
  const ratioLines = own === undefined
    ? []
    : report.rows.filter((row) => row.key !== "baseline" && row !== own && row.status === "ok").map((row) =>
      `omniprof / ${row.label}: CPU ${ratio(row.cpuSeconds, own.cpuSeconds)}, slowdown ${
        ratio(row.slowdownPercent, own.slowdownPercent)
      }, BPF ns/switch ${ratio(row.bpfNsPerSwitch, own.bpfNsPerSwitch)}`
    );
  const targets = alignColumns([
    ["target", "measured", "result"],
    ...report.targets.map((target) => [target.target, target.value, target.verdict]),
  ]);
  const details = report.rows.filter((row) => row.status === "ok" && row.notes.length > 0).map((row) =>
    `${row.label}: ${row.notes.join("; ")}`
  );
  return [
    `workload: ${report.description}; each tool follows it for ${report.durationSeconds} s, ` +
    `recording waits of at least ${report.minMicroseconds} us`,
    "",
    ...table,
    "",
    rounds,
    "",
    ...ratioLines,
    ...(ratioLines.length > 0 ? [""] : []),
    "targets (issue: omniprof's CPU and the workload's slowdown no more than bcc's offcputime's):",
    targets,
    "",
    ...details,
  ].join("\n");
}

/** What every tool gets for one run. */
interface ToolOptions {
  /** A private directory for the tool's files. */
  dir: string;
  /** The workload's process. */
  pid: number;
  durationSeconds: number;
  minMicroseconds: number;
  onSpawn?: (pid: number) => void;
}

/** What one tool's run measured. */
interface ToolRun {
  steps: Step[];
  /** CLOCK_MONOTONIC ns of the window the tool was attached (see the module documentation). */
  windowStartNs: number;
  windowEndNs: number;
  programs: NamedProgram[];
  /** Off-CPU time recorded for the workload's process, ns; null when the tool's output was not read. */
  offCpuNs: number | null;
  /** Its stacks, when the tool gives them. */
  stacks: OffCpuStack[] | null;
  notes: string[];
}

/** One tool of the section. */
interface OffCpuTool {
  key: OffCpuToolKey;
  label: string;
  /** Null when it can run here, else why not (`not installed` with how to install it, `not available`). */
  missing(dir: string): Promise<{ status: "not installed" | "not available"; reason: string } | null>;
  run(options: ToolOptions): Promise<ToolRun>;
}

/**
 * Runs `argv` under `/usr/bin/time` (peers.ts's timedRun) and follows the run counters of its BPF
 * programs: the window is from the first poll that saw any of them run to the last poll that saw their
 * sum grow, or the whole run when it loaded none.
 */
async function attachedRun(
  argv: string[],
  options: Omit<Parameters<typeof timedRun>[1], "watchPrograms" | "onPoll">,
): Promise<{ run: Awaited<ReturnType<typeof timedRun>>; windowStartNs: number; windowEndNs: number }> {
  let previous = 0;
  let firstNs: number | null = null;
  let lastGrowthNs: number | null = null;
  const onPoll = (watcher: ProgramWatcher, nowNs: number) => {
    const total = watcher.programs().reduce((sum, program) => sum + program.runCount, 0);
    if (total > previous) {
      firstNs ??= nowNs;
      lastGrowthNs = nowNs;
      previous = total;
    }
  };
  const run = await timedRun(argv, { ...options, watchPrograms: true, onPoll });
  const endNs = monotonicNs();
  return firstNs !== null && lastGrowthNs !== null && lastGrowthNs > firstNs
    ? { run, windowStartNs: firstNs, windowEndNs: lastGrowthNs }
    : { run, windowStartNs: run.startNs, windowEndNs: endNs };
}

/** The tool's own error: the last line of its standard error that says something. */
function toolError(what: string, run: Awaited<ReturnType<typeof timedRun>>): Error {
  return new Error(`${what} exited with ${run.step.exitCode}: ${lastMessage(run.stderr)}`);
}

/**
 * The last line of `stderr` with a word in it: a Python traceback ends with the exception, under lines
 * of `^^^^` that point into the source line above.
 */
export function lastMessage(stderr: string): string {
  const lines = stderr.split("\n").map((line) => line.trim()).filter((line) => /\w/.test(line));
  return lines[lines.length - 1] ?? "(nothing on stderr)";
}

const omniprof: OffCpuTool = {
  key: "omniprof",
  label: "omniprof",
  missing: () => Promise.resolve(null),
  async run(options) {
    const output = `${options.dir}/omniprof.pb.gz`;
    const statsPath = `${options.dir}/omniprof.stats.json`;
    const { run, windowStartNs, windowEndNs } = await attachedRun([
      Deno.execPath(),
      ...omniprofArgs([
        "record",
        "--off-cpu",
        "--off-cpu-min",
        String(options.minMicroseconds),
        "-p",
        String(options.pid),
        "-d",
        String(options.durationSeconds),
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
      timeoutSeconds: options.durationSeconds + 120,
    });
    if (run.step.exitCode !== 0) throw toolError("omniprof record", run);
    const profile = decodePprof(Deno.readFileSync(output));
    const stacks: OffCpuStack[] = [];
    let cpuSamples = 0;
    for (const sample of profile.samples) {
      if (sample.pid !== options.pid) continue;
      if (sample.count > 0) cpuSamples += sample.count;
      const ns = sample.offCpuNs ?? 0;
      if (ns <= 0) continue;
      stacks.push({
        frames: sample.locations.map((index) => profile.locations[index]!.functionName).reverse(),
        ns,
      });
    }
    const stats = JSON.parse(Deno.readTextFileSync(statsPath));
    return {
      steps: [run.step],
      windowStartNs,
      windowEndNs,
      programs: run.watcher?.programs() ?? [],
      offCpuNs: stacks.reduce((sum, stack) => sum + stack.ns, 0),
      stacks,
      notes: [`${cpuSamples} CPU samples, ${stacks.length} distinct off-CPU stacks`, omniprofCounters(stats)],
    };
  },
};

/**
 * The counters of omniprof's `--stats` that say whether every switch was recorded: the waits recorded
 * (added up in the kernel or sent whole), the switches its BPF program saw, those left out as shorter than the minimum or because the store of
 * switched-out threads was full, and traces lost on the way to the host.
 */
export function omniprofCounters(stats: unknown): string {
  const field = (value: unknown, ...path: string[]): unknown =>
    path.reduce<unknown>(
      (node, key) =>
        typeof node === "object" && node !== null ? (node as Record<string, unknown>)[key] : undefined,
      value,
    );
  const show = (value: unknown) => typeof value === "number" ? String(value) : "?";
  return `waits ${show(field(stats, "offCpu", "waits"))} of ${show(field(stats, "bpf", "OffCpuSwitches"))} ` +
    `switches out (${show(field(stats, "bpf", "OffCpuCounted"))} added up in the kernel, ` +
    `${show(field(stats, "bpf", "OffCpuSent"))} sent whole; short ${
      show(field(stats, "bpf", "OffCpuShort"))
    }, store full ` +
    `${show(field(stats, "bpf", "OffCpuStoreFull"))}), lost ${show(field(stats, "lost"))}`;
}

/** Where bcc looks for the running kernel's headers (or the in-kernel copy it can use instead). */
function kernelHeadersPresent(): boolean {
  for (const path of [`/lib/modules/${Deno.osRelease()}/build`, "/sys/kernel/kheaders.tar.xz"]) {
    try {
      Deno.statSync(path);
      return true;
    } catch {
      // try the next
    }
  }
  return false;
}

/** Whether the kernel has a kprobe PMU (CONFIG_KPROBES, Linux 4.17 and later): bcc's offcputime needs one. */
function hasKprobes(): boolean {
  try {
    Deno.statSync("/sys/bus/event_source/devices/kprobe");
    return true;
  } catch {
    return false;
  }
}

/**
 * bcc's offcputime. bcc ships it twice: built on libbpf (libbpf-tools, `offcputime`), which takes each
 * thread's stack at its switch-out from a sched_switch tracepoint and runs on any kernel with BTF, and
 * the Python original (bpfcc-tools, `offcputime-bpfcc`), which needs a kprobe on finish_task_switch.
 * The first is used where it is installed.
 */
const LIBBPF_OFFCPUTIME = "/usr/sbin/offcputime";

const bcc: OffCpuTool = {
  key: "bcc",
  label: "bcc offcputime",
  async missing() {
    if (await runs(LIBBPF_OFFCPUTIME, ["--help"])) return null;
    if (!await runs("offcputime-bpfcc", ["--help"])) {
      return {
        status: "not installed",
        reason: `offcputime: apt-get install libbpf-tools (or bpfcc-tools; or ${INSTALL_ALL})`,
      };
    }
    if (!kernelHeadersPresent()) {
      return {
        status: "not installed",
        reason: `bcc: kernel headers for ${Deno.osRelease()} (${INSTALL_ALL} installs and links them)`,
      };
    }
    return null;
  },
  async run(options) {
    const libbpf = await runs(LIBBPF_OFFCPUTIME, ["--help"]);
    const program = libbpf ? LIBBPF_OFFCPUTIME : "offcputime-bpfcc";
    const output = `${options.dir}/bcc.out`;
    const { run, windowStartNs, windowEndNs } = await attachedRun([
      program,
      "-p",
      String(options.pid),
      "-m",
      String(options.minMicroseconds),
      // The Python one writes folded lines with -f; the libbpf one has only its stack listing.
      ...(libbpf ? [] : ["-f"]),
      String(options.durationSeconds),
    ], {
      label: "bcc",
      dir: options.dir,
      stdoutPath: output,
      onSpawn: options.onSpawn,
      timeoutSeconds: options.durationSeconds + 240,
    });
    if (run.step.exitCode !== 0) {
      const error = toolError(program, run);
      if (libbpf || hasKprobes()) throw error;
      // Its own error says what it tripped over first; the cause is worth saying once.
      throw new Error(
        `${error.message} (it attaches a kprobe to finish_task_switch, and this kernel has no kprobes: ` +
          "no /sys/bus/event_source/devices/kprobe)",
      );
    }
    const text = Deno.readTextFileSync(output);
    // Folded lines are `comm;user frames;kernel frames MICROSECONDS`; the listing gives microseconds too.
    const stacks = (libbpf ? parseOffcputimeListing(text) : parseFoldedStacks(text)).map((stack) => ({
      frames: [stack.comm, ...stack.frames],
      ns: stack.count * 1000,
    }));
    return {
      steps: [run.step],
      windowStartNs,
      windowEndNs,
      programs: run.watcher?.programs() ?? [],
      offCpuNs: stacks.reduce((sum, stack) => sum + stack.ns, 0),
      stacks,
      notes: [`${stacks.length} stacks (${libbpf ? "libbpf-tools" : "bpfcc-tools"})`],
    };
  },
};

const perf: OffCpuTool = {
  key: "perf",
  label: "perf --off-cpu",
  async missing(dir) {
    if (!await runs("perf")) {
      return { status: "not installed", reason: `perf: apt-get install linux-perf (or ${INSTALL_ALL})` };
    }
    // A perf built without BPF skeletons takes the option and ignores it: ask it on a trivial command.
    const probe = await new Deno.Command("perf", {
      args: ["record", "--off-cpu", "-o", `${dir}/perf-probe.data`, "--", "true"],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(probe.stderr);
    const ignored = perfOffCpuIgnored(stderr);
    if (ignored !== null) return { status: "not available", reason: `perf record --off-cpu: ${ignored}` };
    if (!probe.success) {
      return { status: "not available", reason: `perf record --off-cpu: ${oneLine(stderr.trim())}` };
    }
    return null;
  },
  async run(options) {
    const data = `${options.dir}/perf.data`;
    const text = `${options.dir}/perf.txt`;
    const record = await attachedRun(
      [
        "perf",
        "record",
        "--off-cpu",
        "-g",
        "-p",
        String(options.pid),
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
    if (record.run.step.exitCode !== 0) throw toolError("perf record", record.run);
    const script = await timedRun(["perf", "script", "-F", "event,period", "-i", data], {
      label: "perf-script",
      dir: options.dir,
      stdoutPath: text,
      onSpawn: options.onSpawn,
      timeoutSeconds: 600,
    });
    if (script.step.exitCode !== 0) throw toolError("perf script", script);
    return {
      steps: [record.run.step, script.step],
      windowStartNs: record.windowStartNs,
      windowEndNs: record.windowEndNs,
      programs: record.run.watcher?.programs() ?? [],
      offCpuNs: perfOffCpuNs(Deno.readTextFileSync(text)),
      stacks: null,
      notes: [
        `perf script ${(script.step.usage.userSeconds + script.step.usage.systemSeconds).toFixed(2)} CPU s`,
      ],
    };
  },
};

const bpftrace: OffCpuTool = {
  key: "bpftrace",
  label: "bpftrace",
  async missing() {
    return await runs("bpftrace")
      ? null
      : { status: "not installed", reason: `bpftrace: apt-get install bpftrace (or ${INSTALL_ALL})` };
  },
  async run(options) {
    const output = `${options.dir}/bpftrace.txt`;
    const durationNs = options.durationSeconds * 1e9;
    let firstRunNs: number | null = null;
    const { run, windowStartNs, windowEndNs } = await attachedRun(
      ["bpftrace", "-e", bpftraceOffCpuScript(options.pid, options.minMicroseconds)],
      {
        label: "bpftrace",
        dir: options.dir,
        stdoutPath: output,
        onSpawn: options.onSpawn,
        // As a user stops it, with Ctrl-C, once its program has run for the duration (it has no -d).
        interruptWhen: ({ startNs, firstRunNs: first, nowNs }) => {
          firstRunNs = first;
          return first !== null ? nowNs >= first + durationNs : nowNs >= startNs + durationNs + 60e9;
        },
        timeoutSeconds: options.durationSeconds + 240,
      },
    );
    if (run.step.exitCode !== 0) throw toolError("bpftrace", run);
    const stacks = parseBpftraceMap(Deno.readTextFileSync(output)).map((stack) => ({
      frames: stack.frames,
      ns: stack.count,
    }));
    return {
      steps: [run.step],
      windowStartNs,
      windowEndNs,
      programs: run.watcher?.programs() ?? [],
      offCpuNs: stacks.reduce((sum, stack) => sum + stack.ns, 0),
      stacks,
      notes: [
        `${stacks.length} stacks`,
        ...(firstRunNs === null ? ["its program never ran"] : []),
      ],
    };
  },
};

const TOOLS: Record<OffCpuToolKey, OffCpuTool> = { omniprof, bcc, perf, bpftrace };

/** What {@linkcode runOffCpu} needs. */
export interface OffCpuOptions {
  /** A private directory, removed by the caller. */
  dir: string;
  durationSeconds: number;
  rounds: number;
  minMicroseconds: number;
  tools: readonly OffCpuToolKey[];
  /** Told about every process tree started, so an interrupt can end it. */
  onSpawn?: (pid: number) => void;
  /** Told when one has been waited for. */
  onExit?: (pid: number) => void;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Builds the workload into `dir`: frame pointers, so that bcc and bpftrace can unwind it too. */
async function compileWorkload(dir: string): Promise<string> {
  const path = `${dir}/${SWITCHES_COMM}`;
  const output = await new Deno.Command("gcc", {
    args: [
      "-O2",
      "-fno-omit-frame-pointer",
      "-pthread",
      `${REPO_ROOT}tests/workloads/switches.c`,
      "-o",
      path,
    ],
    stderr: "piped",
  }).output();
  if (!output.success) throw new Error(`gcc: ${new TextDecoder().decode(output.stderr)}`);
  return path;
}

const cpuOf = (usage: ResourceUsage) => usage.userSeconds + usage.systemSeconds;

/**
 * One round of `tool` (null: the baseline, no tool for the duration) on a fresh copy of the workload,
 * which is stopped afterwards; then a second for the kernel to free the tool's programs and events.
 */
async function measureRound(
  tool: OffCpuTool | null,
  workload: string,
  options: OffCpuOptions,
  durationSeconds: number,
): Promise<OffCpuRound> {
  const key = tool?.key ?? "baseline";
  const label = tool?.label ?? "baseline (no tool)";
  const dir = `${options.dir}/${key}`;
  Deno.mkdirSync(dir, { recursive: true });
  const reportPath = `${dir}/workload.txt`;
  const child = new Deno.Command(workload, { args: ["3600"], stdin: "null", stdout: "piped", stderr: "null" })
    .spawn();
  options.onSpawn?.(child.pid);
  const reported = child.stdout.pipeTo(
    Deno.openSync(reportPath, { write: true, create: true, truncate: true }).writable,
  );
  let toolRun: ToolRun | null = null;
  let failure: string | null = null;
  let baselineWindow: [number, number] | null = null;
  try {
    // The threads pin themselves and settle into their rhythm.
    await sleep(500);
    console.log(`${label}: running...`);
    if (tool === null) {
      const start = monotonicNs();
      await sleep(durationSeconds * 1000);
      baselineWindow = [start, monotonicNs()];
    } else {
      toolRun = await tool.run({
        dir,
        pid: child.pid,
        durationSeconds,
        minMicroseconds: options.minMicroseconds,
        onSpawn: options.onSpawn,
      });
    }
  } catch (error) {
    failure = oneLine(error instanceof Error ? error.message : String(error));
  } finally {
    signalTree(child.pid, "SIGKILL");
    await child.status;
    await reported.catch(() => {});
    options.onExit?.(child.pid);
  }
  await sleep(1000);
  if (failure !== null) return notRunRound(key, label, "failed", failure);
  const reports = parseSwitchesReports(Deno.readTextFileSync(reportPath));
  const [startNs, endNs] = toolRun === null ? baselineWindow! : [toolRun.windowStartNs, toolRun.windowEndNs];
  const window = windowFigures(reports, startNs, endNs);
  if (toolRun === null) {
    return { ...notRunRound(key, label, "failed", ""), status: "ok", reason: null, window };
  }
  const programs = toolRun.programs;
  const bpfNs = programs.reduce((sum, program) => sum + program.runTimeNs, 0);
  return {
    key,
    label,
    status: "ok",
    reason: null,
    cpuSeconds: toolRun.steps.reduce((sum, step) => sum + cpuOf(step.usage), 0),
    maxRssMb: Math.max(...toolRun.steps.map((step) => step.usage.maxRssKb)) / 1024,
    window,
    bpfNsPerSwitch: perSwitchNs(programs),
    bpfSeconds: programs.length === 0 ? null : bpfNs / 1e9,
    bpfPrograms: programs.map((program) =>
      `${program.name || "?"}#${program.id} ${program.runTimeNs}/${program.runCount}`
    ),
    offCpuSeconds: toolRun.offCpuNs === null ? null : toolRun.offCpuNs / 1e9,
    underWorkloadShare: toolRun.stacks === null || toolRun.offCpuNs === null || toolRun.offCpuNs === 0
      ? null
      : timeUnder(toolRun.stacks, WORKLOAD_FUNCTIONS) / toolRun.offCpuNs,
    notes: [
      ...toolRun.notes,
      ...(window === null
        ? []
        : [`window ${window.seconds.toFixed(1)} s, workload CPU ${window.cpuSeconds.toFixed(2)} s`]),
      ...(programs.length > 0
        ? [
          `BPF programs (run_time_ns/run_cnt): ${
            programs.map((program) =>
              `${program.name || "?"}#${program.id} ${program.runTimeNs}/${program.runCount}`
            ).join(", ")
          }`,
        ]
        : []),
    ],
  };
}

/** Runs the baseline and every tool, `options.rounds` times interleaved, and reports. */
export async function runOffCpu(options: OffCpuOptions): Promise<OffCpuReport> {
  const workload = await compileWorkload(options.dir);
  const tools = options.tools.map((key) => TOOLS[key]);
  const rounds: OffCpuRound[] = [];
  const runnable: OffCpuTool[] = [];
  for (const tool of tools) {
    const missing = await tool.missing(options.dir);
    if (missing === null) {
      runnable.push(tool);
    } else {
      console.log(`${tool.label}: ${missing.status}: ${missing.reason}`);
      rounds.push(notRunRound(tool.key, tool.label, missing.status, missing.reason));
    }
  }
  if (runnable.includes(omniprof)) {
    // One short run first, so that omniprof's rows measure a run and not Deno's one-time transpile and
    // V8's code caches (V8 keeps code per set of flags, the same in every run).
    console.log("omniprof: a 1 s run first, to warm Deno's caches");
    await measureRound(omniprof, workload, options, 1);
  }
  const failed = new Set<OffCpuToolKey>();
  for (let round = 1; round <= options.rounds; round++) {
    if (options.rounds > 1) console.log(`round ${round} of ${options.rounds}`);
    rounds.push(await measureRound(null, workload, options, options.durationSeconds));
    for (const tool of runnable) {
      // A tool that failed fails the same way again; its first error is its row.
      if (failed.has(tool.key)) continue;
      const result = await measureRound(tool, workload, options, options.durationSeconds);
      if (result.status !== "ok") failed.add(tool.key);
      rounds.push(result);
    }
  }
  const order = ["baseline", ...options.tools];
  const rows = offCpuRows(rounds).sort((a, b) => order.indexOf(a.key) - order.indexOf(b.key));
  return {
    description: `tests/workloads/switches.c (-O2 -fno-omit-frame-pointer) as ${SWITCHES_COMM}: ` +
      `${SWITCHES_THREADS} threads on the last CPU passing a byte through two pipes`,
    durationSeconds: options.durationSeconds,
    minMicroseconds: options.minMicroseconds,
    rows,
    targets: offCpuTargets(rows),
  };
}

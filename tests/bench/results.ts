/**
 * The benchmark's results: one row per profiler, the ratios against omniprof, and the targets omniprof
 * must meet (less CPU than bpftrace and bcc, at most 1.5x perf's record + script, at most 120 MB RSS),
 * as text tables and as JSON-ready values.
 *
 * @example
 * ```ts
 * import { evaluateTargets, formatTable } from "./results.ts";
 * import type { BenchRow } from "./results.ts";
 * declare const rows: BenchRow[];
 * console.log(formatTable(rows));
 * const failed = evaluateTargets(rows).some((target) => target.verdict === "FAIL");
 * ```
 *
 * @module
 */
import { type NamedProgram, perSampleNs, PROG_TYPE_PERF_EVENT } from "./bpf_programs.ts";
import { completeShare } from "./peer_output.ts";
import type { Peer, PeerResult } from "./peers.ts";

/** One profiler's measurements; null where a value does not apply or was not measured. */
export interface BenchRow {
  key: Peer["key"];
  tool: string;
  status: "ok" | "not installed" | "failed";
  /** Why the tool did not run, or the error it failed with. */
  reason: string | null;
  /** User + system CPU seconds of every step (perf: record + script). */
  cpuSeconds: number | null;
  /** CPU seconds of the separate post-processing step alone (perf script). */
  postCpuSeconds: number | null;
  /** Largest peak RSS of any step, MB (1024 KiB). */
  maxRssMb: number | null;
  bpfNsPerSample: number | null;
  /** The sampling programs: `name#id run_time_ns/run_cnt`. */
  bpfPrograms: string[];
  /** ms from just before the tool was spawned to its first sample. */
  firstSampleMs: number | null;
  firstSampleSource: string | null;
  /** Samples of the workload's thread name. */
  workloadSamples: number | null;
  /** Of those, the ones whose stack holds the whole chain in order. */
  completeStacks: number | null;
  /** completeStacks / workloadSamples. */
  completeShare: number | null;
  /**
   * CPU seconds the machine spent during the tool's window on neither the tool nor the workload (other
   * processes, interrupts, the benchmark's own polling): how noisy that window was.
   */
  otherCpuSeconds: number | null;
  /** CPU seconds the hypervisor gave to other machines during the window while this one wanted to run. */
  stealSeconds: number | null;
  /** With several rounds: the CPU seconds of every round, in order (this row is the median one's). */
  cpuSecondsByRound?: (number | null)[];
  notes: string[];
}

/**
 * One tool's rounds as one row: the round of median CPU time (the lower of the two middle ones for an
 * even count), every round's CPU kept in `cpuSecondsByRound`. A tool that failed in any round keeps
 * that round's row: a failure is not averaged away.
 */
export function medianRound(rounds: readonly BenchRow[]): BenchRow {
  if (rounds.length === 0) throw new RangeError("medianRound() needs at least one round");
  const cpuSecondsByRound = rounds.map((row) => row.cpuSeconds);
  const failed = rounds.find((row) => row.status !== "ok" || row.cpuSeconds === null);
  if (failed !== undefined) return { ...failed, cpuSecondsByRound };
  const sorted = [...rounds].sort((a, b) => a.cpuSeconds! - b.cpuSeconds!);
  return { ...sorted[Math.floor((sorted.length - 1) / 2)]!, cpuSecondsByRound };
}

/** A row for a tool that did not run. */
export function missingRow(
  peer: Pick<Peer, "key" | "label">,
  status: "not installed" | "failed",
  reason: string,
) {
  return {
    key: peer.key,
    tool: peer.label,
    status,
    reason,
    cpuSeconds: null,
    postCpuSeconds: null,
    maxRssMb: null,
    bpfNsPerSample: null,
    bpfPrograms: [],
    firstSampleMs: null,
    firstSampleSource: null,
    workloadSamples: null,
    completeStacks: null,
    completeShare: null,
    otherCpuSeconds: null,
    stealSeconds: null,
    notes: [],
  } satisfies BenchRow;
}

/** The row for a tool's run, judging stacks of thread name `comm` against `chain`. */
export function resultRow(
  peer: Pick<Peer, "key" | "label">,
  result: PeerResult,
  comm: string,
  chain: string[],
): BenchRow {
  const cpu = result.steps.reduce((sum, step) => sum + step.usage.userSeconds + step.usage.systemSeconds, 0);
  const rssKb = Math.max(...result.steps.map((step) => step.usage.maxRssKb));
  const share = completeShare(result.stacks, comm, chain);
  const sampling = result.programs.filter((program) => program.type === PROG_TYPE_PERF_EVENT);
  return {
    key: peer.key,
    tool: peer.label,
    status: "ok",
    reason: null,
    cpuSeconds: cpu,
    postCpuSeconds: result.postProcessing === null
      ? null
      : result.postProcessing.userSeconds + result.postProcessing.systemSeconds,
    maxRssMb: rssKb / 1024,
    bpfNsPerSample: perSampleNs(result.programs, result.entryProgram),
    bpfPrograms: sampling.map(describeProgram),
    firstSampleMs: result.firstSampleNs === null ? null : (result.firstSampleNs - result.startNs) / 1e6,
    firstSampleSource: result.firstSampleSource,
    workloadSamples: share.samples,
    completeStacks: share.complete,
    completeShare: share.samples === 0 ? null : share.complete / share.samples,
    otherCpuSeconds: null,
    stealSeconds: null,
    // Host cost per sample, fixed start-up included: compare runs of one duration across workloads
    // (e.g. --workload python against chain for what naming Python frames costs).
    notes: share.samples === 0
      ? result.notes
      : [...result.notes, `CPU per 1,000 workload samples: ${(cpu / share.samples * 1e6).toFixed(0)} ms`],
  };
}

function describeProgram(program: NamedProgram): string {
  return `${program.name || "?"}#${program.id} ${program.runTimeNs}/${program.runCount}`;
}

/** One target and whether omniprof met it ("n/a" when a peer it compares with did not run). */
export interface TargetResult {
  target: string;
  value: string;
  verdict: "PASS" | "FAIL" | "n/a";
}

/** The issue's targets for omniprof, judged on `rows`. */
export function evaluateTargets(rows: BenchRow[]): TargetResult[] {
  const find = (key: BenchRow["key"]) => rows.find((row) => row.key === key && row.status === "ok");
  const own = find("omniprof");
  const results: TargetResult[] = [];
  const cpuBelow = (key: BenchRow["key"], factor: number, target: string) => {
    const peer = find(key);
    if (own?.cpuSeconds == null || peer?.cpuSeconds == null) {
      results.push({ target, value: own ? `${key} did not run` : "omniprof did not run", verdict: "n/a" });
      return;
    }
    const limit = peer.cpuSeconds * factor;
    const pass = factor === 1 ? own.cpuSeconds < limit : own.cpuSeconds <= limit;
    results.push({
      target,
      value: `${seconds(own.cpuSeconds)} vs ${factor === 1 ? "" : `${factor} x `}${seconds(peer.cpuSeconds)}`,
      verdict: pass ? "PASS" : "FAIL",
    });
  };
  cpuBelow("bpftrace", 1, "omniprof CPU < bpftrace CPU");
  cpuBelow("bcc", 1, "omniprof CPU < bcc profile CPU");
  cpuBelow("perf", 1.5, "omniprof CPU <= 1.5 x perf -g (record + script)");
  results.push(
    own?.maxRssMb == null
      ? { target: "omniprof max RSS <= 120 MB", value: "omniprof did not run", verdict: "n/a" }
      : {
        target: "omniprof max RSS <= 120 MB",
        value: `${own.maxRssMb.toFixed(2)} MB`,
        verdict: own.maxRssMb <= 120 ? "PASS" : "FAIL",
      },
  );
  return results;
}

/** Each other tool's values divided by omniprof's (null where either is missing). */
export interface RatioRow {
  tool: string;
  cpu: number | null;
  maxRss: number | null;
  bpfNsPerSample: number | null;
  firstSample: number | null;
}

/** The ratios tool / omniprof for every other tool that ran. */
export function ratios(rows: BenchRow[]): RatioRow[] {
  const own = rows.find((row) => row.key === "omniprof" && row.status === "ok");
  const ratio = (value: number | null, base: number | null | undefined) =>
    value === null || base == null || base === 0 ? null : value / base;
  return rows.filter((row) => row.key !== "omniprof" && row.status === "ok").map((row) => ({
    tool: row.tool,
    cpu: ratio(row.cpuSeconds, own?.cpuSeconds),
    maxRss: ratio(row.maxRssMb, own?.maxRssMb),
    bpfNsPerSample: ratio(row.bpfNsPerSample, own?.bpfNsPerSample),
    firstSample: ratio(row.firstSampleMs, own?.firstSampleMs),
  }));
}

function seconds(value: number): string {
  return `${value.toFixed(2)} s`;
}

/** A message on one line without terminal colors, at most 300 characters. */
export function oneLine(text: string): string {
  // deno-lint-ignore no-control-regex
  const plain = text.replace(/\x1b\[[0-9;]*m/g, "").replace(/\s*\n\s*/g, " | ").trim();
  return plain.length > 300 ? `${plain.slice(0, 297)}...` : plain;
}

function cell(value: number | null, digits: number, suffix = ""): string {
  return value === null ? "-" : `${value.toFixed(digits)}${suffix}`;
}

/** Left-aligns the first column and right-aligns the others. */
export function alignColumns(table: string[][]): string {
  const widths = table[0]!.map((_, column) => Math.max(...table.map((row) => (row[column] ?? "").length)));
  return table.map((row) =>
    row.map((text, column) => column === 0 ? text.padEnd(widths[column]!) : text.padStart(widths[column]!))
      .join("  ").trimEnd()
  ).join("\n");
}

/** The main table, one line per tool. */
export function formatTable(rows: BenchRow[]): string {
  const header = [
    "tool",
    "CPU s",
    "post-proc CPU s",
    "max RSS MB",
    "BPF ns/sample",
    "first sample ms",
    "workload samples",
    "complete stacks",
    "other CPU s",
  ];
  const lines = rows.map((row) =>
    row.status !== "ok" ? [row.tool, `${row.status}: ${oneLine(row.reason ?? "")}`] : [
      row.tool,
      cell(row.cpuSeconds, 2),
      cell(row.postCpuSeconds, 2),
      cell(row.maxRssMb, 1),
      row.bpfNsPerSample === null ? "-" : Math.round(row.bpfNsPerSample).toLocaleString("en-US"),
      row.firstSampleMs === null ? "n/a" : row.firstSampleMs.toFixed(0),
      row.workloadSamples === null ? "-" : String(row.workloadSamples),
      row.completeShare === null ? "-" : `${(row.completeShare * 100).toFixed(1)}%`,
      cell(row.otherCpuSeconds, 1),
    ]
  );
  // Rows of tools that did not run hold one long message: align only the full rows.
  const full = [header, ...lines.filter((line) => line.length === header.length)];
  const aligned = alignColumns(full).split("\n");
  let next = 1;
  return [
    aligned[0]!,
    ...lines.map((line) => line.length === header.length ? aligned[next++]! : line.join("  ")),
  ]
    .join("\n");
}

/** The ratios table. */
export function formatRatios(rows: BenchRow[]): string {
  const x = (value: number | null) => value === null ? "-" : `${value.toFixed(2)}x`;
  return alignColumns([
    ["tool / omniprof", "CPU", "max RSS", "BPF ns/sample", "first sample"],
    ...ratios(rows).map((
      row,
    ) => [row.tool, x(row.cpu), x(row.maxRss), x(row.bpfNsPerSample), x(row.firstSample)]),
  ]);
}

/** Every round's CPU seconds per tool, in the order they ran. */
export function formatRounds(rows: BenchRow[]): string {
  const ran = rows.filter((row) => row.cpuSecondsByRound !== undefined);
  const rounds = Math.max(0, ...ran.map((row) => row.cpuSecondsByRound!.length));
  return alignColumns([
    ["CPU s by round", ...Array.from({ length: rounds }, (_, i) => String(i + 1)), "median"],
    ...ran.map((row) => [
      row.tool,
      ...row.cpuSecondsByRound!.map((cpu) => cell(cpu, 2)),
      row.status === "ok" ? cell(row.cpuSeconds, 2) : row.status,
    ]),
  ]);
}

/** The targets table. */
export function formatTargets(targets: TargetResult[]): string {
  return alignColumns([
    ["target", "measured", "result"],
    ...targets.map((target) => [target.target, target.value, target.verdict]),
  ]);
}

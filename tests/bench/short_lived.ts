/**
 * `deno task bench --workload build|storm`: omniprof next to perf on workloads made of short-lived
 * processes, where a profiler has to learn about each process (its mappings, its unwind tables) in time to
 * name and unwind the few samples it gets.
 *
 * - build: a generated C project (tests/bench/c_project.ts, 44 modules) built with `make -j2` from a clean
 *   tree; the samples judged are cc1's (the compiler proper, a fraction of a second per file).
 * - storm: bash starting `/bin/true` in a loop for the duration; the samples judged are `true`'s.
 *
 * Each tool starts the workload itself, as a user types it: `omniprof record -F HZ -- CMD`,
 * `perf record -F HZ -g -- CMD` and `perf record -F HZ --call-graph dwarf -- CMD` (each followed by
 * `perf script`). CMD runs under an inner `/usr/bin/time`, so the profiler's own CPU is the outer
 * `/usr/bin/time`'s user + system (the profiler and everything it waited for) less the inner one's (the
 * workload), plus `perf script` for perf. Process starts: the build's are counted before it runs
 * (tests/bench/process_starts.ts), the storm's by the loop itself; both include the inner
 * `/usr/bin/time` and the shell or make at the top.
 *
 * @example
 * ```ts ignore
 * import { runShortLived } from "./short_lived.ts";
 * const report = await runShortLived({ workload: "build", frequencyHz: 499, durationSeconds: 10,
 *   tools: ["omniprof", "perf"], dir: "/tmp/x" });
 * ```
 *
 * @module
 */
import { DENO_RUN_ENV, omniprofArgs, REPO_ROOT } from "../helpers.ts";
import { INSTALL_ALL, runs, type Step, TIME_PROGRAM, timedRun } from "./peers.ts";
import { parseTimeOutput, type ResourceUsage, TIME_FORMAT } from "./peer_output.ts";
import { writeCProject } from "./c_project.ts";
import { buildProcessStarts } from "./process_starts.ts";
import { alignColumns } from "./results.ts";
import {
  parseFoldedSamples,
  parsePerfScriptSamples,
  type Sample,
  type UserStackFigures,
  userStackFigures,
} from "./user_stacks.ts";

/** The workloads of short-lived processes. */
export type ShortLivedWorkloadName = "build" | "storm";

/** The tools compared on them. */
export const SHORT_LIVED_TOOLS = ["omniprof", "perf", "perf-a", "perf-dwarf"] as const;
export type ShortLivedToolKey = (typeof SHORT_LIVED_TOOLS)[number];

/** What {@linkcode runShortLived} needs. */
export interface ShortLivedOptions {
  workload: ShortLivedWorkloadName;
  frequencyHz: number;
  /** The storm's length; the build takes as long as it takes. */
  durationSeconds: number;
  tools: readonly ShortLivedToolKey[];
  /** A private directory, removed by the caller. */
  dir: string;
  onSpawn?: (pid: number) => void;
}

/** One tool's figures on the workload. */
export interface ShortLivedRow {
  tool: ShortLivedToolKey;
  label: string;
  status: "ok" | "not installed" | "failed";
  reason: string | null;
  /** The judged thread name's samples and how their user stacks look (null unless ok). */
  figures: UserStackFigures | null;
  /** Every sample of the profile (the workload's process tree, all thread names). */
  allSamples: number | null;
  /** allSamples / (the workload's CPU seconds x HZ): how much of the workload's CPU time was sampled. */
  sampledShare: number | null;
  /** The profiler's CPU: recording (outer less workload) plus post-processing, seconds. */
  cpuSeconds: number | null;
  postCpuSeconds: number | null;
  /** Largest peak RSS of the profiler's processes (the recording's includes the workload's processes). */
  maxRssMb: number | null;
  starts: number | null;
  /** Profiler CPU ms per 1,000 process starts of the workload. */
  cpuMsPerThousandStarts: number | null;
  workloadCpuSeconds: number | null;
  workloadElapsedSeconds: number | null;
  notes: string[];
}

/** The report of one run: the workload, each tool's row, and the targets. */
export interface ShortLivedReport {
  workload: ShortLivedWorkloadName;
  comm: string;
  description: string;
  rows: ShortLivedRow[];
  targets: ShortLivedTarget[];
}

/** One target of the issue, judged on this run. */
export interface ShortLivedTarget {
  target: string;
  value: string;
  verdict: "PASS" | "FAIL" | "n/a";
}

interface Workload {
  comm: string;
  description: string;
  /** Makes the next run start from the same state and returns the command to profile. */
  prepare(run: string): Promise<string[]>;
  /** Process starts of the run just done, the inner /usr/bin/time included. */
  starts(run: string): number;
}

async function check(program: string, args: string[], cwd?: string): Promise<void> {
  const output = await new Deno.Command(program, {
    args,
    cwd,
    stdout: "null",
    stderr: "piped",
    stdin: "null",
  })
    .output();
  if (!output.success) {
    throw new Error(`${program} ${args.join(" ")}: ${new TextDecoder().decode(output.stderr).slice(-300)}`);
  }
}

async function buildWorkload(dir: string): Promise<Workload> {
  const project = `${dir}/project`;
  Deno.mkdirSync(project);
  const written = writeCProject(project);
  const { starts, commands } = await buildProcessStarts(project);
  // One build first: the compiler's files in the page cache for every tool alike; then its CPU as reference.
  const reference = `${dir}/reference-build.time`;
  await check(TIME_PROGRAM, ["-f", TIME_FORMAT, "-o", reference, "make", "-j2"], project);
  const usage = parseTimeOutput(Deno.readTextFileSync(reference));
  return {
    comm: "cc1",
    description: `make -j2 of a generated C project: ${written.modules} modules + main.c ` +
      `(${Math.round(written.sourceBytes / 1024)} KiB of C, -O2), ${commands} gcc commands, ` +
      `${starts + 1} process starts with the inner /usr/bin/time; unprofiled it took ` +
      `${usage.elapsedSeconds.toFixed(1)} s, ${(usage.userSeconds + usage.systemSeconds).toFixed(1)} CPU s`,
    async prepare() {
      await check("make", ["clean"], project);
      return ["make", "-C", project, "-j2"];
    },
    starts: () => starts + 1,
  };
}

function stormWorkload(dir: string, seconds: number): Workload {
  const countPath = (run: string) => `${dir}/${run}.storm-count`;
  return {
    comm: "true",
    description: `bash starting /bin/true in a loop for ${seconds} s`,
    prepare(run) {
      return Promise.resolve([
        "bash",
        "-c",
        `n=0; while [ $SECONDS -lt ${seconds} ]; do /bin/true; n=$((n+1)); done; echo $n > ${countPath(run)}`,
      ]);
    },
    // Each /bin/true, bash and the inner /usr/bin/time.
    starts: (run) => Number(Deno.readTextFileSync(countPath(run)).trim()) + 2,
  };
}

/** How one tool records a command and what it leaves to read. */
interface Tool {
  key: ShortLivedToolKey;
  label: string;
  missing(): Promise<string | null>;
  record(dir: string, hz: number, command: string[], onSpawn?: (pid: number) => void): Promise<Recorded>;
}

interface Recorded {
  record: Step;
  post: Step | null;
  samples: Sample[];
  notes: string[];
}

const RECORD_TIMEOUT_SECONDS = 1800;
const SCRIPT_TIMEOUT_SECONDS = 3600;

const omniprof: Tool = {
  key: "omniprof",
  label: "omniprof",
  missing: () => Promise.resolve(null),
  async record(dir, hz, command, onSpawn) {
    const output = `${dir}/omniprof.folded`;
    const stats = `${dir}/omniprof.stats.json`;
    const run = await timedRun([
      Deno.execPath(),
      ...omniprofArgs(["record", "-F", String(hz), "-o", output, "--stats", stats, "--", ...command]),
    ], {
      label: "omniprof",
      dir,
      cwd: REPO_ROOT,
      env: DENO_RUN_ENV,
      onSpawn,
      timeoutSeconds: RECORD_TIMEOUT_SECONDS,
    });
    if (run.step.exitCode !== 0) {
      throw new Error(`omniprof record exited with ${run.step.exitCode}: ${run.stderr.trim().slice(-500)}`);
    }
    const counters = JSON.parse(Deno.readTextFileSync(stats)) as Record<string, unknown>;
    return {
      record: run.step,
      post: null,
      samples: parseFoldedSamples(Deno.readTextFileSync(output)),
      notes: [`samples ${counters.samples}, lost ${counters.lost}`],
    };
  },
};

function perfTool(key: Exclude<ShortLivedToolKey, "omniprof">, label: string, callGraph: string[]): Tool {
  return {
    key,
    label,
    async missing() {
      return await runs("perf") ? null : `perf: apt-get install linux-perf (or ${INSTALL_ALL})`;
    },
    async record(dir, hz, command, onSpawn) {
      const data = `${dir}/${key}.data`;
      const text = `${dir}/${key}.txt`;
      const record = await timedRun([
        "perf",
        "record",
        "-F",
        String(hz),
        ...callGraph,
        "-o",
        data,
        "--",
        ...command,
      ], {
        label: `${key}-record`,
        dir,
        onSpawn,
        timeoutSeconds: RECORD_TIMEOUT_SECONDS,
      });
      if (record.step.exitCode !== 0) {
        throw new Error(
          `perf record exited with ${record.step.exitCode}: ${record.stderr.trim().slice(-500)}`,
        );
      }
      const script = await timedRun(["perf", "script", "-F", "comm,pid,tid,time,ip,sym,dso", "-i", data], {
        label: `${key}-script`,
        dir,
        stdoutPath: text,
        onSpawn,
        timeoutSeconds: SCRIPT_TIMEOUT_SECONDS,
      });
      if (script.step.exitCode !== 0) {
        throw new Error(
          `perf script exited with ${script.step.exitCode}: ${script.stderr.trim().slice(-500)}`,
        );
      }
      const samples = parsePerfScriptSamples(Deno.readTextFileSync(text));
      const bytes = Deno.statSync(data).size;
      // perf.data can be large (DWARF mode copies 8 KiB of stack per sample): gone before the next tool.
      Deno.removeSync(data);
      Deno.removeSync(text);
      return {
        record: record.step,
        post: script.step,
        samples,
        notes: [`${samples.length} samples, perf.data ${(bytes / 1048576).toFixed(1)} MB`],
      };
    },
  };
}

const TOOLS: Record<ShortLivedToolKey, Tool> = {
  omniprof,
  perf: perfTool("perf", "perf -g", ["-g"]),
  // System-wide: each CPU's event samples every process at the rate asked. Following the command instead,
  // perf hands each child its parent's sampling period, tuned for the long-lived shell, and a storm of
  // processes that live 1 ms is barely sampled at all.
  "perf-a": perfTool("perf-a", "perf -a -g", ["-a", "-g"]),
  "perf-dwarf": perfTool("perf-dwarf", "perf --call-graph dwarf", ["--call-graph", "dwarf"]),
};

const cpu = (usage: ResourceUsage) => usage.userSeconds + usage.systemSeconds;

function failedRow(tool: Tool, status: "not installed" | "failed", reason: string): ShortLivedRow {
  return {
    tool: tool.key,
    label: tool.label,
    status,
    reason,
    figures: null,
    allSamples: null,
    sampledShare: null,
    cpuSeconds: null,
    postCpuSeconds: null,
    maxRssMb: null,
    starts: null,
    cpuMsPerThousandStarts: null,
    workloadCpuSeconds: null,
    workloadElapsedSeconds: null,
    notes: [],
  };
}

async function measure(tool: Tool, workload: Workload, options: ShortLivedOptions): Promise<ShortLivedRow> {
  const dir = `${options.dir}/${tool.key}`;
  Deno.mkdirSync(dir);
  const command = await workload.prepare(tool.key);
  const innerTime = `${dir}/workload.time`;
  const recorded = await tool.record(
    dir,
    options.frequencyHz,
    [TIME_PROGRAM, "-f", TIME_FORMAT, "-o", innerTime, ...command],
    options.onSpawn,
  );
  const inner = parseTimeOutput(Deno.readTextFileSync(innerTime));
  const recordCpu = cpu(recorded.record.usage) - cpu(inner);
  const postCpu = recorded.post === null ? null : cpu(recorded.post.usage);
  const cpuSeconds = recordCpu + (postCpu ?? 0);
  const starts = workload.starts(tool.key);
  const figures = userStackFigures(recorded.samples, workload.comm);
  const allSamples = recorded.samples.reduce((sum, sample) => sum + sample.count, 0);
  const expected = cpu(inner) * options.frequencyHz;
  return {
    tool: tool.key,
    label: tool.label,
    status: "ok",
    reason: null,
    figures,
    allSamples,
    sampledShare: expected > 0 ? allSamples / expected : null,
    cpuSeconds,
    postCpuSeconds: postCpu,
    maxRssMb: Math.max(recorded.record.usage.maxRssKb, recorded.post?.usage.maxRssKb ?? 0) / 1024,
    starts,
    cpuMsPerThousandStarts: starts > 0 ? cpuSeconds * 1e6 / starts : null,
    workloadCpuSeconds: cpu(inner),
    workloadElapsedSeconds: inner.elapsedSeconds,
    notes: [
      ...recorded.notes,
      `recording ${recordCpu.toFixed(2)} CPU s (outer ${cpu(recorded.record.usage).toFixed(2)} less the ` +
      `workload's ${cpu(inner).toFixed(2)})`,
      `${workload.comm}: ${figures.noUserFrame} samples without a user frame, ` +
      `${figures.leafInKnownFile - figures.namedLeaf} with the leaf's file but no name`,
    ],
  };
}

const percent = (part: number, whole: number) => whole > 0 ? part / whole * 100 : null;

/** The targets on this run: omniprof's shares, and its CPU per 1,000 starts against perf -g's. */
export function shortLivedTargets(
  workload: ShortLivedWorkloadName,
  comm: string,
  rows: readonly ShortLivedRow[],
): ShortLivedTarget[] {
  const own = rows.find((row) => row.tool === "omniprof" && row.status === "ok");
  const share = (row: ShortLivedRow | undefined, pick: (figures: UserStackFigures) => number) =>
    row?.figures == null ? null : percent(pick(row.figures), row.figures.samples);
  const atLeast = (target: string, value: number | null, threshold: number): ShortLivedTarget => ({
    target,
    value: value === null ? "-" : `${value.toFixed(1)}%`,
    verdict: value === null ? "n/a" : value >= threshold ? "PASS" : "FAIL",
  });
  const targets = [
    atLeast(`omniprof: ${comm} samples with a named user leaf >= 90%`, share(own, (f) => f.namedLeaf), 90),
  ];
  if (workload === "build") {
    targets.push(atLeast(`omniprof: ${comm} samples complete >= 80%`, share(own, (f) => f.complete), 80));
  }
  const ownCost = own?.cpuMsPerThousandStarts ?? null;
  if (workload === "storm") {
    for (const [key, label] of [["perf", "perf -g"], ["perf-a", "perf -a -g"]] as const) {
      const peer = rows.find((row) => row.tool === key && row.status === "ok");
      const perfCost = peer?.cpuMsPerThousandStarts ?? null;
      targets.push({
        target: `omniprof: CPU per 1,000 process starts below ${label}'s (record + script)`,
        value: ownCost === null || perfCost === null
          ? "-"
          : `${ownCost.toFixed(0)} vs ${perfCost.toFixed(0)} ms`,
        verdict: ownCost === null || perfCost === null ? "n/a" : ownCost < perfCost ? "PASS" : "FAIL",
      });
    }
  }
  return targets;
}

/** The table, the ratios against omniprof, the targets and one details line per tool. */
export function formatShortLivedReport(report: ShortLivedReport): string {
  const { comm, rows } = report;
  const header = [
    "tool",
    "all samples",
    "of CPU x HZ",
    `${comm} samples`,
    "named leaf",
    "leaf file known",
    "complete",
    "profiler CPU s",
    "post-proc CPU s",
    "max RSS MB",
    "process starts",
    "CPU ms / 1,000 starts",
    `${report.workload} CPU s`,
    `${report.workload} wall s`,
  ];
  const share = (part: number, whole: number) => {
    const value = percent(part, whole);
    return value === null ? "-" : `${value.toFixed(1)}%`;
  };
  const fixed = (value: number | null, digits: number) => value === null ? "-" : value.toFixed(digits);
  const lines = rows.map((row) => {
    if (row.status !== "ok" || row.figures === null) return [row.label, `${row.status}: ${row.reason}`];
    const f = row.figures;
    return [
      row.label,
      String(row.allSamples ?? "-"),
      row.sampledShare === null ? "-" : `${(row.sampledShare * 100).toFixed(0)}%`,
      String(f.samples),
      share(f.namedLeaf, f.samples),
      share(f.leafInKnownFile, f.samples),
      share(f.complete, f.samples),
      fixed(row.cpuSeconds, 2),
      fixed(row.postCpuSeconds, 2),
      fixed(row.maxRssMb, 0),
      String(row.starts ?? "-"),
      fixed(row.cpuMsPerThousandStarts, 0),
      fixed(row.workloadCpuSeconds, 1),
      fixed(row.workloadElapsedSeconds, 1),
    ];
  });
  const own = rows.find((row) => row.tool === "omniprof" && row.status === "ok");
  const ratioLines = rows.filter((row) => row !== own && row.status === "ok" && own !== undefined).map(
    (row) => {
      const ratio = (a: number | null, b: number | null) =>
        a === null || b === null || b === 0 ? "-" : `${(a / b).toFixed(2)}x`;
      return `${row.label} / omniprof: profiler CPU ${
        ratio(row.cpuSeconds, own!.cpuSeconds)
      }, CPU per 1,000 ` +
        `starts ${ratio(row.cpuMsPerThousandStarts, own!.cpuMsPerThousandStarts)}`;
    },
  );
  const targetLines = report.targets.map((target) =>
    `${target.verdict.padEnd(4)} ${target.target}: ${target.value}`
  );
  const details = rows.filter((row) => row.status === "ok").map((row) =>
    `${row.label}: ${row.notes.join("; ")}`
  );
  return [
    `workload: ${report.description}`,
    "",
    alignColumns([header, ...lines]),
    "",
    ...ratioLines,
    ...(ratioLines.length > 0 ? [""] : []),
    "targets (issue: short-lived processes, every sample named and unwound):",
    ...targetLines,
    "",
    ...details,
  ].join("\n");
}

/** Runs every tool of `options.tools` on the workload, one after the other, and reports. */
export async function runShortLived(options: ShortLivedOptions): Promise<ShortLivedReport> {
  const tools = options.tools.map((key) => TOOLS[key]);
  const missing = new Map<ShortLivedToolKey, string>();
  for (const tool of tools) {
    const reason = await tool.missing();
    if (reason !== null) {
      missing.set(tool.key, reason);
      console.log(`not installed: ${reason}`);
    }
  }
  if (options.workload === "build") console.log("generating the project and building it once, unprofiled...");
  const workload = options.workload === "build"
    ? await buildWorkload(options.dir)
    : stormWorkload(options.dir, options.durationSeconds);
  console.log(`workload: ${workload.description}`);
  const rows: ShortLivedRow[] = [];
  for (const tool of tools) {
    const reason = missing.get(tool.key);
    if (reason !== undefined) {
      rows.push(failedRow(tool, "not installed", reason));
      continue;
    }
    console.log(`${tool.label}: running...`);
    try {
      rows.push(await measure(tool, workload, options));
    } catch (error) {
      rows.push(
        failedRow(
          tool,
          "failed",
          (error instanceof Error ? error.message : String(error)).replace(/\s+/g, " "),
        ),
      );
    }
  }
  return {
    workload: options.workload,
    comm: workload.comm,
    description: workload.description,
    rows,
    targets: shortLivedTargets(options.workload, workload.comm, rows),
  };
}

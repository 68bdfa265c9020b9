/**
 * `deno task bench`: omniprof next to perf, bpftrace and bcc on the same workload, in one run.
 *
 * For each tool in turn: one busy copy of a known-chain workload (main -> a -> b -> c) per CPU, the tool
 * sampling every CPU at the same frequency for the same time, and then: the tool's own CPU time and peak
 * RSS, its BPF run time per sample, the time to its first sample, and the share of the workload's
 * samples that carry the whole chain. Prints one table, the ratios against omniprof and the issue's
 * targets with PASS/FAIL; `--json FILE` also writes everything as JSON. tests/bench/README.md says how
 * each column is measured. `--workload build|storm` (short_lived.ts) and `--workload offcpu`
 * (off_cpu.ts: off-CPU recording next to bcc's offcputime, perf and bpftrace, and the workload's slowdown
 * under each) replace that run with their own.
 *
 *   deno task bench [--json FILE] [--duration SECONDS] [--frequency HZ] [--tools omniprof,perf,...]
 *
 * Exit code: 0 when every target that could be judged passed, 1 when one failed or omniprof did not run,
 * 2 when the benchmark cannot run here.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { hasTool } from "../../lib/testing/commands.ts";
import { DENO_RUN_ENV, omniprofArgs, REPO_ROOT } from "../helpers.ts";
import { onlineCpus } from "../../lib/sys/cpus.ts";
import { statFields } from "../../lib/process/proc_stat.ts";
import { enableBpfStats } from "./bpf_programs.ts";
import { processCpuSeconds, systemCpu } from "./system_cpu.ts";
import { type Peer, PEERS, signalTree, timeMissing } from "./peers.ts";
import {
  alignColumns,
  type BenchRow,
  evaluateTargets,
  formatRatios,
  formatRounds,
  formatTable,
  formatTargets,
  medianRound,
  missingRow,
  oneLine,
  ratios,
  resultRow,
} from "./results.ts";
import { formatUnwindTableReport, type UnwindTableReport, unwindTableReport } from "./unwind_tables.ts";
import {
  formatShortLivedReport,
  runShortLived,
  SHORT_LIVED_TOOLS,
  type ShortLivedToolKey,
  type ShortLivedWorkloadName,
} from "./short_lived.ts";
import { formatOffCpuReport, OFF_CPU_TOOLS, type OffCpuToolKey, runOffCpu } from "./off_cpu.ts";

const USAGE = `Usage: deno task bench [--json FILE] [--duration SECONDS] [--frequency HZ] [--tools LIST]
                       [--rounds N] [--workload chain|deep|python|node|java|build|storm|offcpu]
                       [--off-cpu-min US] [--no-tables] [--no-python]

Runs omniprof, perf -g, bpftrace and bcc's profile one after the other on the same workload (one busy
process per CPU) and compares their cost and their stacks. Needs root.

Each tool runs --rounds times, the rounds interleaved (omniprof, perf, bpftrace, bcc, omniprof, ...) so
that a noisy stretch of a shared machine falls on every tool alike; the table shows each tool's round
of median CPU time, and every round's CPU is listed under it.

  --json FILE          also write the results as JSON
  --duration SECONDS   seconds each tool samples (whole seconds, default 10)
  --frequency HZ       samples per second per CPU (default 99)
  --rounds N           runs of each tool, interleaved (default 3)
  --tools LIST         comma-separated subset of: ${PEERS.map((peer) => peer.key).join(",")}
  --workload NAME      chain (main;a;b;c, default) or deep (a 30-frame native stack), both built with
                       frame pointers so that every tool can unwind them; or python (a 20-frame Python
                       stack run by python3), node (a 20-frame JavaScript stack run by node without
                       flags) or java (a 19-frame Java stack run by java without flags), which only
                       omniprof names; or one of short-lived
                       processes, where each tool starts the workload itself and the table gives the
                       share of samples with a named leaf and a complete stack, and the profiler's CPU
                       per 1,000 process starts: build (make -j2 of a generated 44-file C project,
                       cc1's samples) or storm (bash starting /bin/true for --duration seconds, true's
                       samples). These two run omniprof, perf (-g), perf-a (-a -g) and perf-dwarf (--call-graph dwarf)
                       once each, at 499 Hz unless --frequency says otherwise; or offcpu: off-CPU
                       recording of a process that switches context tens of thousands of times a second
                       (two threads passing a byte through pipes), where each tool follows its PID for
                       --duration: omniprof record --off-cpu, bcc's offcputime, perf record --off-cpu and a
                       bpftrace script, against rounds with no tool; the table gives each tool's CPU and
                       the workload's slowdown (--tools picks from ${OFF_CPU_TOOLS.join(",")})
  --off-cpu-min US     with --workload offcpu: waits shorter than US microseconds are left out, by every
                       tool alike (default 1, omniprof's and bcc's default)
  --no-python          skip the section that runs omniprof on a 30-frame native, a 20-frame Python, a
                       20-frame JavaScript and a 19-frame Java stack (BPF ns per sample and host CPU per
                       1,000 samples, side by side)
  --no-tables          skip the unwind-table section (.eh_frame extraction vs readelf -wF, BPF memory
                       per executable)
`;

/**
 * The workloads: a file of tests/workloads (C, or a Python or JavaScript script run by the system's python3
 * or node) and the chain every one of its samples holds.
 */
const WORKLOADS = {
  chain: { source: "chain.c", comm: "chain_bench", chain: ["main", "a", "b", "c"] },
  deep: { source: "deep.c", comm: "deep_bench", chain: ["main", ...Array(28).fill("level"), "burn"] },
  python: {
    source: "deep.py",
    comm: "python_bench",
    chain: ["<module>", "main", ...Array(17).fill("level"), "burn"],
  },
  node: {
    source: "deep.js",
    comm: "node_bench",
    chain: ["main", ...Array(17).fill("level"), "burn"],
  },
  java: {
    source: "java/Deep.java",
    comm: "java_bench",
    chain: ["Deep.main", ...Array(17).fill("Deep.level"), "Deep.burn"],
  },
} as const;

type Workload = (typeof WORKLOADS)[keyof typeof WORKLOADS];

interface Options {
  workload: Workload;
  /** The short-lived workload, which replaces the whole run, or null. */
  shortLived: ShortLivedWorkloadName | null;
  shortLivedTools: ShortLivedToolKey[];
  /** --workload offcpu, which replaces the whole run. */
  offCpu: boolean;
  offCpuTools: OffCpuToolKey[];
  offCpuMinMicroseconds: number;
  tables: boolean;
  /** Also run omniprof on a deep native and a deep Python stack, side by side. */
  python: boolean;
  jsonPath: string | null;
  durationSeconds: number;
  frequencyHz: number;
  rounds: number;
  peers: Peer[];
}

function parseOptions(argv: string[]): Options | string {
  let values;
  try {
    values = parseArgs({
      args: argv,
      strict: true,
      options: {
        json: { type: "string" },
        duration: { type: "string" },
        frequency: { type: "string" },
        rounds: { type: "string" },
        tools: { type: "string" },
        workload: { type: "string" },
        "off-cpu-min": { type: "string" },
        "no-tables": { type: "boolean" },
        "no-python": { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    }).values;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
  if (values.help) return "";
  const durationSeconds = Number(values.duration ?? "10");
  if (!Number.isInteger(durationSeconds) || durationSeconds < 1 || durationSeconds > 3600) {
    return `--duration ${values.duration}: expected whole seconds from 1 to 3600`;
  }
  const workload = values.workload ?? "chain";
  const shortLived = workload === "build" || workload === "storm" ? workload : null;
  const offCpu = workload === "offcpu";
  if (offCpu && values.frequency !== undefined) {
    return "--frequency: not with --workload offcpu (it records switches, not samples)";
  }
  if (!offCpu && values["off-cpu-min"] !== undefined) return "--off-cpu-min: only with --workload offcpu";
  const offCpuMinMicroseconds = Number(values["off-cpu-min"] ?? "1");
  if (!Number.isInteger(offCpuMinMicroseconds) || offCpuMinMicroseconds < 1 || offCpuMinMicroseconds > 1e9) {
    return `--off-cpu-min ${values["off-cpu-min"]}: expected whole microseconds from 1`;
  }
  const frequencyHz = Number(values.frequency ?? (shortLived !== null ? "499" : "99"));
  if (!Number.isInteger(frequencyHz) || frequencyHz < 1 || frequencyHz > 10000) {
    return `--frequency ${values.frequency}: expected a whole number of Hz from 1 to 10000`;
  }
  const rounds = Number(values.rounds ?? "3");
  if (!Number.isInteger(rounds) || rounds < 1 || rounds > 100) {
    return `--rounds ${values.rounds}: expected a whole number from 1 to 100`;
  }
  const known: readonly string[] = shortLived !== null
    ? SHORT_LIVED_TOOLS
    : offCpu
    ? OFF_CPU_TOOLS
    : PEERS.map((peer) => peer.key);
  const keys = values.tools === undefined ? [...known] : values.tools.split(",");
  const unknown = keys.filter((key) => !known.includes(key));
  if (unknown.length > 0) return `--tools: unknown ${unknown.join(", ")} (use ${known.join(",")})`;
  if (shortLived !== null && values.rounds !== undefined) return `--rounds: not with --workload ${workload}`;
  if (shortLived === null && !offCpu && !Object.hasOwn(WORKLOADS, workload)) {
    return `--workload ${workload}: use chain, deep, python, node, java, build, storm or offcpu`;
  }
  return {
    workload: shortLived === null && !offCpu
      ? WORKLOADS[workload as keyof typeof WORKLOADS]
      : WORKLOADS.chain,
    shortLived,
    shortLivedTools: SHORT_LIVED_TOOLS.filter((key) => keys.includes(key)),
    offCpu,
    offCpuTools: OFF_CPU_TOOLS.filter((key) => keys.includes(key)),
    offCpuMinMicroseconds,
    tables: !values["no-tables"],
    python: !values["no-python"],
    jsonPath: values.json ?? null,
    durationSeconds,
    frequencyHz,
    rounds,
    peers: PEERS.filter((peer) => keys.includes(peer.key)),
  };
}

/** Everything the benchmark started or changed, undone on any exit, including Ctrl-C. */
class Cleanup {
  readonly spawned = new Set<number>();
  restoreStats: (() => void) | null = null;
  dir: string | null = null;

  run(): void {
    // Only processes still our children: a pid that was reaped may belong to someone else by now.
    for (const pid of this.spawned) if (parentOf(pid) === Deno.pid) signalTree(pid, "SIGKILL");
    this.spawned.clear();
    try {
      this.restoreStats?.();
    } catch (error) {
      console.error(`bench: could not restore kernel.bpf_stats_enabled: ${error}`);
    }
    if (this.dir !== null) {
      try {
        Deno.removeSync(this.dir, { recursive: true });
      } catch {
        // already gone
      }
      this.dir = null;
    }
  }
}

function parentOf(pid: number): number | null {
  try {
    return Number(statFields(Deno.readTextFileSync(`/proc/${pid}/stat`))?.[1]);
  } catch {
    return null;
  }
}

async function firstLine(program: string, args: string[]): Promise<string> {
  try {
    const output = await new Deno.Command(program, { args, stdout: "piped", stderr: "null" }).output();
    return new TextDecoder().decode(output.stdout).split("\n")[0]!.trim();
  } catch {
    return "";
  }
}

async function compileWorkload(dir: string, workload: Options["workload"]): Promise<string> {
  const path = `${dir}/${workload.comm}`;
  if (workload.source.endsWith(".java")) {
    // A script that runs java through a link named as the workload: the thread name then says which
    // threads are the workload's, as for the others (the JVM names its own threads).
    const result = await new Deno.Command("javac", {
      args: ["-d", dir, `${REPO_ROOT}tests/workloads/${workload.source}`],
      stderr: "piped",
    }).output();
    if (!result.success) throw new Error(`javac: ${new TextDecoder().decode(result.stderr)}`);
    const java = hasTool("java") ? Deno.realPathSync(javaOnPath()) : null;
    if (java === null) throw new Error("java is not on PATH");
    const link = `${dir}/bin/${workload.comm}`;
    Deno.mkdirSync(`${dir}/bin`, { recursive: true });
    // The same workload may be made twice in one run (the main table's, then the interpreter section's).
    try {
      Deno.removeSync(link);
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    }
    Deno.symlinkSync(java, link);
    const main = workload.source.slice(workload.source.lastIndexOf("/") + 1, -".java".length);
    Deno.writeTextFileSync(path, `#!/bin/sh\nexec "${link}" -cp "${dir}" ${main} "$@"\n`);
    Deno.chmodSync(path, 0o755);
    return path;
  }
  if (workload.source.endsWith(".py") || workload.source.endsWith(".js")) {
    // Run through its #! line, the executable's name becomes the thread name, as for the C workloads.
    Deno.copyFileSync(`${REPO_ROOT}tests/workloads/${workload.source}`, path);
    Deno.chmodSync(path, 0o755);
    return path;
  }
  const output = await new Deno.Command("gcc", {
    args: ["-O2", "-fno-omit-frame-pointer", `${REPO_ROOT}tests/workloads/${workload.source}`, "-o", path],
    stderr: "piped",
  }).output();
  if (!output.success) throw new Error(`gcc: ${new TextDecoder().decode(output.stderr)}`);
  return path;
}

/** The path of `java` on PATH (hasTool("java") said there is one). */
function javaOnPath(): string {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    try {
      if (Deno.statSync(`${dir}/java`).isFile) return `${dir}/java`;
    } catch {
      // not here
    }
  }
  throw new Error("java is not on PATH");
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** omniprof's row on one workload of the native-versus-Python section. */
interface InterpreterRow {
  workload: string;
  row: BenchRow;
}

/** The native-versus-Python section: what naming Python frames costs in BPF and on the host. */
function formatInterpreterRows(rows: readonly InterpreterRow[]): string {
  const header = ["omniprof on", "samples", "complete", "BPF ns/sample", "CPU s", "CPU ms / 1,000 samples"];
  const lines = rows.map(({ workload, row }) => {
    const samples = row.workloadSamples ?? 0;
    return [
      workload === WORKLOADS.python.source
        ? `${workload} (20 Python frames under python3's native ones)`
        : workload === WORKLOADS.node.source
        ? `${workload} (20 JavaScript frames under node's native ones)`
        : workload === WORKLOADS.java.source
        ? `${workload} (19 Java frames under the JVM's native ones)`
        : `${workload} (30 native frames)`,
      String(samples),
      row.completeShare === null ? "-" : `${(row.completeShare * 100).toFixed(1)}%`,
      row.bpfNsPerSample === null ? "-" : Math.round(row.bpfNsPerSample).toLocaleString("en-US"),
      row.cpuSeconds === null ? "-" : row.cpuSeconds.toFixed(2),
      row.cpuSeconds === null || samples === 0 ? "-" : (row.cpuSeconds / samples * 1e6).toFixed(0),
    ];
  });
  return `${alignColumns([header, ...lines])}
(CPU includes the same fixed start-up for each; the differences are what Python, JavaScript and Java frames
cost)`;
}

/**
 * Runs `peer` on `cpus` busy copies of the workload at `path` and measures it; the workload is stopped
 * afterwards, and the kernel gets a second to free the tool's programs and perf events.
 */
async function measure(
  peer: Peer,
  path: string,
  spec: Workload,
  options: Options,
  cleanup: Cleanup,
  cpus: number,
): Promise<BenchRow> {
  const before = systemCpu();
  const workloads = Array.from({ length: cpus }, () => {
    const child = new Deno.Command(path, {
      args: ["3600"],
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    cleanup.spawned.add(child.pid);
    return child;
  });
  await sleep(300);
  console.log(`${peer.label}: running...`);
  let row: BenchRow;
  try {
    const result = await peer.run({
      dir: cleanup.dir!,
      durationSeconds: options.durationSeconds,
      frequencyHz: options.frequencyHz,
      onSpawn: (pid) => cleanup.spawned.add(pid),
    });
    row = resultRow(peer, result, spec.comm, [...spec.chain]);
    const after = systemCpu();
    const workloadCpu = workloads.reduce((sum, child) => sum + (processCpuSeconds(child.pid) ?? 0), 0);
    row.otherCpuSeconds = after.busySeconds - before.busySeconds - workloadCpu - (row.cpuSeconds ?? 0);
    row.stealSeconds = after.stealSeconds - before.stealSeconds;
  } catch (error) {
    row = missingRow(peer, "failed", oneLine(error instanceof Error ? error.message : String(error)));
  } finally {
    for (const child of workloads) {
      try {
        child.kill("SIGKILL");
      } catch {
        // already gone
      }
      await child.status;
      cleanup.spawned.delete(child.pid);
    }
  }
  // Let the kernel free the tool's programs and perf events before the next one starts.
  await sleep(1000);
  return row;
}

async function main(argv: string[]): Promise<number> {
  const options = parseOptions(argv);
  if (typeof options === "string") {
    if (options) console.error(`bench: ${options}\n`);
    console.error(USAGE);
    return options ? 2 : 0;
  }
  if (Deno.uid() !== 0) {
    console.error(
      "bench: needs root (the tools load BPF programs and the benchmark sets kernel.bpf_stats_enabled)",
    );
    return 2;
  }
  const noTime = await timeMissing();
  if (noTime !== null) {
    console.error(`bench: not installed: ${noTime} (it measures each tool's CPU time and RSS)`);
    return 2;
  }
  if (options.shortLived !== null) return await shortLivedBench(options);
  if (options.offCpu) return await offCpuBench(options);
  const missing = new Map<Peer["key"], string>();
  for (const peer of options.peers) {
    const reason = await peer.missing();
    if (reason !== null) {
      missing.set(peer.key, reason);
      console.log(`not installed: ${reason}`);
    }
  }
  const cpus = onlineCpus().length;
  const meta = {
    date: new Date().toISOString(),
    kernel: Deno.osRelease(),
    cpus,
    durationSeconds: options.durationSeconds,
    frequencyHz: options.frequencyHz,
    workload: `${cpus} x tests/workloads/${options.workload.source} ` +
      `(${
        options.workload.source.endsWith(".py")
          ? "python3"
          : options.workload.source.endsWith(".js")
          ? "node"
          : options.workload.source.endsWith(".java")
          ? "java"
          : "-O2 -fno-omit-frame-pointer"
      }) as ${options.workload.comm}`,
    versions: {
      deno: Deno.version.deno,
      perf: await firstLine("perf", ["--version"]),
      bpftrace: await firstLine("bpftrace", ["--version"]),
      bcc: await firstLine("dpkg-query", ["-W", "-f", "${Version}", "bpfcc-tools"]),
    },
  };
  console.log(
    `kernel ${meta.kernel}, ${cpus} CPUs, ${options.frequencyHz} Hz for ${options.durationSeconds} s per tool, ` +
      `${options.rounds} round${options.rounds === 1 ? "" : "s"}, workload: ${meta.workload}`,
  );
  console.log(
    `a tool that keeps up records about ${
      cpus * options.frequencyHz * options.durationSeconds
    } workload samples ` +
      `(fewer when other processes take CPU from the workload)`,
  );

  const cleanup = new Cleanup();
  const onSignal = () => {
    cleanup.run();
    console.error("\nbench: interrupted; kernel.bpf_stats_enabled restored, temporary files removed");
    Deno.exit(130);
  };
  const signals: Deno.Signal[] = ["SIGINT", "SIGTERM", "SIGHUP"];
  for (const signal of signals) Deno.addSignalListener(signal, onSignal);

  const rows: BenchRow[] = [];
  const pythonRows: InterpreterRow[] = [];
  try {
    cleanup.dir = Deno.makeTempDirSync({ prefix: "omniprof-bench-" });
    const dir = cleanup.dir;
    const workload = await compileWorkload(dir, options.workload);
    // One short record first, with the flags of the measured ones, so that omniprof's rows measure a
    // run and not Deno's one-time transpile and V8 code caches (V8 keeps code only for the same flags).
    await new Deno.Command(Deno.execPath(), {
      args: omniprofArgs(["record", "-d", "1", "-o", `${dir}/warm-up.folded`]),
      cwd: REPO_ROOT,
      env: DENO_RUN_ENV,
      stdout: "null",
      stderr: "null",
    }).output();
    cleanup.restoreStats = enableBpfStats();

    const installed = options.peers.filter((peer) => !missing.has(peer.key));
    const rounds = new Map<Peer["key"], BenchRow[]>(installed.map((peer) => [peer.key, []]));
    for (let round = 1; round <= options.rounds; round++) {
      if (options.rounds > 1) console.log(`round ${round} of ${options.rounds}`);
      for (const peer of installed) {
        rounds.get(peer.key)!.push(await measure(peer, workload, options.workload, options, cleanup, cpus));
      }
    }
    for (const peer of options.peers) {
      const reason = missing.get(peer.key);
      rows.push(
        reason !== undefined ? missingRow(peer, "not installed", reason) : medianRound(rounds.get(peer.key)!),
      );
    }
    const omniprof = PEERS.find((peer) => peer.key === "omniprof");
    if (options.python && omniprof !== undefined && !missing.has("omniprof")) {
      for (const spec of [WORKLOADS.deep, WORKLOADS.python, WORKLOADS.node, WORKLOADS.java]) {
        if (spec === WORKLOADS.java && !hasTool("java")) {
          console.log("omniprof on java/Deep.java: skipped, no java on PATH");
          continue;
        }
        console.log(`omniprof on ${spec.source}:`);
        const path = await compileWorkload(dir, spec);
        pythonRows.push({
          workload: spec.source,
          row: await measure(omniprof, path, spec, options, cleanup, cpus),
        });
      }
    }
  } finally {
    cleanup.run();
    for (const signal of signals) Deno.removeSignalListener(signal, onSignal);
  }

  const targets = evaluateTargets(rows);
  console.log(`\n${formatTable(rows)}\n\n${formatRatios(rows)}\n\n${formatTargets(targets)}\n`);
  if (options.rounds > 1) console.log(`${formatRounds(rows)}\n`);
  for (const row of rows) {
    if (row.status !== "ok") continue;
    const details = [
      `first sample: ${row.firstSampleSource}`,
      ...(row.bpfPrograms.length > 0
        ? [`BPF programs (run_time_ns/run_cnt): ${row.bpfPrograms.join(", ")}`]
        : []),
      ...row.notes,
      ...(row.stealSeconds !== null
        ? [`hypervisor steal during its window ${row.stealSeconds.toFixed(1)} s`]
        : []),
    ];
    console.log(`${row.tool}: ${details.join("; ")}`);
  }
  if (pythonRows.length > 0) console.log(`\n${formatInterpreterRows(pythonRows)}`);
  if (options.jsonPath !== null) {
    Deno.writeTextFileSync(
      options.jsonPath,
      JSON.stringify({ meta, rows, ratios: ratios(rows), targets, python: pythonRows }, null, 2) + "\n",
    );
    console.log(`wrote ${options.jsonPath}`);
  }
  let tables: UnwindTableReport | null = null;
  if (options.tables) {
    tables = await unwindTableReport();
    console.log(`\n${formatUnwindTableReport(tables)}`);
  }
  if (options.jsonPath !== null && tables !== null) {
    const written = JSON.parse(Deno.readTextFileSync(options.jsonPath));
    Deno.writeTextFileSync(options.jsonPath, JSON.stringify({ ...written, tables }, null, 2) + "\n");
  }
  const own = rows.find((row) => row.key === "omniprof");
  if (own !== undefined && own.status !== "ok") return 1;
  return targets.some((target) => target.verdict === "FAIL") ? 1 : 0;
}

/** `--workload build|storm`: omniprof and perf on short-lived processes, each tool once. */
async function shortLivedBench(options: Options): Promise<number> {
  const workload = options.shortLived!;
  console.log(
    `kernel ${Deno.osRelease()}, ${onlineCpus().length} CPUs, ${options.frequencyHz} Hz, workload ${workload}` +
      (workload === "storm" ? ` for ${options.durationSeconds} s` : ""),
  );
  const cleanup = new Cleanup();
  const onSignal = () => {
    cleanup.run();
    console.error("\nbench: interrupted; temporary files removed");
    Deno.exit(130);
  };
  const signals: Deno.Signal[] = ["SIGINT", "SIGTERM", "SIGHUP"];
  for (const signal of signals) Deno.addSignalListener(signal, onSignal);
  try {
    cleanup.dir = Deno.makeTempDirSync({ prefix: "omniprof-bench-" });
    if (options.shortLivedTools.includes("omniprof")) {
      // As in the main run: omniprof's row measures a run, not Deno's one-time transpile and code caches.
      await new Deno.Command(Deno.execPath(), {
        args: omniprofArgs(["record", "-d", "1", "-o", `${cleanup.dir}/warm-up.folded`]),
        cwd: REPO_ROOT,
        env: DENO_RUN_ENV,
        stdout: "null",
        stderr: "null",
      }).output();
    }
    const report = await runShortLived({
      workload,
      frequencyHz: options.frequencyHz,
      durationSeconds: options.durationSeconds,
      tools: options.shortLivedTools,
      dir: cleanup.dir,
      onSpawn: (pid) => cleanup.spawned.add(pid),
    });
    console.log(`\n${formatShortLivedReport(report)}`);
    if (options.jsonPath !== null) {
      const meta = {
        date: new Date().toISOString(),
        kernel: Deno.osRelease(),
        cpus: onlineCpus().length,
        frequencyHz: options.frequencyHz,
        durationSeconds: workload === "storm" ? options.durationSeconds : null,
        versions: { deno: Deno.version.deno, perf: await firstLine("perf", ["--version"]) },
      };
      Deno.writeTextFileSync(options.jsonPath, JSON.stringify({ meta, ...report }, null, 2) + "\n");
      console.log(`wrote ${options.jsonPath}`);
    }
    const own = report.rows.find((row) => row.tool === "omniprof");
    if (own !== undefined && own.status !== "ok") return 1;
    return report.targets.some((target) => target.verdict === "FAIL") ? 1 : 0;
  } finally {
    cleanup.run();
    for (const signal of signals) Deno.removeSignalListener(signal, onSignal);
  }
}

/**
 * `--workload offcpu`: omniprof's off-CPU recording next to bcc's offcputime, perf --off-cpu and bpftrace,
 * on a process switching context tens of thousands of times a second, against rounds with no tool.
 */
async function offCpuBench(options: Options): Promise<number> {
  const cpus = onlineCpus().length;
  console.log(
    `kernel ${Deno.osRelease()}, ${cpus} CPUs, ${options.durationSeconds} s per tool, ${options.rounds} ` +
      `round${options.rounds === 1 ? "" : "s"}, waits of at least ${options.offCpuMinMicroseconds} us`,
  );
  if (cpus < 2) {
    console.log("one CPU: the tools run on the workload's CPU, so all their CPU shows as slowdown");
  }
  const cleanup = new Cleanup();
  const onSignal = () => {
    cleanup.run();
    console.error("\nbench: interrupted; kernel.bpf_stats_enabled restored, temporary files removed");
    Deno.exit(130);
  };
  const signals: Deno.Signal[] = ["SIGINT", "SIGTERM", "SIGHUP"];
  for (const signal of signals) Deno.addSignalListener(signal, onSignal);
  try {
    cleanup.dir = Deno.makeTempDirSync({ prefix: "omniprof-bench-" });
    cleanup.restoreStats = enableBpfStats();
    const report = await runOffCpu({
      dir: cleanup.dir,
      durationSeconds: options.durationSeconds,
      rounds: options.rounds,
      minMicroseconds: options.offCpuMinMicroseconds,
      tools: options.offCpuTools,
      onSpawn: (pid) => cleanup.spawned.add(pid),
      onExit: (pid) => cleanup.spawned.delete(pid),
    });
    console.log(`\n${formatOffCpuReport(report)}`);
    if (options.jsonPath !== null) {
      const meta = {
        date: new Date().toISOString(),
        kernel: Deno.osRelease(),
        cpus,
        durationSeconds: options.durationSeconds,
        minMicroseconds: options.offCpuMinMicroseconds,
        versions: {
          deno: Deno.version.deno,
          perf: await firstLine("perf", ["--version"]),
          bpftrace: await firstLine("bpftrace", ["--version"]),
          bcc: await firstLine("dpkg-query", ["-W", "-f", "${Version}", "bpfcc-tools"]),
        },
      };
      Deno.writeTextFileSync(options.jsonPath, JSON.stringify({ meta, ...report }, null, 2) + "\n");
      console.log(`wrote ${options.jsonPath}`);
    }
    const own = report.rows.find((row) => row.key === "omniprof");
    if (own !== undefined && own.status !== "ok") return 1;
    return report.targets.some((target) => target.verdict === "FAIL") ? 1 : 0;
  } finally {
    cleanup.run();
    for (const signal of signals) Deno.removeSignalListener(signal, onSignal);
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}

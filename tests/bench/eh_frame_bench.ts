/**
 * Unwind-table extraction throughput: MB of `.eh_frame` (plus `.debug_frame`) per second turned into an
 * unwind table, on libc, libstdc++, the node binary and libjvm.so, next to binutils' `readelf -wF` (which
 * decodes the same rule tables) on the same files. omniprof's time is in-process: open the ELF, read the
 * sections, extract the table. Every file is extracted once first (the first file with a cold JIT; those
 * times are shown too), then the median of several runs per file is taken, as in the profiler, a
 * long-running process that extracts many files. readelf's time is the wall time of the whole process
 * with its output sent to /dev/null, the median of a few runs. The ratio is readelf's time over
 * omniprof's: above 1 means omniprof is faster.
 *
 *   deno run -A tests/bench/eh_frame_bench.ts [--runs N] [--json FILE]
 *
 * `runEhFrameBench()` is what the main benchmark calls.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { ElfFile } from "../../lib/elf/elf_file.ts";
import { extractUnwindTable } from "../../lib/unwind/unwind_table.ts";
import { isFile } from "../../lib/sys/files.ts";

/** One file's measurements. */
export interface EhFrameBenchRow {
  /** What the file is ("libc", "libstdc++", "node", "libjvm"). */
  label: string;
  /** The file measured, or null when none was found. */
  path: string | null;
  status: "ok" | "not installed" | "failed";
  reason: string | null;
  /** Bytes of `.eh_frame` and `.debug_frame`. */
  cfiBytes: number;
  /** Rows in the unwind table. */
  rows: number;
  /** The first extraction of this file in the process (the first file's with a cold JIT), ms. */
  coldMs: number | null;
  /** Median extraction time once every file has been extracted once, ms. */
  extractMs: number | null;
  extractMBps: number | null;
  /** Median wall time of `readelf -wF FILE > /dev/null`, ms; null when readelf is missing. */
  readelfMs: number | null;
  readelfMBps: number | null;
  /** readelfMs / extractMs. */
  ratio: number | null;
}

/** Options of {@linkcode runEhFrameBench}. */
export interface EhFrameBenchOptions {
  /** Timed extraction runs per file (after the warm-up). Default 9. */
  runs?: number;
  /** Timed readelf runs per file. Default 3. */
  readelfRuns?: number;
}

const LIBRARY_DIRS = [
  "/usr/lib/x86_64-linux-gnu",
  "/lib/x86_64-linux-gnu",
  "/usr/lib64",
  "/usr/lib",
  "/lib64",
];

/** The libc this process runs on, from its memory map. */
function findLibc(): string | null {
  try {
    return Deno.readTextFileSync("/proc/self/maps").match(/\s(\/\S*\/libc\.so\.6)$/m)?.[1] ?? null;
  } catch {
    return null;
  }
}

function findLibrary(name: string): string | null {
  return LIBRARY_DIRS.map((dir) => `${dir}/${name}`).find(isFile) ?? null;
}

/** The first `name` on PATH. */
function findOnPath(name: string): string | null {
  const dirs = (Deno.env.get("PATH") ?? "").split(":").filter((d) => d !== "");
  return dirs.map((dir) => `${dir}/${name}`).find(isFile) ?? null;
}

/** A libjvm.so of an installed JDK or JRE (the alphabetically first). */
function findLibjvm(): string | null {
  try {
    const names = [...Deno.readDirSync("/usr/lib/jvm")].map((e) => e.name).sort();
    return names.map((n) => `/usr/lib/jvm/${n}/lib/server/libjvm.so`).find(isFile) ?? null;
  } catch {
    return null;
  }
}

/** The files benchmarked: label and path (null when not installed). */
export function benchFiles(): { label: string; path: string | null }[] {
  const real = (path: string | null) => path === null ? null : Deno.realPathSync(path);
  return [
    { label: "libc", path: real(findLibc()) },
    { label: "libstdc++", path: real(findLibrary("libstdc++.so.6")) },
    { label: "node", path: real(findOnPath("node")) },
    { label: "libjvm", path: real(findLibjvm()) },
  ];
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** One extraction, from opening the file to the table; returns its time and the table's size. */
function extractOnce(path: string): { ms: number; rows: number; cfiBytes: number } {
  const start = performance.now();
  using elf = ElfFile.open(path);
  const table = extractUnwindTable(elf);
  const ms = performance.now() - start;
  const cfiBytes = [".eh_frame", ".debug_frame"].reduce(
    (sum, name) => sum + (elf.section(name)?.size ?? 0),
    0,
  );
  return { ms, rows: table.length, cfiBytes };
}

/** Wall time of one `readelf -wF path` with its output discarded, or null when readelf is missing. */
async function readelfOnce(path: string): Promise<number | null> {
  const start = performance.now();
  try {
    await new Deno.Command("readelf", { args: ["-wF", path], stdout: "null", stderr: "null" }).output();
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
  return performance.now() - start;
}

/**
 * Measures extraction and `readelf -wF` on libc, libstdc++, node and libjvm. A file that is not installed
 * gets a "not installed" row; one whose extraction throws, a "failed" row.
 */
export async function runEhFrameBench(options: EhFrameBenchOptions = {}): Promise<EhFrameBenchRow[]> {
  const runs = options.runs ?? 9;
  const readelfRuns = options.readelfRuns ?? 3;
  const rows: EhFrameBenchRow[] = benchFiles().map(({ label, path }) => ({
    label,
    path,
    status: path === null ? "not installed" : "ok",
    reason: path === null ? `no ${label} found` : null,
    cfiBytes: 0,
    rows: 0,
    coldMs: null,
    extractMs: null,
    extractMBps: null,
    readelfMs: null,
    readelfMBps: null,
    ratio: null,
  }));
  // One pass over every file first: the first extraction of each (the very first one with a cold JIT),
  // and the warm-up of the code for the timed runs.
  for (const row of rows) {
    if (row.path === null) continue;
    try {
      const first = extractOnce(row.path);
      row.coldMs = first.ms;
      row.cfiBytes = first.cfiBytes;
      row.rows = first.rows;
    } catch (error) {
      row.status = "failed";
      row.reason = error instanceof Error ? error.message : String(error);
    }
  }
  for (const row of rows) {
    if (row.path === null || row.status !== "ok") continue;
    const times: number[] = [];
    for (let i = 0; i < runs; i++) times.push(extractOnce(row.path).ms);
    row.extractMs = median(times);
    row.extractMBps = row.cfiBytes / 1e6 / (row.extractMs / 1000);
    const readelfTimes: number[] = [];
    for (let i = 0; i < readelfRuns; i++) {
      const ms = await readelfOnce(row.path);
      if (ms === null) break;
      readelfTimes.push(ms);
    }
    if (readelfTimes.length > 0) {
      row.readelfMs = median(readelfTimes);
      row.readelfMBps = row.cfiBytes / 1e6 / (row.readelfMs / 1000);
      row.ratio = row.readelfMs / row.extractMs;
    }
  }
  return rows;
}

function cell(value: number | null, digits: number): string {
  return value === null ? "-" : value.toFixed(digits);
}

/** The rows as an aligned text table. */
export function formatEhFrameBench(rows: EhFrameBenchRow[]): string {
  const table = [[
    "file",
    ".eh_frame MB",
    "rows",
    "omniprof ms",
    "(first ms)",
    "omniprof MB/s",
    "readelf -wF ms",
    "readelf MB/s",
    "readelf/omniprof",
  ]];
  for (const row of rows) {
    if (row.status !== "ok") {
      table.push([row.label, `${row.status}: ${row.reason ?? ""}`, "", "", "", "", "", "", ""]);
      continue;
    }
    table.push([
      row.label,
      (row.cfiBytes / 1e6).toFixed(2),
      String(row.rows),
      cell(row.extractMs, 1),
      cell(row.coldMs, 1),
      cell(row.extractMBps, 1),
      cell(row.readelfMs, 1),
      cell(row.readelfMBps, 1),
      row.ratio === null ? "-" : `${row.ratio.toFixed(1)}x`,
    ]);
  }
  const widths = table[0]!.map((_, c) => Math.max(...table.map((r) => r[c]!.length)));
  return table.map((r) =>
    r.map((text, c) => c === 0 ? text.padEnd(widths[c]!) : text.padStart(widths[c]!)).join("  ").trimEnd()
  )
    .join("\n");
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: { runs: { type: "string" }, json: { type: "string" } },
  });
  const rows = await runEhFrameBench({ runs: values.runs === undefined ? undefined : Number(values.runs) });
  console.log(formatEhFrameBench(rows));
  if (values.json !== undefined) Deno.writeTextFileSync(values.json, JSON.stringify(rows, null, 2));
  const slower = rows.filter((r) => r.ratio !== null && r.ratio < 1).map((r) => r.label);
  if (slower.length > 0) {
    console.log(`target missed (extraction slower than readelf -wF): ${slower.join(", ")}`);
  }
}

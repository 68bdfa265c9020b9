/**
 * The "top functions" report: for each function (a name and a frame kind), how many samples it was running
 * in (self: it was the leaf) and how many it was on the stack of (total), like `pprof -top` or
 * `perf report --children`. A recursive function counts once per sample in its total.
 *
 * By default only CPU samples count: off-CPU samples (count 0, from `record --off-cpu`) add nothing, so a
 * function seen only while its thread was switched out is not listed, and shares stay shares of CPU
 * samples. With `{ value: "offCpu" }` it is the other way round: each stack weighs its off-CPU ns, and
 * rows say where threads waited.
 *
 * @example
 * ```ts
 * import { formatTopTable, topFunctions, totalSampleCount } from "./top.ts";
 * import type { Profile } from "../profile/profile.ts";
 * declare const profile: Profile;
 * console.log(formatTopTable(topFunctions(profile, { limit: 20 }), totalSampleCount(profile)));
 * ```
 *
 * @module
 */

import type { FrameKind, Profile } from "../profile/profile.ts";
import { sampleOffCpuNs } from "../profile/wall_time.ts";

/** One function of the report. */
export interface TopRow {
  /** Function name as in the profile ("" for frames without one). */
  name: string;
  kind: FrameKind;
  /** Samples (or off-CPU ns) in which this function was the leaf frame. */
  self: number;
  /** Samples (or off-CPU ns) in which this function was anywhere on the stack (once per sample). */
  total: number;
  /** `self` as a percentage of all samples. */
  selfPercent: number;
  /** `total` as a percentage of all samples. */
  totalPercent: number;
}

/** Options of {@linkcode topFunctions}. */
export interface TopOptions {
  /** Keep only the first `limit` rows (default: all). */
  limit?: number;
  /** What a stack weighs: its CPU samples (the default), or its off-CPU ns. */
  value?: "cpu" | "offCpu";
}

/** The number of CPU samples in `profile`: the sum of the positive sample counts. */
export function totalSampleCount(profile: Profile): number {
  let total = 0;
  for (const sample of profile.samples) if (sample.count > 0) total += sample.count;
  return total;
}

/**
 * Aggregates `profile` per function, sorted by self samples (then total samples, then name), most first.
 * Runs in time linear in the number of frames plus a sort of the functions.
 *
 * @example
 * ```ts
 * import { topFunctions } from "./top.ts";
 * const rows = topFunctions({
 *   startTimeNs: 0, durationNs: 0, periodNs: 1e7, mappings: [],
 *   locations: [{ kind: "native", mapping: -1, address: 0, functionName: "main", sourceFile: "", line: 0 }],
 *   samples: [{ locations: [0], count: 4, pid: 1, tid: 1, comm: "app" }],
 * }, { limit: 10 });
 * // rows[0] is { name: "main", kind: "native", self: 4, total: 4, selfPercent: 100, totalPercent: 100 }
 * ```
 */
export function topFunctions(profile: Profile, options: TopOptions = {}): TopRow[] {
  const { locations, samples } = profile;
  // Locations of the same function share an id, so the per-frame work is array indexing only.
  const functionIds = new Map<string, number>();
  const names: string[] = [];
  const kinds: FrameKind[] = [];
  const functionOfLocation = new Int32Array(locations.length);
  for (let i = 0; i < locations.length; i++) {
    const { kind, functionName } = locations[i]!;
    const key = kind + "\0" + functionName;
    let id = functionIds.get(key);
    if (id === undefined) {
      id = names.length;
      names.push(functionName);
      kinds.push(kind);
      functionIds.set(key, id);
    }
    functionOfLocation[i] = id;
  }

  const n = names.length;
  const self = new Float64Array(n);
  const total = new Float64Array(n);
  // lastSample[f] = 1 + the last sample that added to total[f]: counts recursion once per sample.
  const lastSample = new Int32Array(n);
  let allSamples = 0;
  const offCpu = options.value === "offCpu";
  for (let s = 0; s < samples.length; s++) {
    const sample = samples[s]!;
    const stack = sample.locations;
    // An off-CPU sample has no CPU samples to add (count 0), a CPU sample no off-CPU time.
    const count = offCpu ? sampleOffCpuNs(sample) : sample.count;
    if (!(count > 0)) continue;
    allSamples += count;
    if (stack.length === 0) continue;
    for (let i = 0; i < stack.length; i++) {
      const index = stack[i]!;
      if (!(index >= 0 && index < locations.length)) {
        throw new RangeError(`Cannot compute top functions: sample ${s} refers to location ${index}`);
      }
      const f = functionOfLocation[index]!;
      if (lastSample[f] !== s + 1) {
        lastSample[f] = s + 1;
        total[f] = total[f]! + count;
      }
    }
    const leaf = functionOfLocation[stack[0]!]!;
    self[leaf] = self[leaf]! + count;
  }

  const order: number[] = [];
  for (let f = 0; f < n; f++) if (total[f]! > 0) order.push(f);
  order.sort((a, b) =>
    self[b]! - self[a]! || total[b]! - total[a]! || compare(names[a]!, names[b]!) ||
    compare(kinds[a]!, kinds[b]!)
  );
  const limit = options.limit ?? order.length;
  const rows: TopRow[] = [];
  for (let i = 0; i < order.length && i < limit; i++) {
    const f = order[i]!;
    rows.push({
      name: names[f]!,
      kind: kinds[f]!,
      self: self[f]!,
      total: total[f]!,
      selfPercent: percent(self[f]!, allSamples),
      totalPercent: percent(total[f]!, allSamples),
    });
  }
  return rows;
}

/**
 * Formats rows as an aligned text table with the columns self%, self, total%, total and function, one row
 * per line, each line ending in a newline. Percentages are of `totalSamples`; with `{ unit: "ns" }` (rows
 * of off-CPU time) the amounts are ns, shown as ms. Kernel functions are marked
 * `[k]`, those of interpreters and JITs with their kind (the runtime's name in brackets); native ones are
 * unmarked.
 *
 * @example
 * ```ts
 * import { formatTopTable } from "./top.ts";
 * const table = formatTopTable([
 *   { name: "do_syscall_64", kind: "kernel", self: 3, total: 9, selfPercent: 30, totalPercent: 90 },
 * ], 10);
 * //  self%  self  total%  total  function
 * // 30.00%     3  90.00%      9  do_syscall_64 [k]
 * ```
 */
export function formatTopTable(
  rows: readonly TopRow[],
  totalSamples: number,
  options: { unit?: "samples" | "ns" } = {},
): string {
  const ns = options.unit === "ns";
  const header = ns
    ? ["self%", "self ms", "total%", "total ms", "function"]
    : ["self%", "self", "total%", "total", "function"];
  const value = (amount: number) => ns ? (amount / 1e6).toFixed(1) : String(amount);
  const cells: string[][] = [header];
  for (const row of rows) {
    cells.push([
      `${percent(row.self, totalSamples).toFixed(2)}%`,
      value(row.self),
      `${percent(row.total, totalSamples).toFixed(2)}%`,
      value(row.total),
      displayName(row.name, row.kind),
    ]);
  }
  const widths = [0, 0, 0, 0];
  for (const line of cells) {
    for (let c = 0; c < 4; c++) widths[c] = Math.max(widths[c]!, line[c]!.length);
  }
  let out = "";
  for (const line of cells) {
    for (let c = 0; c < 4; c++) out += line[c]!.padStart(widths[c]!) + "  ";
    out += line[4] + "\n";
  }
  return out;
}

function displayName(name: string, kind: FrameKind): string {
  const shown = name === "" ? "[unknown]" : name.replace(/[\r\n\t]/g, " ");
  if (kind === "native") return shown;
  return `${shown} [${kind === "kernel" ? "k" : kind}]`;
}

function percent(part: number, whole: number): number {
  return whole > 0 ? (part * 100) / whole : 0;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

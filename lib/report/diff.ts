/**
 * Which functions grew or shrank between two profiles. Functions (a kind and a name, as in top.ts) are
 * compared by their share of each profile's samples, self and total, so a 10 s profile compares with a
 * 30 s one. Rows are sorted by the size of the change of the self share, then of the total share: the
 * functions where the time went, or stopped going, come first, before their callers. As in top.ts, only
 * CPU samples count: the off-CPU samples of a profile recorded with `--off-cpu` are left out.
 *
 * @example
 * ```ts
 * import { diffProfiles, formatDiffTable } from "./diff.ts";
 * import type { Profile } from "../profile/profile.ts";
 * declare const before: Profile, after: Profile;
 * console.log(formatDiffTable(diffProfiles(before, after), { limit: 20 }));
 * ```
 *
 * @module
 */

import type { FrameKind, Profile } from "../profile/profile.ts";
import { topFunctions, totalSampleCount } from "./top.ts";

/** One function's samples in both profiles and the change of its shares. */
export interface DiffRow {
  name: string;
  kind: FrameKind;
  /** Samples with the function as leaf, before and after. */
  selfBefore: number;
  selfAfter: number;
  /** Samples with the function anywhere on the stack (once per sample), before and after. */
  totalBefore: number;
  totalAfter: number;
  /** Change of the self share, as a fraction of samples (0.05: five percentage points more). */
  selfDelta: number;
  /** Change of the total share, likewise. */
  totalDelta: number;
}

/** A comparison of two profiles. */
export interface ProfileDiff {
  /** Sample counts of both profiles. */
  samplesBefore: number;
  samplesAfter: number;
  /** Functions whose self or total share changed, biggest change first. */
  rows: DiffRow[];
  /** Functions present with the same shares in both. */
  unchanged: number;
}

/**
 * Compares two profiles function by function.
 *
 * @example
 * ```ts
 * import { diffProfiles } from "./diff.ts";
 * import type { Profile } from "../profile/profile.ts";
 * const profile = (name: string): Profile => ({
 *   startTimeNs: 0, durationNs: 1e9, periodNs: 1e7, mappings: [],
 *   locations: [
 *     { kind: "native", mapping: -1, address: 0, functionName: "main", sourceFile: "", line: 0 },
 *     { kind: "native", mapping: -1, address: 0, functionName: name, sourceFile: "", line: 0 },
 *   ],
 *   samples: [{ locations: [1, 0], count: 10, pid: 1, tid: 1, comm: "app" }],
 * });
 * const diff = diffProfiles(profile("slow"), profile("fast"));
 * // diff.rows: fast (self +100 points), slow (self -100 points); main is unchanged
 * ```
 */
export function diffProfiles(before: Profile, after: Profile): ProfileDiff {
  const samplesBefore = totalSampleCount(before);
  const samplesAfter = totalSampleCount(after);
  const rows = new Map<string, DiffRow>();
  const row = (name: string, kind: FrameKind): DiffRow => {
    const key = `${kind}\0${name}`;
    let found = rows.get(key);
    if (found === undefined) {
      found = {
        name,
        kind,
        selfBefore: 0,
        selfAfter: 0,
        totalBefore: 0,
        totalAfter: 0,
        selfDelta: 0,
        totalDelta: 0,
      };
      rows.set(key, found);
    }
    return found;
  };
  for (const top of topFunctions(before)) {
    const found = row(top.name, top.kind);
    found.selfBefore = top.self;
    found.totalBefore = top.total;
  }
  for (const top of topFunctions(after)) {
    const found = row(top.name, top.kind);
    found.selfAfter = top.self;
    found.totalAfter = top.total;
  }
  const changed: DiffRow[] = [];
  let unchanged = 0;
  for (const found of rows.values()) {
    found.selfDelta = share(found.selfAfter, samplesAfter) - share(found.selfBefore, samplesBefore);
    found.totalDelta = share(found.totalAfter, samplesAfter) - share(found.totalBefore, samplesBefore);
    if (found.selfDelta === 0 && found.totalDelta === 0) unchanged++;
    else changed.push(found);
  }
  changed.sort((a, b) =>
    Math.abs(b.selfDelta) - Math.abs(a.selfDelta) || Math.abs(b.totalDelta) - Math.abs(a.totalDelta) ||
    compare(a.name, b.name) || compare(a.kind, b.kind)
  );
  return { samplesBefore, samplesAfter, rows: changed, unchanged };
}

/** Options of {@linkcode formatDiffTable}. */
export interface DiffTableOptions {
  /** Show only the first `limit` rows (default: all). */
  limit?: number;
}

/**
 * Formats a comparison as an aligned text table: the change of the self share, the self shares before
 * and after, the same for the total share, and the function, one line each. Without any change it says
 * so in one line.
 *
 * @example
 * ```ts
 * import { formatDiffTable } from "./diff.ts";
 * const text = formatDiffTable({
 *   samplesBefore: 100, samplesAfter: 50, unchanged: 0,
 *   rows: [{ name: "c", kind: "native", selfBefore: 90, selfAfter: 10, totalBefore: 90, totalAfter: 10,
 *     selfDelta: -0.7, totalDelta: -0.7 }],
 * });
 * //      Δself  self before  self after    Δtotal  total before  total after  function
 * // -70.00 pp       90.00%      20.00%  -70.00 pp        90.00%       20.00%  c
 * ```
 */
export function formatDiffTable(diff: ProfileDiff, options: DiffTableOptions = {}): string {
  if (diff.rows.length === 0) {
    return `No change: all ${diff.unchanged} functions have the same self and total shares in both profiles.\n`;
  }
  const header = ["Δself", "self before", "self after", "Δtotal", "total before", "total after", "function"];
  const cells: string[][] = [header];
  const limit = options.limit ?? diff.rows.length;
  for (const row of diff.rows.slice(0, limit)) {
    cells.push([
      points(row.selfDelta),
      percentText(row.selfBefore, diff.samplesBefore),
      percentText(row.selfAfter, diff.samplesAfter),
      points(row.totalDelta),
      percentText(row.totalBefore, diff.samplesBefore),
      percentText(row.totalAfter, diff.samplesAfter),
      displayName(row.name, row.kind),
    ]);
  }
  const widths = new Array<number>(6).fill(0);
  for (const line of cells) {
    for (let c = 0; c < 6; c++) widths[c] = Math.max(widths[c]!, line[c]!.length);
  }
  let out = "";
  for (const line of cells) {
    for (let c = 0; c < 6; c++) out += line[c]!.padStart(widths[c]!) + "  ";
    out += line[6] + "\n";
  }
  const hidden = diff.rows.length - Math.min(limit, diff.rows.length);
  if (hidden > 0) out += `(${hidden} more changed functions; ${diff.unchanged} unchanged)\n`;
  else if (diff.unchanged > 0) out += `(${diff.unchanged} functions unchanged)\n`;
  return out;
}

function share(part: number, whole: number): number {
  return whole > 0 ? part / whole : 0;
}

function points(delta: number): string {
  const size = Math.abs(delta * 100).toFixed(2);
  return `${size === "0.00" ? "±" : delta > 0 ? "+" : "-"}${size} pp`;
}

function percentText(part: number, whole: number): string {
  return `${(share(part, whole) * 100).toFixed(2)}%`;
}

function displayName(name: string, kind: FrameKind): string {
  const shown = name === "" ? "[unknown]" : name.replace(/[\r\n\t]/g, " ");
  if (kind === "native") return shown;
  return `${shown} [${kind === "kernel" ? "k" : kind}]`;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

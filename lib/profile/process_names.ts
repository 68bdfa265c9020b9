/**
 * The name each sampled process goes by in an output: its main thread's command name, else its busiest
 * thread's.
 *
 * @example
 * ```ts
 * import { processNames } from "./process_names.ts";
 * const names = processNames({
 *   startTimeNs: 0, durationNs: 1e9, periodNs: 1e7, mappings: [], locations: [],
 *   samples: [
 *     { locations: [], count: 1, pid: 7, tid: 7, comm: "bash" }, // sampled between fork and exec
 *     { locations: [], count: 9, pid: 7, tid: 7, comm: "make" },
 *   ],
 * });
 * names.get(7); // "make"
 * ```
 *
 * @module
 */
import type { Profile } from "./profile.ts";
import { hasOffCpuTime, sampleWallNs } from "./wall_time.ts";

/**
 * Each pid's name: the command name its main thread (tid = pid) has in the most samples, else the name
 * with the most samples among its other threads; in a profile with off-CPU time, the most time (on and
 * off the CPU) instead; in a profile of probe events, the most hits (never its period, which is 0). A
 * main thread can carry two names: a child sampled
 * between fork and exec still has its parent's, so the first name seen is not the one to keep.
 */
export function processNames(profile: Profile): Map<number, string> {
  const mainCounts = new Map<number, Map<string, number>>();
  const otherCounts = new Map<number, Map<string, number>>();
  // Off-CPU samples count too, by time, so that a process that only slept still has a name.
  const wall = hasOffCpuTime(profile);
  const periodNs = profile.periodNs > 0 ? profile.periodNs : 1;
  for (const sample of profile.samples) {
    const weight = wall ? sampleWallNs(sample, periodNs) : sample.count;
    if (!(weight > 0)) continue;
    const table = sample.tid === sample.pid ? mainCounts : otherCounts;
    let byName = table.get(sample.pid);
    if (byName === undefined) {
      byName = new Map();
      table.set(sample.pid, byName);
    }
    byName.set(sample.comm, (byName.get(sample.comm) ?? 0) + weight);
  }
  const names = new Map<number, string>();
  for (const [pid, byName] of mainCounts) names.set(pid, busiest(byName));
  for (const [pid, byName] of otherCounts) if (!names.has(pid)) names.set(pid, busiest(byName));
  return names;
}

function busiest(byName: Map<string, number>): string {
  let best = "", most = -1;
  for (const [name, count] of byName) {
    if (count > most) {
      best = name;
      most = count;
    }
  }
  return best;
}

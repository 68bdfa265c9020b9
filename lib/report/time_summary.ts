/**
 * The line `report` prints for a profile with off-CPU time, giving each total: its table counts CPU
 * samples only (as pprof's `samples` type does), so without this line the time threads spent switched
 * out, often most of a server's wall time, would go unmentioned.
 *
 * @example
 * ```ts
 * import { timeSummary } from "./time_summary.ts";
 * import type { Profile } from "../profile/profile.ts";
 * declare const profile: Profile;
 * const line = timeSummary(profile); // "on-CPU 0.400 s (40 samples), off-CPU 1.200 s, wall 1.600 s"
 * if (line !== null) console.log(line);
 * ```
 *
 * @module
 */

import type { Profile } from "../profile/profile.ts";
import { hasOffCpuTime, sampleOffCpuNs, sampleOnCpuNs } from "../profile/wall_time.ts";

/**
 * On-CPU time (CPU samples by the period), off-CPU time and their sum, in seconds to the millisecond;
 * null for a profile without off-CPU time, whose report stays as it was.
 */
export function timeSummary(profile: Profile): string | null {
  if (!hasOffCpuTime(profile)) return null;
  let samples = 0, onNs = 0, offNs = 0;
  for (const sample of profile.samples) {
    if (sample.count > 0) samples += sample.count;
    onNs += sampleOnCpuNs(sample, profile.periodNs);
    offNs += sampleOffCpuNs(sample);
  }
  const seconds = (ns: number) => `${(ns / 1e9).toFixed(3)} s`;
  return `on-CPU ${seconds(onNs)} (${samples} samples), off-CPU ${seconds(offNs)}, wall ${
    seconds(onNs + offNs)
  }`;
}

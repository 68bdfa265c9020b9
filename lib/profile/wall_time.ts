/**
 * How much time a sample stands for, for writers that show wall time when a profile has off-CPU time
 * (`record --off-cpu`): a CPU sample stands for `count` sampling periods on a CPU, an off-CPU sample for
 * the ns its thread spent switched out. Kept in one place so that every writer weighs samples alike and
 * none divides by a count that an off-CPU sample does not have.
 *
 * @example
 * ```ts
 * import { hasOffCpuTime, sampleWallNs } from "./wall_time.ts";
 * import type { Profile } from "./profile.ts";
 * declare const profile: Profile;
 * if (hasOffCpuTime(profile)) {
 *   const ns = profile.samples.reduce((sum, s) => sum + sampleWallNs(s, profile.periodNs), 0);
 *   console.log(`${ns / 1e9} s of wall time`);
 * }
 * ```
 *
 * @module
 */

import type { Profile, ProfileSample } from "./profile.ts";

/**
 * Whether the profile was recorded with off-CPU time, or has an off-CPU sample all the same (a profile
 * built by hand or read from elsewhere that forgot the flag): its off-CPU time is then shown, not lost.
 *
 * Never for a profile of probe events (`Profile.events`): it has no wall time, and its `periodNs` is 0,
 * so weighing it as wall time would turn every hit into 0 ns and show nothing; writers count its hits.
 */
export function hasOffCpuTime(profile: Pick<Profile, "offCpu" | "samples" | "events">): boolean {
  if (profile.events !== undefined) return false;
  return profile.offCpu === true || profile.samples.some((sample) => sampleOffCpuNs(sample) > 0);
}

/** The CPU time of a sample in ns: its count of periods (0 for an off-CPU sample). */
export function sampleOnCpuNs(sample: Pick<ProfileSample, "count">, periodNs: number): number {
  return sample.count > 0 ? sample.count * periodNs : 0;
}

/** The ns a sample's thread spent switched out (0 for a CPU sample, or a value that is not positive). */
export function sampleOffCpuNs(sample: Pick<ProfileSample, "offCpuNs">): number {
  const ns = sample.offCpuNs ?? 0;
  return ns > 0 ? ns : 0;
}

/** The wall time a sample stands for in ns: its CPU time and its off-CPU time. */
export function sampleWallNs(sample: Pick<ProfileSample, "count" | "offCpuNs">, periodNs: number): number {
  return sampleOnCpuNs(sample, periodNs) + sampleOffCpuNs(sample);
}

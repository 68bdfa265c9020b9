/**
 * What a profile of probe events (`record -e`, {@linkcode Profile.events}) needs in every writer and
 * reader: whether a profile is one, the name of a sample's event, and the hits of each event. Kept in
 * one place so that every output tells events apart the same way, and none takes a hit count for CPU
 * samples or weighs it by `periodNs`, which is 0 in such a profile.
 *
 * @example
 * ```ts
 * import { eventHits, hasEvents } from "./events.ts";
 * import type { Profile } from "./profile.ts";
 * declare const profile: Profile;
 * if (hasEvents(profile)) {
 *   for (const { name, hits } of eventHits(profile)) console.log(`${name}: ${hits} hits`);
 * }
 * ```
 *
 * @module
 */

import type { Profile, ProfileSample } from "./profile.ts";

/**
 * The name shown for a sample whose event is not one of the profile's (a profile built by hand, or read
 * from a file whose sample had no event label): its hits are kept under this name, not dropped.
 */
export const UNKNOWN_EVENT = "[unknown event]";

/** Whether the profile counts probe events rather than CPU samples. */
export function hasEvents(profile: Pick<Profile, "events">): boolean {
  return profile.events !== undefined;
}

/** The index of a sample's event in `events`, or -1 when it names none of them. */
export function sampleEventIndex(sample: Pick<ProfileSample, "event">, events: readonly string[]): number {
  const index = sample.event;
  return index !== undefined && Number.isInteger(index) && index >= 0 && index < events.length ? index : -1;
}

/** The name of a sample's event, {@linkcode UNKNOWN_EVENT} when it names none of the profile's. */
export function sampleEventName(sample: Pick<ProfileSample, "event">, events: readonly string[]): string {
  const index = sampleEventIndex(sample, events);
  return index === -1 ? UNKNOWN_EVENT : events[index]!;
}

/** One event of a profile and how often it was hit. */
export interface EventHits {
  name: string;
  hits: number;
}

/**
 * The hits of each event, in the order of `profile.events` (0 for an event never hit: it was recorded
 * all the same), then those of samples that name none of them, as {@linkcode UNKNOWN_EVENT}, when there
 * are any. Counts that are not positive add nothing.
 */
export function eventHits(profile: Pick<Profile, "events" | "samples">): EventHits[] {
  const events = profile.events ?? [];
  const totals = events.map((name) => ({ name, hits: 0 }));
  let unknown = 0;
  for (const sample of profile.samples) {
    if (!(sample.count > 0)) continue;
    const index = sampleEventIndex(sample, events);
    if (index === -1) unknown += sample.count;
    else totals[index]!.hits += sample.count;
  }
  if (unknown > 0) totals.push({ name: UNKNOWN_EVENT, hits: unknown });
  return totals;
}

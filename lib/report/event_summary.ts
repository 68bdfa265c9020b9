/**
 * The lines `report` prints for a profile of probe events (`record -e`): its total in hits, and, when
 * it recorded several events, a line per event. The table below them adds the hits of every event, so
 * without these lines one could not tell which probe fired how often (an event never hit shows 0: it
 * was recorded all the same).
 *
 * @example
 * ```ts
 * import { eventSummary } from "./event_summary.ts";
 * import type { Profile } from "../profile/profile.ts";
 * declare const profile: Profile;
 * const lines = eventSummary(profile); // ["  uprobe:/usr/bin/app:handle: 40 hits", ...]
 * if (lines !== null) console.log(lines.join("\n"));
 * ```
 *
 * @module
 */

import type { Profile } from "../profile/profile.ts";
import { eventHits, hasEvents } from "../profile/events.ts";

/**
 * A line per event with its hits, in the order recorded, when the profile has several events (or hits
 * of none of them); an empty list for one event, whose hits are the profile's total; null for a profile
 * of CPU samples, whose report stays as it was.
 */
export function eventSummary(profile: Profile): string[] | null {
  if (!hasEvents(profile)) return null;
  const totals = eventHits(profile);
  if (totals.length < 2) return [];
  return totals.map(({ name, hits }) => `  ${name}: ${hits} ${hits === 1 ? "hit" : "hits"}`);
}

/** What a profile's counts count, for the lines that give its total: "hits" of events, or "samples". */
export function countUnit(profile: Profile): "hits" | "samples" {
  return hasEvents(profile) ? "hits" : "samples";
}

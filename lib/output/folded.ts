/**
 * Folded stacks, the input format of `flamegraph.pl` and most flame graph tools: one line per distinct
 * (thread name, stack), `comm;root;...;leaf COUNT`.
 *
 * Kernel frames carry the `_[k]` suffix that `flamegraph.pl --color=java` and friends color as kernel
 * code. Names are sanitized so a line always splits the same way: `;` (the frame separator) becomes `:`,
 * line breaks become spaces, and an empty name (or thread name) reads `[unknown]`. Identical lines are
 * merged by adding their counts, and lines are sorted by their stack text, so the same profile always
 * gives the same bytes.
 *
 * A profile with off-CPU time (`record --off-cpu`) weighs lines in microseconds of wall time instead: a
 * CPU sample weighs `count * period`, an off-CPU sample the time its thread was switched out, so that a
 * thread blocked in `read` shows as wide as the time it lost there. Folded weights are integers (the
 * tools above read them so), hence microseconds, not ns (flame graphs of hours stay far below 2^53), and
 * each line is rounded once, after merging, so that many short switches are not each rounded away; a line
 * whose time rounds to 0 is left out. A profile without off-CPU time keeps counts, as before.
 *
 * A profile of probe events (`record -e`) counts hits: COUNT is the number of times the probe fired with
 * that stack. With more than one event, each line names its event after the thread name,
 * `comm;EVENT;root;...;leaf COUNT` (the event sanitized like any name, `uprobe:/usr/bin/app:handle`),
 * so that hits of two events on the same stack never merge into one line, and a flame graph shows each
 * event as a tower of its own under each thread (`grep ';EVENT;'` keeps one). With one event the lines
 * are those of a CPU profile: the event is the whole file's, and naming it on every line would only
 * push the stacks one level up.
 *
 * @example
 * ```ts
 * import { formatFolded } from "./folded.ts";
 * import type { Profile } from "../profile/profile.ts";
 * declare const profile: Profile;
 * Deno.writeTextFileSync("cpu.folded", formatFolded(profile)); // flamegraph.pl cpu.folded > cpu.svg
 * ```
 *
 * @module
 */

import type { Profile } from "../profile/profile.ts";
import { hasOffCpuTime, sampleWallNs } from "../profile/wall_time.ts";
import { sampleEventName } from "../profile/events.ts";

/** The name shown for frames and threads without one. */
export const UNKNOWN_NAME = "[unknown]";

const unsafe = /[;\r\n]/;
const lineBreaks = /\r\n|[\r\n]/g;

/** Makes a name safe for one field of a folded line. */
export function sanitizeFoldedName(name: string): string {
  if (name === "") return UNKNOWN_NAME;
  if (!unsafe.test(name)) return name;
  return name.replaceAll(";", ":").replace(lineBreaks, " ");
}

/**
 * Formats `profile` as folded stacks, one `comm;root;...;leaf COUNT` line per distinct stack and thread
 * name, each line ending in a newline. Samples with a count of 0 or less are left out; with off-CPU time,
 * COUNT is microseconds of wall time (see the module documentation) and samples without time left out;
 * with several probe events, `comm;EVENT;root;...;leaf COUNT`.
 *
 * @example
 * ```ts
 * import { formatFolded } from "./folded.ts";
 * const text = formatFolded({
 *   startTimeNs: 0, durationNs: 0, periodNs: 1e7, mappings: [],
 *   locations: [
 *     { kind: "kernel", mapping: -1, address: 0, functionName: "do_syscall_64", sourceFile: "", line: 0 },
 *     { kind: "native", mapping: -1, address: 0, functionName: "main", sourceFile: "", line: 0 },
 *   ],
 *   samples: [{ locations: [0, 1], count: 3, pid: 1, tid: 1, comm: "app" }],
 * });
 * // text === "app;main;do_syscall_64_[k] 3\n"
 * ```
 */
export function formatFolded(profile: Profile): string {
  const { locations, samples } = profile;
  // Each location's text is built once, however many stacks it appears in.
  const frameText: (string | undefined)[] = new Array(locations.length);
  const commText = new Map<string, string>();
  const counts = new Map<string, number>();
  // One reused parts array joined per sample: a flat string, cheaper to hash than a chain of concatenations.
  const parts: string[] = [];
  // In a profile with off-CPU time, lines add up ns, made microseconds once merged.
  const wall = hasOffCpuTime(profile);
  const periodNs = profile.periodNs;
  // Several events: each line's second field is its event, so that equal stacks of two events stay apart.
  const events = profile.events !== undefined && profile.events.length > 1 ? profile.events : null;
  const eventText = new Map<string, string>();
  const head = events === null ? 1 : 2;
  for (const sample of samples) {
    const weight = wall ? sampleWallNs(sample, periodNs) : sample.count;
    if (!(weight > 0)) continue;
    let comm = commText.get(sample.comm);
    if (comm === undefined) {
      comm = sanitizeFoldedName(sample.comm);
      commText.set(sample.comm, comm);
    }
    const stack = sample.locations;
    const n = stack.length;
    parts.length = n + head;
    parts[0] = comm;
    if (events !== null) {
      const name = sampleEventName(sample, events);
      let text = eventText.get(name);
      if (text === undefined) {
        text = sanitizeFoldedName(name);
        eventText.set(name, text);
      }
      parts[1] = text;
    }
    for (let i = 0; i < n; i++) {
      const index = stack[i]!;
      let text = frameText[index];
      if (text === undefined) {
        const location = locations[index];
        if (location === undefined) {
          throw new RangeError(`Cannot format folded stacks: location ${index} of ${locations.length}`);
        }
        text = sanitizeFoldedName(location.functionName);
        if (location.kind === "kernel") text += "_[k]";
        frameText[index] = text;
      }
      // Leaf first in the profile, root first in the line.
      parts[n - 1 + head - i] = text;
    }
    const line = parts.join(";");
    counts.set(line, (counts.get(line) ?? 0) + weight);
  }
  const keys = [...counts.keys()].sort();
  const lines: string[] = [];
  for (const key of keys) {
    const weight = wall ? Math.round(counts.get(key)! / 1000) : counts.get(key)!;
    if (weight > 0) lines.push(`${key} ${weight}\n`);
  }
  return lines.join("");
}

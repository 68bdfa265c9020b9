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
 * name, each line ending in a newline. Samples with a count of 0 or less are left out.
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
  for (const sample of samples) {
    if (!(sample.count > 0)) continue;
    let comm = commText.get(sample.comm);
    if (comm === undefined) {
      comm = sanitizeFoldedName(sample.comm);
      commText.set(sample.comm, comm);
    }
    const stack = sample.locations;
    const n = stack.length;
    parts.length = n + 1;
    parts[0] = comm;
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
      parts[n - i] = text;
    }
    const line = parts.join(";");
    counts.set(line, (counts.get(line) ?? 0) + sample.count);
  }
  const lines = [...counts.keys()].sort();
  for (let i = 0; i < lines.length; i++) lines[i] = `${lines[i]} ${counts.get(lines[i]!)}\n`;
  return lines.join("");
}

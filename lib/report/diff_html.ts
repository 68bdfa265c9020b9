/**
 * The differential flamegraph: the flamegraph page (lib/output/html) with two profiles merged into one
 * tree. A frame's width is the mean of its shares of the two profiles, so code that vanished or appeared
 * stays visible; its colour is the change of its share (total, or self at the user's choice): red grew,
 * blue shrank, grey unchanged. Stacks of all processes are merged by default (pids, and often command
 * names, differ between runs); the page can group them by command name instead.
 *
 * @example
 * ```ts
 * import { formatDiffHtml } from "./diff_html.ts";
 * import type { Profile } from "../profile/profile.ts";
 * declare const before: Profile, after: Profile;
 * Deno.writeTextFileSync("diff.html", formatDiffHtml(before, after, { seriesNames: ["v1.pb.gz", "v2.pb.gz"] }));
 * ```
 *
 * @module
 */

import type { Profile } from "../profile/profile.ts";
import { diffFlamegraphData, type FlamegraphDataOptions } from "../output/html/flamegraph_data.ts";
import { renderFlamegraphPage } from "../output/html/flamegraph.ts";

/** Options of {@linkcode formatDiffHtml}: the title, the two profiles' names, progress. */
export type DiffHtmlOptions = FlamegraphDataOptions;

/** Renders the differential flamegraph page of `before` against `after`. */
export function formatDiffHtml(before: Profile, after: Profile, options: DiffHtmlOptions = {}): string {
  return renderFlamegraphPage(diffFlamegraphData(before, after, options));
}

/**
 * The interactive flamegraph page: one self-contained HTML file (script, style and data inline; nothing
 * is fetched, and its Content-Security-Policy forbids fetching) with flame and icicle views on a canvas,
 * hover details, click to zoom, search, process and thread filters, and a sortable top-functions table.
 * The same page shows differential profiles (see diff_html.ts in lib/report).
 *
 * A profile with off-CPU time gets a control in the toolbar to show on-CPU time, off-CPU time or both
 * (wall time, the default); a page without it has no such control, and reads as before. A profile of
 * several probe events gets a menu to show one event or all (the default); with one event there is
 * nothing to pick, and none.
 *
 * The page's code lives in page_model.js (the computations, tested in Deno) and page_view.js (the DOM),
 * embedded at build time as text, like its style in page.css.
 *
 * @example
 * ```ts
 * import { formatFlamegraphHtml } from "./flamegraph.ts";
 * import type { Profile } from "../../profile/profile.ts";
 * declare const profile: Profile;
 * Deno.writeTextFileSync("profile.html", formatFlamegraphHtml(profile, { title: "nginx, 30 s" }));
 * ```
 *
 * @module
 */

import type { Profile } from "../../profile/profile.ts";
import { type FlamegraphData, flamegraphData, type FlamegraphDataOptions } from "./flamegraph_data.ts";
import modelScript from "./page_model.js" with { type: "text" };
import viewScript from "./page_view.js" with { type: "text" };
import style from "./page.css" with { type: "text" };

/** Options of {@linkcode formatFlamegraphHtml}. */
export type FlamegraphHtmlOptions = FlamegraphDataOptions;

/**
 * Renders `profile` as a self-contained flamegraph page.
 *
 * @example
 * ```ts
 * import { formatFlamegraphHtml } from "./flamegraph.ts";
 * const html = formatFlamegraphHtml({
 *   startTimeNs: 0, durationNs: 1e9, periodNs: 1e7, mappings: [],
 *   locations: [{ kind: "native", mapping: -1, address: 0, functionName: "main", sourceFile: "", line: 0 }],
 *   samples: [{ locations: [0], count: 3, pid: 7, tid: 7, comm: "app" }],
 * }, { title: "app" });
 * // html starts with "<!doctype html>"
 * ```
 */
export function formatFlamegraphHtml(profile: Profile, options: FlamegraphHtmlOptions = {}): string {
  return renderFlamegraphPage(flamegraphData(profile, options));
}

/** Renders page data (one profile or a differential pair) as the page. */
export function renderFlamegraphPage(data: FlamegraphData): string {
  // `<` is escaped so no string in the profile can close the script element; the JSON stays valid.
  const json = JSON.stringify(data).replace(/</g, "\\u003c");
  const script = modelScript + "\n" + viewScript.replace(/^import\s[^;]*;\s*$/gm, "");
  const timeControl = data.sampleOffCpuNs === undefined ? "" : `
  <div class="seg" role="group" aria-label="Time">
    <button id="time-cpu" type="button" aria-pressed="false" title="Time on a CPU">On-CPU</button><button id="time-off" type="button" aria-pressed="false" title="Time switched out: blocked or waiting for a CPU">Off-CPU</button><button id="time-wall" type="button" aria-pressed="true" title="Both: wall time">Both</button>
  </div>`;
  // The page fills the menu from the data, so event names need no escaping here.
  const eventControl = (data.events?.length ?? 0) < 2 ? "" : `
  <label id="event-label" title="The probe event whose hits are shown">Event <select id="event"></select></label>`;
  const amounts = data.events === undefined ? "samples" : "events";
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<meta name="generator" content="omniprof">
<title>${escapeHtml(data.title)}</title>
<style>
${style}</style>
</head>
<body>
<header class="bar">
  <div class="brand">omniprof</div>
  <div class="heading"><h1 id="title"></h1><div id="facts" class="facts"></div></div>
</header>
<nav class="toolbar">
  <div class="seg" role="group" aria-label="Orientation">
    <button id="view-flame" type="button" aria-pressed="true" title="Roots at the bottom">Flame</button><button id="view-icicle" type="button" aria-pressed="false" title="Roots at the top">Icicle</button>
  </div>${timeControl}${eventControl}
  <input id="search" type="search" placeholder="Search functions: text or /regex/" autocomplete="off" spellcheck="false" aria-label="Search functions">
  <span id="match" class="match" aria-live="polite"></span>
  <span class="spacer"></span>
  <label>Group <select id="group"><option value="process">by process</option><option value="command">by command</option><option value="none">none</option></select></label>
  <label>Process <select id="process"></select></label>
  <label id="thread-label">Thread <select id="thread"></select></label>
  <label id="diff-colour-label" hidden>Colour by <select id="diff-colour"><option value="total">Δ total</option><option value="self">Δ self</option></select></label>
</nav>
<div id="legend" class="legend"></div>
<div class="zoom-bar"><button id="reset" type="button" title="Esc">Reset zoom</button><div id="crumbs" class="crumbs"></div></div>
<main id="chart" class="chart"><canvas id="canvas" aria-label="Flamegraph"></canvas></main>
<div id="details" class="details">Hover a frame for its ${amounts}; click to zoom.</div>
<section class="table-section">
  <h2>Top functions<span id="table-note"></span></h2>
  <div class="table-wrap"><table id="table"><thead></thead><tbody></tbody></table></div>
</section>
<div id="tooltip" class="tooltip" hidden></div>
<script id="omniprof-data" type="application/json">${json}</script>
<script type="module">
${script}</script>
</body>
</html>
`;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

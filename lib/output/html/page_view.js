// @ts-check
/// <reference lib="dom" />
/**
 * The flamegraph page's view: the canvas, the toolbar, the tooltip and the top-functions table. Embedded
 * in the page after page_model.js (this file's import line is dropped there, the two share one module
 * scope). It reads the data from the `omniprof-data` script element and starts on load.
 *
 * A read-only hook, `window.omniprof`, tells tests and scripts what is drawn (frames with their
 * rectangles in canvas pixels), what is zoomed and searched, and how long the last steps took.
 *
 * A profile with off-CPU time gets a three-way control (on-CPU, off-CPU, both) and shows time, not
 * samples, wherever it shows an amount; it opens on both (wall time), where a blocked thread's time
 * stands beside a busy one's. Without off-CPU time nothing of this shows.
 *
 * A profile of probe events counts events (hits), never time: the header, tooltips, search and table say
 * "events", and with several events a menu shows one event or all of them (the default).
 *
 * @module
 */
import {
  buildViewTree,
  countTree,
  decodeData,
  diffColor,
  frameColor,
  functionTable,
  kindLabel,
  layoutTree,
  matchFrames,
  nodeValues,
  percent,
  pickEvent,
  searchTree,
  visibleFrames,
  weighSamples,
} from "./page_model.js";

const ROW = 18;
const MIN_WIDTH_PX = 0.5;
const TEXT_MIN_PX = 22;
const TABLE_ROWS = 400;
const FONT = "11.5px ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', monospace";
const DIMMED = "hsl(220 8% 90%)";

/**
 * @param {string} id
 * @returns {HTMLElement}
 */
function byId(id) {
  const element = document.getElementById(id);
  if (element === null) throw new Error(`The page has no #${id}`);
  return element;
}

/** @param {number} n */
function formatCount(n) {
  return Math.round(n).toLocaleString("en-US");
}

/** @param {number} ns */
function formatDuration(ns) {
  if (!(ns > 0)) return "0 s";
  if (ns >= 60e9) return `${(ns / 60e9).toFixed(1)} min`;
  if (ns >= 1e9) return `${(ns / 1e9).toFixed(ns >= 10e9 ? 1 : 2)} s`;
  if (ns >= 1e6) return `${(ns / 1e6).toFixed(1)} ms`;
  return `${(ns / 1e3).toFixed(0)} µs`;
}

/** @param {number} delta a difference of shares (0.01 is one percentage point) */
function formatDelta(delta) {
  const points = delta * 100;
  if (Math.abs(points) < 0.005) return "±0";
  return `${points > 0 ? "+" : "−"}${Math.abs(points).toFixed(2)} pp`;
}

/**
 * @param {string} tag
 * @param {string} [className]
 * @param {string} [text]
 */
function element(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

/**
 * Starts the page: reads the data, builds the view and wires the controls.
 * @returns {void}
 */
export function startPage() {
  const started = performance.now();
  const timings = {
    parseMs: 0,
    firstRenderMs: 0,
    lastRenderMs: 0,
    lastSearchMs: 0,
    lastZoomMs: 0,
    lastFilterMs: 0,
    framesDrawn: 0,
  };
  /** Where the time of the last recount went. */
  const steps = { decodeMs: 0, treeMs: 0, countMs: 0, layoutMs: 0, searchTreeMs: 0, tableMs: 0 };
  const json = JSON.parse(byId("omniprof-data").textContent ?? "{}");
  timings.parseMs = performance.now() - started;
  const model = decodeData(json);
  steps.decodeMs = performance.now() - started - timings.parseMs;
  const diff = model.mode === "diff";
  /** Whether amounts are time in ns (a profile with off-CPU time), not samples. */
  const timed = model.offCpu;
  /** @type {Record<import("./page_model.js").TimeView, string>} */
  const TIME_NAMES = { cpu: "on-CPU time", off: "off-CPU time", wall: "wall time" };
  /** An amount as the page counts it: ns of time, or samples. @param {number} n */
  const formatAmount = (n) => (timed ? formatDuration(n) : formatCount(n));
  /** Whether amounts are hits of probe events, not samples. */
  const counted = model.events !== null;
  /** What a count counts. */
  const unit = counted ? "events" : "samples";

  const canvas = /** @type {HTMLCanvasElement} */ (byId("canvas"));
  const chart = byId("chart");
  const tooltip = byId("tooltip");
  const details = byId("details");
  const searchInput = /** @type {HTMLInputElement} */ (byId("search"));
  const matchInfo = byId("match");
  const groupSelect = /** @type {HTMLSelectElement} */ (byId("group"));
  const processSelect = /** @type {HTMLSelectElement} */ (byId("process"));
  const threadSelect = /** @type {HTMLSelectElement} */ (byId("thread"));
  const diffColourSelect = /** @type {HTMLSelectElement} */ (byId("diff-colour"));
  const flameButton = byId("view-flame");
  const icicleButton = byId("view-icicle");
  const resetButton = /** @type {HTMLButtonElement} */ (byId("reset"));
  const crumbs = byId("crumbs");
  const table = /** @type {HTMLTableElement} */ (byId("table"));
  const tableNote = byId("table-note");
  const context = canvas.getContext("2d", { alpha: false });
  if (context === null) throw new Error("Cannot draw: no 2D canvas");
  const ctx = context;

  /** @type {{ flame: boolean, time: import("./page_model.js").TimeView, grouping: import("./page_model.js").Grouping, processKey: string, thread: number, query: string, diffBy: string, zoom: number, hover: number, sortColumn: number, sortDescending: boolean }} */
  const state = {
    flame: true,
    time: "wall",
    grouping: diff ? "none" : "process",
    processKey: "",
    thread: -1,
    query: "",
    diffBy: "total",
    zoom: 0,
    hover: -1,
    sortColumn: diff ? 4 : 2,
    sortDescending: true,
  };

  let treeStarted = performance.now();
  let tree = buildViewTree(model, state.grouping);
  steps.treeMs = performance.now() - treeStarted;
  let counts = countTree(model, tree, null);
  let value = nodeValues(counts);
  let x = layoutTree(tree, value);
  /** @type {Uint8Array | null} */
  let frameMatches = null;
  /** @type {{ nodes: Uint8Array, samples: number[] } | null} */
  let search = null;
  let list = visibleFrames(tree, value, x, 0, 1, MIN_WIDTH_PX);
  let rows = 1;
  let widthPx = 1;
  /** @type {Float64Array | null} */
  let deltas = null;
  let deltaScale = 0;
  const colourCache = /** @type {(string | undefined)[]} */ (new Array(model.frameName.length));

  // ---- header -------------------------------------------------------------------------------------
  document.title = model.title;
  byId("title").textContent = model.title;
  const facts = byId("facts");
  const processes = new Set();
  for (let t = 0; t < model.threadPid.length; t++) {
    processes.add(`${model.threadSeries[t]}:${model.threadPid[t]}`);
  }
  /** @param {import("./page_model.js").SeriesInfo} series */
  const seriesFacts = (series) => {
    const parts = [`${formatCount(series.samples)} ${unit}`];
    if (series.durationNs > 0) parts.push(formatDuration(series.durationNs));
    if (series.periodNs > 0) parts.push(`${Math.round(1e9 / series.periodNs)} Hz`);
    // Each event's hits, when there are several to tell apart.
    if (series.eventHits !== undefined && series.eventHits.length > 1) {
      for (const [e, hits] of series.eventHits.entries()) {
        parts.push(`${model.events?.[e]}: ${formatCount(hits)}`);
      }
    }
    if (series.offCpuNs !== undefined) {
      parts.push(`${formatDuration(series.samples * series.periodNs)} on-CPU`);
      parts.push(`${formatDuration(series.offCpuNs)} off-CPU`);
    }
    if (series.startTimeNs > 0) {
      parts.push(new Date(series.startTimeNs / 1e6).toISOString().replace("T", " ").slice(0, 19) + " UTC");
    }
    return parts.join(" · ");
  };
  if (diff) {
    for (const [i, series] of model.series.entries()) {
      const line = element("div", "fact");
      line.append(element("span", "fact-label", i === 0 ? "before" : "after"));
      line.append(element("span", "fact-name", series.name));
      line.append(element("span", "fact-value", seriesFacts(series)));
      facts.append(line);
    }
  } else {
    const series = model.series[0];
    if (series) {
      const line = element("div", "fact");
      line.append(element("span", "fact-value", seriesFacts(series)));
      line.append(
        element(
          "span",
          "fact-value",
          `${formatCount(processes.size)} process${processes.size === 1 ? "" : "es"}`,
        ),
      );
      line.append(element("span", "fact-value", `${formatCount(model.sampleNode.length)} distinct stacks`));
      facts.append(line);
    }
  }

  // ---- labels and colours -------------------------------------------------------------------------
  /** @param {number} v */
  function label(v) {
    if (v === 0) return "all";
    const f = tree.frame[v] ?? 0;
    const name = model.strings[model.frameName[f] ?? 0] || "[unknown]";
    if (model.frameKind[f] === model.processKind && state.grouping === "process") {
      return `${name} (${model.frameDetail[f]})`;
    }
    return name;
  }
  /** @param {number} v */
  function kindOf(v) {
    return v === 0 ? "process" : model.kinds[model.frameKind[tree.frame[v] ?? 0] ?? 0] ?? "unknown";
  }
  /** @param {number} v */
  function colourOf(v) {
    if (v === 0) return "hsl(222 12% 72%)";
    if (deltas !== null) return diffColor(deltas[v] ?? 0, deltaScale);
    const f = tree.frame[v] ?? 0;
    let colour = colourCache[f];
    if (colour === undefined) {
      colour = frameColor(
        model.kinds[model.frameKind[f] ?? 0] ?? "unknown",
        model.strings[model.frameName[f] ?? 0] ?? "",
      );
      colourCache[f] = colour;
    }
    return colour;
  }

  // ---- counting, filters, layout ------------------------------------------------------------------
  /** @returns {Uint8Array | null} */
  function threadFilter() {
    if (state.processKey === "" && state.thread < 0) return null;
    const filter = new Uint8Array(model.threadPid.length);
    for (let t = 0; t < filter.length; t++) {
      const pass = state.thread >= 0 ? t === state.thread : processKeyOf(t) === state.processKey;
      filter[t] = pass ? 1 : 0;
    }
    return filter;
  }
  /** @param {number} t */
  function processKeyOf(t) {
    return diff ? `c:${model.strings[model.threadComm[t] ?? 0]}` : `p:${model.threadPid[t]}`;
  }
  function recount() {
    let t = performance.now();
    counts = countTree(model, tree, threadFilter());
    steps.countMs = performance.now() - t;
    t = performance.now();
    value = nodeValues(counts);
    x = layoutTree(tree, value);
    steps.layoutMs = performance.now() - t;
    if (!((value[state.zoom] ?? 0) > 0)) state.zoom = 0;
    if (diff) {
      deltas = new Float64Array(tree.size);
      const column = state.diffBy === "self" ? counts.self : counts.total;
      const a = counts.samples[0] ?? 0, b = counts.samples[1] ?? 0;
      let largest = 0;
      for (let v = 1; v < tree.size; v++) {
        const d = (b > 0 ? (column[1]?.[v] ?? 0) / b : 0) - (a > 0 ? (column[0]?.[v] ?? 0) / a : 0);
        deltas[v] = d;
        if (Math.abs(d) > largest) largest = Math.abs(d);
      }
      deltaScale = Math.max(largest, 0.01);
    }
    t = performance.now();
    runSearch();
    steps.searchTreeMs = performance.now() - t;
    // The table follows on the next task, so the flamegraph shows the change first.
    tableStale = true;
    table.classList.add("stale");
    setTimeout(() => {
      if (!tableStale) return;
      const started = performance.now();
      fillTable();
      steps.tableMs = performance.now() - started;
    }, 0);
  }
  let tableStale = false;
  function runSearch() {
    search = frameMatches === null ? null : searchTree(tree, counts, frameMatches);
    if (search === null) {
      matchInfo.textContent = "";
      matchInfo.classList.remove("active");
      return;
    }
    matchInfo.classList.add("active");
    if (diff) {
      matchInfo.textContent = `matched: ${percent(search.samples[0] ?? 0, counts.samples[0] ?? 0)} before → ${
        percent(search.samples[1] ?? 0, counts.samples[1] ?? 0)
      } after`;
    } else {
      const hit = search.samples[0] ?? 0;
      matchInfo.textContent = `matched: ${percent(hit, counts.samples[0] ?? 0)} of ${
        timed ? TIME_NAMES[state.time] : unit
      } (${formatAmount(hit)})`;
    }
  }

  // ---- drawing ------------------------------------------------------------------------------------
  function render() {
    const t0 = performance.now();
    const dpr = globalThis.devicePixelRatio || 1;
    widthPx = Math.max(1, chart.clientWidth);
    list = visibleFrames(tree, value, x, state.zoom, widthPx, MIN_WIDTH_PX);
    rows = Math.max(list.maxDepth + 1, 6);
    const heightPx = rows * ROW;
    if (canvas.width !== Math.round(widthPx * dpr) || canvas.height !== Math.round(heightPx * dpr)) {
      canvas.width = Math.round(widthPx * dpr);
      canvas.height = Math.round(heightPx * dpr);
      canvas.style.width = `${widthPx}px`;
      canvas.style.height = `${heightPx}px`;
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, widthPx, heightPx);
    ctx.font = FONT;
    ctx.textBaseline = "middle";
    const charWidth = ctx.measureText("m").width || 7;
    const zoomDepth = tree.depth[state.zoom] ?? 0;
    const searching = search !== null;
    for (let i = 0; i < list.count; i++) {
      const v = list.node[i] ?? 0;
      const left = list.left[i] ?? 0, width = list.width[i] ?? 0, depth = list.depth[i] ?? 0;
      const top = state.flame ? (rows - 1 - depth) * ROW : depth * ROW;
      const matched = searching && search?.nodes[v] === 1;
      ctx.globalAlpha = depth < zoomDepth ? 0.55 : 1;
      ctx.fillStyle = searching && !matched ? DIMMED : colourOf(v);
      const gap = width > 3 ? 1 : 0;
      ctx.fillRect(left, top, Math.max(width - gap, 0.5), ROW - 1);
      if (matched) {
        ctx.strokeStyle = "hsl(292 80% 38%)";
        ctx.lineWidth = 1.5;
        ctx.strokeRect(left + 0.75, top + 0.75, Math.max(width - gap - 1.5, 0), ROW - 2.5);
      }
      if (width >= TEXT_MIN_PX) {
        const fit = Math.floor((width - 8) / charWidth);
        if (fit >= 2) {
          let text = label(v);
          if (text.length > fit) text = text.slice(0, fit - 1) + "…";
          ctx.fillStyle = searching && !matched ? "#8a8f98" : "#1b1d21";
          ctx.fillText(text, left + 4, top + ROW / 2);
        }
      }
    }
    ctx.globalAlpha = 1;
    if (state.hover >= 0) {
      const i = drawnIndex(state.hover);
      if (i >= 0) {
        const depth = list.depth[i] ?? 0;
        const top = state.flame ? (rows - 1 - depth) * ROW : depth * ROW;
        ctx.strokeStyle = "#111";
        ctx.lineWidth = 1;
        ctx.strokeRect((list.left[i] ?? 0) + 0.5, top + 0.5, Math.max((list.width[i] ?? 0) - 2, 1), ROW - 2);
      }
    }
    timings.lastRenderMs = performance.now() - t0;
    timings.framesDrawn = list.count;
    updateCrumbs();
  }
  let renderQueued = false;
  function renderSoon() {
    if (renderQueued) return;
    renderQueued = true;
    requestAnimationFrame(() => {
      renderQueued = false;
      render();
    });
  }
  /** @param {number} v */
  function drawnIndex(v) {
    for (let i = 0; i < list.count; i++) if (list.node[i] === v) return i;
    return -1;
  }
  /**
   * @param {number} px
   * @param {number} py
   */
  function hitTest(px, py) {
    const row = Math.floor(py / ROW);
    const depth = state.flame ? rows - 1 - row : row;
    for (let i = 0; i < list.count; i++) {
      if (list.depth[i] !== depth) continue;
      const left = list.left[i] ?? 0;
      if (px >= left && px < left + (list.width[i] ?? 0)) return list.node[i] ?? -1;
    }
    return -1;
  }

  // ---- details ------------------------------------------------------------------------------------
  /** @param {number} v */
  function describe(v) {
    const lines = [];
    const kind = kindOf(v);
    const f = tree.frame[v] ?? -1;
    let where = v === 0 ? `all ${unit}` : kindLabel(kind);
    if (f >= 0 && model.frameKind[f] !== model.processKind && (model.frameDetail[f] ?? -1) >= 0) {
      where += ` · ${model.strings[model.frameDetail[f] ?? 0]}`;
    } else if (f >= 0 && model.frameKind[f] === model.processKind && state.grouping === "process") {
      where += ` · pid ${model.frameDetail[f]}`;
    }
    if (diff) {
      for (const [s, name] of [[0, "before"], [1, "after"]]) {
        const all = counts.samples[/** @type {number} */ (s)] ?? 0;
        const total = counts.total[/** @type {number} */ (s)]?.[v] ?? 0;
        const self = counts.self[/** @type {number} */ (s)]?.[v] ?? 0;
        lines.push(
          `${name}: total ${formatAmount(total)} (${percent(total, all)}), self ${formatAmount(self)} (${
            percent(self, all)
          })`,
        );
      }
      const share = (/** @type {number} */ s, /** @type {Float64Array[]} */ column) =>
        (counts.samples[s] ?? 0) > 0 ? (column[s]?.[v] ?? 0) / (counts.samples[s] ?? 1) : 0;
      lines.push(
        `change: total ${formatDelta(share(1, counts.total) - share(0, counts.total))}, self ${
          formatDelta(share(1, counts.self) - share(0, counts.self))
        }`,
      );
    } else {
      const all = counts.samples[0] ?? 0;
      const total = counts.total[0]?.[v] ?? 0;
      const self = counts.self[0]?.[v] ?? 0;
      if (timed) {
        const what = TIME_NAMES[state.time];
        lines.push(`total ${formatDuration(total)} ${what} (${percent(total, all)})`);
        lines.push(`self ${formatDuration(self)} ${what} (${percent(self, all)})`);
      } else {
        const period = model.series[0]?.periodNs ?? 0;
        const cpu = period > 0 ? ` · ${formatDuration(total * period)} CPU` : "";
        lines.push(`total ${formatCount(total)} ${unit} (${percent(total, all)})${counted ? "" : cpu}`);
        lines.push(`self ${formatCount(self)} ${unit} (${percent(self, all)})`);
      }
      if (state.zoom !== 0 && v !== state.zoom) {
        lines.push(`${percent(total, counts.total[0]?.[state.zoom] ?? 0)} of ${label(state.zoom)}`);
      }
    }
    return { title: label(v), where, lines };
  }
  /**
   * @param {number} v
   * @param {MouseEvent} event
   */
  function showTooltip(v, event) {
    const info = describe(v);
    tooltip.replaceChildren();
    tooltip.append(element("div", "tip-title", info.title));
    tooltip.append(element("div", "tip-where", info.where));
    for (const line of info.lines) tooltip.append(element("div", "tip-line", line));
    tooltip.hidden = false;
    const margin = 14;
    const box = tooltip.getBoundingClientRect();
    let left = event.clientX + margin, top = event.clientY + margin;
    if (left + box.width > globalThis.innerWidth - 4) left = event.clientX - box.width - margin;
    if (top + box.height > globalThis.innerHeight - 4) top = event.clientY - box.height - margin;
    tooltip.style.left = `${Math.max(4, left)}px`;
    tooltip.style.top = `${Math.max(4, top)}px`;
    details.textContent = `${info.title} — ${info.where} — ${info.lines.join(" · ")}`;
  }

  // ---- zoom and breadcrumbs -----------------------------------------------------------------------
  /** @param {number} v */
  function zoomTo(v) {
    const t0 = performance.now();
    state.zoom = v;
    state.hover = -1;
    render();
    // Flame view: the zoomed frame and its ancestors are at the bottom.
    if (state.flame) chart.scrollTop = chart.scrollHeight;
    timings.lastZoomMs = performance.now() - t0;
    resetButton.disabled = v === 0;
  }
  function updateCrumbs() {
    crumbs.replaceChildren();
    if (state.zoom === 0) {
      crumbs.append(element("span", "crumb-hint", "Click a frame to zoom in · Esc to reset · / to search"));
      return;
    }
    const path = [];
    for (let a = state.zoom; a >= 0; a = tree.parent[a] ?? -1) path.push(a);
    path.reverse();
    for (const [i, v] of path.entries()) {
      if (i > 0) crumbs.append(element("span", "crumb-sep", "›"));
      const crumb = element("button", i === path.length - 1 ? "crumb current" : "crumb", label(v));
      crumb.addEventListener("click", () => zoomTo(v));
      crumbs.append(crumb);
    }
  }

  // ---- top functions table ------------------------------------------------------------------------
  /** @type {{ title: string, numeric: boolean, get: (row: import("./page_model.js").FunctionRow) => number, show: (row: import("./page_model.js").FunctionRow) => string, delta?: boolean }[]} */
  const columns = [];
  /** @param {number} s @param {number} n */
  const shareOf = (s, n) => (counts.samples[s] ?? 0) > 0 ? n / (counts.samples[s] ?? 1) : 0;
  if (diff) {
    for (const which of ["self", "total"]) {
      const pick = (/** @type {import("./page_model.js").FunctionRow} */ row, /** @type {number} */ s) =>
        shareOf(s, (which === "self" ? row.self : row.total)[s] ?? 0);
      columns.push({
        title: `${which} before`,
        numeric: true,
        get: (row) => pick(row, 0),
        show: (row) => percent(pick(row, 0), 1),
      });
      columns.push({
        title: `${which} after`,
        numeric: true,
        get: (row) => pick(row, 1),
        show: (row) => percent(pick(row, 1), 1),
      });
      columns.push({
        title: `Δ ${which}`,
        numeric: true,
        delta: true,
        get: (row) => pick(row, 1) - pick(row, 0),
        show: (row) => formatDelta(pick(row, 1) - pick(row, 0)),
      });
    }
  } else {
    columns.push({
      title: counted ? "self events" : "self",
      numeric: true,
      get: (row) => row.self[0] ?? 0,
      show: (row) => formatAmount(row.self[0] ?? 0),
    });
    columns.push({
      title: "self %",
      numeric: true,
      get: (row) => row.self[0] ?? 0,
      show: (row) => percent(row.self[0] ?? 0, counts.samples[0] ?? 0),
    });
    columns.push({
      title: counted ? "total events" : "total",
      numeric: true,
      get: (row) => row.total[0] ?? 0,
      show: (row) => formatAmount(row.total[0] ?? 0),
    });
    columns.push({
      title: "total %",
      numeric: true,
      get: (row) => row.total[0] ?? 0,
      show: (row) => percent(row.total[0] ?? 0, counts.samples[0] ?? 0),
    });
  }
  const nameOf = (/** @type {import("./page_model.js").FunctionRow} */ row) =>
    model.strings[model.frameName[row.frame] ?? 0] || "[unknown]";
  const kindNameOf = (/** @type {import("./page_model.js").FunctionRow} */ row) =>
    model.kinds[model.frameKind[row.frame] ?? 0] ?? "unknown";
  const allColumns = [
    { title: "function", numeric: false, get: () => 0, show: nameOf },
    {
      title: "kind",
      numeric: false,
      get: () => 0,
      show: (/** @type {import("./page_model.js").FunctionRow} */ row) => kindLabel(kindNameOf(row)),
    },
    ...columns,
  ];
  // In the diff view, the default sort is the size of the change, whatever its sign.
  const sortKeyOf = (
    /** @type {number} */ column,
    /** @type {import("./page_model.js").FunctionRow} */ row,
  ) => {
    const spec = allColumns[column];
    if (!spec) return 0;
    return spec.numeric && "delta" in spec && spec.delta ? Math.abs(spec.get(row)) : spec.get(row);
  };
  function fillTable() {
    tableStale = false;
    table.classList.remove("stale");
    const functionRows = functionTable(model, tree, counts);
    const column = state.sortColumn;
    const spec = allColumns[column];
    const direction = state.sortDescending ? -1 : 1;
    if (spec && !spec.numeric) {
      functionRows.sort((a, b) => direction * spec.show(a).localeCompare(spec.show(b)));
    } else {
      functionRows.sort((a, b) =>
        direction * (sortKeyOf(column, a) - sortKeyOf(column, b)) || nameOf(a).localeCompare(nameOf(b))
      );
    }
    const head = table.tHead ?? table.createTHead();
    head.replaceChildren();
    const headRow = head.insertRow();
    for (const [c, spec] of allColumns.entries()) {
      const th = element("th", spec.numeric ? "num" : spec.title === "kind" ? "kind" : "", spec.title);
      th.setAttribute("role", "columnheader");
      th.tabIndex = 0;
      if (c === column) {
        th.classList.add("sorted");
        th.setAttribute("aria-sort", state.sortDescending ? "descending" : "ascending");
        th.append(element("span", "arrow", state.sortDescending ? " ▾" : " ▴"));
      }
      const sortBy = () => {
        if (state.sortColumn === c) state.sortDescending = !state.sortDescending;
        else {
          state.sortColumn = c;
          state.sortDescending = spec.numeric;
        }
        fillTable();
      };
      th.addEventListener("click", sortBy);
      th.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") sortBy();
      });
      headRow.append(th);
    }
    const body = table.tBodies[0] ?? table.createTBody();
    const fragment = document.createDocumentFragment();
    const shown = Math.min(functionRows.length, TABLE_ROWS);
    for (let r = 0; r < shown; r++) {
      const row = /** @type {import("./page_model.js").FunctionRow} */ (functionRows[r]);
      const tr = document.createElement("tr");
      for (const spec of allColumns) {
        const td = element("td", spec.numeric ? "num" : spec.title === "kind" ? "kind" : "", spec.show(row));
        if ("delta" in spec && spec.delta) {
          const d = spec.get(row);
          if (Math.abs(d) >= 0.00005) td.classList.add(d > 0 ? "grew" : "shrank");
        }
        tr.append(td);
      }
      const first = tr.firstElementChild;
      if (first) {
        first.classList.add("fn");
        first.setAttribute("title", `${nameOf(row)} — click to search`);
        const swatch = element("span", "swatch");
        swatch.style.background = frameColor(kindNameOf(row), nameOf(row));
        first.prepend(swatch);
      }
      tr.addEventListener(
        "click",
        () => setQuery(`/^${nameOf(row).replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}$/`),
      );
      fragment.append(tr);
    }
    body.replaceChildren(fragment);
    tableNote.textContent = functionRows.length > shown
      ? `showing ${shown} of ${formatCount(functionRows.length)} functions`
      : `${formatCount(functionRows.length)} functions`;
  }

  // ---- controls -----------------------------------------------------------------------------------
  /** @param {string} query */
  function setQuery(query) {
    searchInput.value = query;
    applySearch();
  }
  function applySearch() {
    const t0 = performance.now();
    state.query = searchInput.value;
    try {
      frameMatches = matchFrames(model, state.query);
      searchInput.classList.remove("invalid");
    } catch {
      frameMatches = null;
      searchInput.classList.add("invalid");
    }
    runSearch();
    render();
    timings.lastSearchMs = performance.now() - t0;
  }
  searchInput.addEventListener("input", applySearch);

  /** @param {boolean} flame */
  function setOrientation(flame) {
    state.flame = flame;
    flameButton.setAttribute("aria-pressed", String(flame));
    icicleButton.setAttribute("aria-pressed", String(!flame));
    render();
    chart.scrollTop = flame ? chart.scrollHeight : 0;
  }
  flameButton.addEventListener("click", () => setOrientation(true));
  icicleButton.addEventListener("click", () => setOrientation(false));

  groupSelect.value = state.grouping;
  if (diff) groupSelect.querySelector('option[value="process"]')?.remove();
  groupSelect.addEventListener("change", () => {
    state.grouping = /** @type {import("./page_model.js").Grouping} */ (groupSelect.value);
    treeStarted = performance.now();
    tree = buildViewTree(model, state.grouping);
    steps.treeMs = performance.now() - treeStarted;
    state.zoom = 0;
    state.hover = -1;
    recount();
    render();
  });

  // Processes (by pid; in a diff, by command name, as pids differ between runs) and their threads, most
  // samples first.
  /** @type {Map<string, { label: string, samples: number[] }>} */
  const processList = new Map();
  /** @type {Map<number, string> | null} */
  let processNames = null;
  const threadSamples = new Float64Array(model.threadPid.length);
  for (let i = 0; i < model.sampleThread.length; i++) {
    const t = model.sampleThread[i] ?? 0;
    threadSamples[t] = (threadSamples[t] ?? 0) + (model.sampleWeight[i] ?? 0);
  }
  for (let t = 0; t < model.threadPid.length; t++) {
    const key = processKeyOf(t);
    let entry = processList.get(key);
    if (entry === undefined) {
      const name = diff
        ? model.strings[model.threadComm[t] ?? 0] ?? ""
        : processName(model.threadPid[t] ?? 0);
      entry = { label: diff ? name : `${name} (${model.threadPid[t]})`, samples: model.series.map(() => 0) };
      processList.set(key, entry);
    }
    const s = model.threadSeries[t] ?? 0;
    entry.samples[s] = (entry.samples[s] ?? 0) + (threadSamples[t] ?? 0);
  }
  /** @param {number} pid */
  function processName(pid) {
    if (processNames === null) {
      processNames = new Map();
      for (let f = 0; f < model.frameKind.length; f++) {
        if (model.frameKind[f] === model.processKind) {
          processNames.set(model.frameDetail[f] ?? 0, model.strings[model.frameName[f] ?? 0] ?? "");
        }
      }
    }
    return processNames.get(pid) ?? "";
  }
  // Shares of processes and threads: of samples, or (with off-CPU time) of the wall time they opened on.
  const seriesTotals = model.series.map((series) => (timed ? 0 : series.samples));
  if (timed) {
    for (let t = 0; t < threadSamples.length; t++) {
      const s = model.threadSeries[t] ?? 0;
      seriesTotals[s] = (seriesTotals[s] ?? 0) + (threadSamples[t] ?? 0);
    }
  }
  const sharesText = (/** @type {number[]} */ samples) =>
    samples.map((n, s) => percent(n, seriesTotals[s] ?? 0)).join(" → ");
  processSelect.append(new Option(`all (${formatCount(processList.size)})`, ""));
  const sortedProcesses = [...processList.entries()].sort((a, b) =>
    b[1].samples.reduce((x, y) => x + y, 0) - a[1].samples.reduce((x, y) => x + y, 0)
  );
  for (const [key, entry] of sortedProcesses) {
    processSelect.append(new Option(`${entry.label} — ${sharesText(entry.samples)}`, key));
  }
  function fillThreads() {
    threadSelect.replaceChildren(new Option("all", "-1"));
    const threads = [];
    for (let t = 0; t < model.threadPid.length; t++) {
      if (state.processKey === "" || processKeyOf(t) === state.processKey) threads.push(t);
    }
    threads.sort((a, b) => (threadSamples[b] ?? 0) - (threadSamples[a] ?? 0));
    for (const t of threads.slice(0, 2000)) {
      const comm = model.strings[model.threadComm[t] ?? 0] || "[unknown]";
      const total = seriesTotals[model.threadSeries[t] ?? 0] ?? 0;
      threadSelect.append(
        new Option(
          `${comm} (tid ${model.threadTid[t]}, pid ${model.threadPid[t]}) — ${
            percent(threadSamples[t] ?? 0, total)
          }`,
          String(t),
        ),
      );
    }
    threadSelect.value = String(state.thread);
  }
  function applyFilter() {
    const t0 = performance.now();
    recount();
    render();
    timings.lastFilterMs = performance.now() - t0;
  }
  processSelect.addEventListener("change", () => {
    state.processKey = processSelect.value;
    state.thread = -1;
    fillThreads();
    applyFilter();
  });
  threadSelect.addEventListener("change", () => {
    state.thread = Number(threadSelect.value);
    applyFilter();
  });
  if (diff) {
    byId("thread-label").hidden = true;
    byId("diff-colour-label").hidden = false;
    diffColourSelect.addEventListener("change", () => {
      state.diffBy = diffColourSelect.value;
      recount();
      render();
    });
  } else {
    fillThreads();
  }
  // On-CPU, off-CPU or both: the buttons are only in the page of a profile with off-CPU time.
  /** @type {[import("./page_model.js").TimeView, HTMLElement | null][]} */
  const timeButtons = [
    ["cpu", document.getElementById("time-cpu")],
    ["off", document.getElementById("time-off")],
    ["wall", document.getElementById("time-wall")],
  ];
  /** @param {import("./page_model.js").TimeView} time */
  function setTime(time) {
    const t0 = performance.now();
    state.time = time;
    for (const [which, button] of timeButtons) button?.setAttribute("aria-pressed", String(which === time));
    weighSamples(model, time);
    state.hover = -1;
    recount();
    render();
    timings.lastFilterMs = performance.now() - t0;
  }
  if (timed) {
    for (const [which, button] of timeButtons) button?.addEventListener("click", () => setTime(which));
  }
  // One probe event or all: the menu is only in the page of a profile of several events.
  const eventSelect = /** @type {HTMLSelectElement | null} */ (document.getElementById("event"));
  let eventShown = -1;
  if (counted && eventSelect !== null) {
    const hits = model.events?.map((_, e) =>
      model.series.reduce((sum, s) => sum + (s.eventHits?.[e] ?? 0), 0)
    ) ?? [];
    const all = hits.reduce((sum, n) => sum + n, 0);
    eventSelect.append(new Option(`all (${formatCount(all)})`, "-1"));
    for (const [e, name] of (model.events ?? []).entries()) {
      eventSelect.append(new Option(`${name} (${formatCount(hits[e] ?? 0)})`, String(e)));
    }
    eventSelect.value = "-1";
    eventSelect.addEventListener("change", () => {
      const t0 = performance.now();
      eventShown = Number(eventSelect.value);
      pickEvent(model, eventShown);
      state.hover = -1;
      recount();
      render();
      timings.lastFilterMs = performance.now() - t0;
    });
  }
  resetButton.addEventListener("click", () => zoomTo(0));
  resetButton.disabled = true;

  // ---- legend -------------------------------------------------------------------------------------
  const legend = byId("legend");
  if (diff) {
    legend.append(element("span", "legend-title", "Change of share:"));
    legend.append(element("span", "legend-item", "shrank"));
    const ramp = element("span", "ramp");
    legend.append(ramp);
    legend.append(element("span", "legend-item", "grew"));
    legend.append(element("span", "legend-note", "width: mean of before and after shares"));
  } else {
    legend.append(element("span", "legend-title", "Frames:"));
    const present = new Set();
    for (let f = 0; f < model.frameKind.length; f++) present.add(model.frameKind[f]);
    // The profiler's own kinds around the runtimes' (in the order the data lists them).
    const last = ["unknown", "error", "process"];
    const first = ["kernel", "native"];
    const runtimes = model.kinds.filter((kind) => !first.includes(kind) && !last.includes(kind));
    const order = [...first, ...runtimes, ...last];
    for (const kind of order) {
      const index = model.kinds.indexOf(kind);
      if (index < 0 || !present.has(index)) continue;
      const item = element("span", "legend-item");
      const swatch = element("span", "swatch");
      swatch.style.background = frameColor(kind, "");
      item.append(swatch, kindLabel(kind));
      legend.append(item);
    }
  }

  // ---- canvas events ------------------------------------------------------------------------------
  /** @param {MouseEvent} event */
  function canvasPoint(event) {
    const box = canvas.getBoundingClientRect();
    return { px: event.clientX - box.left, py: event.clientY - box.top };
  }
  canvas.addEventListener("mousemove", (event) => {
    const { px, py } = canvasPoint(event);
    const v = hitTest(px, py);
    if (v < 0) {
      tooltip.hidden = true;
      canvas.style.cursor = "default";
    } else {
      showTooltip(v, event);
      canvas.style.cursor = "pointer";
    }
    if (v !== state.hover) {
      state.hover = v;
      renderSoon();
    }
  });
  canvas.addEventListener("mouseleave", () => {
    tooltip.hidden = true;
    if (state.hover !== -1) {
      state.hover = -1;
      renderSoon();
    }
  });
  canvas.addEventListener("click", (event) => {
    const { px, py } = canvasPoint(event);
    const v = hitTest(px, py);
    if (v >= 0) zoomTo(v);
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      if (document.activeElement === searchInput && searchInput.value !== "") setQuery("");
      else zoomTo(0);
    } else if (event.key === "/" && document.activeElement !== searchInput) {
      event.preventDefault();
      searchInput.focus();
    }
  });
  new ResizeObserver(() => renderSoon()).observe(chart);

  recount();
  fillTable();
  setOrientation(true);
  timings.firstRenderMs = performance.now() - started;

  // ---- read-only hook for tests and scripts -------------------------------------------------------
  const hook = Object.freeze({
    /** Frames drawn, with their rectangles in CSS pixels relative to the canvas. */
    frames: () => {
      const out = [];
      for (let i = 0; i < list.count; i++) {
        const v = list.node[i] ?? 0;
        const depth = list.depth[i] ?? 0;
        out.push({
          name: label(v),
          kind: kindOf(v),
          depth,
          x: list.left[i] ?? 0,
          y: state.flame ? (rows - 1 - depth) * ROW : depth * ROW,
          width: list.width[i] ?? 0,
          height: ROW - 1,
          highlighted: search !== null && search.nodes[v] === 1,
          color: colourOf(v),
          zoomed: v === state.zoom,
        });
      }
      return out;
    },
    view: () => (state.flame ? "flame" : "icicle"),
    /**
     * What amounts are: "samples", "events" (hits of probe events), or the time shown ("cpu", "off",
     * "wall") of an off-CPU profile.
     */
    time: () => (timed ? state.time : unit),
    /** The probe event shown ("all" for every one, "" in a profile without events). */
    event: () => (!counted ? "" : eventShown < 0 ? "all" : model.events?.[eventShown] ?? ""),
    zoomed: () => label(state.zoom),
    search: () => ({
      query: state.query,
      matchedSamples: search === null ? [] : search.samples.slice(),
      samples: counts.samples.slice(),
      text: matchInfo.textContent,
    }),
    canvasWidth: () => widthPx,
    timings: () => ({ ...timings, ...steps }),
  });
  Object.defineProperty(globalThis, "omniprof", { value: hook, writable: false, configurable: false });
}

startPage();

/**
 * Lays out one frame of the live top view as text lines that fit the terminal: a two-line header (what is
 * sampled, elapsed time, sample rate, processes, lost samples, the window), the column titles, then one
 * row per function with self%, total%, the function (kernel functions marked `[k]`, interpreted ones with
 * their kind) and the command it ran in. Function and command names come from the profiled processes and
 * are untrusted: control characters are replaced, so no name can send escape sequences to the terminal.
 *
 * @example
 * ```ts
 * import { renderTopFrame } from "./top_screen.ts";
 * const lines = renderTopFrame({
 *   target: "all CPUs", frequencyHz: 99, elapsedSeconds: 3.2, samplesPerSecond: 396, processes: 12, lost: 0,
 *   halfLifeSeconds: 3, note: "",
 * }, [{ name: "c", kind: "native", self: 90, total: 99, selfPercent: 90, totalPercent: 99, command: "chain" }],
 * { columns: 80, rows: 24, styled: false, interactive: true });
 * ```
 *
 * @module
 */
import type { FrameKind } from "../profile/profile.ts";
import { ESC } from "./full_screen.ts";
import type { TopWindowRow } from "./top_window.ts";

/** The header's figures. */
export interface TopHeader {
  /** What is sampled: "all CPUs" or "PID 1234, 5678". */
  target: string;
  frequencyHz: number;
  elapsedSeconds: number;
  /** Samples per second over the last refresh interval. */
  samplesPerSecond: number;
  /** Processes that had samples in the last refresh interval. */
  processes: number;
  /** Samples lost since the start. */
  lost: number;
  halfLifeSeconds: number;
  /** A status note ("waiting for samples", "PID 12 exited"), or "". */
  note: string;
}

/** The space to lay out in, and how. */
export interface TopLayout {
  columns: number;
  rows: number;
  /** Use reverse video for the column titles (a terminal); plain text otherwise. */
  styled: boolean;
  /** Mention the keys (a live session) or not (snapshots). */
  interactive: boolean;
}

const HEADER_LINES = 4;
const COMMAND_WIDTH = 16;

/** The lines of one frame; at most `layout.rows` lines, each at most `layout.columns` characters wide. */
export function renderTopFrame(
  header: TopHeader,
  rows: readonly TopWindowRow[],
  layout: TopLayout,
): string[] {
  const width = Math.max(20, layout.columns);
  const lines: string[] = [];
  lines.push(fit(
    `omniprof top: ${clean(header.target)} at ${header.frequencyHz} Hz, ${
      header.elapsedSeconds.toFixed(1)
    } s` +
      (header.note === "" ? "" : ` - ${clean(header.note)}`),
    width,
  ));
  lines.push(fit(
    `samples/s ${Math.round(header.samplesPerSecond)}  processes ${header.processes}  lost ${header.lost}` +
      `  window: decaying, half-life ${header.halfLifeSeconds} s` + (layout.interactive ? "  (q: quit)" : ""),
    width,
  ));
  lines.push("");
  // self% and total% take 7 columns each plus two spaces; the command column only when there is room.
  const withCommand = width >= 60;
  const functionWidth = width - 18 - (withCommand ? COMMAND_WIDTH + 2 : 0);
  const titles = "  self%   total%  " + pad("function", functionWidth) +
    (withCommand ? "  " + pad("command", COMMAND_WIDTH) : "");
  lines.push(layout.styled ? ESC.reverse + titles + ESC.reset : titles.trimEnd());
  const room = Math.max(0, layout.rows - HEADER_LINES);
  for (const row of rows.slice(0, room)) {
    let line = `${percent(row.selfPercent)}  ${percent(row.totalPercent)}  ` +
      pad(fit(displayName(row.name, row.kind), functionWidth), functionWidth);
    if (withCommand) line += "  " + fit(clean(row.command), COMMAND_WIDTH);
    lines.push(line.trimEnd());
  }
  return lines.slice(0, Math.max(1, layout.rows));
}

/** A function as shown: the name (or `[unknown]`), with `[k]` for kernel code or the runtime's kind. */
export function displayName(name: string, kind: FrameKind): string {
  const shown = name === "" ? "[unknown]" : clean(name);
  return kind === "native" ? shown : `${shown} [${kind === "kernel" ? "k" : kind}]`;
}

/** Replaces control characters (C0, DEL, C1) so that untrusted text cannot drive the terminal. */
export function clean(text: string): string {
  // deno-lint-ignore no-control-regex -- matching control characters is the point
  return text.replace(/[\x00-\x1f\x7f-\x9f]/g, "?");
}

function percent(value: number): string {
  return `${value.toFixed(2)}%`.padStart(7);
}

function pad(text: string, width: number): string {
  return text.length >= width ? text : text + " ".repeat(width - text.length);
}

function fit(text: string, width: number): string {
  if (text.length <= width) return text;
  return width <= 1 ? text.slice(0, width) : text.slice(0, width - 1) + "…";
}

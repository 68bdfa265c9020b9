import assert from "node:assert/strict";
import { clean, displayName, renderTopFrame, type TopHeader } from "./top_screen.ts";
import type { TopWindowRow } from "./top_window.ts";

const header: TopHeader = {
  target: "PID 4242",
  frequencyHz: 99,
  elapsedSeconds: 12.345,
  samplesPerSecond: 98.6,
  processes: 1,
  lost: 0,
  halfLifeSeconds: 3,
  note: "",
};

function row(
  name: string,
  kind: TopWindowRow["kind"],
  self: number,
  total: number,
  command = "chain",
): TopWindowRow {
  return { name, kind, self, total, selfPercent: self, totalPercent: total, command };
}

const rows = [
  row("c", "native", 95.5, 99.25),
  row("asm_sysvec_apic_timer_interrupt", "kernel", 2, 3),
  row("handler", "python", 1, 1, "python3"),
  row("x".repeat(300), "native", 0.5, 0.5),
];

Deno.test("renderTopFrame() lays out the header, titles and rows within the terminal's size", () => {
  const lines = renderTopFrame(header, rows, { columns: 80, rows: 24, styled: false, interactive: true });
  assert.equal(lines[0], "omniprof top: PID 4242 at 99 Hz, 12.3 s");
  assert.equal(lines[1], "samples/s 99  processes 1  lost 0  window: decaying, half-life 3 s  (q: quit)");
  assert.match(lines[3]!, /^ {2}self% {3}total% {2}function +command$/);
  assert.match(lines[4]!, /^ 95\.50% {3}99\.25% {2}c +chain$/);
  assert.match(lines[5]!, /^ {2}2\.00% {4}3\.00% {2}asm_sysvec_apic_timer_interrupt \[k\] +chain$/);
  assert.match(lines[6]!, /handler \[python\] +python3$/);
  assert.match(lines[7]!, /x+… {2}chain$/, "a long name is cut, the command stays");
  for (const line of lines) assert.ok(line.length <= 80, `${line.length}: ${line}`);
  assert.equal(lines.length, 8);
});

Deno.test("renderTopFrame() shows as many rows as fit and drops the command column when narrow", () => {
  const short = renderTopFrame(header, rows, { columns: 50, rows: 6, styled: false, interactive: false });
  assert.equal(short.length, 6);
  assert.doesNotMatch(short[1]!, /q: quit/);
  assert.doesNotMatch(short[3]!, /command/);
  assert.match(short[4]!, /^ 95\.50% {3}99\.25% {2}c$/);
  for (const line of short) assert.ok(line.length <= 50);
  const styled = renderTopFrame({ ...header, note: "PID 4242 exited" }, [], {
    columns: 80,
    rows: 24,
    styled: true,
    interactive: true,
  });
  assert.match(styled[0]!, / - PID 4242 exited$/);
  assert.ok(styled[3]!.startsWith("\x1b[7m") && styled[3]!.endsWith("\x1b[0m"), "titles in reverse video");
  assert.equal(styled.length, 4);
});

Deno.test("renderTopFrame() neutralizes control characters in names from profiled processes", () => {
  const hostile = [row("evil\x1b]0;pwned\x07\x1b[2J", "native", 50, 50, "cmd\x1b[31m\r")];
  const lines = renderTopFrame(header, hostile, { columns: 100, rows: 10, styled: false, interactive: true });
  const text = lines.join("\n");
  assert.ok(
    ![...text].some((char) => char !== "\n" && (char < " " || char === "\x7f")),
    "no control characters",
  );
  assert.match(lines[4]!, /evil\?\]0;pwned\?\?\[2J +cmd\?\[31m\?$/);
  assert.equal(clean("a\u009bb\tc"), "a?b?c");
  assert.equal(displayName("", "native"), "[unknown]");
  assert.equal(displayName("schedule", "kernel"), "schedule [k]");
});

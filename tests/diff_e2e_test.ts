/**
 * `omniprof diff` on real recordings: the chain workload (main;a;b;c, c burns the CPU) against itself
 * shows no change; against chain_shift (the same chain, but b spends 90% of the time in d instead of c)
 * the changed functions c and d come first, c shrinking and d growing. The differential flamegraph is
 * checked in headless Chromium: c drawn blue, d red.
 */
import assert from "node:assert/strict";
import { ARTIFACTS_DIR, browserTest, type DrawnFrame, drawnFrames, openPage } from "./browser.ts";
import { buildWorkload, REPO_ROOT, runCli, tracing, tracingTest } from "./helpers.ts";

const FP_FLAGS = ["-O2", "-fno-omit-frame-pointer"];

interface Recordings {
  dir: string;
  chain: string;
  shifted: string;
}

let recordings: Promise<Recordings> | null = null;

/** Records both workloads once for the tests of this file, into tests/.build/diff/ (git-ignored). */
function record(): Promise<Recordings> {
  recordings ??= (async () => {
    const dir = `${REPO_ROOT}tests/.build/diff`;
    Deno.mkdirSync(dir, { recursive: true });
    const result: Recordings = { dir, chain: `${dir}/chain.pb.gz`, shifted: `${dir}/chain_shift.pb.gz` };
    for (const [name, output] of [["chain", result.chain], ["chain_shift", result.shifted]] as const) {
      const binary = await buildWorkload(name, FP_FLAGS, "-fp");
      const run = await runCli(["record", "-F", "499", "-o", output, "--", binary, "3"]);
      assert.equal(run.code, 0, run.stderr);
    }
    return result;
  })();
  return recordings;
}

/** One row of the text table. */
interface Row {
  selfDelta: number;
  totalDelta: number;
  name: string;
}

function parseTable(stdout: string): Row[] {
  const lines = stdout.split("\n");
  const header = lines.findIndex((line) => /^\s*Δself\s+self before/.test(line));
  assert.ok(header >= 0, stdout);
  const rows: Row[] = [];
  for (const line of lines.slice(header + 1)) {
    const match = /^\s*([+±-][\d.]+) pp\s+[\d.]+%\s+[\d.]+%\s+([+±-][\d.]+) pp\s+[\d.]+%\s+[\d.]+%\s+(.+)$/
      .exec(line);
    if (!match) break;
    const number = (text: string) => Number(text.replace("±", ""));
    rows.push({ selfDelta: number(match[1]!), totalDelta: number(match[2]!), name: match[3]! });
  }
  return rows;
}

Deno.test(tracingTest("diff: a profile against itself shows no change", async () => {
  const { chain } = await record();
  const result = await runCli(["diff", chain, chain]);
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stdout, /No change: all \d+ functions have the same self and total shares/);
}));

Deno.test(
  tracingTest("diff: against a workload that moved its time, the changed functions come first", async () => {
    const { chain, shifted } = await record();
    const result = await runCli(["diff", chain, shifted]);
    assert.equal(result.code, 0, result.stderr);
    console.log(result.stdout.split("\n").slice(0, 8).join("\n"));
    const rows = parseTable(result.stdout);
    assert.ok(["c", "d"].includes(rows[0]!.name), `first row: ${rows[0]!.name}`);
    assert.deepEqual(rows.slice(0, 2).map((row) => row.name).sort(), ["c", "d"]);
    const c = rows.find((row) => row.name === "c")!;
    const d = rows.find((row) => row.name === "d")!;
    assert.ok(c.selfDelta < -50, `c: ${c.selfDelta} pp`);
    assert.ok(d.selfDelta > 50, `d: ${d.selfDelta} pp`);
    for (const unchanged of ["main", "a", "b"]) {
      const row = rows.find((r) => r.name === unchanged);
      assert.ok(row === undefined || Math.abs(row.totalDelta) < 5, `${unchanged} keeps its total share`);
    }
  }),
);

function hue(frame: DrawnFrame): number {
  const match = /^hsl\(([\d.]+) /.exec(frame.color);
  assert.ok(match, frame.color);
  return Number(match[1]);
}

Deno.test(
  browserTest("diff --html: the differential flamegraph draws c blue (shrank) and d red (grew)", async () => {
    const { dir, chain, shifted } = await record();
    const html = `${dir}/diff.html`;
    const result = await runCli(["diff", chain, shifted, "--html", html]);
    assert.equal(result.code, 0, result.stderr);
    const opened = await openPage(html);
    try {
      const frames = await drawnFrames(opened.page);
      const widest = (name: string) =>
        frames.filter((frame) => frame.name === name).sort((x, y) => y.width - x.width)[0];
      const [b, c, d] = [widest("b"), widest("c"), widest("d")];
      assert.ok(b && c && d, frames.map((frame) => frame.name).join(" "));
      assert.equal(hue(c), 216, `c: ${c.color}`);
      assert.equal(hue(d), 0, `d: ${d.color}`);
      // Both under b, side by side (c first: children are in name order), filling most of it.
      assert.equal(c.depth, b.depth + 1);
      assert.equal(d.depth, b.depth + 1);
      assert.ok(Math.abs(c.x + c.width - d.x) < 1, `c ends at ${c.x + c.width}, d starts at ${d.x}`);
      assert.ok(c.width + d.width > 0.9 * b.width);
      assert.match(await opened.page.locator("#legend").innerText(), /shrank[\s\S]*grew/);
      const firstRow = await opened.page.locator("#table tbody tr").first().innerText();
      assert.match(firstRow, /^(c|d)\t/);
      assert.deepEqual(opened.requests, [new URL(`file://${html}`).href]);
      Deno.mkdirSync(ARTIFACTS_DIR, { recursive: true });
      await opened.page.screenshot({ path: `${ARTIFACTS_DIR}diff_e2e.png`, fullPage: true });
    } finally {
      await opened.close();
    }
  }, tracing()),
);

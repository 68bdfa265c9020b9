import assert from "node:assert/strict";
import { formatShortLivedReport, type ShortLivedRow, shortLivedTargets } from "./short_lived.ts";

function row(
  tool: ShortLivedRow["tool"],
  label: string,
  figures: ShortLivedRow["figures"],
  cpuSeconds: number,
  starts: number,
): ShortLivedRow {
  return {
    tool,
    label,
    status: "ok",
    reason: null,
    figures,
    allSamples: 1000,
    sampledShare: 0.5,
    cpuSeconds,
    postCpuSeconds: tool === "omniprof" ? null : 0.5,
    maxRssMb: 80,
    starts,
    cpuMsPerThousandStarts: cpuSeconds * 1e6 / starts,
    workloadCpuSeconds: 20,
    workloadElapsedSeconds: 12,
    notes: ["a note"],
  };
}

// omniprof: 450 of 500 named (90.0%), 399 complete (79.8%), 2 CPU s over 4,000 starts = 500 ms per 1,000.
// perf -g: 1 CPU s over 2,500 starts = 400 ms per 1,000.
const OWN = row(
  "omniprof",
  "omniprof",
  {
    samples: 500,
    namedLeaf: 450,
    leafInKnownFile: 460,
    noUserFrame: 10,
    complete: 399,
  },
  2,
  4000,
);
const PERF = row(
  "perf",
  "perf -g",
  {
    samples: 100,
    namedLeaf: 100,
    leafInKnownFile: 100,
    noUserFrame: 0,
    complete: 0,
  },
  1,
  2500,
);

Deno.test("shortLivedTargets() judges omniprof's shares at 90% and 80%, and CPU per starts against perf's", () => {
  assert.deepEqual(shortLivedTargets("build", "cc1", [OWN, PERF]).map((t) => [t.value, t.verdict]), [
    ["90.0%", "PASS"],
    ["79.8%", "FAIL"],
  ]);
  assert.deepEqual(shortLivedTargets("storm", "true", [OWN, PERF]).map((t) => [t.value, t.verdict]), [
    ["90.0%", "PASS"],
    ["500 vs 400 ms", "FAIL"],
    ["-", "n/a"],
  ]);
  const cheaper = { ...OWN, cpuMsPerThousandStarts: 399 };
  assert.equal(shortLivedTargets("storm", "true", [cheaper, PERF])[1]!.verdict, "PASS");
  assert.deepEqual(shortLivedTargets("storm", "true", [OWN]).map((t) => t.verdict), ["PASS", "n/a", "n/a"]);
});

Deno.test("formatShortLivedReport() prints each tool's shares, CPU per 1,000 starts and the ratio", () => {
  const text = formatShortLivedReport({
    workload: "build",
    comm: "cc1",
    description: "a build",
    rows: [OWN, PERF, {
      ...PERF,
      tool: "perf-dwarf",
      label: "perf dwarf",
      status: "not installed",
      reason: "no",
    }],
    targets: shortLivedTargets("build", "cc1", [OWN, PERF]),
  });
  const lines = text.split("\n");
  const own = lines.find((line) => line.startsWith("omniprof "))!.split(/\s{2,}/);
  assert.deepEqual(own.slice(1, 7), ["1000", "50%", "500", "90.0%", "92.0%", "79.8%"]);
  // CPU ms per 1,000 starts: 2 s * 1e6 / 4,000.
  assert.equal(own[11], "500");
  assert.ok(lines.includes("perf -g / omniprof: profiler CPU 0.50x, CPU per 1,000 starts 0.80x"), text);
  assert.ok(lines.some((line) => /^perf dwarf\s+not installed: no$/.test(line)), text);
  assert.ok(lines.includes("FAIL omniprof: cc1 samples complete >= 80%: 79.8%"), text);
});

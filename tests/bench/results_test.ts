import assert from "node:assert/strict";
import { PROG_TYPE_PERF_EVENT } from "./bpf_programs.ts";
import type { PeerResult } from "./peers.ts";
import {
  type BenchRow,
  evaluateTargets,
  formatRounds,
  formatTable,
  medianRound,
  missingRow,
  ratios,
  resultRow,
} from "./results.ts";

function row(key: BenchRow["key"], cpuSeconds: number, maxRssMb: number): BenchRow {
  return {
    ...missingRow({ key, label: key }, "failed", ""),
    status: "ok",
    reason: null,
    cpuSeconds,
    maxRssMb,
  };
}

Deno.test("evaluateTargets() compares omniprof's CPU and RSS with the issue's limits", () => {
  const rows = [
    row("omniprof", 0.6, 99),
    row("perf", 0.39, 25),
    row("bpftrace", 0.5, 104),
    row("bcc", 3, 170),
  ];
  assert.deepEqual(evaluateTargets(rows).map((target) => target.verdict), ["FAIL", "PASS", "FAIL", "PASS"]);
  rows[0] = row("omniprof", 0.45, 121);
  assert.deepEqual(evaluateTargets(rows).map((target) => target.verdict), ["PASS", "PASS", "PASS", "FAIL"]);
});

Deno.test("evaluateTargets() says n/a for a peer that did not run", () => {
  const rows = [
    row("omniprof", 0.6, 99),
    row("perf", 1, 25),
    missingRow({ key: "bpftrace", label: "bpftrace" }, "not installed", "apt-get install bpftrace"),
  ];
  const targets = evaluateTargets(rows);
  assert.deepEqual(targets.map((target) => target.verdict), ["n/a", "n/a", "PASS", "PASS"]);
  assert.match(targets[0]!.value, /bpftrace did not run/);
});

Deno.test("resultRow() sums the steps' CPU, keeps the largest RSS and judges the workload's stacks", () => {
  const usage = (user: number, system: number, rssKb: number) => ({
    elapsedSeconds: 1,
    userSeconds: user,
    systemSeconds: system,
    maxRssKb: rssKb,
  });
  const result: PeerResult = {
    steps: [
      { label: "record", usage: usage(0.25, 0.125, 20480), exitCode: 0 },
      { label: "script", usage: usage(0.5, 0.25, 40960), exitCode: 0 },
    ],
    postProcessing: usage(0.5, 0.25, 40960),
    stacks: [
      { comm: "chain_bench", frames: ["main", "a", "b", "c"], count: 3 },
      { comm: "chain_bench", frames: ["main", "c"], count: 1 },
      { comm: "sh", frames: ["main"], count: 7 },
    ],
    startNs: 1_000_000_000,
    firstSampleNs: 1_250_000_000,
    firstSampleSource: "test",
    programs: [{ id: 1, type: PROG_TYPE_PERF_EVENT, tag: "", runTimeNs: 8000, runCount: 4, name: "p" }],
    notes: [],
  };
  const built = resultRow({ key: "perf", label: "perf -g" }, result, "chain_bench", ["main", "a", "b", "c"]);
  assert.equal(built.cpuSeconds, 1.125);
  assert.equal(built.postCpuSeconds, 0.75);
  assert.equal(built.maxRssMb, 40);
  assert.equal(built.firstSampleMs, 250);
  assert.equal(built.bpfNsPerSample, 2000);
  assert.deepEqual([built.workloadSamples, built.completeStacks, built.completeShare], [4, 3, 0.75]);
});

Deno.test("ratios() divides each peer's values by omniprof's", () => {
  const [perf] = ratios([row("omniprof", 0.5, 100), row("perf", 0.25, 25)]);
  assert.equal(perf!.cpu, 0.5);
  assert.equal(perf!.maxRss, 0.25);
  assert.equal(perf!.bpfNsPerSample, null);
});

Deno.test("formatTable() prints a line per tool, with the reason for a tool that did not run", () => {
  const text = formatTable([
    row("omniprof", 0.61, 99.4),
    missingRow({ key: "bcc", label: "bcc profile" }, "not installed", "apt-get install bpfcc-tools"),
  ]);
  const lines = text.split("\n");
  assert.equal(lines.length, 3);
  assert.match(lines[1]!, /^omniprof\s+0\.61\s+-\s+99\.4/);
  assert.equal(lines[2], "bcc profile  not installed: apt-get install bpfcc-tools");
});

Deno.test("medianRound() keeps the round of median CPU and every round's CPU", () => {
  const round = (cpuSeconds: number, notes: string[]): BenchRow => ({
    ...row("omniprof", cpuSeconds, 70),
    notes,
  });
  const median = medianRound([round(0.5, ["a"]), round(0.3, ["b"]), round(0.4, ["c"])]);
  assert.equal(median.cpuSeconds, 0.4);
  assert.deepEqual(median.notes, ["c"]);
  assert.deepEqual(median.cpuSecondsByRound, [0.5, 0.3, 0.4]);
  // An even count takes the lower middle round.
  assert.equal(medianRound([round(0.5, []), round(0.3, [])]).cpuSeconds, 0.3);
  // A failed round is reported, not averaged away.
  const failed = missingRow({ key: "omniprof", label: "omniprof" }, "failed", "boom");
  assert.equal(medianRound([round(0.3, []), failed, round(0.4, [])]).status, "failed");
  assert.throws(() => medianRound([]), RangeError);
});

Deno.test("formatRounds() lists every round's CPU and the median per tool", () => {
  const omniprof = medianRound([
    row("omniprof", 0.5, 70),
    row("omniprof", 0.3, 70),
    row("omniprof", 0.4, 70),
  ]);
  const text = formatRounds([omniprof, missingRow({ key: "bcc", label: "bcc" }, "not installed", "no bcc")]);
  assert.deepEqual(text.split("\n").map((line) => line.split(/\s+/)), [
    ["CPU", "s", "by", "round", "1", "2", "3", "median"],
    ["omniprof", "0.50", "0.30", "0.40", "0.40"],
  ]);
});

import assert from "node:assert/strict";
import type { FrameKind, Profile, ProfileLocation } from "../profile/profile.ts";
import { formatTopTable, topFunctions, totalSampleCount } from "./top.ts";

function frame(kind: FrameKind, functionName: string, address = 0): ProfileLocation {
  return { kind, mapping: -1, address, functionName, sourceFile: "", line: 0 };
}

// fib() recursing into itself at different call sites (distinct locations, one function), then a syscall.
const locations = [
  frame("native", "main"), // 0
  frame("native", "fib", 0x10), // 1
  frame("native", "fib", 0x20), // 2
  frame("kernel", "do_syscall_64"), // 3
  frame("native", "write"), // 4
  frame("python", "write"), // 5: same name, another kind: another function
  frame("native", ""), // 6
];

function profile(samples: Profile["samples"]): Profile {
  return { startTimeNs: 0, durationNs: 0, periodNs: 1e7, mappings: [], locations, samples };
}

const samples: Profile["samples"] = [
  { locations: [2, 1, 2, 1, 0], count: 6, pid: 1, tid: 1, comm: "a" }, // fib x4 deep, leaf fib
  { locations: [1, 0], count: 2, pid: 1, tid: 1, comm: "a" },
  { locations: [3, 4, 1, 0], count: 3, pid: 1, tid: 2, comm: "a" },
  { locations: [5, 0], count: 1, pid: 1, tid: 1, comm: "a" },
  { locations: [6], count: 4, pid: 2, tid: 2, comm: "b" },
  { locations: [], count: 4, pid: 0, tid: 0, comm: "idle" },
];

Deno.test("topFunctions() counts self at the leaf and total once per sample, even under recursion", () => {
  const rows = topFunctions(profile(samples));
  const total = totalSampleCount(profile(samples));
  assert.equal(total, 20);
  const byKey = new Map(rows.map((r) => [`${r.kind}:${r.name}`, r]));
  // fib is on 3 samples (6 + 2 + 3 = 11), however often it recurses; it is the leaf of 6 + 2.
  assert.deepEqual(
    [byKey.get("native:fib")!.self, byKey.get("native:fib")!.total],
    [8, 11],
  );
  assert.deepEqual([byKey.get("native:main")!.self, byKey.get("native:main")!.total], [0, 12]);
  assert.deepEqual([byKey.get("kernel:do_syscall_64")!.self, byKey.get("kernel:do_syscall_64")!.total], [
    3,
    3,
  ]);
  assert.deepEqual([byKey.get("native:write")!.self, byKey.get("native:write")!.total], [0, 3]);
  assert.deepEqual([byKey.get("python:write")!.self, byKey.get("python:write")!.total], [1, 1]);
  assert.deepEqual([byKey.get("native:")!.self, byKey.get("native:")!.total], [4, 4]);
  assert.equal(byKey.get("native:fib")!.totalPercent, (11 * 100) / total);
  assert.equal(byKey.get("native:fib")!.selfPercent, (8 * 100) / total);
  // Sorted by self, then total, most first.
  assert.deepEqual(rows.map((r) => `${r.kind}:${r.name}`), [
    "native:fib",
    "native:",
    "kernel:do_syscall_64",
    "python:write",
    "native:main",
    "native:write",
  ]);
  assert.deepEqual(topFunctions(profile(samples), { limit: 2 }), rows.slice(0, 2));
});

Deno.test("formatTopTable() aligns columns and marks kernel and runtime frames", () => {
  const p = profile(samples);
  const table = formatTopTable(topFunctions(p), totalSampleCount(p));
  const lines = table.split("\n");
  assert.equal(lines.pop(), "", "ends with a newline");
  assert.deepEqual(lines[0]!.trim().split(/\s+/), ["self%", "self", "total%", "total", "function"]);
  // Every row has its function column at the same offset as the header's.
  const functionColumn = lines[0]!.indexOf("function");
  for (const line of lines.slice(1)) {
    assert.notEqual(line[functionColumn - 1], undefined);
    assert.equal(line[functionColumn - 1], " ");
    assert.notEqual(line[functionColumn], " ", line);
  }
  const rows = lines.slice(1).map((l) => l.slice(functionColumn));
  assert.deepEqual(rows, ["fib", "[unknown]", "do_syscall_64 [k]", "write [python]", "main", "write"]);
  const fib = lines[1]!.trim().split(/\s+/);
  assert.deepEqual(fib, [
    `${((8 * 100) / 20).toFixed(2)}%`,
    "8",
    `${((11 * 100) / 20).toFixed(2)}%`,
    "11",
    "fib",
  ]);
});

Deno.test("topFunctions() matches a direct count on 100k distinct stacks of 30 frames", () => {
  const many: ProfileLocation[] = [];
  for (let i = 0; i < 20_000; i++) many.push(frame(i % 7 === 0 ? "kernel" : "native", `f${i % 3000}`, i));
  const big: Profile["samples"] = [];
  let x = 7;
  for (let s = 0; s < 100_000; s++) {
    const stack: number[] = [];
    for (let d = 0; d < 30; d++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      stack.push((x >>> 0) % many.length);
    }
    big.push({ locations: stack, count: 1 + (s % 5), pid: 1, tid: 1, comm: "load" });
  }
  const p: Profile = {
    startTimeNs: 0,
    durationNs: 0,
    periodNs: 1,
    mappings: [],
    locations: many,
    samples: big,
  };
  const started = performance.now();
  const rows = topFunctions(p, { limit: 50 });
  const ms = performance.now() - started;
  console.log(`topFunctions: 100k stacks x 30 frames in ${ms.toFixed(0)} ms`);

  // The reference: a Set per sample.
  const self = new Map<string, number>();
  const total = new Map<string, number>();
  for (const sample of big) {
    const key = (i: number) => `${many[i]!.kind}:${many[i]!.functionName}`;
    self.set(key(sample.locations[0]!), (self.get(key(sample.locations[0]!)) ?? 0) + sample.count);
    for (const k of new Set(sample.locations.map(key))) total.set(k, (total.get(k) ?? 0) + sample.count);
  }
  assert.equal(rows.length, 50);
  for (const row of rows) {
    const k = `${row.kind}:${row.name}`;
    assert.equal(row.self, self.get(k) ?? 0, k);
    assert.equal(row.total, total.get(k), k);
  }
  const maxSelf = Math.max(...self.values());
  assert.equal(rows[0]!.self, maxSelf);
  for (let i = 1; i < rows.length; i++) assert.ok(rows[i - 1]!.self >= rows[i]!.self);
});

Deno.test("topFunctions() counts CPU samples only: off-CPU samples (count 0) add nothing", () => {
  const offCpu: Profile = {
    ...profile([
      { locations: [1, 0], count: 2, pid: 1, tid: 1, comm: "a" },
      { locations: [3, 4, 0], count: 0, offCpuNs: 5e9, pid: 1, tid: 2, comm: "a" },
    ]),
    offCpu: true,
  };
  assert.equal(totalSampleCount(offCpu), 2);
  assert.deepEqual(topFunctions(offCpu), [
    { name: "fib", kind: "native", self: 2, total: 2, selfPercent: 100, totalPercent: 100 },
    { name: "main", kind: "native", self: 0, total: 2, selfPercent: 0, totalPercent: 100 },
  ]);
  // Nothing but off-CPU samples: no rows, and no division by zero.
  const asleep = { ...offCpu, samples: [offCpu.samples[1]!] };
  assert.equal(totalSampleCount(asleep), 0);
  assert.deepEqual(topFunctions(asleep), []);
  assert.equal(formatTopTable(topFunctions(asleep), 0), "self%  self  total%  total  function\n");
});

Deno.test('topFunctions({ value: "offCpu" }) weighs stacks by their off-CPU time, leaving CPU samples out', () => {
  const offCpu: Profile = {
    ...profile([
      { locations: [1, 0], count: 2, pid: 1, tid: 1, comm: "a" },
      { locations: [3, 4, 0], count: 0, offCpuNs: 3e9, pid: 1, tid: 2, comm: "a" },
      { locations: [3, 4, 1, 0], count: 0, offCpuNs: 1e9, pid: 1, tid: 2, comm: "a" },
    ]),
    offCpu: true,
  };
  const rows = topFunctions(offCpu, { value: "offCpu" });
  assert.deepEqual(rows, [
    { name: "do_syscall_64", kind: "kernel", self: 4e9, total: 4e9, selfPercent: 100, totalPercent: 100 },
    { name: "main", kind: "native", self: 0, total: 4e9, selfPercent: 0, totalPercent: 100 },
    { name: "write", kind: "native", self: 0, total: 4e9, selfPercent: 0, totalPercent: 100 },
    { name: "fib", kind: "native", self: 0, total: 1e9, selfPercent: 0, totalPercent: 25 },
  ]);
  assert.equal(
    formatTopTable(rows.slice(0, 1), 4e9, { unit: "ns" }),
    "  self%  self ms   total%  total ms  function\n" +
      "100.00%   4000.0  100.00%    4000.0  do_syscall_64 [k]\n",
  );
});

/** A probe-event profile: `hits` of handle under main, and one hit of another event in main. */
function eventsProfile(hits: number): Profile {
  return {
    startTimeNs: 0,
    durationNs: 1e9,
    periodNs: 0,
    events: ["uprobe:/usr/bin/app:handle", "kprobe:do_sys_openat2"],
    mappings: [],
    locations: [
      { kind: "native", mapping: -1, address: 0, functionName: "handle", sourceFile: "", line: 0 },
      { kind: "native", mapping: -1, address: 0, functionName: "main", sourceFile: "", line: 0 },
    ],
    samples: [
      { locations: [0, 1], count: hits, event: 0, pid: 1, tid: 1, comm: "app" },
      { locations: [1], count: 1, event: 1, pid: 1, tid: 1, comm: "app" },
    ],
  };
}

Deno.test("topFunctions() of a probe-event profile counts hits, though the period is 0", () => {
  assert.deepEqual(
    topFunctions(eventsProfile(3)).map((r) => [r.name, r.self, r.total, r.selfPercent, r.totalPercent]),
    [
      ["handle", 3, 3, 75, 75],
      ["main", 1, 4, 25, 100],
    ],
  );
});

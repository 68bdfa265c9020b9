import assert from "node:assert/strict";
import type { Profile } from "../profile/profile.ts";
import { formatSpeedscope, SPEEDSCOPE_SCHEMA_URL, speedscopeFile } from "./speedscope.ts";

const profile: Profile = {
  startTimeNs: 0,
  durationNs: 1e9,
  periodNs: 1e7,
  mappings: [{ start: 0, end: 0, fileOffset: 0, fileName: "/usr/bin/app", buildId: "", hasFunctions: true }],
  locations: [
    { kind: "native", mapping: 0, address: 0x10, functionName: "main", sourceFile: "", line: 0 },
    { kind: "native", mapping: 0, address: 0x20, functionName: "work", sourceFile: "", line: 0 },
    { kind: "native", mapping: 0, address: 0x24, functionName: "work", sourceFile: "", line: 0 },
    { kind: "kernel", mapping: -1, address: 0x30, functionName: "do_syscall_64", sourceFile: "", line: 0 },
    { kind: "python", mapping: -1, address: 0, functionName: "handler", sourceFile: "app.py", line: 12 },
  ],
  samples: [
    { locations: [1, 0], count: 2, pid: 10, tid: 10, comm: "app" },
    { locations: [2, 0], count: 3, pid: 10, tid: 11, comm: "app-worker" },
    { locations: [3, 0], count: 1, pid: 10, tid: 10, comm: "app" },
    { locations: [4, 0], count: 9, pid: 20, tid: 21, comm: "python3" },
    { locations: [0], count: 0, pid: 30, tid: 30, comm: "idle" },
  ],
};

Deno.test("speedscopeFile() writes one sampled profile per process, busiest first, over shared frames", () => {
  const file = speedscopeFile(profile, { name: "test" });
  assert.equal(file.$schema, SPEEDSCOPE_SCHEMA_URL);
  assert.equal(file.name, "test");
  assert.deepEqual(file.shared.frames, [
    { name: "main", file: "/usr/bin/app" },
    { name: "work", file: "/usr/bin/app" },
    { name: "do_syscall_64", file: "[kernel]" },
    { name: "handler", file: "app.py" },
  ]);
  assert.deepEqual(file.profiles.map((p) => p.name), ["python3 (pid 20)", "app (pid 10)"]);
  const app = file.profiles[1]!;
  // Both threads' `work` stacks (two addresses of one function) are one stack; root first.
  assert.deepEqual(app.samples, [[0, 1], [0, 2]]);
  assert.deepEqual(app.weights, [5e7, 1e7]);
  assert.equal(app.unit, "nanoseconds");
  assert.equal(app.endValue, 6e7);
  assert.equal(file.activeProfileIndex, 0);
});

Deno.test("speedscopeFile() weighs samples by count when the period is unknown", () => {
  const file = speedscopeFile({ ...profile, periodNs: 0 });
  assert.equal(file.profiles[0]!.unit, "none");
  assert.deepEqual(file.profiles[0]!.weights, [9]);
});

Deno.test("formatSpeedscope() is JSON; a bad location index is a RangeError", () => {
  assert.deepEqual(JSON.parse(formatSpeedscope(profile)), speedscopeFile(profile));
  const bad = { ...profile, samples: [{ locations: [99], count: 1, pid: 1, tid: 1, comm: "x" }] };
  assert.throws(() => speedscopeFile(bad), RangeError);
});

Deno.test("speedscopeFile() names a process by its main thread's busiest name, not its first", () => {
  // A child sampled once between fork and exec still carries its parent's name.
  const forked: Profile = {
    ...profile,
    samples: [
      { locations: [0], count: 1, pid: 40, tid: 40, comm: "deno" },
      { locations: [1, 0], count: 7, pid: 40, tid: 40, comm: "chain" },
      { locations: [2, 0], count: 20, pid: 40, tid: 41, comm: "worker" },
    ],
  };
  assert.deepEqual(speedscopeFile(forked).profiles.map((p) => p.name), ["chain (pid 40)"]);
});

Deno.test("speedscopeFile() of an off-CPU profile weighs wall time in ns: CPU samples by period, off-CPU by time", () => {
  const file = speedscopeFile({
    ...profile,
    offCpu: true,
    samples: [
      { locations: [1, 0], count: 2, pid: 10, tid: 10, comm: "app" },
      { locations: [3, 0], count: 0, offCpuNs: 45_000_000, pid: 10, tid: 10, comm: "app" },
      { locations: [1, 0], count: 0, offCpuNs: 5_000_000, pid: 10, tid: 11, comm: "app-worker" },
      { locations: [4, 0], count: 1, pid: 20, tid: 20, comm: "python3" },
      // A process that only slept: a profile of its own.
      { locations: [0], count: 0, offCpuNs: 1_000_000, pid: 30, tid: 30, comm: "idle" },
    ],
  });
  assert.deepEqual(file.profiles.map((p) => p.name), ["app (pid 10)", "python3 (pid 20)", "idle (pid 30)"]);
  const app = file.profiles[0]!;
  assert.equal(app.unit, "nanoseconds");
  assert.deepEqual(app.samples, [[0, 1], [0, 2]]);
  assert.deepEqual(app.weights, [25_000_000, 45_000_000]);
  assert.equal(app.endValue, 70_000_000);
  assert.deepEqual(file.profiles[2]!.weights, [1_000_000]);
});

Deno.test("speedscopeFile() of a probe-event profile weighs hits, with a profile per process and event when several", () => {
  const events: Profile = {
    ...profile,
    periodNs: 0,
    offCpu: true, // ignored: an events profile has no wall time
    events: ["uprobe:/usr/bin/app:work", "tracepoint:syscalls:sys_enter_read"],
    samples: [
      { locations: [1, 0], count: 2, event: 0, pid: 10, tid: 10, comm: "app" },
      { locations: [2, 0], count: 3, event: 0, pid: 10, tid: 11, comm: "app-worker" },
      { locations: [3, 0], count: 4, event: 1, pid: 10, tid: 10, comm: "app" },
      { locations: [0], count: 1, pid: 10, tid: 10, comm: "app" }, // no event
    ],
  };
  const file = speedscopeFile(events);
  assert.deepEqual(
    file.profiles.map((p) => [p.name, p.unit, p.samples, p.weights, p.endValue]),
    [
      ["app (pid 10): uprobe:/usr/bin/app:work", "none", [[0, 1]], [5], 5],
      ["app (pid 10): tracepoint:syscalls:sys_enter_read", "none", [[0, 2]], [4], 4],
      ["app (pid 10): [unknown event]", "none", [[0]], [1], 1],
    ],
  );
  // One event: the profiles of a CPU profile, in hits.
  const one = speedscopeFile({
    ...events,
    events: ["uprobe:/usr/bin/app:work"],
    samples: events.samples.slice(0, 2),
  });
  assert.deepEqual(one.profiles.map((p) => [p.name, p.unit, p.weights]), [["app (pid 10)", "none", [5]]]);
});

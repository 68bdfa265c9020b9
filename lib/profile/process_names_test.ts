import assert from "node:assert/strict";
import type { Profile, ProfileSample } from "./profile.ts";
import { processNames } from "./process_names.ts";

function profileOf(samples: ProfileSample[]): Profile {
  return { startTimeNs: 0, durationNs: 1e9, periodNs: 1e7, mappings: [], locations: [], samples };
}

Deno.test("processNames() takes the main thread's busiest name, not the first one seen", () => {
  const names = processNames(profileOf([
    { locations: [], count: 1, pid: 40, tid: 40, comm: "deno" },
    { locations: [], count: 7, pid: 40, tid: 40, comm: "chain" },
    { locations: [], count: 20, pid: 40, tid: 41, comm: "worker" },
  ]));
  assert.deepEqual([...names], [[40, "chain"]]);
});

Deno.test("processNames() falls back to the busiest thread when the main thread has no samples", () => {
  const names = processNames(profileOf([
    { locations: [], count: 2, pid: 50, tid: 51, comm: "io" },
    { locations: [], count: 5, pid: 50, tid: 52, comm: "compute" },
    { locations: [], count: 0, pid: 50, tid: 50, comm: "idle-main" },
  ]));
  assert.deepEqual([...names], [[50, "compute"]]);
});

Deno.test("processNames() weighs off-CPU samples by time, so a process that only slept has a name", () => {
  const names = processNames({
    ...profileOf([
      { locations: [], count: 0, offCpuNs: 900_000_000, pid: 60, tid: 60, comm: "sleeper" },
      { locations: [], count: 2, pid: 70, tid: 70, comm: "bash" }, // 20 ms on the CPU
      { locations: [], count: 0, offCpuNs: 30_000_000, pid: 70, tid: 70, comm: "make" }, // 30 ms off it
    ]),
    offCpu: true,
  });
  assert.deepEqual([...names], [[60, "sleeper"], [70, "make"]]);
});

Deno.test("processNames() weighs a probe-event profile's samples by hits, though its period is 0", () => {
  const names = processNames({
    ...profileOf([
      { locations: [], count: 1, event: 0, pid: 80, tid: 80, comm: "sh" },
      { locations: [], count: 6, event: 1, pid: 80, tid: 80, comm: "server" },
      { locations: [], count: 0, offCpuNs: 900_000_000, pid: 80, tid: 80, comm: "stray" },
    ]),
    periodNs: 0,
    offCpu: true,
    events: ["uprobe:/usr/bin/server:handle", "tracepoint:syscalls:sys_enter_write"],
  });
  assert.deepEqual([...names], [[80, "server"]]);
});

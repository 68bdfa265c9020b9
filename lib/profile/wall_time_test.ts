import assert from "node:assert/strict";
import type { ProfileSample } from "./profile.ts";
import { hasOffCpuTime, sampleOffCpuNs, sampleOnCpuNs, sampleWallNs } from "./wall_time.ts";

const cpu: ProfileSample = { locations: [], count: 3, pid: 1, tid: 1, comm: "a" };
const off: ProfileSample = { locations: [], count: 0, offCpuNs: 2_500_000, pid: 1, tid: 1, comm: "a" };

Deno.test("a CPU sample stands for its periods, an off-CPU sample for its switched-out ns", () => {
  assert.equal(sampleOnCpuNs(cpu, 10_000_000), 30_000_000);
  assert.equal(sampleOffCpuNs(cpu), 0);
  assert.equal(sampleWallNs(cpu, 10_000_000), 30_000_000);
  assert.equal(sampleOnCpuNs(off, 10_000_000), 0);
  assert.equal(sampleOffCpuNs(off), 2_500_000);
  assert.equal(sampleWallNs(off, 10_000_000), 2_500_000);
  assert.equal(
    sampleWallNs({ count: -2, offCpuNs: -5 }, 10),
    0,
    "values that are not positive count nothing",
  );
});

Deno.test("hasOffCpuTime() holds for the flag, or for an off-CPU sample without it", () => {
  assert.equal(hasOffCpuTime({ samples: [cpu] }), false);
  assert.equal(hasOffCpuTime({ offCpu: true, samples: [cpu] }), true);
  assert.equal(hasOffCpuTime({ offCpu: false, samples: [cpu, off] }), true);
  assert.equal(hasOffCpuTime({ samples: [] }), false);
});

Deno.test("hasOffCpuTime() never holds for a profile of probe events, whose period is 0", () => {
  assert.equal(hasOffCpuTime({ events: ["kprobe:do_sys_openat2"], samples: [cpu] }), false);
  assert.equal(hasOffCpuTime({ events: [], offCpu: true, samples: [cpu, off] }), false);
});

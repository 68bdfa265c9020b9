import assert from "node:assert/strict";
import type { Profile } from "../profile/profile.ts";
import { timeSummary } from "./time_summary.ts";

const profile: Profile = {
  startTimeNs: 0,
  durationNs: 2e9,
  periodNs: 10_000_000,
  mappings: [],
  locations: [],
  samples: [
    { locations: [], count: 30, pid: 1, tid: 1, comm: "a" },
    { locations: [], count: 0, offCpuNs: 1_200_000_000, pid: 1, tid: 2, comm: "a" },
    { locations: [], count: 10, pid: 1, tid: 2, comm: "a" },
    { locations: [], count: 0, offCpuNs: 700_000, pid: 1, tid: 3, comm: "a" },
  ],
};

Deno.test("timeSummary() gives on-CPU, off-CPU and wall time of an off-CPU profile", () => {
  assert.equal(
    timeSummary({ ...profile, offCpu: true }),
    "on-CPU 0.400 s (40 samples), off-CPU 1.201 s, wall 1.601 s",
  );
  assert.equal(
    timeSummary({ ...profile, offCpu: true, samples: [profile.samples[0]!] }),
    "on-CPU 0.300 s (30 samples), off-CPU 0.000 s, wall 0.300 s",
    "recorded with off-CPU time, none switched out",
  );
});

Deno.test("timeSummary() is null without off-CPU time", () => {
  assert.equal(timeSummary({ ...profile, samples: [profile.samples[0]!] }), null);
});

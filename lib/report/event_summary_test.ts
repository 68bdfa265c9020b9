import assert from "node:assert/strict";
import type { Profile } from "../profile/profile.ts";
import { countUnit, eventSummary } from "./event_summary.ts";

const base: Profile = {
  startTimeNs: 0,
  durationNs: 1e9,
  periodNs: 0,
  mappings: [],
  locations: [],
  samples: [],
};

Deno.test("eventSummary() gives each event's hits when there are several, in the order recorded", () => {
  const profile: Profile = {
    ...base,
    events: ["uprobe:/usr/bin/app:handle", "tracepoint:syscalls:sys_enter_getpgid", "kprobe:never"],
    samples: [
      { locations: [], count: 30, event: 0, pid: 1, tid: 1, comm: "app" },
      { locations: [], count: 1, event: 1, pid: 1, tid: 1, comm: "app" },
      { locations: [], count: 10, event: 0, pid: 1, tid: 2, comm: "app" },
    ],
  };
  assert.deepEqual(eventSummary(profile), [
    "  uprobe:/usr/bin/app:handle: 40 hits",
    "  tracepoint:syscalls:sys_enter_getpgid: 1 hit",
    "  kprobe:never: 0 hits",
  ]);
  assert.equal(countUnit(profile), "hits");
});

Deno.test("eventSummary() has no lines for one event, and is null for a CPU profile", () => {
  const one: Profile = {
    ...base,
    events: ["kprobe:do_sys_openat2"],
    samples: [{ locations: [], count: 3, event: 0, pid: 1, tid: 1, comm: "app" }],
  };
  assert.deepEqual(eventSummary(one), []);
  // Hits of no recorded event make a second line.
  assert.deepEqual(eventSummary({ ...one, samples: [...one.samples, { ...one.samples[0]!, event: 4 }] }), [
    "  kprobe:do_sys_openat2: 3 hits",
    "  [unknown event]: 3 hits",
  ]);
  assert.equal(eventSummary({ ...base, periodNs: 1e7 }), null);
  assert.equal(countUnit({ ...base, periodNs: 1e7 }), "samples");
});

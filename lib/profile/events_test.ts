import assert from "node:assert/strict";
import type { ProfileSample } from "./profile.ts";
import { eventHits, hasEvents, sampleEventIndex, sampleEventName, UNKNOWN_EVENT } from "./events.ts";

const events = ["uprobe:/usr/bin/app:handle", "tracepoint:syscalls:sys_enter_getpgid"];
const sample = (event: number | undefined, count: number): ProfileSample => ({
  locations: [],
  count,
  pid: 1,
  tid: 1,
  comm: "app",
  ...(event === undefined ? {} : { event }),
});

Deno.test("hasEvents() holds for a profile with an events list, even an empty one", () => {
  assert.equal(hasEvents({}), false);
  assert.equal(hasEvents({ events: [] }), true);
  assert.equal(hasEvents({ events }), true);
});

Deno.test("a sample's event is its index when it is one of the profile's, else unknown", () => {
  assert.equal(sampleEventIndex(sample(1, 1), events), 1);
  assert.equal(sampleEventName(sample(1, 1), events), "tracepoint:syscalls:sys_enter_getpgid");
  assert.equal(sampleEventIndex(sample(2, 1), events), -1);
  assert.equal(sampleEventIndex(sample(-1, 1), events), -1);
  assert.equal(sampleEventIndex(sample(0.5, 1), events), -1);
  assert.equal(sampleEventName(sample(undefined, 1), events), "[unknown event]");
});

Deno.test("eventHits() adds counts per event, keeps events never hit, and puts strays last", () => {
  assert.deepEqual(eventHits({ events, samples: [sample(0, 3), sample(0, 4), sample(1, 0)] }), [
    { name: "uprobe:/usr/bin/app:handle", hits: 7 },
    { name: "tracepoint:syscalls:sys_enter_getpgid", hits: 0 },
  ]);
  assert.deepEqual(eventHits({ events, samples: [sample(1, 2), sample(undefined, 5), sample(9, -1)] }), [
    { name: "uprobe:/usr/bin/app:handle", hits: 0 },
    { name: "tracepoint:syscalls:sys_enter_getpgid", hits: 2 },
    { name: UNKNOWN_EVENT, hits: 5 },
  ]);
  assert.deepEqual(eventHits({ samples: [sample(undefined, 5)] }), [{ name: "[unknown event]", hits: 5 }]);
});

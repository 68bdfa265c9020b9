import { openTracerObject } from "./tracer_object.ts";
import assert from "node:assert/strict";
import { BPF_F_NO_PREALLOC } from "../bpf/map.ts";
import { allocateOnDemand, kernelAllocatesOnDemand, ON_DEMAND_MAPS } from "./map_allocation.ts";

Deno.test("kernelAllocatesOnDemand: 6.1 and later, by uname release", () => {
  for (const release of ["6.1.0-40-amd64", "6.12.48+deb13-amd64", "6.18.0", "7.0.1", "10.2"]) {
    assert.equal(kernelAllocatesOnDemand(release), true, release);
  }
  for (const release of ["5.10.0-35-amd64", "6.0.19", "5.15.0-1-generic", "4.19", "", "linux", "6"]) {
    assert.equal(kernelAllocatesOnDemand(release), false, release);
  }
});

Deno.test("allocateOnDemand marks exactly the listed hash maps, and only on a kernel that allows it", () => {
  using object = openTracerObject();
  const before = new Map(ON_DEMAND_MAPS.map((name) => [name, object.map(name).flags]));
  assert.equal(allocateOnDemand(object, "5.10.0"), false);
  for (const name of ON_DEMAND_MAPS) assert.equal(object.map(name).flags, before.get(name), name);

  assert.equal(allocateOnDemand(object, "6.1.0"), true);
  for (const name of ON_DEMAND_MAPS) {
    assert.equal(object.map(name).flags, before.get(name)! | BPF_F_NO_PREALLOC, name);
  }
  // The LPM trie always allocates on demand; the LRU maps and arrays are left as they are.
  assert.equal(object.map("reported_pids").flags & BPF_F_NO_PREALLOC, 0);
  // Five shared maps, python_procs, go_procs, v8_procs and hotspot_procs, and the 16 delta buckets.
  assert.equal(ON_DEMAND_MAPS.length, 9 + 16);
});

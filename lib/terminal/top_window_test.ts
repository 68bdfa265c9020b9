import assert from "node:assert/strict";
import type { Profile, ProfileLocation, ProfileSample } from "../profile/profile.ts";
import { TopWindow } from "./top_window.ts";

const fn = (functionName: string, kind: ProfileLocation["kind"] = "native"): ProfileLocation => ({
  kind,
  mapping: -1,
  address: 0,
  functionName,
  sourceFile: "",
  line: 0,
});

function profile(
  locations: ProfileLocation[],
  samples: Array<Partial<ProfileSample> & { locations: number[] }>,
): Profile {
  return {
    startTimeNs: 0,
    durationNs: 1e9,
    periodNs: 1e7,
    mappings: [],
    locations,
    samples: samples.map((s) => ({ count: 1, pid: 1, tid: 1, comm: "app", ...s })),
  };
}

Deno.test("TopWindow counts self at the leaf and total once per sample, recursion included", () => {
  const window = new TopWindow();
  // main -> f -> f -> g (leaf first), and main -> f (leaf), two locations of f.
  window.add(
    profile([fn("g"), fn("f"), fn("f"), fn("main"), fn("g", "kernel")], [
      { locations: [0, 1, 2, 3], count: 6 },
      { locations: [1, 3], count: 2 },
      { locations: [4, 0, 1, 3], count: 2 },
    ]),
    1,
  );
  const rows = window.rows(10);
  assert.deepEqual(rows.map((r) => [r.name, r.kind, r.self, r.total]), [
    ["g", "native", 6, 8],
    ["f", "native", 2, 10],
    ["g", "kernel", 2, 2],
    ["main", "native", 0, 10],
  ]);
  assert.equal(rows[0]!.selfPercent, 60);
  assert.equal(rows[1]!.totalPercent, 100);
  assert.equal(window.samples, 10);
  assert.equal(window.rows(2).length, 2);
});

Deno.test("TopWindow halves old samples every half-life, so the view follows the present", () => {
  const window = new TopWindow({ halfLifeSeconds: 3 });
  const locations = [fn("old"), fn("new")];
  window.add(profile(locations, [{ locations: [0], count: 100 }]), 0);
  window.add(profile(locations, []), 3);
  assert.equal(window.samples, 50);
  assert.equal(window.rows(1)[0]!.self, 50);
  assert.equal(window.rows(1)[0]!.selfPercent, 100);
  window.add(profile(locations, [{ locations: [1], count: 50 }]), 0);
  assert.deepEqual(window.rows(2).map((r) => [r.name, r.selfPercent]), [["new", 50], ["old", 50]]);
  window.add(profile(locations, [{ locations: [1], count: 10 }]), 6);
  const [first, second] = window.rows(2);
  assert.equal(first!.name, "new");
  assert.ok(Math.abs(first!.self - 22.5) < 1e-9 && Math.abs(second!.self - 12.5) < 1e-9);
  // Long enough for both to decay below the floor: forgotten.
  window.add(profile(locations, []), 120);
  assert.equal(window.size, 0);
  assert.deepEqual(window.rows(5), []);
  assert.throws(() => new TopWindow({ halfLifeSeconds: 0 }), /half-life of 0 s/);
});

Deno.test("TopWindow names the command a function ran in most", () => {
  const window = new TopWindow();
  window.add(
    profile([fn("memcpy"), fn("main")], [
      { locations: [0, 1], count: 3, comm: "nginx" },
      { locations: [0, 1], count: 5, comm: "postgres", pid: 2, tid: 2 },
    ]),
    1,
  );
  assert.deepEqual(window.rows(5).map((r) => [r.name, r.command]), [["memcpy", "postgres"], [
    "main",
    "postgres",
  ]]);
  assert.throws(
    () => window.add(profile([fn("x")], [{ locations: [3] }]), 1),
    /Cannot add to the top window: sample 0 refers to location 3/,
  );
});

import assert from "node:assert/strict";
import type { FrameKind, Profile, ProfileLocation } from "../profile/profile.ts";
import { diffProfiles, formatDiffTable } from "./diff.ts";

/** A profile from `root;...;leaf count` lines; `[k]` marks kernel frames. */
function profileOf(lines: string[]): Profile {
  const locations: ProfileLocation[] = [];
  const ids = new Map<string, number>();
  const location = (name: string): number => {
    let id = ids.get(name);
    if (id === undefined) {
      const kind: FrameKind = name.endsWith("[k]") ? "kernel" : "native";
      id = locations.length;
      locations.push({
        kind,
        mapping: -1,
        address: id,
        functionName: name.replace("[k]", ""),
        sourceFile: "",
        line: 0,
      });
      ids.set(name, id);
    }
    return id;
  };
  return {
    startTimeNs: 0,
    durationNs: 1e9,
    periodNs: 1e7,
    mappings: [],
    locations,
    samples: lines.map((line) => {
      const [stack, count] = line.split(" ");
      return {
        comm: "app",
        pid: 1,
        tid: 1,
        count: Number(count),
        locations: stack!.split(";").map(location).reverse(),
      };
    }),
  };
}

Deno.test("diffProfiles() of a profile against itself finds no change", () => {
  const profile = profileOf(["main;a;b;c 90", "main;a 5", "main;write;do_syscall_64[k] 5"]);
  const diff = diffProfiles(profile, profile);
  assert.deepEqual(diff.rows, []);
  assert.equal(diff.unchanged, 6);
  assert.match(formatDiffTable(diff), /^No change: all 6 functions/);
});

Deno.test("diffProfiles() compares shares, so a longer profile with the same mix shows no change", () => {
  const diff = diffProfiles(profileOf(["main;a 10", "main;b 30"]), profileOf(["main;a 100", "main;b 300"]));
  assert.deepEqual(diff.rows, []);
  assert.deepEqual([diff.samplesBefore, diff.samplesAfter], [40, 400]);
});

Deno.test("diffProfiles() puts the function whose self share changed most first, before its callers", () => {
  const before = profileOf(["main;a;b;c 80", "main;a;b 10", "main;x 10"]);
  const after = profileOf(["main;a;b;c 40", "main;a;b;d 100", "main;a;b 20", "main;x 40"]);
  const diff = diffProfiles(before, after);
  // Self shares: c 80% -> 20%, d 0 -> 50%, x 10% -> 20%, b 10% -> 10%; totals of a and b 90% -> 80%.
  assert.deepEqual(diff.rows.map((row) => row.name), ["c", "d", "x", "a", "b"]);
  assert.equal(diff.unchanged, 1, "main: 100% of both");
  const [c, d, , a] = diff.rows;
  assert.ok(Math.abs(c!.selfDelta - (0.2 - 0.8)) < 1e-12);
  assert.ok(Math.abs(d!.selfDelta - 0.5) < 1e-12);
  assert.deepEqual([d!.selfBefore, d!.selfAfter, d!.totalAfter], [0, 100, 100]);
  assert.ok(Math.abs(a!.totalDelta + 0.1) < 1e-12 && a!.selfDelta === 0);
  const table = formatDiffTable(diff, { limit: 2 });
  const lines = table.split("\n");
  assert.match(
    lines[0]!,
    /Δself\s+self before\s+self after\s+Δtotal\s+total before\s+total after\s+function/,
  );
  assert.match(lines[1]!, /^-60\.00 pp\s+80\.00%\s+20\.00%\s+-60\.00 pp\s+80\.00%\s+20\.00%\s+c$/);
  assert.match(lines[2]!, /^\+50\.00 pp\s+0\.00%\s+50\.00%\s+\+50\.00 pp\s+0\.00%\s+50\.00%\s+d$/);
  assert.match(table, /\(3 more changed functions; 1 unchanged\)/);
});

Deno.test("diffProfiles() keeps kernel and native functions of the same name apart", () => {
  const diff = diffProfiles(profileOf(["main;write 10"]), profileOf(["main;write[k] 10"]));
  assert.deepEqual(diff.rows.map((row) => `${row.name}/${row.kind}`).sort(), [
    "write/kernel",
    "write/native",
  ]);
  assert.match(formatDiffTable(diff), /write \[k\]\n/);
});

Deno.test("diffProfiles() compares CPU samples only, leaving off-CPU samples (count 0) out", () => {
  const before = profileOf(["main;a 10", "main;b 30"]);
  const after: Profile = {
    ...profileOf(["main;a 10", "main;b 30", "main;read;schedule[k] 0"]),
    offCpu: true,
  };
  after.samples[2]!.offCpuNs = 9e9;
  const diff = diffProfiles(before, after);
  assert.deepEqual(diff.rows, [], "the same CPU mix: no change, and no read or schedule row");
  assert.deepEqual([diff.samplesBefore, diff.samplesAfter], [40, 40]);
  // Only off-CPU samples after: every function's share drops to 0, without dividing by zero.
  const asleep: Profile = { ...after, samples: [after.samples[2]!] };
  const gone = diffProfiles(before, asleep);
  assert.equal(gone.samplesAfter, 0);
  assert.deepEqual(gone.rows.map((row) => [row.name, row.totalDelta]), [["b", -0.75], ["a", -0.25], [
    "main",
    -1,
  ]]);
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

Deno.test("diffProfiles() of probe-event profiles compares shares of hits, though the period is 0", () => {
  const diff = diffProfiles(eventsProfile(3), eventsProfile(9));
  assert.deepEqual([diff.samplesBefore, diff.samplesAfter], [4, 10]);
  assert.deepEqual(diff.rows.map((r) => [r.name, r.selfDelta.toFixed(2), r.totalDelta.toFixed(2)]), [
    ["handle", "0.15", "0.15"],
    ["main", "-0.15", "0.00"],
  ]);
});

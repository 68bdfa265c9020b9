import assert from "node:assert/strict";
import type { FrameKind, Profile, ProfileLocation } from "../../profile/profile.ts";
import { diffFlamegraphData, type FlamegraphData, flamegraphData } from "./flamegraph_data.ts";

/** A profile from `comm/pid/tid: root;...;leaf count` lines; `[k]` marks kernel frames. */
function profileOf(lines: string[], mappingFile = "/usr/bin/app"): Profile {
  const locations: ProfileLocation[] = [];
  const ids = new Map<string, number>();
  const location = (name: string): number => {
    let id = ids.get(name);
    if (id === undefined) {
      const kind: FrameKind = name.endsWith("[k]") ? "kernel" : "native";
      id = locations.length;
      locations.push({
        kind,
        mapping: kind === "native" ? 0 : -1,
        address: 0x1000 + id,
        functionName: name.replace("[k]", ""),
        sourceFile: "",
        line: 0,
      });
      ids.set(name, id);
    }
    return id;
  };
  return {
    startTimeNs: 1e18,
    durationNs: 2e9,
    periodNs: 1e7,
    mappings: [{ start: 0, end: 0, fileOffset: 0, fileName: mappingFile, buildId: "", hasFunctions: true }],
    locations,
    samples: lines.map((line) => {
      const [, comm, pid, tid, stack, count] = /^(\S+)\/(\d+)\/(\d+): (\S+) (\d+)$/.exec(line)!;
      return {
        comm: comm!,
        pid: Number(pid),
        tid: Number(tid),
        count: Number(count),
        locations: stack!.split(";").map(location).reverse(),
      };
    }),
  };
}

/** Every sample as `process;root;...;leaf@tid count`, rebuilt from the page data. */
function pathsOf(data: FlamegraphData): string[] {
  const name = (frame: number) => data.strings[data.frames[3 * frame]!]!;
  const out: string[] = [];
  for (let s = 0; s < data.sampleNode.length; s++) {
    const parts: string[] = [];
    for (let n = data.sampleNode[s]!; n > 0; n -= data.nodeParentDistance[n]!) {
      parts.unshift(name(data.nodeFrame[n]!));
    }
    out.push(`${parts.join(";")}@${data.threads[4 * data.sampleThread[s]! + 1]} ${data.sampleCount[s]}`);
  }
  return out.sort();
}

Deno.test("flamegraphData() merges stacks into one tree under their process, samples per thread", () => {
  const data = flamegraphData(profileOf([
    "app/10/10: main;a;b 5",
    "app/10/10: main;a;c 2",
    "worker/10/11: main;a;b 1",
    "app/10/10: main;a;b 3", // the same stack again on the same thread: one sample entry
    "sh/20/20: main;do_syscall_64[k] 4",
  ]));
  assert.deepEqual(pathsOf(data), [
    "app;main;a;b@10 8",
    "app;main;a;b@11 1",
    "app;main;a;c@10 2",
    "sh;main;do_syscall_64@20 4",
  ]);
  // root, app, main, a, b, c, sh, main (of /usr/bin/app in another process), do_syscall_64
  assert.equal(data.nodeParentDistance.length, 9);
  for (let n = 1; n < data.nodeParentDistance.length; n++) {
    assert.ok(data.nodeParentDistance[n]! > 0, "parents come first");
  }
  assert.deepEqual(data.series, [{
    name: "profile",
    samples: 15,
    durationNs: 2e9,
    periodNs: 1e7,
    startTimeNs: 1e18,
  }]);
  assert.deepEqual([...data.strings], [...data.strings].sort(), "the string table is sorted");
});

Deno.test("flamegraphData() stores kinds, files and pids of frames", () => {
  const data = flamegraphData(profileOf(["app/10/12: main;do_syscall_64[k] 1"]));
  const frames = [];
  for (let f = 0; f < data.frames.length / 3; f++) {
    const detail = data.frames[3 * f + 2]!;
    const kind = data.kinds[data.frames[3 * f + 1]!]!;
    frames.push([
      data.strings[data.frames[3 * f]!],
      kind,
      kind === "process" ? detail : detail < 0 ? null : data.strings[detail],
    ]);
  }
  assert.deepEqual(frames, [
    ["app", "process", 10],
    ["do_syscall_64", "kernel", null],
    ["main", "native", "/usr/bin/app"],
  ], "in name order");
  assert.deepEqual(data.threads.slice(0, 2), [10, 12]);
  assert.equal(data.strings[data.threads[2]!], "app");
});

Deno.test("flamegraphData() names a process after its main thread", () => {
  const processName = (data: FlamegraphData) => {
    const f = data.nodeFrame[1]!;
    assert.equal(data.kinds[data.frames[3 * f + 1]!], "process");
    return data.strings[data.frames[3 * f]!];
  };
  assert.equal(
    processName(flamegraphData(profileOf(["worker/10/11: main 50", "server/10/10: main 1"]))),
    "server",
  );
  assert.equal(
    processName(flamegraphData(profileOf(["worker/10/11: main 50", "io/10/12: main 1"]))),
    "worker",
    "without the main thread: the busiest name",
  );
});

Deno.test("flamegraphData() lists nodes depth first with children in name order", () => {
  const data = flamegraphData(
    profileOf(["app/1/1: main;zeta 1", "app/1/1: main;alpha;x 1", "app/1/1: main;beta 1"]),
  );
  const names = data.nodeFrame.map((f) => f < 0 ? "root" : data.strings[data.frames[3 * f]!]);
  assert.deepEqual(names, ["root", "app", "main", "alpha", "x", "beta", "zeta"]);
  assert.deepEqual(data.nodeParentDistance, [0, 1, 1, 1, 1, 3, 4]);
});

Deno.test("flamegraphData() makes one frame of a function sampled at several addresses", () => {
  const profile = profileOf(["app/1/1: main;work 1"]);
  profile.locations.push({ ...profile.locations[1]!, address: 0x9999 });
  profile.samples.push({ locations: [2, 0], count: 4, pid: 1, tid: 1, comm: "app" });
  const data = flamegraphData(profile);
  assert.deepEqual(pathsOf(data), ["app;main;work@1 5"]);
});

Deno.test("flamegraphData() reports progress and rejects a sample with a bad location", () => {
  const calls: [number, number][] = [];
  flamegraphData(profileOf(["a/1/1: x 1", "a/1/1: y 1"]), {
    onProgress: (done, total) => calls.push([done, total]),
  });
  assert.deepEqual(calls.at(-1), [2, 2]);
  const bad = profileOf(["a/1/1: x 1"]);
  bad.samples[0]!.locations = [7];
  assert.throws(() => flamegraphData(bad), RangeError);
});

Deno.test("diffFlamegraphData() matches functions by kind and name across two builds", () => {
  const data = diffFlamegraphData(
    profileOf(["chain/5/5: main;a;c 9"], "/tmp/build1/chain"),
    profileOf(["chain/6/6: main;a;d 3"], "/tmp/build2/chain"),
    { seriesNames: ["one.pb.gz", "two.pb.gz"] },
  );
  assert.equal(data.mode, "diff");
  assert.deepEqual(data.series.map((s) => [s.name, s.samples]), [["one.pb.gz", 9], ["two.pb.gz", 3]]);
  // One `main` and one `a` frame for both (files differ), two process frames (one per series).
  const names = [];
  for (let f = 0; f < data.frames.length / 3; f++) names.push(data.strings[data.frames[3 * f]!]);
  assert.deepEqual(names.sort(), ["a", "c", "chain", "chain", "d", "main"]);
  assert.deepEqual(data.threads.filter((_, i) => i % 4 === 3), [0, 1], "threads carry their series");
});

Deno.test("flamegraphData() of an off-CPU profile keeps each sample's off-CPU ns beside its count", () => {
  const profile = profileOf([
    "app/7/7: main;work 3",
    "app/7/7: main;read;vfs_read[k] 0",
    "app/7/8: main;read;vfs_read[k] 0",
  ]);
  profile.offCpu = true;
  profile.samples[1]!.offCpuNs = 40_000_000;
  profile.samples[2]!.offCpuNs = 2_000_000;
  // A CPU sample of the same stack and thread as the first off-CPU one: merged with it.
  profile.samples.push({ ...profile.samples[1]!, count: 1, offCpuNs: undefined });
  const data = flamegraphData(profile);
  const name = (frame: number) => data.strings[data.frames[3 * frame]!]!;
  const rows = data.sampleNode.map((node, s) => {
    const parts: string[] = [];
    for (let n = node; n > 0; n -= data.nodeParentDistance[n]!) parts.unshift(name(data.nodeFrame[n]!));
    return `${parts.join(";")}@${data.threads[4 * data.sampleThread[s]! + 1]} ${data.sampleCount[s]} ${
      data.sampleOffCpuNs![s]
    }`;
  }).sort();
  assert.deepEqual(rows, [
    "app;main;read;vfs_read@7 1 40000000",
    "app;main;read;vfs_read@8 0 2000000",
    "app;main;work@7 3 0",
  ]);
  assert.equal(data.series[0]!.samples, 4);
  assert.equal(data.series[0]!.offCpuNs, 42_000_000);
});

Deno.test("flamegraphData() without off-CPU time has no off-CPU fields", () => {
  const data = flamegraphData(profileOf(["app/7/7: main;work 3"]));
  assert.equal("sampleOffCpuNs" in data, false);
  assert.equal("offCpuNs" in data.series[0]!, false);
  const recorded = flamegraphData({ ...profileOf(["app/7/7: main;work 3"]), offCpu: true });
  assert.equal(recorded.series[0]!.offCpuNs, 0, "recorded with off-CPU time, none switched out");
  assert.deepEqual(recorded.sampleOffCpuNs, [0]);
});

Deno.test("flamegraphData() of a probe-event profile keeps each sample's event and never merges two events", () => {
  const profile = {
    ...profileOf([
      "app/7/7: main;handle 3",
      "app/7/7: main;handle 2", // the same stack, thread and event: merged
      "app/7/7: main;handle 4", // the same stack and thread, another event
      "app/7/8: main;read;vfs_read[k] 1", // no such event
    ]),
    periodNs: 0,
    events: ["uprobe:/usr/bin/app:handle", "tracepoint:syscalls:sys_enter_getpgid", "kprobe:never_hit"],
  };
  profile.samples[0]!.event = 0;
  profile.samples[1]!.event = 0;
  profile.samples[2]!.event = 1;
  profile.samples[3]!.event = 5;
  const data = flamegraphData(profile);
  assert.deepEqual(data.events, [
    "uprobe:/usr/bin/app:handle",
    "tracepoint:syscalls:sys_enter_getpgid",
    "kprobe:never_hit",
    "[unknown event]",
  ]);
  const name = (frame: number) => data.strings[data.frames[3 * frame]!]!;
  const rows = data.sampleNode.map((node, s) => {
    const parts: string[] = [];
    for (let n = node; n > 0; n -= data.nodeParentDistance[n]!) parts.unshift(name(data.nodeFrame[n]!));
    return `${parts.join(";")}@${data.threads[4 * data.sampleThread[s]! + 1]} ${data.sampleCount[s]} ${
      data.events![data.sampleEvent![s]!]
    }`;
  }).sort();
  assert.deepEqual(rows, [
    "app;main;handle@7 4 tracepoint:syscalls:sys_enter_getpgid",
    "app;main;handle@7 5 uprobe:/usr/bin/app:handle",
    "app;main;read;vfs_read@8 1 [unknown event]",
  ]);
  assert.equal(data.series[0]!.samples, 10);
  assert.deepEqual(data.series[0]!.eventHits, [5, 4, 0, 1]);
  assert.equal(data.title, "Event profile");
  assert.equal("sampleOffCpuNs" in data, false);
});

Deno.test("flamegraphData() without probe events has no event fields", () => {
  const data = flamegraphData(profileOf(["app/7/7: main;work 3"]));
  assert.equal("events" in data, false);
  assert.equal("sampleEvent" in data, false);
  assert.equal("eventHits" in data.series[0]!, false);
  assert.equal(data.title, "CPU profile");
});

import assert from "node:assert/strict";
import type { Profile, ProfileLocation } from "../../profile/profile.ts";
import { diffFlamegraphData, flamegraphData } from "./flamegraph_data.ts";
import { runtimeFrameKinds } from "../../profile/frame_kinds.ts";
import {
  buildViewTree,
  countTree,
  decodeData,
  diffColor,
  frameColor,
  functionTable,
  kindLabel,
  layoutTree,
  matchFrames,
  type Model,
  nodeValues,
  percent,
  pickEvent,
  searchTree,
  type ViewTree,
  visibleFrames,
  weighSamples,
} from "./page_model.js";

/** A profile from `comm/pid/tid: root;...;leaf count` lines. */
function profileOf(lines: string[]): Profile {
  const locations: ProfileLocation[] = [];
  const ids = new Map<string, number>();
  const location = (name: string): number => {
    let id = ids.get(name);
    if (id === undefined) {
      id = locations.length;
      locations.push({
        kind: "native",
        mapping: -1,
        address: id,
        functionName: name,
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

function labelOf(model: Model, tree: ViewTree, v: number): string {
  return v === 0 ? "all" : model.strings[model.frameName[tree.frame[v]!]!]!;
}

/** The view node at a path of names below the root (throws when absent). */
function nodeAt(model: Model, tree: ViewTree, path: string[]): number {
  let v = 0;
  for (const name of path) {
    let found = -1;
    for (let i = tree.childStart[v]!; i < tree.childStart[v + 1]!; i++) {
      if (labelOf(model, tree, tree.children[i]!) === name) found = tree.children[i]!;
    }
    assert.ok(found >= 0, `no ${name} under ${labelOf(model, tree, v)}`);
    v = found;
  }
  return v;
}

const LINES = [
  "app/1/1: main;parse;lex 6",
  "app/1/2: main;parse;alloc 2",
  "app/1/1: main;compute 10",
  "app/2/2: main;compute 4",
  "sh/3/3: main;wait 3",
];

Deno.test("decodeData() reads page data and rejects out-of-range tables", () => {
  const data = flamegraphData(profileOf(LINES));
  const model = decodeData(data);
  assert.equal(model.nodeParent.length, data.nodeParentDistance.length);
  assert.deepEqual([...model.nodeParent.subarray(0, 3)], [-1, 0, 1]);
  assert.throws(
    () => decodeData({ ...data, nodeParentDistance: [0, 5, ...data.nodeParentDistance.slice(2)] }),
    RangeError,
  );
  assert.throws(() => decodeData({ ...data, sampleNode: data.sampleNode.map(() => 999) }), RangeError);
  assert.throws(() => decodeData({ ...data, version: 2 }), RangeError);
  // Node 3's parent is node 1, which is no longer on the path once node 2 (a child of the root) came.
  const notDepthFirst = {
    ...data,
    nodeParentDistance: [0, 1, 2, 2],
    nodeFrame: [-1, 0, 0, 1],
    sampleNode: [3],
  };
  assert.throws(
    () => decodeData({ ...notDepthFirst, sampleThread: [0], sampleCount: [1] }),
    /not in depth-first order/,
  );
});

Deno.test("buildViewTree() groups by process, by command name, or not at all", () => {
  const model = decodeData(flamegraphData(profileOf(LINES)));
  const byProcess = buildViewTree(model, "process");
  const byCommand = buildViewTree(model, "command");
  const flat = buildViewTree(model, "none");
  const rootChildren = (tree: ViewTree) =>
    [...tree.children.subarray(tree.childStart[0]!, tree.childStart[1]!)].map((v) => labelOf(model, tree, v));
  assert.deepEqual(rootChildren(byProcess), ["app", "app", "sh"]);
  assert.deepEqual(rootChildren(byCommand), ["app", "sh"]);
  assert.deepEqual(rootChildren(flat), ["main"]);
  const counts = countTree(model, byCommand, null);
  assert.equal(counts.total[0]![nodeAt(model, byCommand, ["app", "main", "compute"])], 14);
  const flatCounts = countTree(model, flat, null);
  assert.equal(flatCounts.total[0]![nodeAt(model, flat, ["main"])], 25);
  assert.equal(flatCounts.samples[0], 25);
  assert.equal(flat.maxDepth, 3);
});

Deno.test("countTree() sums self and total samples of the threads that pass the filter", () => {
  const model = decodeData(flamegraphData(profileOf(LINES)));
  const tree = buildViewTree(model, "none");
  const thread2 = new Uint8Array(model.threadPid.length);
  for (let t = 0; t < thread2.length; t++) thread2[t] = model.threadTid[t] === 2 ? 1 : 0;
  const counts = countTree(model, tree, thread2);
  assert.equal(counts.samples[0], 6, "tid 2 of pid 1 (alloc) and tid 2 of pid 2 (compute)");
  const main = nodeAt(model, tree, ["main"]);
  assert.equal(counts.self[0]![main], 0);
  assert.equal(counts.total[0]![main], 6);
  assert.equal(counts.total[0]![nodeAt(model, tree, ["main", "parse", "lex"])], 0);
});

Deno.test("layoutTree() places children side by side in name order", () => {
  const model = decodeData(flamegraphData(profileOf(LINES)));
  const tree = buildViewTree(model, "none");
  const value = nodeValues(countTree(model, tree, null));
  const x = layoutTree(tree, value);
  const compute = nodeAt(model, tree, ["main", "compute"]);
  const parse = nodeAt(model, tree, ["main", "parse"]);
  const wait = nodeAt(model, tree, ["main", "wait"]);
  assert.deepEqual([x[compute], x[parse], x[wait]], [0, 14, 22]);
  assert.deepEqual([value[compute], value[parse], value[wait]], [14, 8, 3]);
});

Deno.test("visibleFrames() spans the zoomed frame over the width and leaves out frames under 0.5 px", () => {
  const lines = ["app/1/1: main;hot 100000", "app/1/1: main;cold;deeper 1"];
  const model = decodeData(flamegraphData(profileOf(lines)));
  const tree = buildViewTree(model, "none");
  const value = nodeValues(countTree(model, tree, null));
  const x = layoutTree(tree, value);
  const names = (list: ReturnType<typeof visibleFrames>) =>
    [...list.node.subarray(0, list.count)].map((v) => labelOf(model, tree, v));
  const full = visibleFrames(tree, value, x, 0, 1000, 0.5);
  assert.deepEqual(names(full), ["all", "main", "hot"], "cold is 0.01 px wide");
  const cold = nodeAt(model, tree, ["main", "cold"]);
  const zoomed = visibleFrames(tree, value, x, cold, 1000, 0.5);
  assert.deepEqual(names(zoomed), ["all", "main", "cold", "deeper"]);
  const i = names(zoomed).indexOf("cold");
  assert.deepEqual([zoomed.left[i], zoomed.width[i], zoomed.depth[i]], [0, 1000, 2]);
  assert.equal(zoomed.width[0], 1000, "ancestors span the width too");
  assert.equal(zoomed.maxDepth, 3);
});

Deno.test("matchFrames() and searchTree() find functions and count each sample once", () => {
  const lines = ["app/1/1: main;Recurse;recurse;leaf 3", "app/1/1: main;other 1", "recurser/2/2: main 6"];
  const model = decodeData(flamegraphData(profileOf(lines)));
  const tree = buildViewTree(model, "process");
  const counts = countTree(model, tree, null);
  const matches = matchFrames(model, "RECURSE")!;
  const search = searchTree(tree, counts, matches);
  assert.deepEqual(search.samples, [3], "nested matches count once; process names never match");
  assert.equal(search.nodes[nodeAt(model, tree, ["app", "main", "Recurse", "recurse"])], 1);
  assert.equal(search.nodes[nodeAt(model, tree, ["app", "main"])], 0);
  const regex = searchTree(tree, counts, matchFrames(model, "/^(other|leaf)$/")!);
  assert.deepEqual(regex.samples, [4]);
  assert.equal(matchFrames(model, "  "), null);
  assert.throws(() => matchFrames(model, "/(/"), SyntaxError);
});

Deno.test("functionTable() counts a recursive function once per stack in its total", () => {
  const lines = ["app/1/1: main;f;g;f 5", "app/1/1: main;g 2"];
  const model = decodeData(flamegraphData(profileOf(lines)));
  const tree = buildViewTree(model, "process");
  const rows = functionTable(model, tree, countTree(model, tree, null));
  const byName = new Map(rows.map((row) => [model.strings[model.frameName[row.frame]!]!, row]));
  assert.deepEqual([...byName.keys()].sort(), ["f", "g", "main"], "processes are not functions");
  assert.deepEqual(byName.get("f"), { frame: byName.get("f")!.frame, self: [5], total: [5] });
  assert.deepEqual(byName.get("g")!.total, [7]);
  assert.deepEqual(byName.get("main")!.total, [7]);
});

Deno.test("nodeValues() of a diff gives each frame the mean of its two shares", () => {
  const data = diffFlamegraphData(
    profileOf(["app/1/1: main;old 3", "app/1/1: main;both 1"]),
    profileOf(["app/9/9: main;new 1", "app/9/9: main;both 1"]),
  );
  const model = decodeData(data);
  const tree = buildViewTree(model, "command");
  const counts = countTree(model, tree, null);
  assert.deepEqual(counts.samples, [4, 2]);
  const value = nodeValues(counts);
  const at = (path: string[]) => value[nodeAt(model, tree, ["app", "main", ...path])];
  assert.equal(at([]), 1);
  assert.equal(at(["old"]), 0.375);
  assert.equal(at(["new"]), 0.25);
  assert.equal(at(["both"]), 0.375);
});

Deno.test("frameColor() is stable per name and kind; diffColor() is red for growth, blue for shrinkage", () => {
  assert.equal(frameColor("native", "main"), frameColor("native", "main"));
  assert.notEqual(frameColor("native", "main"), frameColor("kernel", "main"));
  assert.match(diffColor(0.1, 0.1), /^hsl\(0 /);
  assert.match(diffColor(-0.1, 0.1), /^hsl\(216 /);
  assert.equal(diffColor(0, 0.1), "hsl(0 0% 90%)");
  assert.deepEqual([percent(1, 3), percent(0, 5), percent(1, 0), percent(1, 1e6)], [
    "33.3%",
    "0%",
    "0%",
    "<0.01%",
  ]);
});

Deno.test("a runtime's frames get the label and colours its descriptor gives, through the page's data", () => {
  const runtimes = runtimeFrameKinds();
  assert.ok(runtimes.length > 0, "no runtime in the list");
  for (const runtime of runtimes) {
    const profile: Profile = {
      startTimeNs: 0,
      durationNs: 1e9,
      periodNs: 1e7,
      mappings: [],
      locations: [{
        kind: runtime.name,
        mapping: -1,
        address: 0,
        functionName: "run",
        sourceFile: "",
        line: 0,
      }],
      samples: [{ locations: [0], count: 1, pid: 7, tid: 7, comm: "app" }],
    };
    const data = flamegraphData(profile);
    assert.deepEqual(Object.keys(data.kindStyles), [runtime.name], "only the kinds the page shows");
    decodeData(data);
    assert.equal(kindLabel(runtime.name), runtime.label);
    const [, hue, sat, light] = /^hsl\(([\d.]+) ([\d.]+)% ([\d.]+)%\)$/.exec(frameColor(runtime.name, "run"))!
      .map(Number);
    const { colour } = runtime;
    assert.ok(
      hue! >= colour.hue && hue! <= colour.hue + colour.spread,
      `hue ${hue} of ${JSON.stringify(colour)}`,
    );
    assert.equal(sat, colour.sat);
    assert.ok(Math.abs(light! - colour.light) <= 4, `lightness ${light} of ${JSON.stringify(colour)}`);
  }
  const native = flamegraphData(profileOf(["app/10/12: main 1"]));
  assert.deepEqual(native.kindStyles, {}, "no runtime's style on a page without its frames");
});

Deno.test("weighSamples() counts an off-CPU page in ns of on-CPU, off-CPU or wall time", () => {
  const profile = profileOf([
    "app/1/1: main;compute 3", // 30 ms on the CPU (period 10 ms)
    "app/1/2: main;read 0", // switched out 45 ms
    "sh/3/3: main;wait 0", // switched out 1 s
  ]);
  profile.offCpu = true;
  profile.samples[1]!.offCpuNs = 45_000_000;
  profile.samples[2]!.offCpuNs = 1_000_000_000;
  const model = decodeData(flamegraphData(profile));
  assert.equal(model.offCpu, true);
  const tree = buildViewTree(model, "none");
  const totals = () => {
    const counts = countTree(model, tree, null);
    return [
      counts.samples[0],
      counts.total[0]![nodeAt(model, tree, ["main", "compute"])],
      counts.total[0]![nodeAt(model, tree, ["main", "read"])],
      counts.total[0]![nodeAt(model, tree, ["main", "wait"])],
    ];
  };
  // Wall time by default.
  assert.deepEqual(totals(), [1_075_000_000, 30_000_000, 45_000_000, 1_000_000_000]);
  weighSamples(model, "cpu");
  assert.deepEqual(totals(), [30_000_000, 30_000_000, 0, 0]);
  weighSamples(model, "off");
  assert.deepEqual(totals(), [1_045_000_000, 0, 45_000_000, 1_000_000_000]);
  weighSamples(model, "wall");
  assert.deepEqual(totals(), [1_075_000_000, 30_000_000, 45_000_000, 1_000_000_000]);
});

Deno.test("weighSamples() leaves a page without off-CPU time counting samples", () => {
  const model = decodeData(flamegraphData(profileOf(LINES)));
  assert.equal(model.offCpu, false);
  weighSamples(model, "wall");
  assert.equal(countTree(model, buildViewTree(model, "none"), null).samples[0], 25);
  assert.throws(
    () => decodeData({ ...flamegraphData(profileOf(LINES)), sampleOffCpuNs: [1] }),
    /table lengths disagree/,
  );
});

Deno.test("pickEvent() counts the hits of one probe event, or of all with -1", () => {
  const profile: Profile = {
    ...profileOf([
      "app/1/1: main;handle 3",
      "app/1/1: main;handle 4",
      "app/1/2: main;read 2",
    ]),
    periodNs: 0,
    events: ["uprobe:/usr/bin/app:handle", "tracepoint:syscalls:sys_enter_read"],
  };
  profile.samples[0]!.event = 0;
  profile.samples[1]!.event = 1;
  profile.samples[2]!.event = 1;
  const model = decodeData(flamegraphData(profile));
  assert.deepEqual(model.events, ["uprobe:/usr/bin/app:handle", "tracepoint:syscalls:sys_enter_read"]);
  assert.equal(model.offCpu, false);
  const tree = buildViewTree(model, "none");
  const totals = () => {
    const counts = countTree(model, tree, null);
    return [
      counts.samples[0],
      counts.total[0]![nodeAt(model, tree, ["main", "handle"])],
      counts.total[0]![nodeAt(model, tree, ["main", "read"])],
    ];
  };
  assert.deepEqual(totals(), [9, 7, 2], "all events by default");
  pickEvent(model, 0);
  assert.deepEqual(totals(), [3, 3, 0]);
  pickEvent(model, 1);
  assert.deepEqual(totals(), [6, 4, 2]);
  pickEvent(model, -1);
  assert.deepEqual(totals(), [9, 7, 2]);
  const data = flamegraphData(profile);
  assert.throws(() => decodeData({ ...data, sampleEvent: [0] }), /table lengths disagree/);
  assert.throws(() => decodeData({ ...data, sampleEvent: data.sampleEvent!.map(() => 2) }), /out of range/);
});

// End-to-end test of Go pprof labels: a stripped Go program (`-ldflags="-s -w"`) runs the chain
// main.a;main.b;main.c in two goroutines under pprof.Do with labels of their own, `omniprof record -p`
// records it, and each sample of the pprof file must carry its goroutine's labels, read back with the
// published schema and with `go tool pprof -tags`. Needs root, BTF and Go.
import assert from "node:assert/strict";
import { programs, requiring } from "../lib/testing/requirements.ts";
import { buildGoWorkload, installedGo, tempDir, tracing } from "./helpers.ts";
import { decodePprofBySchema, type PbProfile } from "./pprof_schema.ts";
import { recordRunning } from "./recording_window.ts";
import { assertSampleCount } from "./sample_bounds.ts";
import { u32Key } from "../lib/bpf/map.ts";
import { Recorder } from "../lib/record/recorder.ts";
import type { Pid } from "../lib/types.ts";
import { GoLabelLayout, goProcInfoLayout } from "../support/types.ts";

/** What tests/workloads/labels.go sets, and what a trace keeps of it (values cut to 64 bytes). */
const WORKERS = ["alpha", "beta"];
const PHASE = "spin";
const LONG = "x".repeat(64);

interface LabeledSample {
  functions: string[];
  labels: Map<string, string[]>;
  tid: number;
  count: number;
}

/** The samples of `pid` with their functions (leaf first) and string labels. */
function samplesOf(profile: PbProfile, pid: number): LabeledSample[] {
  const strings = profile.stringTable;
  const functions = new Map(profile.function.map((f) => [f.id, strings[Number(f.name)]!]));
  const locations = new Map(profile.location.map((l) => [l.id, l]));
  const pidKey = strings.indexOf("pid");
  const tidKey = strings.indexOf("tid");
  return profile.sample
    .filter((sample) => sample.label.some((l) => Number(l.key) === pidKey && Number(l.num) === pid))
    .map((sample) => {
      const labels = new Map<string, string[]>();
      for (const label of sample.label) {
        if (Number(label.str) === 0) continue;
        const key = strings[Number(label.key)]!;
        labels.set(key, [...(labels.get(key) ?? []), strings[Number(label.str)]!]);
      }
      const names = sample.locationId.flatMap((id) =>
        locations.get(id)!.line.map((line) => functions.get(line.functionId)!)
      );
      const tid = Number(sample.label.find((l) => Number(l.key) === tidKey)?.num ?? -1);
      return { functions: names, labels, tid, count: Number(sample.value[0]) };
    });
}

/** The totals of `go tool pprof -tags` (sample counts) per tag and value of a pprof file's bytes. */
function pprofTags(pprof: Uint8Array): Map<string, Map<string, number>> {
  const dir = tempDir();
  const file = `${dir}/profile.pb.gz`;
  Deno.writeFileSync(file, pprof);
  const result = new Deno.Command("go", {
    args: ["tool", "pprof", "-tags", "-sample_index=samples", file],
    env: { GOTOOLCHAIN: "local" },
    stdout: "piped",
    stderr: "piped",
  }).outputSync();
  Deno.removeSync(dir, { recursive: true });
  const output = new TextDecoder().decode(result.stdout);
  assert.ok(result.success, new TextDecoder().decode(result.stderr));
  const tags = new Map<string, Map<string, number>>();
  let current: Map<string, number> | null = null;
  for (const line of output.split("\n")) {
    const tag = /^\s*(\S+): Total/.exec(line);
    if (tag) {
      current = new Map();
      tags.set(tag[1]!, current);
      continue;
    }
    const value = /^\s*([\d.]+) \(\s*[\d.]+%\): (.*)$/.exec(line);
    if (value && current) current.set(value[2]!, Number(value[1]));
  }
  return tags;
}

/**
 * What runtime.mcall runs on the thread's system stack for the goroutine it switches away from (the
 * `mcall(fn)` calls of Go's runtime). Until the scheduler drops it, that goroutine is still the thread's
 * current one (m.curg), whose labels a sample carries, as Go's own profiler gives them; the stack ends at
 * mcall, which clears the frame pointer so that no unwinder goes on into the goroutine's stack.
 */
const MCALL_FUNCTIONS = [
  "runtime.mcall",
  "runtime.gopreempt_m",
  "runtime.park_m",
  "runtime.gosched_m",
  "runtime.goschedguarded_m",
  "runtime.goyield_m",
  "runtime.preemptPark",
  "runtime.goexit0",
  "runtime.exitsyscall0",
];

const sum = (values: Iterable<number>) => [...values].reduce((a, b) => a + b, 0);

// Linked by Go, and by the system linker as every cgo program is: then the file's .eh_frame covers only
// the C start-up code, and unwinding stops at the first Go frame, so the labels must not wait for the
// root of the goroutine's stack.
for (const external of [false, true]) {
  const linking = external ? "linked by the system linker" : "linked by Go";
  Deno.test(requiring([tracing(), programs(...(external ? ["go", "gcc"] : ["go"]))], {
    name:
      `record -p PID of a stripped Go program (${linking}) under pprof.Do labels writes each goroutine's labels per sample`,
    async fn() {
      const binary = external
        ? await buildGoWorkload("labels", { ldflags: "-s -w -linkmode=external" }, "-external-stripped")
        : await buildGoWorkload("labels", { ldflags: "-s -w" }, "-stripped");
      const { pprof, pid, cpu, steal, stats } = await recordRunning(binary, { args: ["30"], cpuSeconds: 4 });
      const samples = samplesOf(decodePprofBySchema(pprof), pid);
      const total = sum(samples.map((s) => s.count));
      assertSampleCount(total, cpu, 99, steal, "Go labels");

      // The runtime's own work has no goroutine's labels, and is no goroutine's: the sysmon thread (it
      // preempts the two busy goroutines every 10 ms, with a signal each time: a few percent of the
      // samples, more on a slower machine), and the scheduler on the system stack once mcall has dropped
      // the goroutine. Go's own profiler gives neither of them labels.
      const sysmonThreads = new Set(
        samples.filter((s) => s.functions.includes("runtime.sysmon")).map((s) => s.tid),
      );
      let labeled = 0;
      let scheduling = 0;
      let runtimeOwn = 0;
      const perWorker = new Map<string, number>();
      /** The stacks of goroutine samples without their labels, and how many: what a failure shows. */
      const unlabelled = new Map<string, number>();
      for (const { functions, labels, tid, count } of samples) {
        const worker = labels.get("worker") ?? [];
        // One value per key: samples of the two goroutines are never merged into one.
        assert.ok(worker.length <= 1, `a sample with workers ${worker.join(", ")}`);
        const complete = worker.length === 1 && WORKERS.includes(worker[0]!) &&
          labels.get("phase")?.join() === PHASE && labels.get("long")?.join() === LONG;
        const root = functions[functions.length - 1]!;
        if (sysmonThreads.has(tid)) {
          assert.ok(!complete, `the sysmon thread labelled: ${functions.join(";")}`);
          runtimeOwn += count;
          continue;
        }
        if (!complete && MCALL_FUNCTIONS.includes(root)) {
          runtimeOwn += count;
          continue;
        }
        if (complete) {
          labeled += count;
          perWorker.set(worker[0]!, (perWorker.get(worker[0]!) ?? 0) + count);
        } else {
          const stack = [...functions].reverse().join(";");
          unlabelled.set(stack, (unlabelled.get(stack) ?? 0) + count);
        }
        // The labels are the goroutines' only: main.a runs under them (also when the sample is of the
        // signal handler that preempts it), and nothing else has them but the scheduler's code that mcall
        // runs for them. (Linked by the system linker, the stack ends at its first Go frame: the labels'
        // values tell.)
        if (complete && !external && !functions.includes("main.a")) {
          assert.ok(MCALL_FUNCTIONS.includes(root), `labelled ${functions.join(";")}`);
          scheduling += count;
        }
      }
      const goroutines = total - runtimeOwn;
      const shown = (stacks: Map<string, number>) =>
        [...stacks].sort((x, y) => y[1] - x[1]).slice(0, 8).map(([k, n]) => `${n} ${k}`).join(" | ");
      console.log(
        `Go labels (${linking}): ${labeled}/${goroutines} samples of the goroutines labelled (${
          [...perWorker].map(([w, n]) => `${w} ${n}`).join(", ")
        }), ${scheduling} of them on the system stack under mcall; ${runtimeOwn} of ${total} the ` +
          `runtime's own (sysmon, the scheduler)` +
          (unlabelled.size === 0 ? "" : `; unlabelled: ${shown(unlabelled)}`),
      );
      // What a failure needs to be understood: the reader's counters and the stacks it did not label.
      const goCounters = Object.entries(stats.bpf)
        .filter(([name, value]) =>
          value > 0 && /^(Go|StacksCopied|TailCallFailed|ProcessUnknown)/.test(name)
        );
      assert.ok(
        goroutines > 0 && labeled / goroutines >= 0.95,
        `${labeled}/${goroutines} goroutine samples with their labels; counters ${
          JSON.stringify(Object.fromEntries(goCounters))
        }; unlabelled: ${shown(unlabelled)}`,
      );
      for (const worker of WORKERS) assert.ok((perWorker.get(worker) ?? 0) > 0, `no sample of ${worker}`);

      const tags = pprofTags(pprof);
      const workers = tags.get("worker");
      assert.ok(
        workers !== undefined,
        `go tool pprof -tags lists no worker: ${[...tags.keys()].join(", ")}`,
      );
      assert.deepEqual([...workers.keys()].sort(), WORKERS);
      assert.equal(sum(workers.values()), labeled);
      assert.deepEqual([...tags.get("phase")!], [[PHASE, labeled]]);
      assert.deepEqual([...tags.get("long")!], [[LONG, labeled]]);
      assert.equal(sum(tags.get("pid")!.values()), total);
    },
  }));
}

Deno.test(requiring([tracing(), programs("go")], {
  name: "record of a stripped Go program without labels writes no labels but pid, tid and comm",
  async fn() {
    const binary = await buildGoWorkload("chain", { ldflags: "-s -w" }, "-go-stripped");
    const { pprof, pid } = await recordRunning(binary, { args: ["30"], cpuSeconds: 1 });
    const samples = samplesOf(decodePprofBySchema(pprof), pid);
    assert.ok(samples.length > 0, "no samples of the workload");
    for (const { labels } of samples) assert.deepEqual([...labels.keys()], ["comm"]);
  },
}));

Deno.test(requiring([tracing(), programs("go")], {
  name: "the label reader follows Go 1.24's sorted slice of labels, ten at most, each cut to 64 bytes",
  async fn() {
    // Built by the installed Go. Before 1.24 it keeps labels in a map: the workload lays its labels out as
    // 1.24 does, and the test tells BPF that this process has that layout. From 1.24 that is Go's own.
    const go = installedGo();
    assert.ok(go, "go env GOVERSION names a go1.N release");
    const { version, minor } = go;
    const binary = await buildGoWorkload("labels_slice", { ldflags: "-s -w" }, "-stripped");
    const workload = new Deno.Command(binary, { args: ["30"], stdout: "null" }).spawn();
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const pid = workload.pid as Pid;
      using recorder = Recorder.start({ frequencyHz: 99, pids: [pid] });
      const procs = recorder.tracer.object.map("go_procs");
      const record = new Uint8Array(goProcInfoLayout.sizeof);
      assert.ok(procs.lookup(u32Key(pid), record), "the Go process has its record");
      const own = minor >= 24 ? GoLabelLayout.Slice : GoLabelLayout.Map;
      assert.equal(record[goProcInfoLayout.layout.offset], own, `the layout of ${version}`);
      record[goProcInfoLayout.layout.offset] = GoLabelLayout.Slice;
      procs.update(u32Key(pid), record);
      recorder.drain();
      recorder.takeProfile({ reset: true }); // samples from before the change
      await new Promise((resolve) => setTimeout(resolve, 2000));
      recorder.stop();
      const profile = recorder.takeProfile();
      // The main goroutine's samples: the runtime's own threads (sysmon) run no goroutine, and have none.
      const all = profile.samples.filter((sample) => sample.pid === pid);
      const samples = all.filter((sample) =>
        sample.locations.some((location) => profile.locations[location]!.functionName === "main.a")
      );
      const total = sum(samples.map((s) => s.count));
      const expected = [
        { key: "a" + "k".repeat(63), value: "v0" },
        ...Array.from({ length: 9 }, (_, i) => ({ key: `k0${i + 1}`, value: `v${i + 1}` })),
      ];
      const same = (labels: unknown) => JSON.stringify(labels) === JSON.stringify(expected);
      const labeled = sum(samples.filter((s) => same(s.labels)).map((s) => s.count));
      console.log(`Go 1.24 layout: ${labeled}/${total} samples of main.a with the first ten labels`);
      for (const sample of all) assert.ok(sample.labels === undefined || same(sample.labels), "other labels");
      assert.ok(total >= 50 && labeled / total >= 0.95, `${labeled}/${total} samples with their labels`);
    } finally {
      try {
        workload.kill();
      } catch {
        // already exited
      }
      await workload.status;
    }
  },
}));

Deno.test(requiring([tracing(), programs("go")], {
  name: "a goroutine with twelve labels, in two map buckets and maybe an overflow one, has ten of them",
  async fn() {
    const binary = await buildGoWorkload("labels", { ldflags: "-s -w" }, "-stripped");
    const { pprof, pid } = await recordRunning(binary, { args: ["30", "many"], cpuSeconds: 2 });
    const samples = samplesOf(decodePprofBySchema(pprof), pid);
    const total = sum(samples.map((s) => s.count));
    let complete = 0;
    for (const { labels, count } of samples) {
      const pairs = [...labels].filter(([key]) => key !== "comm");
      // Ten of the twelve, each once and with its own value.
      if (
        pairs.length === 10 &&
        pairs.every(([key, values]) => /^k(0\d|1[01])$/.test(key) && values.join() === `v${key.slice(1)}`)
      ) complete += count;
    }
    console.log(`Go labels (12 set): ${complete}/${total} samples with ten of them`);
    assert.ok(total > 0 && complete / total >= 0.95, `${complete}/${total} samples with ten labels`);
  },
}));

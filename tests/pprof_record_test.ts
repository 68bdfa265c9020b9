// A real recording written as pprof, read back by protobufjs from the published schema (no code shared
// with the encoder, tests/proto/pprof/profile.proto) and by `omniprof report`. Needs root and BTF for the
// recording.
import assert from "node:assert/strict";
import { runCli, tempDir, tracingTest } from "./helpers.ts";
import { decodePprofBySchema } from "./pprof_schema.ts";
import { recordWatchingCpu } from "./recording_window.ts";
import { assertSampleCount } from "./sample_bounds.ts";
import { baseName } from "../lib/sys/path.ts";

/** The name the kernel gives the recorder (runCli runs it with this Deno): 15 bytes at most. */
const RECORDER_COMM = baseName(Deno.execPath()).slice(0, 15);

const name = "a recorded pprof profile decodes with the published schema, and report prints it";
const definition = tracingTest(name, async () => {
  const dir = tempDir();
  try {
    const { result, childrenCpu, steal } = await recordWatchingCpu(
      ["record", "--demo", "-d", "2", "-o", `${dir}/demo.pb.gz`],
      [],
    );
    assert.equal(result.code, 0, result.stderr);
    const profile = decodePprofBySchema(Deno.readFileSync(`${dir}/demo.pb.gz`));
    const strings = profile.stringTable;
    const s = (index: string) => strings[Number(index)]!;
    assert.equal(strings[0], "");
    assert.deepEqual(
      profile.sampleType.map((type) => [s(type.type), s(type.unit)]),
      [["samples", "count"], ["cpu", "nanoseconds"]],
    );
    assert.deepEqual([s(profile.periodType.type), s(profile.periodType.unit)], [
      "cpu",
      "nanoseconds",
    ]);
    const period = Number(profile.period);
    assert.equal(period, Math.round(1e9 / 99));
    const durationNanos = Number(profile.durationNanos);
    assert.ok(durationNanos >= 1.9e9 && durationNanos < 4e9, `${durationNanos} ns`);
    const functions = new Map(profile.function.map((fn) => [fn.id, s(fn.name)]));
    const locations = new Map(
      profile.location.map((
        location,
      ) => [location.id, functions.get(location.line[0]?.functionId ?? "0") ?? ""]),
    );
    let samples = 0;
    let beforeNamed = 0;
    // Per thread: its samples, and those under its own function (main;compute or io_worker).
    const threads = new Map<number, { total: number; compute: number; io: number }>();
    for (const sample of profile.sample) {
      const [count, nanoseconds] = sample.value.map(Number);
      assert.equal(nanoseconds, count! * period);
      samples += count!;
      const labels = new Map(
        sample.label.map((label) => [s(label.key), label.str !== "0" ? s(label.str) : Number(label.num)]),
      );
      assert.ok((labels.get("pid") as number) > 0 && (labels.get("tid") as number) > 0);
      // The demo names itself first thing in main(); a sample taken before that (while the dynamic loader
      // runs) carries the name exec gave it: N, of the /proc/self/fd/N it is run from. One taken between
      // the fork and the exec carries the recorder's own name.
      const comm = labels.get("comm");
      assert.ok(
        comm === "omniprof-demo" || comm === RECORDER_COMM || /^\d+$/.test(String(comm)),
        `comm ${comm}`,
      );
      if (comm !== "omniprof-demo") beforeNamed += count!;
      const stack = sample.locationId.map((id) => locations.get(id));
      const tid = labels.get("tid") as number;
      const thread = threads.get(tid) ?? { total: 0, compute: 0, io: 0 };
      thread.total += count!;
      if (stack.includes("compute") && stack.includes("main")) thread.compute += count!;
      if (stack.includes("io_worker")) thread.io += count!;
      threads.set(tid, thread);
    }
    // Two threads busy for 2 s get what CPU the machine leaves them: as many samples as the demo's CPU time.
    assertSampleCount(samples, childrenCpu, 99, steal, "the demo");
    assert.ok(beforeNamed <= 3, `${beforeNamed} samples before the demo named itself`);
    // How the machine shares its CPU between the two busy threads is its own affair; each thread's
    // samples show its own work.
    const computing = [...threads.values()].sort((a, b) => b.compute - a.compute)[0];
    const writing = [...threads.values()].sort((a, b) => b.io - a.io)[0];
    console.log(`threads (samples, under main;compute, under io_worker): ${JSON.stringify([...threads])}`);
    assert.ok(computing && computing.compute / computing.total >= 0.9, "the main thread computes");
    assert.ok(writing && writing !== computing && writing.io / writing.total >= 0.9, "the other one writes");
    const demo = profile.mapping.find((mapping) => /omniprof-demo/.test(s(mapping.filename)));
    assert.ok(demo, "the demo binary has a mapping");
    assert.match(s(demo.buildId), /^[0-9a-f]{40}$/, "with its GNU build id");
    assert.ok(demo.hasFunctions);

    const report = await runCli(["report", `${dir}/demo.pb.gz`]);
    assert.equal(report.code, 0, report.stderr);
    assert.match(report.stdout, /samples over/);
    assert.match(report.stdout, /mix_round/);
    assert.match(report.stdout, /\[k\]/, "kernel frames are marked");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
Deno.test(definition);

// The kernel side on its own: load the BPF object, sample a real process, and check what arrives in the
// ring buffer (trace records through the tail-call chain, process events in order, the PID filter, the
// counters). Needs root and BTF.
import assert from "node:assert/strict";
import type { RecordSink } from "../lib/bpf/ring_buffer.ts";
import { Tracer } from "../lib/record/tracer.ts";
import type { Pid } from "../lib/types.ts";
import { EventKind, FrameMarker } from "../support/types.ts";
import {
  RECORD_KIND,
  RECORD_KTIME,
  RECORD_PID,
  TRACE_FRAMES,
  TRACE_NUM_FRAMES,
} from "../lib/record/trace_format.ts";
import { frameLayout } from "../support/types.ts";
import { buildWorkload, tracingTest } from "./helpers.ts";
import { mapInfo } from "./kernel/bpf_info.ts";
import { BPF_F_NO_PREALLOC } from "../lib/bpf/map.ts";
import { kernelAllocatesOnDemand, ON_DEMAND_MAPS } from "../lib/record/map_allocation.ts";

interface Seen {
  kind: number;
  pid: number;
  frames: number;
  kernelMarkers: number;
  nativeMarkers: number;
}

class Collector implements RecordSink {
  records: Seen[] = [];
  onRecord(view: DataView, offset: number): void {
    const kind = view.getUint32(offset + RECORD_KIND, true);
    const seen: Seen = {
      kind,
      pid: view.getUint32(offset + RECORD_PID, true),
      frames: 0,
      kernelMarkers: 0,
      nativeMarkers: 0,
    };
    if (kind === EventKind.Trace) {
      seen.frames = view.getUint16(offset + TRACE_NUM_FRAMES, true);
      for (let i = 0; i < seen.frames; i++) {
        const marker = view.getUint8(
          offset + TRACE_FRAMES + i * frameLayout.sizeof + frameLayout.kind.offset,
        );
        if (marker === FrameMarker.Kernel) seen.kernelMarkers++;
        if (marker === FrameMarker.Native) seen.nativeMarkers++;
      }
    }
    this.records.push(seen);
  }
}

async function sampleWhile(tracer: Tracer, work: () => Promise<unknown>): Promise<Collector> {
  const collector = new Collector();
  const timer = setInterval(() => tracer.drain(collector), 10);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  tracer.stopSampling();
  tracer.drain(collector);
  return collector;
}

Deno.test(tracingTest("Tracer samples only the filtered process, through the tail-call chain", async () => {
  const chain = await buildWorkload("chain", ["-O2", "-fno-omit-frame-pointer"], "-fp");
  const workload = new Deno.Command(chain, { args: ["3"] }).spawn();
  const other = new Deno.Command(chain, { args: ["3"] }).spawn();
  using tracer = Tracer.start({ frequencyHz: 199, pids: [workload.pid as Pid] });
  const collector = await sampleWhile(tracer, () => Promise.all([workload.status, other.status]));
  const traces = collector.records.filter((record) => record.kind === EventKind.Trace);
  assert.ok(traces.length >= 100, `up to ~597 traces expected, got ${traces.length}`);
  assert.ok(traces.every((trace) => trace.pid === workload.pid), "only the filtered PID");
  // c, b, a and main at least: the native unwinder ran and the stop program sent the trace.
  const deep = traces.filter((trace) => trace.nativeMarkers >= 4).length;
  console.log(`${deep}/${traces.length} traces with at least 4 user frames`);
  assert.ok(deep / traces.length >= 0.9, `${deep}/${traces.length}`);
  const metrics = tracer.metrics();
  assert.equal(metrics.TracesLost, 0);
  assert.equal(metrics.TailCallFailed, 0);
  assert.equal(metrics.Samples, traces.length, "every sample became a trace");
  assert.ok(metrics.Filtered > 0, "the other process was filtered out in BPF");
}));

Deno.test(tracingTest("Tracer creates its large hash maps empty where the kernel allows it", () => {
  using tracer = Tracer.start({ frequencyHz: 99, paused: true });
  const expected = kernelAllocatesOnDemand(Deno.osRelease()) ? BPF_F_NO_PREALLOC : 0;
  console.log(`Linux ${Deno.osRelease()}: ${expected ? "allocated on demand" : "preallocated"}`);
  for (const name of ON_DEMAND_MAPS) {
    assert.equal(mapInfo(tracer.object.map(name).fd).flags & BPF_F_NO_PREALLOC, expected, name);
  }
}));

Deno.test(tracingTest("Tracer reports exec, fork and exit of followed processes in order", async () => {
  using tracer = Tracer.start({ frequencyHz: 99, followChildrenOf: [Deno.pid as Pid] });
  let child = 0;
  const collector = await sampleWhile(tracer, async () => {
    const process = new Deno.Command("sh", { args: ["-c", "true; exit 0"] }).spawn();
    child = process.pid;
    await process.status;
    await new Promise((resolve) => setTimeout(resolve, 50));
  });
  const events = collector.records.filter((record) => record.pid === child && record.kind !== EventKind.Trace)
    .map((record) => record.kind);
  assert.deepEqual(events, [EventKind.ProcessFork, EventKind.ProcessExec, EventKind.ProcessExit]);
}));

Deno.test(tracingTest("Tracer records kernel frames of a process inside a system call", async () => {
  const syscalls = await buildWorkload("syscalls", ["-O2", "-fno-omit-frame-pointer"]);
  const workload = new Deno.Command(syscalls, { args: ["2"] }).spawn();
  using tracer = Tracer.start({ frequencyHz: 199, pids: [workload.pid as Pid] });
  const collector = await sampleWhile(tracer, () => workload.status);
  const traces = collector.records.filter((record) => record.kind === EventKind.Trace);
  const withKernel = traces.filter((trace) => trace.kernelMarkers > 0 && trace.nativeMarkers > 0);
  assert.ok(withKernel.length / traces.length >= 0.5, `${withKernel.length}/${traces.length} in the kernel`);
}));

Deno.test(tracingTest("Tracer wakes the host at once for the exec of a followed process", async () => {
  using tracer = Tracer.start({ frequencyHz: 99, followChildrenOf: [Deno.pid as Pid] });
  const collector = new Collector();
  const started = performance.now();
  const waiting = tracer.waitForWakeup(5000);
  const child = new Deno.Command("true").spawn();
  const woken = await waiting;
  const ms = performance.now() - started;
  await child.status;
  tracer.drain(collector);
  assert.equal(woken, true, `no wake-up within ${ms.toFixed(0)} ms`);
  assert.ok(
    collector.records.some((record) => record.kind === EventKind.ProcessExec && record.pid === child.pid),
  );
}));

Deno.test(tracingTest("Tracer.close() ends a pending wait at once", async () => {
  const tracer = Tracer.start({ frequencyHz: 99, pids: [Deno.pid as Pid] });
  const started = performance.now();
  const waiting = tracer.waitForWakeup(10_000);
  tracer.close();
  assert.equal(await waiting, false);
  assert.ok(performance.now() - started < 1000, "close() did not end the wait");
}));

Deno.test(tracingTest("a record the host cannot handle is released, not delivered again", async () => {
  const chain = await buildWorkload("chain", ["-O2", "-fno-omit-frame-pointer"], "-fp");
  const workload = new Deno.Command(chain, { args: ["1"] }).spawn();
  using tracer = Tracer.start({ frequencyHz: 199, pids: [workload.pid as Pid] });
  await workload.status;
  tracer.stopSampling();
  const ktimes = (seen: number[]) => ({
    onRecord(view: DataView, offset: number) {
      seen.push(Number(view.getBigUint64(offset + RECORD_KTIME, true)));
    },
  });
  // The third record throws, as a handler failing on one bad record would.
  const first: number[] = [];
  const failing = ktimes(first);
  const throwing = {
    onRecord(view: DataView, offset: number) {
      failing.onRecord(view, offset);
      if (first.length === 3) throw new Error("cannot handle this record");
    },
  };
  assert.throws(() => tracer.drain(throwing), /cannot handle this record/);
  const rest: number[] = [];
  tracer.drain(ktimes(rest));
  assert.ok(rest.length >= 50, `${rest.length} records after the failing one`);
  assert.equal(first.length, 3);
  for (const ktime of first) assert.ok(!rest.includes(ktime), "a record came back");
}));

// The kernel side on its own: load the BPF object, sample a real process, and check what arrives in the
// ring buffer (trace records through the tail-call chain, process events in order, the PID filter, the
// counters). Needs root and BTF.
import assert from "node:assert/strict";
import type { RecordSink } from "../lib/bpf/ring_buffer.ts";
import { Tracer, type TracerOptions } from "../lib/record/tracer.ts";
import { Recorder } from "../lib/record/recorder.ts";
import type { Pid } from "../lib/types.ts";
import { RUNTIMES } from "../lib/interpreter/runtimes.ts";
import { EventKind, FrameMarker, Limits, StackCopyMode, TraceFlag } from "../support/types.ts";
import {
  COPY_DATA,
  COPY_LENGTH,
  COPY_PC,
  COPY_SP,
  RECORD_KIND,
  RECORD_KTIME,
  RECORD_PID,
  TRACE_FLAGS,
  TRACE_FRAMES,
  TRACE_NUM_FRAMES,
} from "../lib/record/trace_format.ts";
import { frameLayout } from "../support/types.ts";
import { buildWorkload, tracingTest } from "./helpers.ts";
import { processCpuSeconds } from "./bench/system_cpu.ts";
import { assertSampleCount, type CpuSpan, reportedCpuSeconds, StealMeter } from "./sample_bounds.ts";
import { mapInfo } from "./kernel/bpf_info.ts";
import { BPF_F_NO_PREALLOC } from "../lib/bpf/map.ts";
import { ON_DEMAND_MAPS } from "../lib/record/map_allocation.ts";

interface Seen {
  kind: number;
  pid: number;
  frames: number;
  kernelMarkers: number;
  nativeMarkers: number;
  /** A copied stack's registers and length, and the record's length past the copy's header. */
  copy: { pc: number; sp: number; length: number; bytes: number } | null;
}

class Collector implements RecordSink {
  records: Seen[] = [];
  onRecord(view: DataView, offset: number, length: number): void {
    const kind = view.getUint32(offset + RECORD_KIND, true);
    const seen: Seen = {
      kind,
      pid: view.getUint32(offset + RECORD_PID, true),
      frames: 0,
      kernelMarkers: 0,
      nativeMarkers: 0,
      copy: null,
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
      if (view.getUint8(offset + TRACE_FLAGS) & TraceFlag.CopiedStack) {
        const at = offset + TRACE_FRAMES + seen.frames * frameLayout.sizeof;
        const u64 = (field: number) =>
          view.getUint32(at + field + 4, true) * 2 ** 32 + view.getUint32(at + field, true);
        seen.copy = {
          pc: u64(COPY_PC),
          sp: u64(COPY_SP),
          length: view.getUint32(at + COPY_LENGTH, true),
          bytes: offset + length - (at + COPY_DATA),
        };
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

/**
 * A workload of tests/workloads started before a tracer, with the CPU time it used while the tracer
 * sampled: from the tracer's start (read on either side of it) to the workload's exit (as it reports).
 */
class SampledWorkload {
  readonly child: Deno.ChildProcess;
  readonly #output: Promise<Deno.CommandOutput>;
  #startLow = 0;
  #startHigh = 0;

  constructor(path: string, args: string[]) {
    this.child = new Deno.Command(path, { args, stdout: "piped" }).spawn();
    this.#output = this.child.output();
  }

  /** Runs `start` (which starts sampling) and brackets the workload's CPU time at that moment. */
  starting<T>(start: () => T): T {
    this.#startLow = processCpuSeconds(this.child.pid) ?? NaN;
    const started = start();
    // /proc counts in ticks, and utime and stime are each rounded down to one.
    this.#startHigh = (processCpuSeconds(this.child.pid) ?? NaN) + 0.02;
    return started;
  }

  /** Starts a tracer that samples at once. */
  startTracer(options: TracerOptions): Tracer {
    return this.starting(() => Tracer.start(options));
  }

  /** CPU seconds used since sampling started, at least. */
  cpuSinceStart(): number {
    return (processCpuSeconds(this.child.pid) ?? Infinity) - this.#startHigh;
  }

  /** Waits for the workload to exit; the CPU seconds it used while sampled. */
  async sampledCpu(): Promise<CpuSpan> {
    const output = await this.#output;
    assert.ok(output.success, `the workload failed: ${output.code}`);
    const total = reportedCpuSeconds(new TextDecoder().decode(output.stdout));
    return { low: Math.max(0, total - this.#startHigh), high: total - this.#startLow };
  }
}

Deno.test(tracingTest("Tracer samples only the filtered process, through the tail-call chain", async () => {
  const chain = await buildWorkload("chain", ["-O2", "-fno-omit-frame-pointer"], "-fp");
  const steal = new StealMeter();
  const workload = new SampledWorkload(chain, ["3"]);
  const other = new Deno.Command(chain, { args: ["3"], stdout: "null" }).spawn();
  // No process manager installs the workload's mappings: without copies, BPF walks its frame pointers.
  using tracer = workload.startTracer({
    frequencyHz: 199,
    pids: [workload.child.pid as Pid],
    stackCopy: StackCopyMode.Never,
  });
  const collector = await sampleWhile(tracer, () => Promise.all([workload.sampledCpu(), other.status]));
  const traces = collector.records.filter((record) => record.kind === EventKind.Trace);
  assertSampleCount(traces.length, await workload.sampledCpu(), 199, steal.fraction(), "filtered process");
  assert.ok(traces.every((trace) => trace.pid === workload.child.pid), "only the filtered PID");
  // c, b, a and main at least: the native unwinder ran and the stop program sent the trace.
  const deep = traces.filter((trace) => trace.nativeMarkers >= 4).length;
  console.log(`${deep}/${traces.length} traces with at least 4 user frames`);
  assert.ok(deep / traces.length >= 0.95, `${deep}/${traces.length}`);
  const metrics = tracer.metrics();
  assert.equal(metrics.TracesLost, 0);
  assert.equal(metrics.TailCallFailed, 0);
  assert.equal(metrics.Samples, traces.length, "every sample became a trace");
  assert.ok(metrics.Filtered > 0, "the other process was filtered out in BPF");
  // Each runtime's counters are there, under the names its descriptor gives them: none ran here.
  const runtimeCounters = RUNTIMES.flatMap((runtime) => Object.keys(runtime.bpfMetrics));
  assert.ok(runtimeCounters.length > 0);
  for (const name of runtimeCounters) assert.equal(metrics[name], 0, name);
}));

Deno.test(
  tracingTest("Tracer copies the registers and the stack of a process it has no mappings for", async () => {
    const chain = await buildWorkload("chain", ["-O2", "-fomit-frame-pointer"], "-nofp");
    const steal = new StealMeter();
    const workload = new SampledWorkload(chain, ["2"]);
    // No process manager: the workload stays unknown to BPF, so each of its stacks is copied.
    using tracer = workload.startTracer({ frequencyHz: 199, pids: [workload.child.pid as Pid] });
    const collector = await sampleWhile(tracer, () => workload.sampledCpu());
    const traces = collector.records.filter((record) => record.kind === EventKind.Trace);
    assertSampleCount(traces.length, await workload.sampledCpu(), 199, steal.fraction(), "copied stacks");
    for (const trace of traces) {
      assert.ok(trace.copy !== null, "every trace holds a copy");
      assert.equal(trace.nativeMarkers, 0, "and no user frames");
      assert.ok(
        trace.copy.length > 0 && trace.copy.length <= Limits.CopiedStackBytes,
        `${trace.copy.length}`,
      );
      assert.equal(trace.copy.bytes, trace.copy.length, "the record ends with the copy");
      assert.ok(trace.copy.pc > 0 && trace.copy.pc < 2 ** 47 && trace.copy.sp % 8 === 0);
    }
    const metrics = tracer.metrics();
    assert.equal(metrics.StacksCopied, traces.length);
    assert.equal(metrics.StackCopyFailed, 0);
    assert.equal(metrics.UnwindFpFallback, 0, "no frame was walked by frame pointers");
  }),
);

Deno.test(
  tracingTest(
    "Tracer makes no copy while its ring buffer is over half full, and counts each one not made",
    async () => {
      const chain = await buildWorkload("chain", ["-O2", "-fomit-frame-pointer"], "-nofp");
      const workload = new SampledWorkload(chain, ["1"]);
      // No process manager: each stack of the workload is one to copy. A 64 KiB ring holds a few copies
      // (up to 16 KiB of stack each) before it is half full, and is not drained while the workload runs.
      using tracer = workload.startTracer({
        frequencyHz: 999,
        pids: [workload.child.pid as Pid],
        ringBufferBytes: 64 << 10,
      });
      await workload.sampledCpu();
      tracer.stopSampling();
      const collector = new Collector();
      tracer.drain(collector);
      const metrics = tracer.metrics();
      const copies = collector.records.filter((record) =>
        record.kind === EventKind.Trace && record.copy !== null
      );
      console.log(
        `ring of 64 KiB: ${metrics.Samples} samples, ${metrics.StacksCopied} copied, ` +
          `${metrics.StackCopyRingFull} not copied (ring over half full), ${metrics.TracesLost} lost`,
      );
      assert.ok(metrics.Samples >= 500, `${metrics.Samples} samples of 1 s of CPU at 999 Hz`);
      // Each sample was copied or refused a copy, never both, and the copies fit in half the ring.
      assert.equal(metrics.StacksCopied + metrics.StackCopyRingFull, metrics.Samples);
      assert.ok(metrics.StackCopyRingFull > 0, "the ring filled past half");
      assert.equal(copies.length, metrics.StacksCopied, "no copy was lost");
      // Each copy began with the ring at most half full (32 KiB), the last one too (up to 16 KiB of stack).
      const copied = copies.reduce((sum, record) => sum + record.copy!.length, 0);
      assert.ok(
        copies.length >= 1 && copied <= (32 << 10) + Limits.CopiedStackBytes,
        `${copied} bytes copied`,
      );
    },
  ),
);

Deno.test(tracingTest("Tracer creates its large hash maps empty where the kernel allows it", () => {
  using tracer = Tracer.start({ frequencyHz: 99, paused: true });
  // Linux 6.1 made hash map elements safe to allocate in NMI context (bpf_mem_alloc): read here from the
  // release itself, not from the code under test.
  const [major, minor] = Deno.osRelease().split(/[.-]/).map(Number) as [number, number];
  const expected = major > 6 || (major === 6 && minor >= 1) ? BPF_F_NO_PREALLOC : 0;
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
  const steal = new StealMeter();
  const workload = new SampledWorkload(syscalls, ["2"]);
  using tracer = workload.startTracer({
    frequencyHz: 199,
    pids: [workload.child.pid as Pid],
    stackCopy: StackCopyMode.Never,
  });
  const collector = await sampleWhile(tracer, () => workload.sampledCpu());
  const traces = collector.records.filter((record) => record.kind === EventKind.Trace);
  assertSampleCount(traces.length, await workload.sampledCpu(), 199, steal.fraction(), "syscalls");
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
  const steal = new StealMeter();
  const workload = new SampledWorkload(chain, ["1"]);
  using tracer = workload.startTracer({ frequencyHz: 199, pids: [workload.child.pid as Pid] });
  const cpu = await workload.sampledCpu();
  tracer.stopSampling();
  /** Records by their time, and how many of them are traces. */
  const seen = () => ({
    ktimes: [] as number[],
    traces: 0,
    onRecord(view: DataView, offset: number) {
      this.ktimes.push(Number(view.getBigUint64(offset + RECORD_KTIME, true)));
      if (view.getUint32(offset + RECORD_KIND, true) === EventKind.Trace) this.traces++;
    },
  });
  // The third record throws, as a handler failing on one bad record would.
  const first = seen();
  const throwing = {
    onRecord(view: DataView, offset: number) {
      first.onRecord(view, offset);
      if (first.ktimes.length === 3) throw new Error("cannot handle this record");
    },
  };
  assert.throws(() => tracer.drain(throwing), /cannot handle this record/);
  const rest = seen();
  tracer.drain(rest);
  assert.equal(first.ktimes.length, 3);
  for (const ktime of first.ktimes) assert.ok(!rest.ktimes.includes(ktime), "a record came back");
  // Every trace arrived once, the failing one included (it was delivered, then released), and they are
  // the workload's samples.
  const metrics = tracer.metrics();
  assert.equal(metrics.TracesLost, 0);
  assert.equal(first.traces + rest.traces, metrics.Samples, "every trace once");
  assertSampleCount(metrics.Samples, cpu, 199, steal.fraction(), "the workload");
}));

Deno.test(
  tracingTest("a ring buffer too small for the samples loses some, and counts each one lost", async () => {
    const chain = await buildWorkload("chain", ["-O2", "-fno-omit-frame-pointer"], "-fp");
    const steal = new StealMeter();
    const workload = new SampledWorkload(chain, ["1"]);
    // One page holds about 16 traces of the chain.
    using recorder = workload.starting(() =>
      Recorder.start({ frequencyHz: 999, pids: [workload.child.pid as Pid], ringBufferBytes: 4096 })
    );
    // The host does not drain while this runs: the workload's next 0.2 s of CPU bring ~200 samples.
    const giveUp = performance.now() + 60_000;
    while (workload.cpuSinceStart() < 0.2 && performance.now() < giveUp) {
      // busy: blocks the recorder's drains
    }
    const cpu = await workload.sampledCpu();
    recorder.stop();
    const metrics = recorder.metrics();
    const lost = recorder.progress().lost;
    console.log(`ring buffer of one page: ${recorder.samples} samples kept, ${metrics.TracesLost} lost`);
    assert.ok(metrics.TracesLost > 0, "the ring buffer overflowed");
    assert.equal(lost, metrics.TracesLost + metrics.EventsLost, "the recorder reports every loss");
    assert.equal(recorder.samples + metrics.TracesLost, metrics.Samples, "each sample kept or counted lost");
    const profile = recorder.takeProfile();
    assert.equal(profile.samples.reduce((sum, sample) => sum + sample.count, 0), recorder.samples);
    assertSampleCount(metrics.Samples, cpu, 999, steal.fraction(), "kept and lost");
  }),
);

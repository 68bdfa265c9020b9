import { anonymousMapping } from "../testing/perf_records.ts";
import assert from "node:assert/strict";
import {
  EventKind,
  FrameFlag,
  FrameMarker,
  PythonFrameMarker,
  TraceFlag,
  TraceOrigin,
  UnwindStopReason,
} from "../../support/types.ts";
import type { InterpreterFrame, SymbolizedFrame } from "../interpreter/interpreter.ts";
import { FileRegistry } from "../process/file_registry.ts";
import { ProcessManager } from "../process/process_manager.ts";
import { PerfMaps } from "../symbolize/perf_maps.ts";
import { RegularFile } from "../sys/regular_file.ts";
import type { Pid } from "../types.ts";
import { StackTable } from "./stack_table.ts";
import {
  COPY_DATA,
  COPY_FP,
  COPY_LENGTH,
  COPY_PC,
  COPY_SP,
  FRAME_ADDRESS,
  FRAME_FILE_ID,
  FRAME_FLAGS,
  FRAME_KIND,
  FRAME_SIZE,
  LABEL_KEY,
  LABEL_KEY_LENGTH,
  LABEL_SIZE,
  LABEL_VALUE,
  LABEL_VALUE_LENGTH,
  PROCESS_EVENT_PARENT,
  RECORD_KIND,
  RECORD_KTIME,
  RECORD_OFF_CPU_NS,
  RECORD_PID,
  RECORD_TID,
  TRACE_COMM,
  TRACE_FLAGS,
  TRACE_FRAMES,
  TRACE_NUM_FRAMES,
  TRACE_NUM_LABELS,
  TRACE_ORIGIN,
} from "./trace_format.ts";

/** A Python frame as BPF writes it: code object address, first-line stamp and byte offset. */
interface PyFrame {
  code: number;
  offset: number;
}

/** One trace record: a kernel frame, then Python frames (leaf first), then `labels` (key, value). */
function traceRecord(pid: number, frames: PyFrame[], labels: [string, string][] = []): DataView {
  const labelsAt = TRACE_FRAMES + (frames.length + 1) * FRAME_SIZE;
  const length = labelsAt + labels.length * LABEL_SIZE;
  const view = new DataView(new ArrayBuffer(length));
  view.setUint32(RECORD_KIND, EventKind.Trace, true);
  view.setUint32(RECORD_PID, pid, true);
  view.setUint32(RECORD_TID, pid, true);
  new Uint8Array(view.buffer).set(new TextEncoder().encode("python3"), TRACE_COMM);
  view.setUint16(TRACE_NUM_FRAMES, frames.length + 1, true);
  view.setUint8(TRACE_FRAMES + FRAME_KIND, FrameMarker.Kernel);
  view.setUint32(TRACE_FRAMES + FRAME_ADDRESS, 0x81000000, true);
  view.setUint32(TRACE_FRAMES + FRAME_ADDRESS + 4, 0xffffffff, true);
  frames.forEach((frame, i) => {
    const at = TRACE_FRAMES + (i + 1) * FRAME_SIZE;
    view.setUint8(at + FRAME_KIND, PythonFrameMarker.Python);
    view.setUint32(at + FRAME_FILE_ID, frame.code % 2 ** 32, true);
    view.setUint32(at + FRAME_FILE_ID + 4, Math.floor(frame.code / 2 ** 32), true);
    view.setUint32(at + FRAME_ADDRESS, frame.offset >>> 0, true);
    view.setUint32(at + FRAME_ADDRESS + 4, 7, true); // the first-line stamp
  });
  view.setUint8(TRACE_NUM_LABELS, labels.length);
  const encoder = new TextEncoder();
  labels.forEach(([key, value], i) => {
    const at = labelsAt + i * LABEL_SIZE;
    view.setUint8(at + LABEL_KEY_LENGTH, key.length);
    view.setUint8(at + LABEL_VALUE_LENGTH, value.length);
    new Uint8Array(view.buffer).set(encoder.encode(key), at + LABEL_KEY);
    new Uint8Array(view.buffer).set(encoder.encode(value), at + LABEL_VALUE);
  });
  return view;
}

/**
 * Processes whose runtime names code 0x7f0000001000 "outer" and others "inner"; a line per 10 bytes of
 * bytecode.
 */
class FakePython extends ProcessManager {
  calls = 0;
  override symbolize(_pid: Pid, frame: InterpreterFrame): readonly SymbolizedFrame[] | null {
    this.calls++;
    if (frame.fileId === 0xdead) return null;
    const offset = frame.addrOrLine % 2 ** 32;
    return [{
      kind: "python",
      functionName: frame.fileId === 0x7f0000001000 ? "outer" : "inner",
      sourceFile: "/app/main.py",
      line: 1 + Math.floor(offset / 10),
    }];
  }
}

function feed(table: StackTable, record: DataView): void {
  table.onRecord(record, 0, record.byteLength);
}

Deno.test("StackTable counts an identical trace again without naming its frames again", () => {
  using files = new FileRegistry();
  const python = new FakePython({ files });
  const table = new StackTable(python, files);
  const frames = [{ code: 0x7f0000002000, offset: 4 }, { code: 0x7f0000001000, offset: 30 }];
  feed(table, traceRecord(4242, frames));
  feed(table, traceRecord(4242, frames));
  assert.equal(table.stacks().length, 1);
  assert.equal(table.stacks()[0]!.count, 2);
  assert.equal(python.calls, 2, "two Python frames named once");
  const names = table.stacks()[0]!.frames.map((frame) => frame.symbol?.functionName ?? frame.addressKind);
  assert.deepEqual(names, ["kernel", "inner", "outer"]);
});

Deno.test("StackTable merges traces that differ only within a line, and keeps lines apart", () => {
  using files = new FileRegistry();
  const table = new StackTable(new FakePython({ files }), files);
  const outer = { code: 0x7f0000001000, offset: 30 };
  feed(table, traceRecord(4242, [{ code: 0x7f0000002000, offset: 2 }, outer]));
  feed(table, traceRecord(4242, [{ code: 0x7f0000002000, offset: 6 }, outer])); // same line 1
  feed(table, traceRecord(4242, [{ code: 0x7f0000002000, offset: 12 }, outer])); // line 2
  const stacks = table.stacks();
  assert.equal(stacks.length, 2);
  assert.deepEqual(stacks.map((stack) => [stack.frames[1]!.symbol?.line, stack.count]), [[1, 2], [2, 1]]);
  assert.equal(table.samples, 3);
});

Deno.test("StackTable reads the labels behind a trace's frames, and keeps traces with other labels apart", () => {
  using files = new FileRegistry();
  const table = new StackTable(new FakePython({ files }), files);
  const frames = [{ code: 0x7f0000001000, offset: 30 }];
  const alpha: [string, string][] = [["worker", "alpha"], ["phase", "spin"]];
  feed(table, traceRecord(4242, frames, alpha));
  feed(table, traceRecord(4242, frames, [["worker", "beta"], ["phase", "spin"]]));
  feed(table, traceRecord(4242, frames, alpha));
  feed(table, traceRecord(4242, frames));
  const stacks = table.stacks();
  assert.deepEqual(
    stacks.map((stack) => [stack.labels?.map(({ key, value }) => `${key}=${value}`).join(","), stack.count]),
    [["worker=alpha,phase=spin", 2], ["worker=beta,phase=spin", 1], [undefined, 1]],
  );
  assert.equal(stacks[0]!.frames.length, 2, "the labels are not read as frames");
});

Deno.test("StackTable keeps a frame its process cannot name, as <unknown> of its kind", () => {
  using files = new FileRegistry();
  const table = new StackTable(new FakePython({ files }), files);
  feed(table, traceRecord(4242, [{ code: 0xdead, offset: 0 }]));
  const frame = table.stacks()[0]!.frames[1]!;
  assert.equal(frame.addressKind, "interpreter");
  assert.deepEqual(frame.symbol, {
    kind: "python",
    functionName: "<unknown>",
    sourceFile: "<unknown>",
    line: 0,
  });
});

/** A process event record (exit, fork) as BPF writes it. */
function processEvent(kind: EventKind, pid: number, parent = 0): DataView {
  const view = new DataView(new ArrayBuffer(PROCESS_EVENT_PARENT + 64));
  view.setUint32(RECORD_KIND, kind, true);
  view.setUint32(RECORD_PID, pid, true);
  view.setUint32(RECORD_TID, pid, true);
  view.setUint32(PROCESS_EVENT_PARENT, parent, true);
  return view;
}

Deno.test("StackTable settles an exit before a fork that hands its PID out again in the same drain", () => {
  const root = Deno.makeTempDirSync();
  try {
    for (const pid of [500, 700]) {
      Deno.mkdirSync(`${root}/${pid}`);
      Deno.writeTextFileSync(`${root}/${pid}/maps`, "10000-11000 r-xp 00000000 00:00 0 \n");
    }
    using files = new FileRegistry({ procRoot: root });
    using processes = new ProcessManager({ files, procRoot: root });
    processes.onExec(500 as Pid);
    processes.onExec(700 as Pid);
    const table = new StackTable(processes, files);
    feed(table, processEvent(EventKind.ProcessExit, 700));
    feed(table, processEvent(EventKind.ProcessFork, 700, 500));
    table.endDrain();
    // The new process 700 (500's child) is tracked: the old one's exit, settled at the end of the drain,
    // would have removed it.
    assert.equal(processes.processCount, 2);
    assert.equal(processes.stats.reusedPids, 0, "the exit was seen: no reuse to detect");
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});

/** A trace of native frames at process addresses (as frame-pointer unwinding in BPF leaves them). */
function absoluteTrace(pid: number, addresses: number[]): DataView {
  const view = new DataView(new ArrayBuffer(TRACE_FRAMES + addresses.length * FRAME_SIZE));
  view.setUint32(RECORD_KIND, EventKind.Trace, true);
  view.setUint32(RECORD_PID, pid, true);
  view.setUint32(RECORD_TID, pid, true);
  view.setUint16(TRACE_NUM_FRAMES, addresses.length, true);
  addresses.forEach((address, i) => {
    const at = TRACE_FRAMES + i * FRAME_SIZE;
    view.setUint8(at + FRAME_KIND, FrameMarker.Native);
    view.setUint8(at + FRAME_FLAGS, FrameFlag.AbsoluteAddress | (i > 0 ? FrameFlag.ReturnAddress : 0));
    view.setUint32(at + FRAME_ADDRESS, address, true);
  });
  return view;
}

Deno.test("StackTable gives a frame in anonymous executable memory its process's perf map, looked for at once", () => {
  const root = Deno.makeTempDirSync();
  try {
    Deno.mkdirSync(`${root}/500`);
    Deno.writeTextFileSync(
      `${root}/500/maps`,
      "10000-11000 r-xp 00000000 00:00 0 \n20000-21000 r-xp 00000000 08:01 77 /usr/bin/app\n",
    );
    Deno.writeTextFileSync(`${root}/perf-500.map`, "10000 20 JS:*work /app.js:1:1\n");
    let looks = 0;
    const perfMaps = new PerfMaps({
      open: (pid) => {
        looks++;
        return { kind: "opened", file: RegularFile.open(`${root}/perf-${pid}.map`) };
      },
      openJitDump: () => ({ kind: "absent" }),
    });
    using files = new FileRegistry({ procRoot: root });
    // The process manager owns the perf maps and closes them.
    using processes = new ProcessManager({ files, procRoot: root, perfMaps });
    const table = new StackTable(processes, files);
    feed(table, absoluteTrace(500, [0x10010, 0x10500, 0x30000]));
    assert.equal(looks, 1, "the map is looked for when the process's first JIT frame is resolved");
    const [leaf, caller, outside] = table.stacks()[0]!.frames;
    assert.equal(leaf!.addressKind, "jit");
    assert.equal(leaf!.address, 0x10010, "the process's address, which the map names");
    assert.equal(leaf!.jit, perfMaps.of(500 as Pid));
    assert.equal(leaf!.jit!.lookup(leaf!.address)?.functionName, "JS:*work /app.js:1:1");
    assert.equal(caller!.addressKind, "jit");
    assert.equal(outside!.addressKind, "absolute", "in no mapping");
    // Without perf maps, as before: an offset into the anonymous memory.
    using withoutMaps = new ProcessManager({ files, procRoot: root });
    const plain = new StackTable(withoutMaps, files);
    feed(plain, absoluteTrace(500, [0x10010]));
    assert.deepEqual([plain.stacks()[0]!.frames[0]!.addressKind, plain.stacks()[0]!.frames[0]!.address], [
      "offset",
      0x10,
    ]);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});

/**
 * A trace whose user stack BPF copied: one kernel frame, then the copy of `words` (8 bytes each) taken at
 * rsp `sp` with registers `pc` and `fp`.
 */
function copiedTrace(pid: number, pc: number, sp: number, fp: number, words: number[]): DataView {
  const at = TRACE_FRAMES + FRAME_SIZE;
  const view = new DataView(new ArrayBuffer(at + COPY_DATA + words.length * 8));
  view.setUint32(RECORD_KIND, EventKind.Trace, true);
  view.setUint32(RECORD_PID, pid, true);
  view.setUint32(RECORD_TID, pid, true);
  view.setUint16(TRACE_NUM_FRAMES, 1, true);
  view.setUint8(TRACE_FLAGS, TraceFlag.CopiedStack);
  view.setUint8(TRACE_FRAMES + FRAME_KIND, FrameMarker.Kernel);
  view.setUint32(TRACE_FRAMES + FRAME_ADDRESS, 0x81000000, true);
  view.setUint32(TRACE_FRAMES + FRAME_ADDRESS + 4, 0xffffffff, true);
  view.setUint32(at + COPY_PC, pc, true);
  view.setUint32(at + COPY_SP, sp % 2 ** 32, true);
  view.setUint32(at + COPY_SP + 4, Math.floor(sp / 2 ** 32), true);
  view.setUint32(at + COPY_FP, fp % 2 ** 32, true);
  view.setUint32(at + COPY_FP + 4, Math.floor(fp / 2 ** 32), true);
  view.setUint32(at + COPY_LENGTH, words.length * 8, true);
  words.forEach((word, i) => {
    view.setUint32(at + COPY_DATA + i * 8, word % 2 ** 32, true);
    view.setUint32(at + COPY_DATA + i * 8 + 4, Math.floor(word / 2 ** 32), true);
  });
  return view;
}

Deno.test("StackTable unwinds a copied stack on the host, marks its frames and merges equal stacks", () => {
  const root = Deno.makeTempDirSync();
  try {
    Deno.mkdirSync(`${root}/500`);
    Deno.writeTextFileSync(`${root}/500/maps`, "10000-11000 r-xp 00000000 00:00 0 \n");
    using files = new FileRegistry({ procRoot: root });
    using processes = new ProcessManager({ files, procRoot: root });
    const table = new StackTable(processes, files);
    // Anonymous memory has no tables: the host follows rbp, as BPF would. rbp = sp + 8 -> [saved rbp 0,
    // return address 0x10500]; then rbp is 0: the end of the stack.
    const sp = 0x7ffd00000000;
    for (const junk of [1, 2]) feed(table, copiedTrace(500, 0x10010, sp, sp + 8, [junk, 0, 0x10500]));
    const stacks = table.stacks();
    assert.equal(stacks.length, 1, "two copies of one stack are one stack");
    const [stack] = stacks;
    assert.equal(stack!.count, 2);
    assert.equal(stack!.hostUnwound, true);
    assert.deepEqual(
      stack!.frames.map((
        frame,
      ) => [frame.addressKind, frame.address, frame.returnAddress, frame.hostUnwound]),
      [["kernel", 0x81000000, false, undefined], ["offset", 0x10, false, true], [
        "offset",
        0x500,
        true,
        true,
      ]],
    );
    assert.equal(stack!.stopReason, UnwindStopReason.EndOfStack);
    assert.equal(table.samples, 2);
    assert.deepEqual(table.copiedStackStats, { samples: 2, frames: 4, stops: { EndOfStack: 2 } });
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});

/** `absoluteTrace` taken at `ktimeNs`. */
function traceAt(pid: number, addresses: number[], ktimeNs: number): DataView {
  const view = absoluteTrace(pid, addresses);
  view.setUint32(RECORD_KTIME, ktimeNs, true);
  return view;
}

Deno.test("StackTable, fed the kernel's records, resolves traces against the program they were taken in", () => {
  const root = Deno.makeTempDirSync();
  try {
    using files = new FileRegistry({ procRoot: root });
    using processes = new ProcessManager({ files, procRoot: root, kernelRecords: true });
    const table = new StackTable(processes, files);
    // One drain: the records first (a fork, its exec, then exit), then the traces, then the end.
    table.onFork(800 as Pid, 1 as Pid, 100);
    table.onMmap(anonymousMapping(800, 0x10000, 110));
    table.onExec(800 as Pid, "worker", 200);
    table.onMmap(anonymousMapping(800, 0x50000, 210));
    table.onExit(800 as Pid, 400);
    table.endRecords();
    // Taken before the exec, in the program before it; then in the new one. Both after the exit was read.
    feed(table, traceAt(800, [0x10010], 150));
    feed(table, traceAt(800, [0x50020], 300));
    // BPF's own exit event adds nothing: the records said it.
    feed(table, processEvent(EventKind.ProcessExit, 800));
    const [before, after] = table.stacks().map((stack) => stack.frames[0]!);
    assert.deepEqual([before!.addressKind, before!.address], ["offset", 0x10]);
    assert.deepEqual([after!.addressKind, after!.address], ["offset", 0x20]);
    assert.equal(processes.processCount, 1, "forgotten only at the end of the drain");
    table.endDrain();
    assert.equal(processes.processCount, 0);
    assert.equal(processes.stats.syncs, 0, "nothing read from /proc");
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});

Deno.test("StackTable unwinds a stack copied before its process exec'd in the program it was taken in", () => {
  const root = Deno.makeTempDirSync();
  try {
    using files = new FileRegistry({ procRoot: root });
    using processes = new ProcessManager({ files, procRoot: root, kernelRecords: true });
    const table = new StackTable(processes, files);
    table.onFork(820 as Pid, 1 as Pid, 100);
    table.onMmap(anonymousMapping(820, 0x10000, 110));
    table.onExec(820 as Pid, "worker", 200);
    table.onMmap(anonymousMapping(820, 0x50000, 210));
    table.endRecords();
    // Copied at 150, in the program before the exec: the leaf and its caller are both in its page.
    const sp = 0x7ffd00000000;
    const copy = copiedTrace(820, 0x10010, sp, sp + 8, [7, 0, 0x10500]);
    copy.setUint32(RECORD_KTIME, 150, true);
    feed(table, copy);
    const frames = table.stacks()[0]!.frames.filter((frame) => frame.addressKind !== "kernel");
    assert.deepEqual(frames.map((frame) => [frame.addressKind, frame.address]), [["offset", 0x10], [
      "offset",
      0x500,
    ]]);
    assert.equal(processes.stats.resolvedBeforeExec, 2);
    table.endDrain();
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});

Deno.test("StackTable keeps a process whose main thread exited when another thread exec'd", () => {
  const root = Deno.makeTempDirSync();
  try {
    using files = new FileRegistry({ procRoot: root });
    using processes = new ProcessManager({ files, procRoot: root, kernelRecords: true });
    const table = new StackTable(processes, files);
    table.onFork(810 as Pid, 1 as Pid, 100);
    // The kernel reports the old main thread's exit, then the exec, under the process's id.
    table.onExit(810 as Pid, 200);
    table.onExec(810 as Pid, "worker", 201);
    table.onMmap(anonymousMapping(810, 0x20000, 210));
    table.endRecords();
    table.endDrain();
    assert.equal(processes.processCount, 1);
    feed(table, traceAt(810, [0x20004], 300));
    assert.deepEqual(table.stacks()[0]!.frames[0]!.address, 4);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});

/** A trace of one kernel frame at `address`, of origin `origin`, away `offCpuNs` (off-CPU traces). */
function kernelTrace(origin: number, address: number, offCpuNs = 0): DataView {
  const view = new DataView(new ArrayBuffer(TRACE_FRAMES + FRAME_SIZE));
  view.setUint32(RECORD_KIND, EventKind.Trace, true);
  view.setUint32(RECORD_PID, 600, true);
  view.setUint32(RECORD_TID, 601, true);
  view.setUint32(RECORD_OFF_CPU_NS, offCpuNs, true);
  view.setUint8(TRACE_ORIGIN, origin);
  view.setUint16(TRACE_NUM_FRAMES, 1, true);
  view.setUint8(TRACE_FRAMES + FRAME_KIND, FrameMarker.Kernel);
  view.setUint32(TRACE_FRAMES + FRAME_ADDRESS, address, true);
  view.setUint32(TRACE_FRAMES + FRAME_ADDRESS + 4, 0xffffffff, true);
  return view;
}

Deno.test("StackTable sums off-CPU waits by stack, apart from CPU samples and probe hits of the same frames", () => {
  using files = new FileRegistry({ procRoot: "/nonexistent" });
  using processes = new ProcessManager({ files, procRoot: "/nonexistent" });
  const table = new StackTable(processes, files);
  feed(table, kernelTrace(TraceOrigin.Sampling, 0x81000100));
  feed(table, kernelTrace(TraceOrigin.OffCpu, 0x81000100, 1000));
  feed(table, kernelTrace(TraceOrigin.Sampling, 0x81000100));
  feed(table, kernelTrace(TraceOrigin.OffCpu, 0x81000100, 2000));
  feed(table, kernelTrace(TraceOrigin.OffCpu, 0x81000100, 3000));
  feed(table, kernelTrace(TraceOrigin.Probe + 1, 0x81000100));
  feed(table, kernelTrace(TraceOrigin.Probe + 2, 0x81000100));
  feed(table, kernelTrace(TraceOrigin.Probe + 1, 0x81000100));
  const stacks = table.stacks().map(({ offCpu, probe, count, offCpuNs }) => ({
    offCpu,
    probe,
    count,
    offCpuNs,
  }));
  assert.deepEqual(stacks, [
    { offCpu: undefined, probe: undefined, count: 2, offCpuNs: 0 },
    { offCpu: true, probe: undefined, count: 3, offCpuNs: 6000 },
    { offCpu: undefined, probe: 1, count: 2, offCpuNs: 0 },
    { offCpu: undefined, probe: 2, count: 1, offCpuNs: 0 },
  ]);
  // Samples count CPU samples and probe hits; waits are counted apart.
  assert.equal(table.samples, 5);
  assert.equal(table.offCpuWaits, 3);
  assert.equal(table.offCpuNs, 6000);
});

Deno.test("StackTable keeps a copied stack's probe: its hits never merge with samples of the same frames", () => {
  const root = Deno.makeTempDirSync();
  try {
    Deno.mkdirSync(`${root}/500`);
    Deno.writeTextFileSync(`${root}/500/maps`, "10000-11000 r-xp 00000000 00:00 0 \n");
    using files = new FileRegistry({ procRoot: root });
    using processes = new ProcessManager({ files, procRoot: root });
    const table = new StackTable(processes, files);
    const sp = 0x7ffd00000000;
    const hit = copiedTrace(500, 0x10010, sp, sp + 8, [1, 0, 0x10500]);
    hit.setUint8(TRACE_ORIGIN, TraceOrigin.Probe + 3);
    feed(table, hit);
    feed(table, copiedTrace(500, 0x10010, sp, sp + 8, [2, 0, 0x10500]));
    feed(table, hit);
    assert.deepEqual(table.stacks().map(({ probe, count }) => ({ probe, count })), [
      { probe: 3, count: 2 },
      { probe: undefined, count: 1 },
    ]);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});

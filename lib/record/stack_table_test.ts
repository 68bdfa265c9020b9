import assert from "node:assert/strict";
import { EventKind, FrameMarker } from "../../support/types.ts";
import type { InterpreterFrame, SymbolizedFrame } from "../interpreter/interpreter.ts";
import { ProcessManager } from "../process/process_manager.ts";
import type { Pid } from "../types.ts";
import { type InterpreterFrames, StackTable } from "./stack_table.ts";
import {
  FRAME_ADDRESS,
  FRAME_FILE_ID,
  FRAME_KIND,
  FRAME_SIZE,
  RECORD_KIND,
  RECORD_PID,
  RECORD_TID,
  TRACE_COMM,
  TRACE_FRAMES,
  TRACE_NUM_FRAMES,
} from "./trace_format.ts";

/** A Python frame as BPF writes it: code object address, first-line stamp and byte offset. */
interface PyFrame {
  code: number;
  offset: number;
}

/** One trace record: a kernel frame, then Python frames (leaf first). */
function traceRecord(pid: number, frames: PyFrame[]): DataView {
  const length = TRACE_FRAMES + (frames.length + 1) * FRAME_SIZE;
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
    view.setUint8(at + FRAME_KIND, FrameMarker.Python);
    view.setUint32(at + FRAME_FILE_ID, frame.code % 2 ** 32, true);
    view.setUint32(at + FRAME_FILE_ID + 4, Math.floor(frame.code / 2 ** 32), true);
    view.setUint32(at + FRAME_ADDRESS, frame.offset >>> 0, true);
    view.setUint32(at + FRAME_ADDRESS + 4, 7, true); // the first-line stamp
  });
  return view;
}

/** Names code 0x7f0000001000 "outer" and others "inner"; a line per 10 bytes of bytecode. */
class FakePython implements InterpreterFrames {
  calls = 0;
  symbolize(_pid: Pid, frame: InterpreterFrame): SymbolizedFrame | null {
    this.calls++;
    if (frame.fileId === 0xdead) return null;
    const offset = frame.addrOrLine % 2 ** 32;
    return {
      kind: "python",
      functionName: frame.fileId === 0x7f0000001000 ? "outer" : "inner",
      sourceFile: "/app/main.py",
      line: 1 + Math.floor(offset / 10),
    };
  }
}

function feed(table: StackTable, record: DataView): void {
  table.onRecord(record, 0, record.byteLength);
}

Deno.test("StackTable counts an identical trace again without naming its frames again", () => {
  using processes = new ProcessManager();
  const python = new FakePython();
  const table = new StackTable(processes, undefined, python);
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
  using processes = new ProcessManager();
  const table = new StackTable(processes, undefined, new FakePython());
  const outer = { code: 0x7f0000001000, offset: 30 };
  feed(table, traceRecord(4242, [{ code: 0x7f0000002000, offset: 2 }, outer]));
  feed(table, traceRecord(4242, [{ code: 0x7f0000002000, offset: 6 }, outer])); // same line 1
  feed(table, traceRecord(4242, [{ code: 0x7f0000002000, offset: 12 }, outer])); // line 2
  const stacks = table.stacks();
  assert.equal(stacks.length, 2);
  assert.deepEqual(stacks.map((stack) => [stack.frames[1]!.symbol?.line, stack.count]), [[1, 2], [2, 1]]);
  assert.equal(table.samples, 3);
});

Deno.test("StackTable keeps a frame its process cannot name, as <unknown> of its kind", () => {
  using processes = new ProcessManager();
  const table = new StackTable(processes, undefined, new FakePython());
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

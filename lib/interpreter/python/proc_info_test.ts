import assert from "node:assert/strict";
import {
  ABSENT_OFFSET,
  encodePythonProcInfo,
  INSTRUCTION_MODEL_CODES,
  PYTHON_PROC_INFO_LAYOUT,
  PythonProcFlag,
  type PythonProcInfo,
  type PythonProcInfoLayout,
} from "./proc_info.ts";
import { pythonOffsets } from "./offsets.ts";

function infoFor(minor: number): PythonProcInfo {
  const o = pythonOffsets({ major: 3, minor, micro: 0 });
  return {
    version: 0x0300 | minor,
    frameModel: o.frameModel === "frame-object" ? 0 : 1,
    instructionModel: o.instructionModel,
    tlsThreadState: minor >= 12 ? -8 : null,
    tsdKey: 1,
    tsdOffset: 792,
    tsdMultiplier: 16,
    tsdIndirect: false,
    tstateFrame: o.tstateFrame,
    cframeCurrentFrame: o.cframeCurrentFrame,
    framePrevious: o.framePrevious,
    frameCode: o.frameCode,
    frameInstruction: o.frameInstruction,
    frameOwner: o.frameOwner,
    frameIsEntry: o.frameIsEntry,
    codeFirstLineNo: o.codeFirstLineNo,
    codeCodeAdaptive: o.codeCodeAdaptive,
  };
}

Deno.test("encodePythonProcInfo() writes every field where the layout says, absent ones as 0xffff", () => {
  const L = PYTHON_PROC_INFO_LAYOUT;
  for (const minor of [8, 11, 12, 13]) {
    const info = infoFor(minor);
    const bytes = encodePythonProcInfo(info);
    const view = new DataView(bytes.buffer);
    assert.equal(bytes.length, L.sizeof);
    assert.equal(Number(view.getBigInt64(L.tls_tstate_offset.offset, true)), info.tlsThreadState ?? 0);
    assert.equal(view.getInt32(L.tsd_key.offset, true), 1);
    assert.equal(view.getInt16(L.tsd_offset.offset, true), 792);
    assert.equal(view.getUint8(L.tsd_multiplier.offset), 16);
    assert.equal(view.getUint8(L.tsd_indirect.offset), 0);
    assert.equal(view.getUint16(L.version.offset, true), 0x0300 | minor);
    assert.equal(view.getUint8(L.frame_model.offset), info.frameModel);
    assert.equal(view.getUint8(L.instruction_model.offset), INSTRUCTION_MODEL_CODES[info.instructionModel]);
    const flags = view.getUint16(L.flags.offset, true);
    assert.equal(flags & PythonProcFlag.TsdValid, PythonProcFlag.TsdValid);
    assert.equal((flags & PythonProcFlag.TlsValid) !== 0, minor >= 12);
    const u16 = (field: keyof PythonProcInfoLayout) =>
      view.getUint16((L[field] as { offset: number }).offset, true);
    assert.equal(u16("tstate_frame"), info.tstateFrame);
    assert.equal(u16("cframe_current_frame"), info.cframeCurrentFrame ?? ABSENT_OFFSET);
    assert.equal(u16("frame_previous"), info.framePrevious);
    assert.equal(u16("frame_code"), info.frameCode);
    assert.equal(u16("frame_instruction"), info.frameInstruction);
    assert.equal(u16("frame_owner"), info.frameOwner ?? ABSENT_OFFSET);
    assert.equal(u16("frame_is_entry"), info.frameIsEntry ?? ABSENT_OFFSET);
    assert.equal(u16("code_firstlineno"), info.codeFirstLineNo);
    assert.equal(u16("code_code_adaptive"), info.codeCodeAdaptive ?? ABSENT_OFFSET);
  }
});

Deno.test("encodePythonProcInfo() refuses values that do not fit and layouts that do not hold them", () => {
  assert.throws(() => encodePythonProcInfo({ ...infoFor(11), tsdOffset: 70000 }), RangeError);
  assert.throws(() => encodePythonProcInfo({ ...infoFor(11), framePrevious: -1 }), RangeError);
  const short = { ...PYTHON_PROC_INFO_LAYOUT, sizeof: 16 };
  assert.throws(() => encodePythonProcInfo(infoFor(11), short), RangeError);
});

Deno.test("encodePythonProcInfo() marks a record not ready only while no route to the thread state is valid", () => {
  const flagsOf = (info: PythonProcInfo) =>
    new DataView(encodePythonProcInfo(info).buffer).getUint16(PYTHON_PROC_INFO_LAYOUT.flags.offset, true);
  // 3.11 before the runtime created its key: nothing valid, a key expected.
  assert.equal(flagsOf({ ...infoFor(11), tsdKey: null, notReady: true }), 0x4);
  assert.equal(flagsOf({ ...infoFor(11), tsdKey: null }), 0);
  // A valid route wins: BPF has what it needs, nothing to ask.
  assert.equal(flagsOf({ ...infoFor(11), notReady: true }), 0x2);
  assert.equal(PythonProcFlag.NotReady, 0x4);
});

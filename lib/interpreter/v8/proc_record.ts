/**
 * A process's `v8_procs` record (`struct v8_proc_info`, bpf/v8_tracer.h): its V8's layouts, which every
 * process of a file shares, and its JS dispatch table, which is its own.
 *
 * @example
 * ```ts ignore
 * import { v8ProcRecord } from "./proc_record.ts";
 * ebpf.updateProcData("v8", pid, v8ProcRecord(layout, heap.dispatchTable));
 * ```
 *
 * @module
 */
import { V8Limits, v8ProcInfoLayout } from "../../../support/types.ts";
import type { V8Layout } from "./introspection.ts";

/**
 * The `struct v8_proc_info` of a process whose V8 has `layout`, and whose JS dispatch table (V8 13) is at
 * `dispatchTable` (0: none, or not known yet: BPF then finds no compiled code, and names such frames
 * without a line).
 */
export function v8ProcRecord(layout: V8Layout, dispatchTable = 0): Uint8Array {
  const L = v8ProcInfoLayout;
  const record = new Uint8Array(L.sizeof);
  const view = new DataView(record.buffer);
  view.setBigUint64(L.dispatch_table.offset, BigInt(dispatchTable), true);
  const u16 = (field: { offset: number }, value: number) => view.setUint16(field.offset, value, true);
  const u8 = (field: { offset: number }, value: number) => view.setUint8(field.offset, value);
  view.setUint32(L.codekind_mask.offset, layout.code.kindMask, true);
  u16(L.type_jsfunction_first, layout.types.jsFunctionFirst);
  u16(L.type_jsfunction_last, layout.types.jsFunctionLast);
  u16(L.type_shared_function_info, layout.types.sharedFunctionInfo);
  u16(L.type_code, layout.types.code);
  u16(L.off_map_instance_type, layout.mapInstanceType);
  u16(L.off_heap_object_map, layout.heapObjectMap);
  u16(L.off_jsfunction_shared, layout.jsFunction.shared);
  u16(L.off_jsfunction_code, layout.jsFunction.code);
  u16(L.off_code_instruction_start, layout.code.instructionStart);
  u16(L.off_code_instruction_size, layout.code.instructionSize);
  u16(L.off_code_flags, layout.code.flags);
  // BPF finds a slot at fp - FrameBelowFp + this: fp - 8 is FrameBelowFp - 8.
  const below = V8Limits.FrameBelowFp;
  u8(L.fp_marker, below + layout.frame.marker);
  u8(L.fp_function, below + layout.frame.function);
  u8(L.fp_bytecode_offset, below + layout.frame.bytecodeOffset);
  u8(L.codekind_shift, layout.code.kindShift);
  u8(L.codekind_baseline, layout.code.kindBaseline);
  u8(L.code_instructions_is_pointer, layout.code.instructionStartIsPointer ? 1 : 0);
  return record;
}

/**
 * Per-file V8 state: the layouts of the V8 a file holds, and {@linkcode V8Data.attach}, which writes a
 * process's `v8_procs` record (the same for every process of the file: V8 keeps no per-process layout)
 * and makes the instance that names its frames from its memory.
 *
 * @example
 * ```ts ignore
 * import { V8Data } from "./data.ts";
 * const instance = data.attach(ebpf, pid, bias, memory, mappings);
 * instance.symbolize({ kind, fileId, addrOrLine });
 * ```
 *
 * @module
 */
import type { Pid } from "../../types.ts";
import { V8Limits, v8ProcInfoLayout } from "../../../support/types.ts";
import type { Data, EbpfHandler } from "../interpreter.ts";
import type { RemoteMemory } from "../remote_memory.ts";
import { V8Heap } from "./heap.ts";
import { V8Instance } from "./instance.ts";
import type { V8Layout } from "./introspection.ts";

/** The `struct v8_proc_info` of a process whose V8 has `layout`. */
export function v8ProcRecord(layout: V8Layout): Uint8Array {
  const L = v8ProcInfoLayout;
  const record = new Uint8Array(L.sizeof);
  const view = new DataView(record.buffer);
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

/** A file's V8, shared by every process that maps it. */
export class V8Data implements Data {
  readonly fileName: string;
  readonly layout: V8Layout;
  readonly #record: Uint8Array;

  constructor(fileName: string, layout: V8Layout) {
    this.fileName = fileName;
    this.layout = layout;
    this.#record = v8ProcRecord(layout);
  }

  attach(ebpf: EbpfHandler, pid: Pid, _bias: number, memory: RemoteMemory): V8Instance {
    ebpf.updateProcData("v8", pid, this.#record);
    return new V8Instance(new V8Heap(memory, this.layout));
  }
}

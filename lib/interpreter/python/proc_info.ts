/**
 * The per-process record the BPF Python unwinder reads (`struct python_proc_info` in
 * bpf/python_tracer.h): how to find the current thread's `PyThreadState` from its thread pointer, and the
 * struct offsets needed to walk its frames. Encoded against the layout build.ts generates from the BPF object's BTF
 * (support/types.ts), so the C struct is the only definition.
 *
 * @example
 * ```ts ignore
 * import { encodePythonProcInfo } from "./proc_info.ts";
 * ebpf.updateProcData("python", pid, encodePythonProcInfo(instance.procInfo()));
 * ```
 *
 * @module
 */
import { PythonProcFlag, pythonProcInfoLayout } from "../../../support/types.ts";
import type { InstructionModel } from "./offsets.ts";

/** The record's contents. Absent offsets are null. */
export interface PythonProcInfo {
  /** `major << 8 | minor`. */
  readonly version: number;
  /** 0: `PyFrameObject` (3.8-3.10); 1: `_PyInterpreterFrame` (3.11+). */
  readonly frameModel: 0 | 1;
  readonly instructionModel: InstructionModel;
  /**
   * `tstate = *(u64 *)(thread_pointer + tlsThreadState)`, from `_Py_tss_tstate` (3.12+, when the file
   * has the symbol and the module has static TLS); null when unknown. Only set while the thread holds
   * the GIL: the TSD route below is the one to rely on.
   */
  readonly tlsThreadState: number | null;
  /** The pthread key of `_PyRuntime`'s autoTSSkey, null until the runtime created it. */
  readonly tsdKey: number | null;
  /**
   * Neither route to the thread state is known yet, but one will be shortly (the runtime is initializing,
   * or the C library is not mapped yet): BPF asks for the record again within milliseconds.
   */
  readonly notReady?: boolean;
  /** The C library's TSD layout (see `TsdInfo` in ../interpreter.ts), null when unknown (not glibc). */
  readonly tsdOffset: number | null;
  readonly tsdMultiplier: number;
  readonly tsdIndirect: boolean;
  readonly tstateFrame: number;
  readonly cframeCurrentFrame: number | null;
  readonly framePrevious: number;
  readonly frameCode: number;
  readonly frameInstruction: number;
  readonly frameOwner: number | null;
  readonly frameIsEntry: number | null;
  readonly codeFirstLineNo: number;
  readonly codeCodeAdaptive: number | null;
}

/** One field of a layout: byte offset and size. */
export interface FieldLayout {
  readonly offset: number;
  readonly size: number;
}

/** The shape of `struct python_proc_info`'s layout (as build.ts generates them). */
export interface PythonProcInfoLayout {
  readonly sizeof: number;
  readonly tls_tstate_offset: FieldLayout;
  readonly tsd_key: FieldLayout;
  readonly tsd_offset: FieldLayout;
  readonly tsd_multiplier: FieldLayout;
  readonly tsd_indirect: FieldLayout;
  readonly version: FieldLayout;
  readonly frame_model: FieldLayout;
  readonly instruction_model: FieldLayout;
  readonly flags: FieldLayout;
  readonly tstate_frame: FieldLayout;
  readonly cframe_current_frame: FieldLayout;
  readonly frame_previous: FieldLayout;
  readonly frame_code: FieldLayout;
  readonly frame_instruction: FieldLayout;
  readonly frame_owner: FieldLayout;
  readonly frame_is_entry: FieldLayout;
  readonly code_firstlineno: FieldLayout;
  readonly code_code_adaptive: FieldLayout;
}

/** The layout of `struct python_proc_info` in bpf/python_tracer.h, generated from the BPF object's BTF. */
export const PYTHON_PROC_INFO_LAYOUT: PythonProcInfoLayout = pythonProcInfoLayout;

/** `python_proc_info.flags` bits, generated from `enum python_proc_flag`. */
export { PythonProcFlag };

/** The value of an absent u16 offset. */
export const ABSENT_OFFSET = 0xffff;

/** `python_proc_info.instruction_model` values. */
export const INSTRUCTION_MODEL_CODES: Readonly<Record<InstructionModel, number>> = {
  "lasti-bytes": 0,
  "lasti-units": 1,
  "prev-instr": 2,
  "instr-ptr": 3,
};

/**
 * Encodes the record with `layout` (default: the proposed struct).
 *
 * @throws {RangeError} when a value does not fit its field or the layout's sizes differ from the struct's.
 */
export function encodePythonProcInfo(
  info: PythonProcInfo,
  layout: PythonProcInfoLayout = PYTHON_PROC_INFO_LAYOUT,
): Uint8Array {
  const bytes = new Uint8Array(layout.sizeof);
  const view = new DataView(bytes.buffer);
  const put = (name: keyof Omit<PythonProcInfoLayout, "sizeof">, value: number, signed = false): void => {
    const field = layout[name];
    if (field.offset + field.size > layout.sizeof) {
      throw new RangeError(`Cannot encode python_proc_info.${name}: the field lies outside the struct`);
    }
    const bits = field.size * 8;
    const min = signed ? -(2 ** (bits - 1)) : 0;
    const max = signed ? 2 ** (bits - 1) - 1 : 2 ** bits - 1;
    if (!Number.isInteger(value) || value < min || value > max) {
      throw new RangeError(
        `Cannot encode python_proc_info.${name}: ${value} does not fit ${field.size} bytes`,
      );
    }
    switch (field.size) {
      case 1:
        view.setUint8(field.offset, value & 0xff);
        break;
      case 2:
        view.setUint16(field.offset, value & 0xffff, true);
        break;
      case 4:
        view.setUint32(field.offset, value >>> 0, true);
        break;
      case 8:
        view.setBigInt64(field.offset, BigInt(value), true);
        break;
      default:
        throw new RangeError(`Cannot encode python_proc_info.${name}: unsupported size ${field.size}`);
    }
  };
  const optional = (value: number | null): number => value ?? ABSENT_OFFSET;
  let flags = 0;
  if (info.tlsThreadState !== null) flags |= PythonProcFlag.TlsValid;
  if (info.tsdKey !== null && info.tsdOffset !== null) flags |= PythonProcFlag.TsdValid;
  if (info.notReady && flags === 0) flags |= PythonProcFlag.NotReady;
  put("tls_tstate_offset", info.tlsThreadState ?? 0, true);
  put("tsd_key", info.tsdKey ?? -1, true);
  put("tsd_offset", info.tsdOffset ?? 0, true);
  put("tsd_multiplier", info.tsdMultiplier);
  put("tsd_indirect", info.tsdIndirect ? 1 : 0);
  put("version", info.version);
  put("frame_model", info.frameModel);
  put("instruction_model", INSTRUCTION_MODEL_CODES[info.instructionModel]);
  put("flags", flags);
  put("tstate_frame", info.tstateFrame);
  put("cframe_current_frame", optional(info.cframeCurrentFrame));
  put("frame_previous", info.framePrevious);
  put("frame_code", info.frameCode);
  put("frame_instruction", info.frameInstruction);
  put("frame_owner", optional(info.frameOwner));
  put("frame_is_entry", optional(info.frameIsEntry));
  put("code_firstlineno", info.codeFirstLineNo);
  put("code_code_adaptive", optional(info.codeCodeAdaptive));
  return bytes;
}

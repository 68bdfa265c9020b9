/**
 * The kernel fields the BPF programs read (`struct kernel_fields` in bpf/types.h): found in the running
 * kernel's BTF and written into the programs' settings before they load.
 *
 * @example
 * ```ts ignore
 * import { writeKernelFields } from "./kernel_fields.ts";
 * const rodata = object.map(".rodata").initialValue();
 * writeKernelFields(rodata, rodataOffsets.tracer_config + tracerConfigLayout.kernel.offset);
 * ```
 *
 * @module
 */
import { KernelBtf, type KernelField } from "../btf/kernel_btf.ts";
import { kernelFieldsLayout } from "../../support/types.ts";

type FieldName = Exclude<keyof typeof kernelFieldsLayout, "sizeof">;

/**
 * Where each setting comes from: struct, member path, and the size the programs read. A kernel whose
 * field has another size is refused rather than read wrong.
 */
const FIELDS: { readonly [name in FieldName]: readonly [struct: string, path: string, size: number] } = {
  task_flags: ["task_struct", "flags", 4],
  task_stack: ["task_struct", "stack", 8],
  task_pid: ["task_struct", "pid", 4],
  task_tgid: ["task_struct", "tgid", 4],
  task_signal: ["task_struct", "signal", 8],
  task_fsbase: ["task_struct", "thread.fsbase", 8],
  signal_live: ["signal_struct", "live", 4],
};

/** The offset of each field in the running kernel (or in the BTF at `btfPath`). */
export function kernelFields(btfPath?: string): Record<FieldName, number> {
  using btf = KernelBtf.open(btfPath);
  const offsets = {} as Record<FieldName, number>;
  for (const name of Object.keys(FIELDS) as FieldName[]) {
    const [struct, path, size] = FIELDS[name];
    const field: KernelField = btf.field(struct, path);
    if (field.size !== size) {
      throw new Error(
        `Cannot read struct ${struct}'s ${path}: it has ${field.size} bytes in this kernel, and omniprof's ` +
          `programs read ${size}`,
      );
    }
    offsets[name] = field.offset;
  }
  return offsets;
}

/** Writes the running kernel's field offsets as a `struct kernel_fields` at byte `at` of `bytes`. */
export function writeKernelFields(bytes: Uint8Array, at: number, btfPath?: string): void {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const offsets = kernelFields(btfPath);
  for (const name of Object.keys(FIELDS) as FieldName[]) {
    view.setUint32(at + kernelFieldsLayout[name].offset, offsets[name], true);
  }
}

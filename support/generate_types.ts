/**
 * Generates support/types.ts from the BPF object: the structs and enums of bpf/types.h come from the
 * object's BTF, and the offsets of the settings in .rodata from its symbol table (BTF's DATASEC offsets
 * are only filled in by libbpf at load time). Called by build.ts, which also checks for drift.
 *
 * @module
 */
import { parseBtf } from "../lib/btf/btf.ts";
import { generateLayoutModule } from "../lib/btf/codegen.ts";
import { ElfFile } from "../lib/elf/elf_file.ts";
import { objectSymbols } from "../lib/bpf/object_spec.ts";

/** What the host reads or writes of the BPF side's data. */
const SPEC = {
  structs: [
    "event_header",
    "trace",
    "frame",
    "process_event",
    "pid_filter_value",
    "tracer_config",
    "kernel_fields",
    "unwind_info",
    "stack_delta",
    "stack_delta_page_key",
    "stack_delta_page_info",
    "pid_page_mapping_key",
    "pid_page_mapping_info",
    "interpreter_offsets",
    "python_proc_info",
    "go_proc_info",
    "trace_label",
    "kernel_name_batch",
  ],
  enums: [
    "frame_marker",
    "unwind_program",
    "trace_origin",
    "event_kind",
    "frame_flag",
    "unwind_stop_reason",
    "metric_id",
    "limits",
    "pid_filter_flag",
    "stack_delta_constants",
    "unwind_command",
    "unwind_opcode",
    "unwind_fp_opcode",
    "interpreter_constants",
    "python_proc_flag",
    "python_frame_owner",
    "go_label_layout",
    "kernel_name_limits",
  ],
};

/** Global variables in .rodata that the host sets before load. */
const RODATA_VARIABLES = ["tracer_config"];

/** Offsets of named symbols in the section called `sectionName`, from the ELF symbol table. */
function symbolOffsets(elf: ElfFile, sectionName: string, names: string[]): Map<string, number> {
  const section = elf.section(sectionName);
  if (!section) throw new Error(`Cannot find ${sectionName} in the BPF object`);
  const found = new Map<string, number>();
  for (const symbol of objectSymbols(elf)) {
    if (symbol.section === section.index && names.includes(symbol.name)) found.set(symbol.name, symbol.value);
  }
  for (const name of names) {
    if (!found.has(name)) throw new Error(`Cannot find ${name} in ${sectionName} of the BPF object`);
  }
  return found;
}

/** The text of support/types.ts for the given BPF object. */
export function generateSupportTypes(object: Uint8Array): Promise<string> {
  using elf = ElfFile.fromBytes(object, "omniprof.bpf.o");
  const btf = parseBtf(elf.readSection(".BTF"));
  let text = generateLayoutModule(btf, SPEC, "bpf/*.bpf.c (types.h)");
  const offsets = symbolOffsets(elf, ".rodata", RODATA_VARIABLES);
  text += "\n/** Offsets of the settings in the .rodata map (from the object's symbol table). */\n";
  text += "export const rodataOffsets = {\n";
  for (const [name, offset] of offsets) text += `  ${name}: ${offset},\n`;
  text += "} as const;\n";
  return Promise.resolve(text);
}

/**
 * Generates support/types.ts from the BPF object: the structs and enums of bpf/types.h (the list below)
 * and every struct and enum declared in a runtime's header, bpf/<name>_tracer.h (found by that rule, so a
 * runtime is named only in its own files), come from the object's BTF; the offsets of the settings in
 * .rodata from its symbol table (BTF's DATASEC offsets are only filled in by libbpf at load time). Called
 * by build.ts, which also checks for drift.
 *
 * @example
 * ```ts ignore
 * const text = await generateSupportTypes(await Deno.readFile(".build/omniprof.bpf.o"));
 * ```
 *
 * @module
 */
import { parseBtf } from "../lib/btf/btf.ts";
import { generateLayoutModule } from "../lib/btf/codegen.ts";
import { ElfFile } from "../lib/elf/elf_file.ts";
import { objectSymbols } from "../lib/bpf/object_spec.ts";

/** What the host reads or writes of the BPF side's shared data (bpf/types.h). */
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
    "trace_label",
    "kernel_name_batch",
    "copied_stack",
    "off_cpu_trace",
    "off_cpu_wait",
    "off_cpu_total",
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
    "kernel_name_limits",
    "trace_flag",
    "stack_copy_mode",
    "off_cpu_constants",
  ],
};

const BPF_DIR = new URL("../bpf/", import.meta.url);
/** A runtime's header: what its unwinder shares with the host. */
const RUNTIME_HEADER = /^[a-z0-9]+_tracer\.h$/;
/** A struct or enum declared at the top level of a header (its body opens on the same line). */
const DECLARATION = /^(struct|enum) ([A-Za-z_][A-Za-z0-9_]*) \{/gm;

/** The structs and enums declared in the runtimes' headers (bpf/<name>_tracer.h), by header name. */
export function runtimeHeaderTypes(): { structs: string[]; enums: string[] } {
  const headers = [...Deno.readDirSync(BPF_DIR)]
    .filter((entry) => entry.isFile && RUNTIME_HEADER.test(entry.name))
    .map((entry) => entry.name)
    .sort();
  const structs: string[] = [];
  const enums: string[] = [];
  for (const header of headers) {
    const text = Deno.readTextFileSync(new URL(header, BPF_DIR));
    for (const [, kind, name] of text.matchAll(DECLARATION)) {
      (kind === "struct" ? structs : enums).push(name!);
    }
  }
  return { structs, enums };
}

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
  const runtime = runtimeHeaderTypes();
  const spec = { structs: [...SPEC.structs, ...runtime.structs], enums: [...SPEC.enums, ...runtime.enums] };
  let text = generateLayoutModule(btf, spec, "bpf/*.bpf.c (types.h, *_tracer.h)");
  const offsets = symbolOffsets(elf, ".rodata", RODATA_VARIABLES);
  text += "\n/** Offsets of the settings in the .rodata map (from the object's symbol table). */\n";
  text += "export const rodataOffsets = {\n";
  for (const [name, offset] of offsets) text += `  ${name}: ${offset},\n`;
  text += "} as const;\n";
  return Promise.resolve(text);
}

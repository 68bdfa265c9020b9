import assert from "node:assert/strict";
import { ElfFile } from "../elf/elf_file.ts";
import { bpfObjectBytes } from "../../support/embedded/bpf_object.ts";
import { compareNames, objectSymbols, readObjectSpec, STT_FUNC } from "./object_spec.ts";
import { BpfMapType, BpfProgramType, programTypeOfSection } from "./uapi.ts";

/** The built object with `edit` applied to a copy of its bytes, given the ELF read from the original. */
function editedObject(edit: (bytes: Uint8Array, elf: ElfFile) => void): ElfFile {
  const bytes = new Uint8Array(bpfObjectBytes);
  using elf = ElfFile.fromBytes(bpfObjectBytes, "omniprof.bpf.o");
  edit(bytes, elf);
  return ElfFile.fromBytes(bytes, "edited.bpf.o");
}

Deno.test("readObjectSpec() reads the maps and programs of the built object as bpf/ declares them", () => {
  using elf = ElfFile.fromBytes(bpfObjectBytes, "omniprof.bpf.o");
  const spec = readObjectSpec(elf);
  // bpf/maps.bpf.h: `struct progs_map { PROG_ARRAY; max_entries PROG_UNWIND_COUNT; key, value __u32 }`.
  assert.deepEqual(spec.maps.find((map) => map.name === "progs"), {
    name: "progs",
    type: BpfMapType.ProgArray,
    keySize: 4,
    valueSize: 4,
    maxEntries: 10,
  });
  // A hash of maps: a u64 key, a descriptor as value, and the template of its arrays of 4-byte rows.
  assert.deepEqual(spec.maps.find((map) => map.name === "exe_id_to_8_stack_deltas")?.inner, {
    type: BpfMapType.Array,
    keySize: 4,
    valueSize: 4,
    maxEntries: 1,
    flags: 1024 | 4096,
  });
  assert.deepEqual(spec.programs.find((program) => program.name === "on_process_fork"), {
    name: "on_process_fork",
    section: "raw_tp/sched_process_fork",
    type: BpfProgramType.RawTracepoint,
  });
  // Global subprograms in .text are not programs.
  const names = spec.programs.map((program) => program.name);
  assert.ok(!names.includes("unwind_frame") && !names.includes("python_step"), names.join(", "));
});

Deno.test("readObjectSpec() refuses an object whose symbol table names a map its BTF does not", () => {
  using elf = editedObject((bytes, original) => {
    const strtab = original.sections[original.sections.find((section) => section.name === ".symtab")!.link]!;
    const at = new TextDecoder().decode(bytes.subarray(strtab.offset, strtab.offset + strtab.size))
      .indexOf("known_pids\0");
    assert.ok(at >= 0);
    bytes[strtab.offset + at + "known_pids".length - 1] = "z".charCodeAt(0);
  });
  assert.throws(() => readObjectSpec(elf), /Cannot read map known_pids of edited\.bpf\.o: the symbol table/);
});

Deno.test("readObjectSpec() refuses a static program, as libbpf does", () => {
  using elf = editedObject((bytes, original) => {
    const symtab = original.sections.find((section) => section.name === ".symtab")!;
    const index = objectSymbols(original).findIndex((symbol) => symbol.name === "sample_cpu");
    assert.equal(objectSymbols(original)[index]!.type, STT_FUNC);
    // Symbol index + 1 (the null symbol is left out), st_info at byte 4: STB_LOCAL << 4 | STT_FUNC.
    bytes[symtab.offset + (index + 1) * 24 + 4] = STT_FUNC;
  });
  assert.throws(() => readObjectSpec(elf), /Cannot read program sample_cpu .*static programs/);
});

Deno.test("readObjectSpec() refuses an ELF file that is not a BPF object", () => {
  using elf = ElfFile.open("/bin/true");
  assert.throws(() => readObjectSpec(elf), /Cannot read \/bin\/true as a BPF object: its machine is 62/);
});

Deno.test("compareNames() orders the numbers in names by value", () => {
  const names = ["b", "exe_id_to_10_x", ".rodata", "exe_id_to_9_x", "a2b", "a10", "a2a", "a"];
  assert.deepEqual(names.sort(compareNames), [
    ".rodata",
    "a",
    "a2a",
    "a2b",
    "a10",
    "b",
    "exe_id_to_9_x",
    "exe_id_to_10_x",
  ]);
});

Deno.test("programTypeOfSection() follows libbpf's section names", () => {
  assert.equal(programTypeOfSection("perf_event"), BpfProgramType.PerfEvent);
  assert.equal(programTypeOfSection("raw_tp/sched_switch"), BpfProgramType.RawTracepoint);
  assert.equal(programTypeOfSection("tp/sched/sched_switch"), BpfProgramType.Tracepoint);
  assert.equal(programTypeOfSection("uprobe/lib.so:f"), BpfProgramType.Kprobe);
  assert.throws(() => programTypeOfSection("perf_events"), RangeError);
  assert.throws(() => programTypeOfSection("xdp"), /lib\/bpf\/uapi\.ts lists none/);
});

/**
 * The tail-call table `progs`: which program unwinds each kind of frame. BPF jumps through it by the slots
 * of `enum unwind_program` (bpf/types.h), which support/types.ts generates as `UnwindProgram`; the tracer
 * fills it from {@linkcode UNWIND_PROGRAMS} alone, so a runtime's unwinder is one line there.
 *
 * @example
 * ```ts ignore
 * import { fillUnwindPrograms } from "./unwind_programs.ts";
 * object.load();
 * fillUnwindPrograms(object);
 * ```
 *
 * @module
 */
import { u32Key } from "./map.ts";
import type { BpfObject } from "./object.ts";
import { BPF_MAPS, type BpfProgramName } from "../../support/bpf_catalogue.ts";
import { UnwindProgram } from "../../support/types.ts";

/** A slot of the table: a value of `enum unwind_program` other than the count. */
export type UnwindSlot = Exclude<keyof typeof UnwindProgram, "Count">;

/** The program in each filled slot of the table; a slot left out ends the trace when jumped to. */
export const UNWIND_PROGRAMS = {
  Stop: "unwind_stop",
  Native: "unwind_native",
  Python: "unwind_python",
} as const satisfies Partial<Record<UnwindSlot, BpfProgramName>>;

// Slots and program descriptors are u32 in the table (u32Key): a change in bpf/ is a type error here.
BPF_MAPS.progs.keySize satisfies 4;
BPF_MAPS.progs.valueSize satisfies 4;

/** A filled slot of the table, its index in it, and its program. */
export interface UnwindProgramEntry {
  slot: keyof typeof UNWIND_PROGRAMS;
  index: number;
  program: BpfProgramName;
}

/** The filled slots of the table. */
export function unwindPrograms(): UnwindProgramEntry[] {
  return (Object.keys(UNWIND_PROGRAMS) as (keyof typeof UNWIND_PROGRAMS)[]).map((slot) => ({
    slot,
    index: UnwindProgram[slot],
    program: UNWIND_PROGRAMS[slot],
  }));
}

/** Puts every program of {@linkcode UNWIND_PROGRAMS} in its slot of the loaded `object`'s table. */
export function fillUnwindPrograms(object: BpfObject): void {
  const progs = object.map("progs");
  for (const { index, program } of unwindPrograms()) {
    progs.update(u32Key(index), u32Key(object.program(program).fd));
  }
}

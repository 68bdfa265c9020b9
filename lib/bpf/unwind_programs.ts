/**
 * The tail-call table `progs`: which program unwinds each kind of frame. BPF jumps through it by the slots
 * of `enum unwind_program` (bpf/types.h), which support/types.ts generates as `UnwindProgram`. The
 * profiler's own slots are listed here; each runtime brings its own (lib/interpreter/runtimes.ts), whose
 * number its header bpf/<name>_tracer.h declares, and the tracer fills the table from both lists alone.
 *
 * @example
 * ```ts ignore
 * import { fillUnwindPrograms, unwindPrograms } from "./unwind_programs.ts";
 * object.load();
 * fillUnwindPrograms(object, unwindPrograms(runtimeUnwinders(RUNTIMES)));
 * ```
 *
 * @module
 */
import { u32Key } from "./map.ts";
import type { BpfObject } from "./object.ts";
import { BPF_MAPS, type BpfProgramName } from "../../support/bpf_catalogue.ts";
import { UnwindProgram } from "../../support/types.ts";

/** A program and the slot it fills. */
export interface Unwinder {
  /** An index of the table: a value of `enum unwind_program`, or a runtime's slot from its header. */
  readonly slot: number;
  readonly program: BpfProgramName;
}

/** The slots every session fills: the native unwinder and the program that ends a trace. */
export const NATIVE_UNWINDERS: readonly Unwinder[] = [
  { slot: UnwindProgram.Stop, program: "unwind_stop" },
  { slot: UnwindProgram.Native, program: "unwind_native" },
];

// Slots and program descriptors are u32 in the table (u32Key): a change in bpf/ is a type error here.
BPF_MAPS.progs.keySize satisfies 4;
BPF_MAPS.progs.valueSize satisfies 4;

/** A filled slot of the table and its program. */
export type UnwindProgramEntry = Unwinder;

/**
 * The filled slots of the table: the native ones and `runtimeUnwinders`; a slot left out ends the trace
 * when jumped to.
 *
 * @throws {RangeError} when two programs claim one slot, or a slot lies outside the table.
 */
export function unwindPrograms(runtimeUnwinders: readonly Unwinder[]): UnwindProgramEntry[] {
  const entries: UnwindProgramEntry[] = [];
  for (const { slot, program } of [...NATIVE_UNWINDERS, ...runtimeUnwinders]) {
    const taken = entries.find((entry) => entry.slot === slot);
    if (taken !== undefined) {
      throw new RangeError(`Cannot put ${program} in slot ${slot}: ${taken.program} is there`);
    }
    if (!Number.isInteger(slot) || slot < 0 || slot >= UnwindProgram.Count) {
      throw new RangeError(
        `Cannot put ${program} in slot ${slot}: the table has ${UnwindProgram.Count} slots`,
      );
    }
    entries.push({ slot, program });
  }
  return entries;
}

/** Puts every program of `entries` in its slot of the loaded `object`'s table. */
export function fillUnwindPrograms(object: BpfObject, entries: readonly UnwindProgramEntry[]): void {
  const progs = object.map("progs");
  for (const { slot, program } of entries) {
    progs.update(u32Key(slot), u32Key(object.program(program).fd));
  }
}

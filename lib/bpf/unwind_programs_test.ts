import { openTracerObject } from "../record/tracer_object.ts";
import assert from "node:assert/strict";
import { libbpf, LibbpfError } from "./libbpf.ts";
import { u32Key } from "./map.ts";
import type { BpfObject } from "./object.ts";
import { NATIVE_UNWINDERS, type Unwinder, unwindPrograms, UnwindProgramTable } from "./unwind_programs.ts";
import { GoUnwindProgram, PythonUnwindProgram, UnwindProgram } from "../../support/types.ts";
import { programInfoById } from "../../tests/kernel/bpf_info.ts";
import { tracingTest } from "../../tests/helpers.ts";

// A runtime's slot: the table's last. Which program fills it does not matter to the table.
const RUNTIME_SLOT = UnwindProgram.Count - 1;

Deno.test("unwindPrograms() puts the native programs and the runtimes' in the slots they name", () => {
  const entries = unwindPrograms([{ slot: RUNTIME_SLOT, program: "unwind_stop" }]);
  assert.deepEqual(entries.map(({ slot }) => slot), [UnwindProgram.Stop, UnwindProgram.Native, RUNTIME_SLOT]);
  assert.deepEqual(entries.slice(0, 2), NATIVE_UNWINDERS);
  assert.deepEqual(entries.at(-1), { slot: RUNTIME_SLOT, program: "unwind_stop" });
});

Deno.test("unwindPrograms() refuses two programs in one slot", () => {
  assert.throws(
    () => unwindPrograms([{ slot: UnwindProgram.Native, program: "unwind_stop" }]),
    new RegExp(`Cannot put unwind_stop in slot ${UnwindProgram.Native}: unwind_native is there`),
  );
});

Deno.test("unwindPrograms() refuses a slot outside the table", () => {
  assert.throws(
    () => unwindPrograms([{ slot: UnwindProgram.Count, program: "unwind_stop" }]),
    new RegExp(
      `Cannot put unwind_stop in slot ${UnwindProgram.Count}: the table has ${UnwindProgram.Count} slots`,
    ),
  );
});

/** The slots of `object`'s table that hold a program, with the kernel's id of each (what BPF jumps to). */
function kernelSlots(object: BpfObject): Map<number, number> {
  const progs = object.map("progs");
  const value = new Uint32Array(1);
  const filled = new Map<number, number>();
  for (let slot = 0; slot < progs.maxEntries; slot++) {
    // Read from user space, a slot of a program array holds the id of its program.
    if (progs.lookup(u32Key(slot), new Uint8Array(value.buffer))) filled.set(slot, value[0]!);
  }
  return filled;
}

/**
 * The object as a session opens it: the kernel-names program only where the kernel runs it, and without
 * the probes' programs, which load as their own types in objects of their own (lib/record/probes.ts).
 */
function openObject(): BpfObject {
  const object = openTracerObject();
  object.program("name_kernel_addresses").setAutoload(false);
  return object;
}

const GO_LABELS: Unwinder = { slot: GoUnwindProgram.Labels, program: "unwind_go_labels" };
const PYTHON: Unwinder = { slot: PythonUnwindProgram.Python, program: "unwind_python" };

Deno.test(tracingTest("a lazy table loads a runtime's program only when its slot is first required", () => {
  using object = openObject();
  const table = new UnwindProgramTable(object, [PYTHON, GO_LABELS], { lazy: true });
  try {
    object.load();
    table.fillLoaded();
    // Only the native slots: the runtimes' programs were not verified with the object.
    assert.deepEqual(
      [...kernelSlots(object).keys()].sort(),
      [UnwindProgram.Stop, UnwindProgram.Native].sort(),
    );
    assert.throws(() => object.program("unwind_go_labels").fd, /descriptor of program unwind_go_labels/);
    assert.throws(() => object.program("unwind_python").fd, /descriptor of program unwind_python/);

    table.require(GoUnwindProgram.Labels);
    const slots = kernelSlots(object);
    assert.deepEqual(
      [...slots.keys()].sort(),
      [UnwindProgram.Stop, UnwindProgram.Native, GoUnwindProgram.Labels].sort(),
    );
    // The kernel keeps 15 characters of a program's name.
    assert.equal(programInfoById(slots.get(GoUnwindProgram.Labels)!)?.name, "unwind_go_label");
    assert.deepEqual(table.filled().map(({ program }) => program), [
      "unwind_stop",
      "unwind_native",
      "unwind_go_labels",
    ]);

    // Once: the same program stays in the slot; the native slot needs nothing.
    table.require(GoUnwindProgram.Labels);
    table.require(UnwindProgram.Native);
    assert.deepEqual(kernelSlots(object), slots);
    assert.equal(table.filled().length, 3);
  } finally {
    table.close();
  }
}));

Deno.test(tracingTest("an eager table loads every program with the object", () => {
  using object = openObject();
  const table = new UnwindProgramTable(object, [PYTHON, GO_LABELS], { lazy: false });
  try {
    object.load();
    table.fillLoaded();
    const expected = new Map(
      [...NATIVE_UNWINDERS, PYTHON, GO_LABELS].map((
        { slot, program },
      ) => [slot, programId(object.program(program).fd)]),
    );
    assert.deepEqual(kernelSlots(object), expected);
    table.require(GoUnwindProgram.Labels);
    assert.deepEqual(kernelSlots(object), expected);
  } finally {
    table.close();
  }
}));

/** The kernel's id of a loaded program (struct bpf_prog_info: type at byte 0, id at byte 4). */
function programId(fd: number): number {
  const info = new Uint8Array(256);
  const length = new Uint32Array([info.length]);
  const result = libbpf().fn.bpf_obj_get_info_by_fd(fd, info, new Uint8Array(length.buffer));
  if (result < 0) throw new LibbpfError(`get the information on program fd ${fd}`, -result);
  return new DataView(info.buffer).getUint32(4, true);
}

import assert from "node:assert/strict";
import { NATIVE_UNWINDERS, unwindPrograms } from "./unwind_programs.ts";
import { UnwindProgram } from "../../support/types.ts";

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

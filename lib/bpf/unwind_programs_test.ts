import assert from "node:assert/strict";
import { NATIVE_UNWINDERS, unwindPrograms } from "./unwind_programs.ts";
import { UnwindProgram } from "../../support/types.ts";

Deno.test("unwindPrograms() puts the native programs and the runtimes' in the slots they name", () => {
  const entries = unwindPrograms([{ slot: "Python", program: "unwind_python" }]);
  assert.deepEqual(entries.map(({ slot }) => slot), [...NATIVE_UNWINDERS.map(({ slot }) => slot), "Python"]);
  for (const { slot, index } of entries) assert.equal(index, UnwindProgram[slot], slot);
  assert.deepEqual(entries.at(-1), { slot: "Python", program: "unwind_python", index: UnwindProgram.Python });
});

Deno.test("unwindPrograms() refuses two programs in one slot", () => {
  assert.throws(
    () => unwindPrograms([{ slot: "Native", program: "unwind_python" }]),
    /Cannot put unwind_python in slot Native: unwind_native is there/,
  );
});

import assert from "node:assert/strict";
import { decodeBiasAndUnwindProgram, encodeBiasAndUnwindProgram } from "./bias_and_unwind_program.ts";
import { UnwindProgram } from "./types.ts";

Deno.test("encodeBiasAndUnwindProgram() puts the program in the top byte and the bias below", () => {
  const bytes = encodeBiasAndUnwindProgram(0x0000_7f12_3456_7000, UnwindProgram.Native);
  const value = new DataView(bytes.buffer).getBigUint64(0, true);
  assert.equal(value, (BigInt(UnwindProgram.Native) << 56n) | 0x7f1234567000n);
  for (const [bias, program] of [[0, 0], [1, 0xff], [Number.MAX_SAFE_INTEGER, 7], [0x400000, 4]]) {
    assert.deepEqual(decodeBiasAndUnwindProgram(encodeBiasAndUnwindProgram(bias!, program!)), {
      bias,
      unwindProgram: program,
    });
  }
});

Deno.test("encodeBiasAndUnwindProgram() refuses negative biases and wide programs", () => {
  assert.throws(() => encodeBiasAndUnwindProgram(-4096, 1), RangeError);
  assert.throws(() => encodeBiasAndUnwindProgram(0.5, 1), RangeError);
  assert.throws(() => encodeBiasAndUnwindProgram(0, 256), RangeError);
});

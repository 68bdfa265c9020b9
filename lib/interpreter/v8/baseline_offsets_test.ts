import assert from "node:assert/strict";
import { bytecodeOffsetAt } from "./baseline_offsets.ts";

/** A table of three scales for opcodes 0-7: 4-7 take 2, 3, 1 and 2 bytes at single scale, more when wider. */
const SIZES: [Uint8Array, Uint8Array, Uint8Array] = [
  new Uint8Array([1, 1, 1, 1, 2, 3, 1, 2]),
  new Uint8Array([1, 1, 1, 1, 3, 5, 1, 3]),
  new Uint8Array([1, 1, 1, 1, 5, 9, 1, 5]),
];

Deno.test("bytecodeOffsetAt() walks the prologue, then one bytecode per machine-code length", () => {
  // Bytecodes: op4 at 0 (2 bytes), Wide op5 at 2 (1 + 5 bytes), op6 at 8 (1 byte), ExtraWide op7 at 9.
  const bytecodes = new Uint8Array([4, 0xaa, 0, 5, 0, 0, 0, 0, 6, 1, 7, 0, 0, 0, 0]);
  // Machine code: a prologue of 10 bytes, then 5, 8, 3 and 200 (a VLQ of two bytes: 0xc8 0x01).
  const table = new Uint8Array([10, 5, 8, 3, 0xc8, 0x01]);
  const at = (pc: number) => bytecodeOffsetAt(table, bytecodes, SIZES, pc);
  assert.equal(at(0), 0, "the prologue stands for the function's start");
  assert.equal(at(9), 0);
  assert.equal(at(10), 0);
  assert.equal(at(14), 0);
  assert.equal(at(15), 2, "after the first bytecode's 5 bytes: the wide one");
  assert.equal(at(22), 2);
  assert.equal(at(23), 8);
  assert.equal(at(25), 8);
  assert.equal(at(26), 9, "the extra-wide one, 200 bytes of code");
  assert.equal(at(225), 9);
  assert.equal(at(226), null, "past the last bytecode");
});

Deno.test("bytecodeOffsetAt() of tables that end early or name unknown bytecodes is null", () => {
  assert.equal(bytecodeOffsetAt(new Uint8Array(), new Uint8Array([4, 0]), SIZES, 0), null);
  assert.equal(bytecodeOffsetAt(new Uint8Array([2, 0x80]), new Uint8Array([4, 0]), SIZES, 5), null);
  assert.equal(bytecodeOffsetAt(new Uint8Array([2, 4]), new Uint8Array([99]), SIZES, 3), null);
});

import assert from "node:assert/strict";
import { pcValue, readVarint, zigZag } from "./pcvalue.ts";

Deno.test("readVarint() decodes one to five bytes and refuses longer or cut ones", () => {
  assert.deepEqual(readVarint(Uint8Array.of(0x05), 0), { value: 5, next: 1 });
  assert.deepEqual(readVarint(Uint8Array.of(0xac, 0x02), 0), { value: 300, next: 2 });
  assert.deepEqual(readVarint(Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0x0f), 0), {
    value: 0xffffffff,
    next: 5,
  });
  assert.equal(readVarint(Uint8Array.of(0x80, 0x80, 0x80, 0x80, 0x80, 0x01), 0), null);
  assert.equal(readVarint(Uint8Array.of(0x80), 0), null);
  assert.equal(readVarint(Uint8Array.of(), 0), null);
});

Deno.test("zigZag() maps 0, 1, 2, 3 to 0, -1, 1, -2 over the whole 32-bit range", () => {
  assert.deepEqual([0, 1, 2, 3].map(zigZag), [0, -1, 1, -2]);
  assert.equal(zigZag(0xfffffffe), 0x7fffffff);
  assert.equal(zigZag(0xffffffff), -0x80000000);
});

Deno.test("pcValue() walks the pairs from the entry in quanta and stops at the end marker", () => {
  // -1 +11 = 10 for 4 quanta, -1 +11 -3 = 7 for 2 quanta (zig-zag 5 = -3), then the end.
  const table = Uint8Array.of(0xff, 22, 4, 5, 2, 0);
  const entry = 0x1000;
  assert.equal(pcValue(table, 1, entry, entry, 4), 10);
  assert.equal(pcValue(table, 1, entry, entry + 15, 4), 10);
  assert.equal(pcValue(table, 1, entry, entry + 16, 4), 7);
  assert.equal(pcValue(table, 1, entry, entry + 23, 4), 7);
  assert.equal(pcValue(table, 1, entry, entry + 24, 4), null, "past the table");
  assert.equal(pcValue(table, 1, entry, entry - 1, 4), null, "before the entry");
});

Deno.test("pcValue() takes a zero first delta as a value, not the end", () => {
  // Value -1 + 0 for 3 bytes: Go writes such a first pair for a table that starts at -1.
  assert.equal(pcValue(Uint8Array.of(0, 3, 2, 1, 0), 0, 0, 2, 1), -1);
  assert.equal(pcValue(Uint8Array.of(0, 3, 2, 1, 0), 0, 0, 3, 1), 0);
});

Deno.test("pcValue() gives nothing for a table cut short or an offset outside it", () => {
  assert.equal(pcValue(Uint8Array.of(22, 4, 4), 0, 0, 5, 1), null);
  assert.equal(pcValue(Uint8Array.of(22, 0x80), 0, 0, 5, 1), null);
  assert.equal(pcValue(Uint8Array.of(22, 4, 0), 3, 0, 0, 1), null);
  assert.equal(pcValue(Uint8Array.of(22, 4, 0), -1, 0, 0, 1), null);
});

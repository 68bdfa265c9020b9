import assert from "node:assert/strict";
import { constants, deflateSync } from "node:zlib";
import { unzlib } from "./inflate.ts";

function sample(length: number, seed: number): Uint8Array {
  // Text-like bytes with repeats (for lengths and distances) and random runs (for literals).
  const out = new Uint8Array(length);
  let x = seed;
  for (let i = 0; i < length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out[i] = i > 300 && (x >>> 28) < 9 ? out[i - 1 - ((x >>> 8) % 300)]! : 97 + ((x >>> 16) % 26);
  }
  return out;
}

Deno.test("unzlib inflates what node:zlib deflates, at every level and strategy", () => {
  const strategies = [
    constants.Z_DEFAULT_STRATEGY,
    constants.Z_FIXED,
    constants.Z_HUFFMAN_ONLY,
    constants.Z_RLE,
  ];
  for (const length of [0, 1, 100, 4096, 70_000, 300_000]) {
    const data = sample(length, length + 1);
    for (const level of [0, 1, 6, 9]) {
      for (const strategy of strategies) {
        const packed = deflateSync(data, { level, strategy });
        assert.deepEqual(
          unzlib(packed, length),
          data,
          `length ${length} level ${level} strategy ${strategy}`,
        );
      }
    }
  }
});

Deno.test("unzlib refuses a wrong size, a bad checksum and corrupt streams without hanging", () => {
  const data = sample(20_000, 7);
  const packed = new Uint8Array(deflateSync(data));
  assert.throws(() => unzlib(packed, data.length - 1), RangeError);
  assert.throws(() => unzlib(packed, data.length + 1), RangeError);
  const badSum = packed.slice();
  badSum[badSum.length - 1]! ^= 1;
  assert.throws(() => unzlib(badSum, data.length), /Adler-32/);
  assert.throws(() => unzlib(packed.subarray(0, packed.length / 2), data.length), RangeError);
  let refused = 0;
  for (let i = 0; i < 2000; i++) {
    const corrupt = packed.slice();
    corrupt[2 + (i * 7919) % (corrupt.length - 2)]! ^= 1 << (i % 8);
    try {
      unzlib(corrupt, data.length);
    } catch (error) {
      assert.ok(error instanceof RangeError, String(error));
      refused++;
    }
  }
  assert.ok(refused > 1900, `only ${refused} of 2000 corrupt streams refused`);
});

import assert from "node:assert/strict";
import { prefixesForRange } from "./prefixes.ts";

function covered(prefixes: { value: number; length: number }[], width: number): [number, number][] {
  return prefixes.map(({ value, length }) => [value, value + 2 ** (width - length)]);
}

Deno.test("prefixesForRange() covers a range exactly with aligned blocks", () => {
  const cases: [number, number][] = [
    [0x1000, 0x2000],
    [0x1000, 0x5000],
    [0x55d0c0a02000, 0x55d0c0a21000],
    [0x7f1c2e028000, 0x7f1c2e1bd000],
    [0, 0x10000],
    [0x7ffffffff000, 0x800000000000],
  ];
  for (const [start, end] of cases) {
    const prefixes = prefixesForRange(start, end, 64);
    const ranges = covered(prefixes, 64);
    assert.equal(ranges[0]![0], start);
    assert.equal(ranges.at(-1)![1], end);
    for (let i = 1; i < ranges.length; i++) assert.equal(ranges[i]![0], ranges[i - 1]![1], "contiguous");
    for (const { value, length } of prefixes) assert.equal(value % 2 ** (64 - length), 0, "aligned");
    // At most two blocks per bit of the range's size.
    assert.ok(prefixes.length <= 2 * Math.ceil(Math.log2(end - start + 1)), `${prefixes.length}`);
  }
});

Deno.test("prefixesForRange() rejects ranges outside exact integers", () => {
  assert.throws(() => prefixesForRange(-1, 10, 64), RangeError);
  assert.throws(() => prefixesForRange(0, 2 ** 60, 64), RangeError);
  assert.deepEqual(prefixesForRange(5, 5, 64), []);
});

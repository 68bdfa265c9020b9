import assert from "node:assert/strict";
import { LatestRanges } from "./latest_ranges.ts";

Deno.test("LatestRanges gives the latest range covering an address, added before or after a lookup", () => {
  // A small random model: for each address, the last range added that covers it, found by a scan.
  let seed = 7;
  const random = (below: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % below;
  };
  const ranges = new LatestRanges(1000);
  const added: [number, number][] = [];
  for (let round = 0; round < 5; round++) {
    for (let i = 0; i < 40; i++) {
      const start = random(500);
      const end = start + 1 + random(60);
      assert.equal(ranges.add(start, end), added.length);
      added.push([start, end]);
    }
    for (let address = 0; address < 600; address++) {
      let expected = -1;
      for (let entry = added.length - 1; entry >= 0; entry--) {
        if (address >= added[entry]![0] && address < added[entry]![1]) {
          expected = entry;
          break;
        }
      }
      assert.equal(ranges.lookup(address), expected, `address ${address} after round ${round}`);
    }
  }
});

Deno.test("LatestRanges refuses ranges past its bound", () => {
  const ranges = new LatestRanges(2);
  assert.equal(ranges.add(0, 10), 0);
  assert.equal(ranges.add(5, 20), 1);
  assert.equal(ranges.full, true);
  assert.equal(ranges.add(30, 40), -1);
  assert.equal(ranges.lookup(35), -1);
  assert.equal(ranges.lookup(7), 1);
  assert.equal(ranges.startOf(1), 5);
});

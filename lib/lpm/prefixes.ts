/**
 * Splitting an address range into the power-of-two aligned blocks an LPM trie can hold: a mapping
 * [start, end) becomes at most about two blocks per address bit, each a (value, prefix length) pair.
 *
 * @example
 * ```ts
 * import { prefixesForRange } from "./prefixes.ts";
 * import assert from "node:assert/strict";
 * assert.deepEqual(prefixesForRange(0x1000, 0x3000, 64), [
 *   { value: 0x1000, length: 52 },
 *   { value: 0x2000, length: 52 },
 * ]);
 * ```
 *
 * @module
 */

/** An aligned block: the addresses whose top `length` bits (of `width`) equal those of `value`. */
export interface Prefix {
  value: number;
  length: number;
}

/**
 * The smallest list of aligned blocks covering exactly [start, end), in address order. Addresses must be
 * integers below 2^53; `width` is the key's width in bits (64 for addresses).
 */
export function prefixesForRange(start: number, end: number, width: number): Prefix[] {
  if (!Number.isInteger(start) || !Number.isInteger(end) || start < 0 || end > Number.MAX_SAFE_INTEGER) {
    throw new RangeError(`Cannot split range [${start}, ${end}): not integers in [0, 2^53)`);
  }
  const prefixes: Prefix[] = [];
  let at = start;
  while (at < end) {
    // The largest block that starts at `at`, is aligned to its size and ends by `end`.
    let size = 1;
    let bits = 0;
    while (at % (size * 2) === 0 && at + size * 2 <= end && bits < width) {
      size *= 2;
      bits++;
    }
    prefixes.push({ value: at, length: width - bits });
    at += size;
  }
  return prefixes;
}

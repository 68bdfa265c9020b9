/**
 * Go's pc-value tables: the compact encoding in `.gopclntab` of a value that changes along a function's
 * code (its source line, file index, stack depth, inlining index). A table is a run of (value delta,
 * pc delta) pairs from the function's entry; each delta is an unsigned LEB128 varint of at most 32 bits,
 * the value delta zig-zag encoded, the pc delta counted in instruction quanta; a value delta of 0 ends the
 * table, except as the first pair. The value starts at -1. (Go's `runtime.pcvalue` and `runtime.step`.)
 *
 * The table comes from the file, so it is hostile: a table that runs past its buffer, or a varint longer
 * than five bytes, gives no value rather than a read out of range.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { pcValue } from "./pcvalue.ts";
 * // From -1: +11 (zig-zag 22) for 4 bytes, then +2 (zig-zag 4) for 2 bytes, then the end.
 * const table = Uint8Array.of(22, 4, 4, 2, 0);
 * assert.equal(pcValue(table, 0, 0x1000, 0x1002, 1), 10);
 * assert.equal(pcValue(table, 0, 0x1000, 0x1005, 1), 12);
 * assert.equal(pcValue(table, 0, 0x1000, 0x1006, 1), null);
 * ```
 *
 * @module
 */

/** A varint of a pc-value table has at most five bytes (32 bits of payload). */
const MAX_VARINT_BYTES = 5;

/**
 * The value the table at `offset` of `pctab` gives the instruction at `target`, in the function that
 * starts at `entry`; null when the table ends before `target`, `target` lies before `entry`, or the
 * table is malformed. `quantum` is the pc-value quantum of the file (1 on x86-64, 4 on arm64).
 */
export function pcValue(
  pctab: Uint8Array,
  offset: number,
  entry: number,
  target: number,
  quantum: number,
): number | null {
  if (target < entry || !(offset >= 0 && offset < pctab.length)) return null;
  let pos = offset;
  let value = -1;
  let pc = entry;
  let first = true;
  // Every pair consumes at least two bytes, so the loop ends at the buffer's end at the latest.
  while (true) {
    const valueDelta = readVarint(pctab, pos);
    if (valueDelta === null) return null;
    pos = valueDelta.next;
    if (valueDelta.value === 0 && !first) return null;
    first = false;
    const pcDelta = readVarint(pctab, pos);
    if (pcDelta === null) return null;
    pos = pcDelta.next;
    value = (value + zigZag(valueDelta.value)) | 0;
    pc += pcDelta.value * quantum;
    if (target < pc) return value;
  }
}

/** A varint and the position after it. */
export interface Varint {
  value: number;
  next: number;
}

/**
 * The unsigned varint at `pos` of `bytes` (at most 32 bits: the fifth byte's bits past them are dropped,
 * as Go does); null when it runs past the buffer or over five bytes.
 */
export function readVarint(bytes: Uint8Array, pos: number): Varint | null {
  let value = 0;
  for (let i = 0; i < MAX_VARINT_BYTES; i++) {
    const byte = bytes[pos + i];
    if (byte === undefined) return null;
    value = (value | ((byte & 0x7f) << (7 * i))) >>> 0;
    if ((byte & 0x80) === 0) return { value, next: pos + i + 1 };
  }
  return null;
}

/** Decodes a zig-zag encoded 32-bit value: 0, 1, 2, 3, ... to 0, -1, 1, -2, ... */
export function zigZag(u: number): number {
  return ((u >>> 1) ^ -(u & 1)) | 0;
}

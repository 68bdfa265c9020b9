/**
 * Source line numbers from a CPython code object's line table, for a byte offset into its bytecode. Three
 * formats, each decoded as CPython's own `PyCode_Addr2Line` does for its version:
 *
 * - 3.8-3.9 `co_lnotab` (Objects/lnotab_notes.txt): pairs of (unsigned byte-offset increment, signed
 *   line increment); the line of an offset is the sum of increments up to the last pair starting at or
 *   before it.
 * - 3.10 `co_linetable` (Objects/lnotab_notes.txt of 3.10): pairs of (unsigned byte delta, signed line
 *   delta), each closing the address range [start, start + delta); a line delta of -128 means "no line".
 * - 3.11+ location table (Objects/locations.md): entries of 1 + n bytes; the first byte has bit 7 set,
 *   a 4-bit code in bits 3-6 and (length in code units - 1) in bits 0-2. Code 15: no location; 14: long
 *   form (signed varint line delta, then end line, columns); 13: no columns (signed varint line delta);
 *   10-12: one line, delta = code - 10; 0-9: short form, same line.
 *
 * The table is hostile input (read from another process): decoding never reads past it, and an offset
 * beyond its end gives "unknown" (0).
 *
 * @example
 * ```ts
 * import { lineForOffset } from "./line_table.ts";
 * // 3.8: offsets 0-5 on line 10, from 6 on line 11.
 * console.log(lineForOffset("lnotab", new Uint8Array([6, 1]), 10, 8)); // 11
 * ```
 *
 * @module
 */
import type { LineTableFormat } from "./offsets.ts";

/** `sizeof(_Py_CODEUNIT)`: addresses in 3.10+ tables count 2-byte code units. */
const CODE_UNIT = 2;
const NO_LINE_3_10 = -128;
const LOCATION_NONE = 15;
const LOCATION_LONG = 14;
const LOCATION_NO_COLUMNS = 13;
const LOCATION_ONE_LINE0 = 10;

/**
 * The source line of the instruction at `byteOffset` (bytes from the start of the bytecode), or 0 when
 * the table says it has none or does not cover the offset. A negative offset (a frame that has not
 * started executing) gives `firstLine`, as in CPython.
 */
export function lineForOffset(
  format: LineTableFormat,
  table: Uint8Array,
  firstLine: number,
  byteOffset: number,
): number {
  if (byteOffset < 0) return firstLine;
  switch (format) {
    case "lnotab":
      return lnotabLine(table, firstLine, byteOffset);
    case "linetable":
      return linetableLine(table, firstLine, byteOffset);
    case "locations":
      return locationsLine(table, firstLine, byteOffset);
  }
}

function lnotabLine(table: Uint8Array, firstLine: number, byteOffset: number): number {
  let line = firstLine;
  let address = 0;
  for (let i = 0; i + 1 < table.length; i += 2) {
    address += table[i] as number;
    if (address > byteOffset) break;
    line += ((table[i + 1] as number) << 24) >> 24;
  }
  return line;
}

function linetableLine(table: Uint8Array, firstLine: number, byteOffset: number): number {
  let computed = firstLine;
  let end = 0;
  for (let i = 0; i + 1 < table.length; i += 2) {
    end += table[i] as number;
    const delta = ((table[i + 1] as number) << 24) >> 24;
    let line = -1;
    if (delta !== NO_LINE_3_10) {
      computed += delta;
      line = computed;
    }
    if (end > byteOffset) return Math.max(0, line);
  }
  return 0;
}

function locationsLine(table: Uint8Array, firstLine: number, byteOffset: number): number {
  let computed = firstLine;
  let end = 0;
  let i = 0;
  while (i < table.length) {
    const first = table[i] as number;
    // Every entry starts with bit 7 set; anything else means the table is not what we think.
    if ((first & 0x80) === 0) return 0;
    const code = (first >> 3) & 15;
    end += ((first & 7) + 1) * CODE_UNIT;
    let line = -1;
    if (code !== LOCATION_NONE) {
      let delta = 0;
      if (code === LOCATION_LONG || code === LOCATION_NO_COLUMNS) {
        delta = signedVarint(table, i + 1);
      } else if (code >= LOCATION_ONE_LINE0) {
        delta = code - LOCATION_ONE_LINE0;
      }
      computed += delta;
      line = computed;
    }
    if (end > byteOffset) return Math.max(0, line);
    // The next entry starts at the next byte with bit 7 set.
    i++;
    while (i < table.length && ((table[i] as number) & 0x80) === 0) i++;
  }
  return 0;
}

/** CPython's `scan_varint`: 6-bit groups, least significant first, bit 6 set on all but the last. */
function varint(table: Uint8Array, at: number): number {
  let read = table[at] ?? 0;
  let value = read & 63;
  let shift = 0;
  // At most 5 groups make 30 bits; more is garbage, and the table may end first.
  while ((read & 64) !== 0 && shift < 24) {
    at++;
    if (at >= table.length) break;
    read = table[at] as number;
    shift += 6;
    value |= (read & 63) << shift;
  }
  return value >>> 0;
}

/** CPython's `scan_signed_varint`: the low bit is the sign. */
function signedVarint(table: Uint8Array, at: number): number {
  const value = varint(table, at);
  return (value & 1) !== 0 ? -(value >>> 1) : value >>> 1;
}

/**
 * V8's source position tables and source positions. A table (a ByteArray of bytecode or of compiled code)
 * maps code offsets to source positions: a run of (code delta, position delta) pairs, each a zigzag VLQ,
 * the code delta negated (minus one) for positions that are not statements. A source position packs the
 * offset in its script's source (plus one; 0 is "none") and, for optimised code, which inlined call it
 * lies in (0 for the function itself).
 *
 * @example
 * ```ts ignore
 * import { positionAt, scriptOffsetOf, inliningIdOf, lineOf } from "./source_positions.ts";
 * const position = positionAt(table, bytecodeOffset); // null: before the first entry
 * const line = lineOf(lineStarts, scriptOffsetOf(position!)); // 1-based
 * ```
 *
 * @module
 */

const TWO_POW_31 = 2 ** 31;
const SCRIPT_OFFSET_BITS = 2 ** 30;
const INLINING_ID_BITS = 2 ** 16;

/**
 * The source position in force at `codeOffset`: the position of the last entry at or before it, or null
 * when the table has none there (or is malformed).
 */
export function positionAt(table: Uint8Array, codeOffset: number): number | null {
  let at = 0;
  let code = -1;
  let position = 0;
  let found: number | null = null;
  while (at < table.length) {
    const codeDelta = readVlq(table, at);
    if (codeDelta === null) return found;
    at = codeDelta.next;
    const positionDelta = readVlq(table, at);
    if (positionDelta === null) return found;
    at = positionDelta.next;
    code += codeDelta.value >= 0 ? codeDelta.value : -(codeDelta.value + 1);
    position += positionDelta.value;
    if (code > codeOffset) break;
    found = position;
  }
  return found;
}

/** The offset in the script's source that `position` names, or -1 when it names none. */
export function scriptOffsetOf(position: number): number {
  return (Math.floor(position / 2) % SCRIPT_OFFSET_BITS) - 1;
}

/** Which inlined call of optimised code `position` lies in: 0 for the code's own function. */
export function inliningIdOf(position: number): number {
  return Math.floor(position / TWO_POW_31) % INLINING_ID_BITS;
}

/** Where each line of `source` starts (offsets), for {@linkcode lineOf}. A line ends at `\n`, `\r\n` or `\r`. */
export function lineStarts(source: string): number[] {
  const starts = [0];
  for (let i = 0; i < source.length; i++) {
    const c = source.charCodeAt(i);
    if (c === 10 || (c === 13 && source.charCodeAt(i + 1) !== 10)) starts.push(i + 1);
  }
  return starts;
}

/** Line starts from V8's own `Script.line_ends` (the offset of each line's terminator). */
export function lineStartsFromEnds(ends: readonly number[]): number[] {
  return [0, ...ends.map((end) => end + 1)];
}

/** The 1-based line that holds `offset`, or 0 when `offset` is not in the source. */
export function lineOf(starts: readonly number[], offset: number): number {
  if (offset < 0 || starts.length === 0) return 0;
  let low = 0;
  let high = starts.length - 1;
  while (low < high) {
    const middle = (low + high + 1) >> 1;
    if ((starts[middle] as number) <= offset) low = middle;
    else high = middle - 1;
  }
  return low + 1;
}

/** A zigzag-encoded VLQ at `at`: its value and where the next begins, or null when it runs off the end. */
function readVlq(bytes: Uint8Array, at: number): { value: number; next: number } | null {
  let unsigned = 0;
  let scale = 1;
  for (let i = at; i < bytes.length && i < at + 10; i++) {
    const byte = bytes[i] as number;
    unsigned += (byte & 0x7f) * scale;
    scale *= 128;
    if ((byte & 0x80) === 0) {
      const value = unsigned % 2 === 0 ? unsigned / 2 : -(unsigned + 1) / 2;
      return { value, next: i + 1 };
    }
  }
  return null;
}

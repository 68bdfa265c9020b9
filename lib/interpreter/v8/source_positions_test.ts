import assert from "node:assert/strict";
import {
  inliningIdOf,
  lineOf,
  lineStarts,
  lineStartsFromEnds,
  positionAt,
  scriptOffsetOf,
} from "./source_positions.ts";

/** V8's encoding of one table value: zigzag, then 7 bits a byte, low first (SourcePositionTableBuilder). */
function vlq(value: number): number[] {
  let unsigned = value >= 0 ? value * 2 : -value * 2 - 1;
  const bytes: number[] = [];
  do {
    const low = unsigned % 128;
    unsigned = Math.floor(unsigned / 128);
    bytes.push(unsigned > 0 ? low | 0x80 : low);
  } while (unsigned > 0);
  return bytes;
}

/** A SourcePosition as V8 packs it: (script offset + 1) << 1, inlining id << 31. */
function sourcePosition(scriptOffset: number, inliningId = 0): number {
  return (scriptOffset + 1) * 2 + inliningId * 2 ** 31;
}

/** A table of (code offset, position, is statement) entries, in V8's delta encoding. */
function table(entries: [number, number, boolean][]): Uint8Array {
  const bytes: number[] = [];
  let code = -1;
  let position = 0;
  for (const [offset, value, statement] of entries) {
    const delta = offset - code;
    bytes.push(...vlq(statement ? delta : -delta - 1), ...vlq(value - position));
    code = offset;
    position = value;
  }
  return new Uint8Array(bytes);
}

Deno.test("positionAt() finds the entry in force at a code offset, statements or not", () => {
  const t = table([
    [0, sourcePosition(10), true],
    [7, sourcePosition(25), false],
    [30, sourcePosition(12), true],
    [300, sourcePosition(90000, 3), true],
  ]);
  assert.equal(positionAt(t, 0), sourcePosition(10));
  assert.equal(positionAt(t, 6), sourcePosition(10));
  assert.equal(positionAt(t, 7), sourcePosition(25));
  assert.equal(positionAt(t, 29), sourcePosition(25));
  assert.equal(positionAt(t, 30), sourcePosition(12), "a position may go backwards");
  assert.equal(positionAt(t, 5000), sourcePosition(90000, 3));
  assert.equal(scriptOffsetOf(positionAt(t, 5000)!), 90000);
  assert.equal(inliningIdOf(positionAt(t, 5000)!), 3);
  assert.equal(inliningIdOf(positionAt(t, 30)!), 0);
});

Deno.test("positionAt() of an empty or cut table is null or the last whole entry", () => {
  assert.equal(positionAt(new Uint8Array(), 10), null);
  const t = table([[4, sourcePosition(1), true], [9, sourcePosition(2), true]]);
  assert.equal(positionAt(t, 3), null, "before the first entry");
  assert.equal(positionAt(t.subarray(0, t.length - 1), 20), sourcePosition(1), "a cut entry is not read");
  assert.equal(positionAt(new Uint8Array([0x80, 0x80]), 0), null);
});

Deno.test("scriptOffsetOf() is -1 for the position that names no offset", () => {
  assert.equal(scriptOffsetOf(0), -1);
  assert.equal(scriptOffsetOf(sourcePosition(0)), 0);
});

Deno.test("lineOf() counts \\n, \\r\\n and \\r line ends, like V8's Script::GetLineNumber", () => {
  const source = "a\nbb\r\nccc\rdddd";
  const starts = lineStarts(source);
  assert.deepEqual(starts, [0, 2, 6, 10]);
  const line = (text: string) => lineOf(starts, source.indexOf(text));
  assert.equal(line("a"), 1);
  assert.equal(line("bb"), 2);
  assert.equal(line("ccc"), 3);
  assert.equal(line("dddd"), 4);
  assert.equal(lineOf(starts, -1), 0);
  // V8's own line_ends hold each line's terminator: the same starts.
  assert.deepEqual(lineStartsFromEnds([1, 5, 9]), [0, 2, 6, 10]);
});

/**
 * Sparkplug's map from machine code back to bytecode. Baseline code is compiled one bytecode after the
 * other, and its Code keeps, instead of a source position table, the length in bytes of the machine code
 * of each piece in order (unsigned VLQs): the prologue first, then each bytecode. Walking the bytecodes
 * beside it (their sizes from `Bytecodes::kBytecodeSizes`, a scaling prefix making the next one wider)
 * finds the bytecode a pc offset lies in; the bytecode's own position table then gives the line.
 *
 * @example
 * ```ts ignore
 * import { bytecodeOffsetAt } from "./baseline_offsets.ts";
 * const offset = bytecodeOffsetAt(table, bytecodes, layout.bytecodeSizes!, pcOffset); // null: not found
 * ```
 *
 * @module
 */

/** The scaling prefixes (Wide, ExtraWide and their debug-break forms): the bytecode after them is wider. */
const PREFIXES = 4;

/**
 * The offset of the bytecode whose baseline code holds `pcOffset` (0 within the prologue), or null when
 * the tables end first or disagree.
 */
export function bytecodeOffsetAt(
  table: Uint8Array,
  bytecodes: Uint8Array,
  sizes: readonly [Uint8Array, Uint8Array, Uint8Array],
  pcOffset: number,
): number | null {
  let at = 0;
  const prologue = readUnsigned(table, at);
  if (prologue === null) return null;
  at = prologue.next;
  let pc = prologue.value;
  if (pcOffset < pc) return 0;
  let offset = 0;
  while (offset < bytecodes.length) {
    const length = readUnsigned(table, at);
    if (length === null) return null;
    at = length.next;
    const size = bytecodeSize(bytecodes, offset, sizes);
    if (size === null) return null;
    if (pcOffset < pc + length.value) return offset;
    pc += length.value;
    offset += size;
  }
  return null;
}

/** The size of the bytecode at `offset`, its scaling prefix included. */
function bytecodeSize(
  bytecodes: Uint8Array,
  offset: number,
  sizes: readonly [Uint8Array, Uint8Array, Uint8Array],
): number | null {
  const opcode = bytecodes[offset];
  if (opcode === undefined) return null;
  if (opcode >= PREFIXES) {
    const size = sizes[0][opcode];
    return size === undefined || size === 0 ? null : size;
  }
  // Wide (0) and DebugBreakWide (2) double the operands; ExtraWide (1), DebugBreakExtraWide (3) quadruple.
  const scaled = bytecodes[offset + 1];
  const size = scaled === undefined ? undefined : sizes[(opcode & 1) === 0 ? 1 : 2][scaled];
  return size === undefined || size === 0 ? null : 1 + size;
}

/** An unsigned VLQ at `at` (7 bits a byte, low first) and where the next begins, or null at the end. */
function readUnsigned(bytes: Uint8Array, at: number): { value: number; next: number } | null {
  let value = 0;
  let scale = 1;
  for (let i = at; i < bytes.length && i < at + 8; i++) {
    const byte = bytes[i] as number;
    value += (byte & 0x7f) * scale;
    scale *= 128;
    if ((byte & 0x80) === 0) return { value, next: i + 1 };
  }
  return null;
}

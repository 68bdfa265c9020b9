/**
 * A bounded cursor over DWARF-encoded bytes: fixed-size little-endian integers, LEB128 and the
 * `DW_EH_PE_*` encoded pointers of `.eh_frame`. Every read is checked against the cursor's end, so a
 * hostile length can only make a read fail, never read past the data it was given; a failed read throws
 * `RangeError("Cannot read DWARF: ...")`. Values are JS numbers: 64-bit fields are read as two 32-bit
 * halves (no BigInt), exact below 2^53; a LEB128 too large for that saturates to +-Infinity, which every
 * later bounds check rejects (never NaN, which would slip through a comparison).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { DW_EH_PE, DwarfReader } from "./dwarf_reader.ts";
 * const reader = new DwarfReader(new Uint8Array([0xe5, 0x8e, 0x26, 0xfc, 0xff, 0xff, 0xff]));
 * assert.equal(reader.uleb128(), 624485);
 * assert.equal(reader.encodedPointer(DW_EH_PE.pcrel | DW_EH_PE.sdata4, 0x1000), 0x1000 + 3 - 4);
 * ```
 *
 * @module
 */

/** `DW_EH_PE_*` pointer encodings: a value format in the low nibble, an application in bits 4..6. */
export const DW_EH_PE = {
  absptr: 0x00,
  uleb128: 0x01,
  udata2: 0x02,
  udata4: 0x03,
  udata8: 0x04,
  sleb128: 0x09,
  sdata2: 0x0a,
  sdata4: 0x0b,
  sdata8: 0x0c,
  pcrel: 0x10,
  textrel: 0x20,
  datarel: 0x30,
  funcrel: 0x40,
  aligned: 0x50,
  indirect: 0x80,
  omit: 0xff,
} as const;

const TWO_POW_32 = 4294967296;
/** LEB128 groups beyond this shift cannot change a value that is still exact as a number. */
const LEB_MAX_SHIFT = 56;
/** The shift of the last group that a signed LEB128 keeps (bits 49..55). */
const LEB_TOP_SHIFT = 49;

/**
 * Bases that `DW_EH_PE_textrel`/`datarel`/`funcrel` pointers are relative to; a missing base makes such
 * a pointer unsupported.
 */
export interface PointerBases {
  text?: number;
  data?: number;
  func?: number;
}

/** A read position over `bytes[pos..end)`; every read advances `pos` or throws `RangeError`. */
export class DwarfReader {
  /** The whole buffer; offsets (`pos`, `end`) index into it. */
  bytes: Uint8Array;
  /** The next byte to read. */
  pos: number;
  /** One past the last byte this cursor may read. */
  end: number;

  /**
   * A cursor over `bytes[start..end)`.
   *
   * @throws {RangeError} when the range is not inside `bytes`.
   */
  constructor(bytes: Uint8Array, start = 0, end: number = bytes.length) {
    if (!(start >= 0 && start <= end && end <= bytes.length)) {
      throw new RangeError(`Cannot read DWARF: range ${start}..${end} is outside ${bytes.length} bytes`);
    }
    this.bytes = bytes;
    this.pos = start;
    this.end = end;
  }

  /**
   * Points the cursor at `bytes[start..end)`, so one cursor can serve many entries without allocating.
   *
   * @throws {RangeError} when the range is not inside `bytes`.
   */
  reset(bytes: Uint8Array, start: number, end: number): void {
    if (!(start >= 0 && start <= end && end <= bytes.length)) {
      throw new RangeError(`Cannot read DWARF: range ${start}..${end} is outside ${bytes.length} bytes`);
    }
    this.bytes = bytes;
    this.pos = start;
    this.end = end;
  }

  /** Bytes left before `end`. */
  get remaining(): number {
    return this.end - this.pos;
  }

  /** Moves to `pos`, which must lie in `[0, end]`. */
  seek(pos: number): void {
    if (!(pos >= 0 && pos <= this.end)) this.#fail(`cannot seek to ${pos}`);
    this.pos = pos;
  }

  /** Skips `count` bytes. */
  skip(count: number): void {
    if (!(count >= 0 && count <= this.end - this.pos)) this.#fail(`cannot skip ${count} bytes`);
    this.pos += count;
  }

  u8(): number {
    if (this.pos >= this.end) this.#fail("1-byte value truncated");
    return this.bytes[this.pos++]!;
  }

  u16(): number {
    if (this.end - this.pos < 2) this.#fail("2-byte value truncated");
    const b = this.bytes;
    const p = this.pos;
    this.pos = p + 2;
    return b[p]! | (b[p + 1]! << 8);
  }

  u32(): number {
    if (this.end - this.pos < 4) this.#fail("4-byte value truncated");
    const b = this.bytes;
    const p = this.pos;
    this.pos = p + 4;
    return (b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16) | (b[p + 3]! << 24)) >>> 0;
  }

  /** An unsigned 64-bit value; inexact (but still at least 2^53) when it does not fit a safe integer. */
  u64(): number {
    const low = this.u32();
    return this.u32() * TWO_POW_32 + low;
  }

  /** A signed 64-bit value; inexact when its magnitude is at least 2^53. */
  s64(): number {
    const low = this.u32();
    return (this.u32() | 0) * TWO_POW_32 + low;
  }

  /** An unsigned LEB128; +Infinity when it does not fit 56 bits. */
  uleb128(): number {
    const b = this.bytes;
    const end = this.end;
    let p = this.pos;
    if (p < end && b[p]! < 0x80) {
      this.pos = p + 1;
      return b[p]!;
    }
    let result = 0;
    let scale = 1;
    let shift = 0;
    // Each iteration consumes one byte, so the loop ends at `end` at the latest.
    while (true) {
      if (p >= end) {
        this.pos = p;
        this.#fail("unterminated LEB128");
      }
      const byte = b[p++]!;
      if (shift < LEB_MAX_SHIFT) result += (byte & 0x7f) * scale;
      else if ((byte & 0x7f) !== 0) result = Infinity;
      scale *= 128;
      shift += 7;
      if ((byte & 0x80) === 0) break;
    }
    this.pos = p;
    return result;
  }

  /** A signed LEB128; +-Infinity when it does not fit 56 bits. */
  sleb128(): number {
    const b = this.bytes;
    const end = this.end;
    let p = this.pos;
    if (p < end && b[p]! < 0x80) {
      this.pos = p + 1;
      const byte = b[p]!;
      return byte < 0x40 ? byte : byte - 0x80;
    }
    // The low seven groups are summed unsigned (exact below 2^49); the eighth, which holds bit 55 (the
    // sign of a 56-bit value), is added signed, so negative values stay exact. Groups past it must
    // repeat the sign.
    let low = 0;
    let top = 0;
    let scale = 1;
    let shift = 0;
    let byte = 0;
    let outOfRange = false;
    // Each iteration consumes one byte, so the loop ends at `end` at the latest.
    while (true) {
      if (p >= end) {
        this.pos = p;
        this.#fail("unterminated LEB128");
      }
      byte = b[p++]!;
      const group = byte & 0x7f;
      if (shift < LEB_TOP_SHIFT) low += group * scale;
      else if (shift === LEB_TOP_SHIFT) top = group;
      else if (group !== ((top & 0x40) !== 0 ? 0x7f : 0)) outOfRange = true;
      scale *= 128;
      shift += 7;
      if ((byte & 0x80) === 0) break;
    }
    this.pos = p;
    if (shift <= LEB_TOP_SHIFT) return (byte & 0x40) !== 0 ? low - scale : low;
    if (outOfRange) return (byte & 0x40) !== 0 ? -Infinity : Infinity;
    return low + (top >= 0x40 ? top - 0x80 : top) * 2 ** LEB_TOP_SHIFT;
  }

  /**
   * Reads the NUL-terminated string at the cursor and returns it as latin1 text (at most `maxLength`
   * bytes before the NUL).
   */
  cstring(maxLength = 256): string {
    const start = this.pos;
    const limit = Math.min(this.end, start + maxLength + 1);
    const nul = this.bytes.subarray(start, limit).indexOf(0);
    if (nul < 0) this.#fail("unterminated string");
    this.pos = start + nul + 1;
    let text = "";
    for (let i = start; i < start + nul; i++) text += String.fromCharCode(this.bytes[i]!);
    return text;
  }

  /**
   * Reads a pointer in `encoding` (a `DW_EH_PE_*` value without `omit`). `pcBase` is the address the
   * cursor's first byte (`bytes[0]`) is loaded at, for `pcrel`; `addressSize` is what `absptr` means.
   * Returns the address as a number, or NaN when it is not an address below 2^53 (negative, or too big
   * for a number to hold exactly).
   *
   * @throws {RangeError} when the bytes are truncated or the encoding is unknown or unsupported here
   *   (`indirect`, `aligned`, or a relative one without its base).
   */
  encodedPointer(encoding: number, pcBase: number, bases?: PointerBases, addressSize = 8): number {
    if ((encoding & DW_EH_PE.indirect) !== 0) this.#fail(`indirect pointer encoding 0x${hex(encoding)}`);
    const fieldPos = this.pos;
    const value = this.encodedValue(encoding & 0x0f, addressSize, true);
    let base: number;
    switch (encoding & 0x70) {
      case DW_EH_PE.absptr:
        base = 0;
        break;
      case DW_EH_PE.pcrel:
        base = pcBase + fieldPos;
        break;
      case DW_EH_PE.textrel:
        base = bases?.text ?? NaN;
        break;
      case DW_EH_PE.datarel:
        base = bases?.data ?? NaN;
        break;
      case DW_EH_PE.funcrel:
        base = bases?.func ?? NaN;
        break;
      default:
        base = NaN;
    }
    if (Number.isNaN(base)) this.#fail(`unsupported pointer encoding 0x${hex(encoding)}`);
    const address = base + value;
    return address >= 0 && address <= Number.MAX_SAFE_INTEGER ? address : NaN;
  }

  /**
   * Reads a value in the format nibble of a pointer encoding (`absptr`, `udata*`, `sdata*`, `*leb128`),
   * without applying any base: what `.eh_frame` uses for an FDE's address range. `signed64` reads
   * 8-byte formats as two's complement (for adding to a base with 64-bit wrap-around).
   *
   * @throws {RangeError} when truncated or the format is unknown.
   */
  encodedValue(format: number, addressSize = 8, signed64 = false): number {
    switch (format) {
      case DW_EH_PE.absptr:
        if (addressSize === 4) return this.u32();
        if (addressSize === 8) return signed64 ? this.s64() : this.u64();
        return this.#fail(`address size ${addressSize}`);
      case DW_EH_PE.uleb128:
        return this.uleb128();
      case DW_EH_PE.udata2:
        return this.u16();
      case DW_EH_PE.udata4:
        return this.u32();
      case DW_EH_PE.udata8:
        return signed64 ? this.s64() : this.u64();
      case DW_EH_PE.sleb128:
        return this.sleb128();
      case DW_EH_PE.sdata2:
        return (this.u16() << 16) >> 16;
      case DW_EH_PE.sdata4:
        return this.u32() | 0;
      case DW_EH_PE.sdata8:
        return this.s64();
      default:
        return this.#fail(`unknown pointer format 0x${hex(format)}`);
    }
  }

  /** Skips a pointer in `encoding` without decoding it (for personality pointers). */
  skipEncodedPointer(encoding: number, addressSize = 8): void {
    if ((encoding & 0x70) === DW_EH_PE.aligned) {
      // The value starts at the next multiple of the address size (from the buffer start).
      const aligned = Math.ceil(this.pos / addressSize) * addressSize;
      this.skip(aligned - this.pos);
    }
    this.encodedValue(encoding & 0x0f, addressSize);
  }

  #fail(what: string): never {
    throw new RangeError(`Cannot read DWARF: ${what} at offset ${this.pos} (end ${this.end})`);
  }
}

function hex(value: number): string {
  return value.toString(16);
}

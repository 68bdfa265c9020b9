/**
 * A small, bounds-checked protocol buffer decoder: the counterpart of {@linkcode ProtobufWriter}. The input
 * is hostile: every varint, length and nested message is checked against the end of its enclosing
 * message, and any violation throws a `RangeError` "Cannot decode <what>: <state>". Unknown fields
 * (including deprecated groups) are skipped. No BigInt: a varint is read as two u32 halves
 * ({@linkcode ProtobufReader.lo}, {@linkcode ProtobufReader.hi}) and also returned as a JS number, exact
 * below 2^53.
 *
 * @example
 * ```ts
 * import { ProtobufReader, WireType } from "./protobuf_reader.ts";
 * const r = new ProtobufReader(new Uint8Array([0x08, 0xac, 0x02]), "example");
 * while (r.next()) {
 *   if (r.field === 1) {
 *     r.expectWireType(WireType.Varint, "id");
 *     console.log(r.readVarint()); // 300
 *   } else r.skip();
 * }
 * ```
 *
 * @module
 */

import { WireType } from "./protobuf_writer.ts";

export { WireType };

const TWO_POW_32 = 4294967296;
/** Deepest group nesting {@linkcode ProtobufReader.skip} follows before giving up. */
const MAX_GROUP_DEPTH = 64;

const utf8 = new TextDecoder("utf-8", { fatal: false });

/**
 * Reads fields of one message at a time. `next()` advances to the following field key; then exactly one of
 * the read methods (or `skip()`) consumes its value. Nested messages narrow the readable range with
 * {@linkcode enterLengthDelimited} / {@linkcode exitLengthDelimited} instead of allocating sub-readers.
 */
export class ProtobufReader {
  /** The whole input. */
  readonly bytes: Uint8Array;
  /** Offset of the next byte to read. */
  pos: number;
  /** End (exclusive) of the message being read. */
  end: number;
  /** Field number of the current field (after {@linkcode next}). */
  field = 0;
  /** Wire type of the current field (after {@linkcode next}). */
  wireType = 0;
  /** Low 32 bits (unsigned) of the last varint read. */
  lo = 0;
  /** High 32 bits (unsigned) of the last varint read. */
  hi = 0;
  readonly #what: string;

  /** Reads `bytes`; `what` names the content in error messages ("Cannot decode <what>: ..."). */
  constructor(bytes: Uint8Array, what = "protobuf message") {
    this.bytes = bytes;
    this.pos = 0;
    this.end = bytes.length;
    this.#what = what;
  }

  /** Builds the `RangeError` this reader throws for malformed input. */
  error(state: string): RangeError {
    return new RangeError(`Cannot decode ${this.#what}: ${state}`);
  }

  /** Advances to the next field of the current message; false at its end. */
  next(): boolean {
    if (this.pos >= this.end) return false;
    const at = this.pos;
    this.readVarint();
    if (this.hi !== 0) throw this.error(`field key at offset ${at} does not fit 32 bits`);
    const key = this.lo;
    const field = key >>> 3;
    const wireType = key & 7;
    if (field === 0) throw this.error(`field number 0 at offset ${at}`);
    if (wireType > WireType.Fixed32) throw this.error(`invalid wire type ${wireType} at offset ${at}`);
    this.field = field;
    this.wireType = wireType;
    return true;
  }

  /** Throws unless the current field has wire type `wireType`; `name` is the field's name for the message. */
  expectWireType(wireType: number, name: string): void {
    if (this.wireType !== wireType) {
      throw this.error(
        `field ${name} (${this.field}) at offset ${this.pos} has wire type ${this.wireType}, expected ${wireType}`,
      );
    }
  }

  /** Reads an unsigned varint (up to 64 bits); sets {@linkcode lo} and {@linkcode hi}. */
  readVarint(): number {
    const bytes = this.bytes;
    const end = this.end;
    let pos = this.pos;
    if (pos < end) {
      const first = bytes[pos]!;
      if (first < 0x80) {
        this.pos = pos + 1;
        this.lo = first;
        this.hi = 0;
        return first;
      }
    }
    const start = pos;
    let lo = 0;
    let hi = 0;
    let byte = 0x80;
    // Bytes 1-4 carry bits 0-27.
    for (let shift = 0; shift < 28; shift += 7) {
      if (pos >= end) throw this.error(`truncated varint at offset ${start}`);
      byte = bytes[pos++]!;
      lo |= (byte & 0x7f) << shift;
      if (byte < 0x80) return this.#setVarint(pos, lo, 0);
    }
    // Byte 5 carries bits 28-34: four into the low half, three into the high half.
    if (pos >= end) throw this.error(`truncated varint at offset ${start}`);
    byte = bytes[pos++]!;
    lo |= (byte & 0x7f) << 28;
    hi = (byte & 0x7f) >>> 4;
    if (byte < 0x80) return this.#setVarint(pos, lo, hi);
    // Bytes 6-10 carry bits 35-63 of the high half.
    for (let shift = 3; shift < 32; shift += 7) {
      if (pos >= end) throw this.error(`truncated varint at offset ${start}`);
      byte = bytes[pos++]!;
      if (shift === 31 && byte > 1) throw this.error(`varint at offset ${start} overflows 64 bits`);
      hi |= (byte & 0x7f) << shift;
      if (byte < 0x80) return this.#setVarint(pos, lo, hi);
    }
    // Unreachable: the tenth byte either ends the varint or overflows above.
    throw this.error(`varint at offset ${start} is longer than 10 bytes`);
  }

  #setVarint(pos: number, lo: number, hi: number): number {
    this.pos = pos;
    this.lo = lo >>> 0;
    this.hi = hi >>> 0;
    return this.hi * TWO_POW_32 + this.lo;
  }

  /** Reads a protobuf `int64` (two's complement in a varint); exact between -2^53 and 2^53. */
  readInt64(): number {
    const value = this.readVarint();
    if (this.hi < 0x80000000) return value;
    const negLo = (~this.lo + 1) >>> 0;
    const negHi = (~this.hi + (negLo === 0 ? 1 : 0)) >>> 0;
    return -(negHi * TWO_POW_32 + negLo);
  }

  /** Reads a `bool`. */
  readBool(): boolean {
    this.readVarint();
    return this.lo !== 0 || this.hi !== 0;
  }

  /** Reads the length prefix of a length-delimited value and checks it fits the current message. */
  readLength(): number {
    const at = this.pos;
    const length = this.readVarint();
    if (length > this.end - this.pos) {
      throw this.error(`length ${length} at offset ${at} runs past the end of its message (${this.end})`);
    }
    return length;
  }

  /** Reads a `bytes` value; the result shares memory with the input. */
  readBytes(): Uint8Array {
    const length = this.readLength();
    const start = this.pos;
    this.pos += length;
    return this.bytes.subarray(start, start + length);
  }

  /**
   * Reads a `string` value; invalid UTF-8 becomes U+FFFD rather than an error. A string longer than
   * `maxBytes` is refused before it is decoded.
   */
  readString(maxBytes = Infinity): string {
    const at = this.pos;
    const length = this.readLength();
    if (length > maxBytes) {
      throw this.error(`string of ${length} bytes at offset ${at}, more than ${maxBytes}`);
    }
    const start = this.pos;
    this.pos += length;
    return utf8.decode(this.bytes.subarray(start, start + length));
  }

  /**
   * Enters the current length-delimited field (a nested message or a packed list): until
   * {@linkcode exitLengthDelimited}, `next()` and the readers stop at its end. Returns the enclosing end to
   * hand back to `exitLengthDelimited`.
   */
  enterLengthDelimited(): number {
    const length = this.readLength();
    const outerEnd = this.end;
    this.end = this.pos + length;
    return outerEnd;
  }

  /** Leaves a nested field entered with {@linkcode enterLengthDelimited}, skipping what was not read. */
  exitLengthDelimited(outerEnd: number): void {
    this.pos = this.end;
    this.end = outerEnd;
  }

  /** Skips the value of the current field, whatever its wire type (groups included). */
  skip(): void {
    this.#skipValue(this.wireType, this.field, 0);
  }

  #skipBytes(count: number): void {
    if (count > this.end - this.pos) {
      throw this.error(`field ${this.field} at offset ${this.pos} runs past the end of its message`);
    }
    this.pos += count;
  }

  #skipValue(wireType: number, field: number, depth: number): void {
    switch (wireType) {
      case WireType.Varint:
        this.readVarint();
        return;
      case WireType.Fixed64:
        this.#skipBytes(8);
        return;
      case WireType.LengthDelimited:
        this.#skipBytes(this.readLength());
        return;
      case WireType.Fixed32:
        this.#skipBytes(4);
        return;
      case WireType.StartGroup: {
        if (depth >= MAX_GROUP_DEPTH) throw this.error(`groups nested deeper than ${MAX_GROUP_DEPTH}`);
        for (;;) {
          if (!this.next()) throw this.error(`group ${field} is not closed`);
          if (this.wireType === WireType.EndGroup) {
            if (this.field !== field) {
              throw this.error(`group ${field} closed by end of group ${this.field} at offset ${this.pos}`);
            }
            return;
          }
          this.#skipValue(this.wireType, this.field, depth + 1);
        }
      }
      default:
        throw this.error(`unexpected wire type ${wireType} for field ${field} at offset ${this.pos}`);
    }
  }
}

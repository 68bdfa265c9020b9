/**
 * A small protocol buffer encoder: just what the pprof writer needs (varints, length-delimited fields,
 * packed repeated varints, strings). Values are JS numbers; a varint above 2^32 is produced with
 * division rather than bit operations (which would truncate to 32 bits), so no BigInt is involved.
 * Numbers above 2^53 are encoded exactly as the double they are (all such doubles are integers).
 *
 * @example
 * ```ts
 * import { ProtobufWriter, WireType } from "./protobuf_writer.ts";
 * const w = new ProtobufWriter();
 * w.writeTag(1, WireType.Varint);
 * w.writeVarint(300);
 * w.writeStringField(2, "hello");
 * const bytes = w.finish(); // 08 ac 02 12 05 68 65 6c 6c 6f
 * ```
 *
 * @module
 */

/** The protobuf wire types this encoder and {@linkcode ProtobufReader} understand. */
export const WireType = {
  Varint: 0,
  Fixed64: 1,
  LengthDelimited: 2,
  StartGroup: 3,
  EndGroup: 4,
  Fixed32: 5,
} as const;

const TWO_POW_32 = 4294967296;
const TWO_POW_64 = 18446744073709551616;
/** Largest field number protobuf allows. */
export const MAX_FIELD_NUMBER = 0x1fffffff;

const utf8 = new TextEncoder();

/** Bytes the varint encoding of the unsigned integer `value` takes (1 to 10). */
export function varintSize(value: number): number {
  if (value < 0x80) return 1;
  if (value < 0x4000) return 2;
  if (value < 0x200000) return 3;
  if (value < 0x10000000) return 4;
  let size = 4;
  let rest = Math.floor(value / 0x10000000);
  while (rest > 0) {
    size++;
    rest = Math.floor(rest / 128);
  }
  return size;
}

/**
 * Appends protobuf fields to a growing buffer. Nested messages are written in place: a length-delimited
 * field reserves one length byte up front and moves its content only when it turns out to be 128 bytes or
 * longer, so small messages (the bulk of a profile) cost no copy.
 */
export class ProtobufWriter {
  #buf: Uint8Array;
  #pos = 0;

  /** Creates a writer whose buffer starts at `initialCapacity` bytes and doubles as needed. */
  constructor(initialCapacity = 4096) {
    this.#buf = new Uint8Array(Math.max(16, initialCapacity));
  }

  /** Bytes written so far. */
  get length(): number {
    return this.#pos;
  }

  #ensure(extra: number): void {
    const needed = this.#pos + extra;
    if (needed <= this.#buf.length) return;
    let capacity = this.#buf.length * 2;
    while (capacity < needed) capacity *= 2;
    const grown = new Uint8Array(capacity);
    grown.set(this.#buf.subarray(0, this.#pos));
    this.#buf = grown;
  }

  /** Writes a field key: the field number and the wire type of the value that follows. */
  writeTag(field: number, wireType: number): void {
    if (!Number.isInteger(field) || field < 1 || field > MAX_FIELD_NUMBER) {
      throw new RangeError(`Cannot encode protobuf field number ${field}: not in 1..${MAX_FIELD_NUMBER}`);
    }
    // field * 8 stays below 2^32, so the tag is a u32 varint.
    this.writeVarint(field * 8 + wireType);
  }

  /** Writes an unsigned integer (0 <= value < 2^64) as a varint. */
  writeVarint(value: number): void {
    if ((value >>> 0) === value) {
      this.#ensure(5);
      const buf = this.#buf;
      let pos = this.#pos;
      let v = value;
      while (v >= 0x80) {
        buf[pos++] = (v & 0x7f) | 0x80;
        v >>>= 7;
      }
      buf[pos++] = v;
      this.#pos = pos;
      return;
    }
    if (!Number.isInteger(value) || value < 0 || value >= TWO_POW_64) {
      throw new RangeError(`Cannot encode ${value} as a varint: not an integer in 0..2^64-1`);
    }
    // Above 2^32: bit operations would truncate, division by 128 is exact for every integral double.
    this.#ensure(10);
    const buf = this.#buf;
    let pos = this.#pos;
    let v = value;
    while (v >= 0x80) {
      buf[pos++] = (v % 128) | 0x80;
      v = Math.floor(v / 128);
    }
    buf[pos++] = v;
    this.#pos = pos;
  }

  /** Writes the unsigned 64-bit integer `hi * 2^32 + lo` (both u32 halves) as a varint. */
  writeVarint64(lo: number, hi: number): void {
    if (hi === 0) {
      this.writeVarint(lo >>> 0);
      return;
    }
    this.#ensure(10);
    const buf = this.#buf;
    let pos = this.#pos;
    let l = lo >>> 0;
    let h = hi >>> 0;
    // Emit 7 bits at a time from the 64-bit pair, moving 7 bits of `h` down into `l` each step.
    while (h !== 0 || l >= 0x80) {
      buf[pos++] = (l & 0x7f) | 0x80;
      l = ((l >>> 7) | (h << 25)) >>> 0;
      h >>>= 7;
    }
    buf[pos++] = l;
    this.#pos = pos;
  }

  /** Writes a signed integer as protobuf `int64`: negative values take ten bytes (two's complement). */
  writeInt64(value: number): void {
    if (value >= 0) {
      this.writeVarint(value);
      return;
    }
    if (!Number.isInteger(value) || value < -9223372036854775808) {
      throw new RangeError(`Cannot encode ${value} as an int64: not an integer in -2^63..2^63-1`);
    }
    const magnitude = -value;
    const lo = magnitude % TWO_POW_32;
    const hi = Math.floor(magnitude / TWO_POW_32);
    const negLo = (~lo + 1) >>> 0;
    const negHi = (~hi + (negLo === 0 ? 1 : 0)) >>> 0;
    this.writeVarint64(negLo, negHi);
  }

  /** Writes a varint field (tag and value). */
  writeVarintField(field: number, value: number): void {
    this.writeTag(field, WireType.Varint);
    this.writeVarint(value);
  }

  /** Writes an `int64` field (tag and value). */
  writeInt64Field(field: number, value: number): void {
    this.writeTag(field, WireType.Varint);
    this.writeInt64(value);
  }

  /** Writes a `bool` field. */
  writeBoolField(field: number, value: boolean): void {
    this.writeTag(field, WireType.Varint);
    this.writeVarint(value ? 1 : 0);
  }

  /** Writes a `string` field as UTF-8. */
  writeStringField(field: number, value: string): void {
    const mark = this.beginLengthDelimited(field);
    const n = value.length;
    this.#ensure(n);
    const buf = this.#buf;
    let pos = this.#pos;
    let i = 0;
    // Most names are ASCII: copy them byte by byte without a temporary view.
    for (; i < n; i++) {
      const c = value.charCodeAt(i);
      if (c >= 0x80) break;
      buf[pos++] = c;
    }
    this.#pos = pos;
    if (i < n) {
      const rest = value.substring(i);
      // UTF-8 needs at most 3 bytes per UTF-16 code unit.
      this.#ensure(rest.length * 3);
      const { written } = utf8.encodeInto(rest, this.#buf.subarray(this.#pos));
      this.#pos += written;
    }
    this.endLengthDelimited(mark);
  }

  /** Writes a `bytes` field. */
  writeBytesField(field: number, value: Uint8Array): void {
    this.writeTag(field, WireType.LengthDelimited);
    this.writeVarint(value.length);
    this.#ensure(value.length);
    this.#buf.set(value, this.#pos);
    this.#pos += value.length;
  }

  /** Writes a packed repeated varint field (`[packed = true]`, the proto3 default). Empty lists write nothing. */
  writePackedVarints(field: number, values: ArrayLike<number>): void {
    if (values.length === 0) return;
    let size = 0;
    for (let i = 0; i < values.length; i++) size += varintSize(values[i]!);
    this.writeTag(field, WireType.LengthDelimited);
    this.writeVarint(size);
    for (let i = 0; i < values.length; i++) this.writeVarint(values[i]!);
  }

  /**
   * Starts a length-delimited field (a nested message or a packed list) whose content is written next;
   * returns the mark to pass to {@linkcode endLengthDelimited}. Marks nest like parentheses.
   */
  beginLengthDelimited(field: number): number {
    this.writeTag(field, WireType.LengthDelimited);
    this.#ensure(1);
    const mark = this.#pos;
    this.#buf[this.#pos++] = 0;
    return mark;
  }

  /** Ends the length-delimited field started at `mark`: writes its length in front of the content. */
  endLengthDelimited(mark: number): void {
    const contentStart = mark + 1;
    const length = this.#pos - contentStart;
    if (length < 0x80) {
      this.#buf[mark] = length;
      return;
    }
    const extra = varintSize(length) - 1;
    this.#ensure(extra);
    const buf = this.#buf;
    buf.copyWithin(contentStart + extra, contentStart, this.#pos);
    this.#pos += extra;
    let pos = mark;
    let v = length;
    while (v >= 0x80) {
      buf[pos++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    buf[pos] = v;
  }

  /** Returns the bytes written so far (a copy sized to fit; the writer can keep writing). */
  finish(): Uint8Array {
    return this.#buf.slice(0, this.#pos);
  }
}

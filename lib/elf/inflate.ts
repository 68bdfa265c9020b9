/**
 * zlib (RFC 1950) / DEFLATE (RFC 1951) decompression into a buffer of known size, for ELF sections
 * compressed with ELFCOMPRESS_ZLIB. Written here, after Mark Adler's `puff`, because importing
 * `node:zlib` loads Deno's Node compatibility layer for zlib and streams on every start (about 20 ms of
 * CPU) for sections that are rarely compressed. The input is hostile: every read and write is bounded,
 * and a malformed stream throws a RangeError.
 *
 * @example
 * ```ts
 * import { deflateSync } from "node:zlib";
 * import { unzlib } from "./inflate.ts";
 * const text = new TextEncoder().encode("hello hello hello");
 * const out = unzlib(deflateSync(text), text.length);
 * console.log(new TextDecoder().decode(out)); // "hello hello hello"
 * ```
 *
 * @module
 */

const MAX_BITS = 15;
const LENGTH_BASE = [
  3,
  4,
  5,
  6,
  7,
  8,
  9,
  10,
  11,
  13,
  15,
  17,
  19,
  23,
  27,
  31,
  35,
  43,
  51,
  59,
  67,
  83,
  99,
  115,
  131,
  163,
  195,
  227,
  258,
];
const LENGTH_EXTRA = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
const DISTANCE_BASE = [
  1,
  2,
  3,
  4,
  5,
  7,
  9,
  13,
  17,
  25,
  33,
  49,
  65,
  97,
  129,
  193,
  257,
  385,
  513,
  769,
  1025,
  1537,
  2049,
  3073,
  4097,
  6145,
  8193,
  12289,
  16385,
  24577,
];
const DISTANCE_EXTRA = [
  0,
  0,
  0,
  0,
  1,
  1,
  2,
  2,
  3,
  3,
  4,
  4,
  5,
  5,
  6,
  6,
  7,
  7,
  8,
  8,
  9,
  9,
  10,
  10,
  11,
  11,
  12,
  12,
  13,
  13,
];
/** The order in which a dynamic block lists the code lengths of the code-length code. */
const CODE_LENGTH_ORDER = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];

/** A canonical Huffman code: how many codes of each length, and the symbols in code order. */
interface Huffman {
  counts: Uint16Array;
  symbols: Uint16Array;
}

function fail(message: string): never {
  throw new RangeError(`Cannot inflate: ${message}`);
}

function huffman(lengths: Uint8Array, count: number): Huffman {
  const counts = new Uint16Array(MAX_BITS + 1);
  for (let i = 0; i < count; i++) counts[lengths[i]!]!++;
  counts[0] = 0;
  // An over-subscribed code cannot be decoded; an incomplete one is allowed (a single distance code).
  let left = 1;
  for (let bits = 1; bits <= MAX_BITS; bits++) {
    left = left * 2 - counts[bits]!;
    if (left < 0) fail("over-subscribed Huffman code");
  }
  const offsets = new Uint16Array(MAX_BITS + 2);
  for (let bits = 1; bits <= MAX_BITS; bits++) offsets[bits + 1] = offsets[bits]! + counts[bits]!;
  const symbols = new Uint16Array(count);
  for (let symbol = 0; symbol < count; symbol++) {
    const bits = lengths[symbol]!;
    if (bits !== 0) symbols[offsets[bits]!++] = symbol;
  }
  return { counts, symbols };
}

const FIXED = (() => {
  const lengths = new Uint8Array(288);
  lengths.fill(8, 0, 144);
  lengths.fill(9, 144, 256);
  lengths.fill(7, 256, 280);
  lengths.fill(8, 280, 288);
  const distances = new Uint8Array(30).fill(5);
  return { literals: huffman(lengths, 288), distances: huffman(distances, 30) };
})();

/** DEFLATE decoder state over one input and one fixed-size output. */
class Inflater {
  #input: Uint8Array;
  #at: number;
  #bitBuffer = 0;
  #bitCount = 0;
  readonly out: Uint8Array;
  written = 0;

  constructor(input: Uint8Array, start: number, out: Uint8Array) {
    this.#input = input;
    this.#at = start;
    this.out = out;
  }

  get position(): number {
    return this.#at;
  }

  bits(count: number): number {
    let value = this.#bitBuffer;
    while (this.#bitCount < count) {
      if (this.#at >= this.#input.length) fail("the stream ends early");
      value |= this.#input[this.#at++]! << this.#bitCount;
      this.#bitCount += 8;
    }
    this.#bitBuffer = value >>> count;
    this.#bitCount -= count;
    return value & ((1 << count) - 1);
  }

  decode(code: Huffman): number {
    let value = 0;
    let first = 0;
    let index = 0;
    for (let bits = 1; bits <= MAX_BITS; bits++) {
      value |= this.bits(1);
      const count = code.counts[bits]!;
      if (value - first < count) return code.symbols[index + value - first]!;
      index += count;
      first = (first + count) * 2;
      value *= 2;
    }
    return fail("invalid Huffman code");
  }

  stored(): void {
    this.#bitBuffer = 0;
    this.#bitCount = 0;
    if (this.#at + 4 > this.#input.length) fail("the stream ends early");
    const length = this.#input[this.#at]! | (this.#input[this.#at + 1]! << 8);
    const complement = this.#input[this.#at + 2]! | (this.#input[this.#at + 3]! << 8);
    this.#at += 4;
    if (length !== (~complement & 0xffff)) fail("stored block length does not match its complement");
    if (this.#at + length > this.#input.length) fail("the stream ends early");
    if (this.written + length > this.out.length) fail("more output than the declared size");
    this.out.set(this.#input.subarray(this.#at, this.#at + length), this.written);
    this.#at += length;
    this.written += length;
  }

  codes(literals: Huffman, distances: Huffman): void {
    for (;;) {
      const symbol = this.decode(literals);
      if (symbol < 256) {
        if (this.written >= this.out.length) fail("more output than the declared size");
        this.out[this.written++] = symbol;
      } else if (symbol === 256) {
        return;
      } else {
        const lengthCode = symbol - 257;
        if (lengthCode >= 29) fail("invalid length code");
        const length = LENGTH_BASE[lengthCode]! + this.bits(LENGTH_EXTRA[lengthCode]!);
        const distanceCode = this.decode(distances);
        if (distanceCode >= 30) fail("invalid distance code");
        const distance = DISTANCE_BASE[distanceCode]! + this.bits(DISTANCE_EXTRA[distanceCode]!);
        if (distance > this.written) fail("distance too far back");
        if (this.written + length > this.out.length) fail("more output than the declared size");
        // Byte by byte: a copy may overlap what it writes (distance < length repeats a pattern).
        for (let i = 0; i < length; i++, this.written++) {
          this.out[this.written] = this.out[this.written - distance]!;
        }
      }
    }
  }

  dynamic(): void {
    const literalCount = this.bits(5) + 257;
    const distanceCount = this.bits(5) + 1;
    const lengthCount = this.bits(4) + 4;
    if (literalCount > 286 || distanceCount > 30) fail("too many codes in a dynamic block");
    const lengths = new Uint8Array(320);
    for (let i = 0; i < lengthCount; i++) lengths[CODE_LENGTH_ORDER[i]!] = this.bits(3);
    const lengthCode = huffman(lengths, 19);
    lengths.fill(0);
    for (let i = 0; i < literalCount + distanceCount;) {
      let symbol = this.decode(lengthCode);
      if (symbol < 16) {
        lengths[i++] = symbol;
        continue;
      }
      let repeat: number;
      if (symbol === 16) {
        if (i === 0) fail("a repeat with no previous length");
        symbol = lengths[i - 1]!;
        repeat = 3 + this.bits(2);
      } else if (symbol === 17) {
        symbol = 0;
        repeat = 3 + this.bits(3);
      } else {
        symbol = 0;
        repeat = 11 + this.bits(7);
      }
      if (i + repeat > literalCount + distanceCount) fail("code lengths overrun the block's codes");
      while (repeat-- > 0) lengths[i++] = symbol;
    }
    if (lengths[256] === 0) fail("a dynamic block without an end-of-block code");
    const literals = huffman(lengths.subarray(0, literalCount), literalCount);
    const distances = huffman(lengths.subarray(literalCount, literalCount + distanceCount), distanceCount);
    this.codes(literals, distances);
  }
}

/** Adler-32 of `bytes` (RFC 1950), the checksum ending a zlib stream. */
function adler32(bytes: Uint8Array): number {
  let a = 1;
  let b = 0;
  for (let at = 0; at < bytes.length;) {
    // 5552 bytes at most between reductions keep the sums below 2^32 (zlib's NMAX).
    const end = Math.min(bytes.length, at + 5552);
    for (; at < end; at++) {
      a += bytes[at]!;
      b += a;
    }
    a %= 65521;
    b %= 65521;
  }
  return ((b << 16) | a) >>> 0;
}

/**
 * Inflates a zlib stream that must produce exactly `size` bytes.
 *
 * @throws {RangeError} when the stream is malformed, fails its checksum, or does not produce `size` bytes.
 */
export function unzlib(input: Uint8Array, size: number): Uint8Array {
  if (input.length < 2) fail("no zlib header");
  const cmf = input[0]!;
  const flags = input[1]!;
  if ((cmf & 0x0f) !== 8 || (cmf >> 4) > 7 || ((cmf << 8) | flags) % 31 !== 0) fail("not a zlib stream");
  if (flags & 0x20) fail("a preset dictionary is not supported");
  const inflater = new Inflater(input, 2, new Uint8Array(size));
  let last: number;
  do {
    last = inflater.bits(1);
    const type = inflater.bits(2);
    if (type === 0) inflater.stored();
    else if (type === 1) inflater.codes(FIXED.literals, FIXED.distances);
    else if (type === 2) inflater.dynamic();
    else fail("invalid block type");
  } while (!last);
  if (inflater.written !== size) fail(`${inflater.written} bytes out, not ${size}`);
  const end = inflater.position;
  if (end + 4 > input.length) fail("no Adler-32 checksum");
  const expected =
    ((input[end]! << 24) | (input[end + 1]! << 16) | (input[end + 2]! << 8) | input[end + 3]!) >>> 0;
  if (adler32(inflater.out) !== expected) fail("Adler-32 checksum does not match");
  return inflater.out;
}

import assert from "node:assert/strict";
import protobuf from "protobufjs";
import { ProtobufWriter, varintSize, WireType } from "./protobuf_writer.ts";

// protobufjs is an independent encoder/decoder: our bytes must match and parse the same.

const unsignedValues = [
  0,
  1,
  127,
  128,
  300,
  16383,
  16384,
  2 ** 28 - 1,
  2 ** 28,
  2 ** 31 - 1,
  2 ** 31,
  2 ** 32 - 1,
  2 ** 32,
  2 ** 35 + 7,
  0x7fff_ffff_f000, // top of x86-64 user space
  2 ** 49 + 12345,
  Number.MAX_SAFE_INTEGER,
  2 ** 53,
  1_700_000_000_123_456_768, // wall-clock ns: above 2^53, an exact double
  2 ** 63,
  2 ** 64 - 2048, // largest double below 2^64
];

function referenceUint64(value: number): Uint8Array {
  // BigInt only here, to give protobufjs the exact decimal value of each double.
  return protobuf.Writer.create().uint64(BigInt(value).toString()).finish();
}

Deno.test("writeVarint() matches protobufjs for values up to 2^64", () => {
  for (const value of unsignedValues) {
    const w = new ProtobufWriter(16);
    w.writeVarint(value);
    const bytes = w.finish();
    assert.deepEqual(bytes, new Uint8Array(referenceUint64(value)), `value ${value}`);
    assert.equal(varintSize(value), bytes.length, `size of ${value}`);
  }
});

Deno.test("writeVarint64() writes the 64-bit value of its two halves", () => {
  const halves: [number, number][] = [[0, 0], [0x81234567, 0xffffffff], [0xffffffff, 0xffffffff], [5, 1], [
    0,
    0x80000000,
  ]];
  for (const [lo, hi] of halves) {
    const w = new ProtobufWriter();
    w.writeVarint64(lo, hi);
    const exact = (BigInt(hi) << 32n) | BigInt(lo);
    const expected = protobuf.Writer.create().uint64(exact.toString()).finish();
    assert.deepEqual(w.finish(), new Uint8Array(expected), `halves ${hi.toString(16)}:${lo.toString(16)}`);
  }
});

Deno.test("writeInt64() writes negative numbers as ten-byte two's complement", () => {
  for (const value of [-1, -2, -128, -(2 ** 31), -(2 ** 32), -(2 ** 32) - 1, -Number.MAX_SAFE_INTEGER, 5]) {
    const w = new ProtobufWriter();
    w.writeInt64(value);
    const expected = protobuf.Writer.create().int64(String(value)).finish();
    assert.deepEqual(w.finish(), new Uint8Array(expected), `value ${value}`);
  }
});

Deno.test("writeVarint() rejects values that are not unsigned 64-bit integers", () => {
  const w = new ProtobufWriter();
  for (const value of [-1, 2 ** 64, 1.5, 2 ** 40 + 0.5, NaN, Infinity]) {
    assert.throws(() => w.writeVarint(value), RangeError, `value ${value}`);
  }
  assert.throws(() => w.writeTag(0, WireType.Varint), RangeError);
});

Deno.test("nested length-delimited fields decode with protobufjs at every length boundary", () => {
  // Content lengths around the 1-, 2- and 3-byte length prefixes, nested two deep.
  for (const length of [0, 1, 127, 128, 129, 16383, 16384, 16385, 70000]) {
    const payload = new Uint8Array(length).map((_, i) => (i * 7 + length) & 0xff);
    const w = new ProtobufWriter(8);
    w.writeVarintField(1, 42);
    const outer = w.beginLengthDelimited(2);
    w.writeBytesField(3, payload);
    const inner = w.beginLengthDelimited(4);
    w.writeStringField(5, "x".repeat(length));
    w.endLengthDelimited(inner);
    w.writeVarintField(6, length);
    w.endLengthDelimited(outer);
    w.writeVarintField(7, 99);

    const r = protobuf.Reader.create(w.finish());
    assert.equal(r.uint32(), (1 << 3) | 0);
    assert.equal(r.uint32(), 42);
    assert.equal(r.uint32(), (2 << 3) | 2);
    const outerEnd = r.uint32() + r.pos;
    assert.equal(r.uint32(), (3 << 3) | 2);
    assert.deepEqual(new Uint8Array(r.bytes()), payload);
    assert.equal(r.uint32(), (4 << 3) | 2);
    const innerEnd = r.uint32() + r.pos;
    assert.equal(r.uint32(), (5 << 3) | 2);
    assert.equal(r.string(), "x".repeat(length));
    assert.equal(r.pos, innerEnd);
    assert.equal(r.uint32(), (6 << 3) | 0);
    assert.equal(r.uint32(), length);
    assert.equal(r.pos, outerEnd);
    assert.equal(r.uint32(), (7 << 3) | 0);
    assert.equal(r.uint32(), 99);
    assert.equal(r.pos, r.len);
  }
});

Deno.test("writeStringField() writes UTF-8 like protobufjs", () => {
  for (
    const value of [
      "",
      "main",
      "ünïcødé::λ",
      "std::vector<int>::push_back",
      "日本語🙂",
      "a\u0000b",
      "x".repeat(200),
    ]
  ) {
    const w = new ProtobufWriter(4);
    w.writeStringField(6, value);
    const expected = protobuf.Writer.create().uint32((6 << 3) | 2).string(value).finish();
    assert.deepEqual(w.finish(), new Uint8Array(expected), JSON.stringify(value));
  }
});

Deno.test("writePackedVarints() writes a packed field protobufjs reads back", () => {
  const values = [1, 2, 300, 2 ** 32 + 5, 70000, 0];
  const w = new ProtobufWriter();
  w.writePackedVarints(1, values);
  w.writePackedVarints(2, []);
  const r = protobuf.Reader.create(w.finish());
  assert.equal(r.uint32(), (1 << 3) | 2);
  const end = r.uint32() + r.pos;
  const read: number[] = [];
  while (r.pos < end) read.push(Number(r.uint64().toString()));
  assert.deepEqual(read, values);
  assert.equal(r.pos, r.len, "an empty list writes nothing");
});

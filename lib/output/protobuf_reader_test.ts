import assert from "node:assert/strict";
import protobuf from "protobufjs";
import { ProtobufReader, WireType } from "./protobuf_reader.ts";

// Inputs come from protobufjs, an independent encoder.

function tag(field: number, wireType: number): number {
  return field * 8 + wireType;
}

Deno.test("readVarint() reads what protobufjs writes, with exact halves above 2^53", () => {
  const values = [
    "0",
    "1",
    "127",
    "128",
    "300",
    "4294967295",
    "4294967296",
    "9007199254740991",
    "18446744073709551615",
  ];
  const w = protobuf.Writer.create();
  for (const value of values) w.uint64(value);
  const r = new ProtobufReader(w.finish(), "test");
  for (const value of values) {
    const read = r.readVarint();
    const exact = (BigInt(r.hi) << 32n) | BigInt(r.lo);
    assert.equal(exact.toString(), value);
    assert.equal(read, Number(value));
  }
  assert.equal(r.pos, r.end);
});

Deno.test("readInt64() reads negative numbers", () => {
  const values = [-1, -2, -(2 ** 31), -(2 ** 32) - 1, -Number.MAX_SAFE_INTEGER, 0, 7];
  const w = protobuf.Writer.create();
  for (const value of values) w.int64(String(value));
  const r = new ProtobufReader(w.finish(), "test");
  for (const value of values) assert.equal(r.readInt64(), value);
});

Deno.test("next() skips unknown fields of every wire type, groups included", () => {
  const w = protobuf.Writer.create();
  w.uint32(tag(9, WireType.Fixed64)).fixed64(12345);
  w.uint32(tag(10, WireType.Fixed32)).fixed32(7);
  w.uint32(tag(11, WireType.LengthDelimited)).string("skipped");
  w.uint32(tag(12, WireType.StartGroup));
  w.uint32(tag(13, WireType.Varint)).uint32(1);
  w.uint32(tag(14, WireType.StartGroup)).uint32(tag(14, WireType.EndGroup)); // nested group
  w.uint32(tag(12, WireType.EndGroup));
  w.uint32(tag(1, WireType.Varint)).uint32(300);
  w.uint32(tag(2, WireType.LengthDelimited)).string("kept");
  const r = new ProtobufReader(w.finish(), "test");
  const seen: string[] = [];
  while (r.next()) {
    if (r.field === 1) seen.push(`1=${r.readVarint()}`);
    else if (r.field === 2) seen.push(`2=${r.readString()}`);
    else r.skip();
  }
  assert.deepEqual(seen, ["1=300", "2=kept"]);
});

Deno.test("enterLengthDelimited() confines reading to the nested message", () => {
  const w = protobuf.Writer.create();
  w.uint32(tag(1, WireType.LengthDelimited)).fork();
  w.uint32(tag(1, WireType.Varint)).uint32(5);
  w.uint32(tag(2, WireType.Varint)).uint32(6);
  w.ldelim();
  w.uint32(tag(2, WireType.Varint)).uint32(7);
  const r = new ProtobufReader(w.finish(), "test");
  assert.ok(r.next());
  const outer = r.enterLengthDelimited();
  const inner: number[] = [];
  while (r.next()) inner.push(r.readVarint());
  r.exitLengthDelimited(outer);
  assert.deepEqual(inner, [5, 6]);
  assert.ok(r.next());
  assert.equal(r.field, 2);
  assert.equal(r.readVarint(), 7);
  assert.ok(!r.next());
});

Deno.test("readString() replaces invalid UTF-8 instead of failing", () => {
  const r = new ProtobufReader(new Uint8Array([3, 0x61, 0xff, 0x62]), "test");
  assert.equal(r.readString(), "a\ufffdb");
});

Deno.test("readString(maxBytes) reads a string of exactly maxBytes", () => {
  const r = new ProtobufReader(new Uint8Array([2, 0x61, 0x62]), "test");
  assert.equal(r.readString(2), "ab");
});

Deno.test("malformed input throws RangeError naming what was decoded", () => {
  const cases: [RegExp, Uint8Array, (r: ProtobufReader) => unknown][] = [
    [/truncated varint/, new Uint8Array([0x80, 0x80]), (r) => r.readVarint()],
    [/overflows 64 bits/, new Uint8Array(11).fill(0x80), (r) => r.readVarint()],
    [
      /overflows 64 bits/,
      new Uint8Array([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]),
      (r) => r.readVarint(),
    ],
    [/length 5 .* runs past the end/, new Uint8Array([0x0a, 0x05, 0x61]), (r) => (r.next(), r.readString())],
    [
      /string of 3 bytes at offset 1, more than 2/,
      new Uint8Array([0x0a, 0x03, 0x61, 0x62, 0x63]),
      (r) => (r.next(), r.readString(2)),
    ],
    [
      /length 127 .* runs past the end/,
      new Uint8Array([0x0a, 0x7f]),
      (r) => (r.next(), r.enterLengthDelimited()),
    ],
    [/field number 0/, new Uint8Array([0x00, 0x01]), (r) => r.next()],
    [/invalid wire type 6/, new Uint8Array([0x0e]), (r) => r.next()],
    [/invalid wire type 7/, new Uint8Array([0x0f]), (r) => r.next()],
    [/group 1 is not closed/, new Uint8Array([0x0b, 0x08, 0x01]), (r) => (r.next(), r.skip())],
    [/group 1 closed by end of group 2/, new Uint8Array([0x0b, 0x14]), (r) => (r.next(), r.skip())],
    [/unexpected wire type 4/, new Uint8Array([0x0c]), (r) => (r.next(), r.skip())],
    [/runs past the end/, new Uint8Array([0x09, 1, 2, 3]), (r) => (r.next(), r.skip())],
    [/groups nested deeper than 64/, new Uint8Array(200).fill(0x0b), (r) => (r.next(), r.skip())],
  ];
  for (const [expected, bytes, read] of cases) {
    assert.throws(() => read(new ProtobufReader(bytes, "thing")), (e: unknown) => {
      assert.ok(e instanceof RangeError, String(expected));
      assert.match(e.message, /^Cannot decode thing: /);
      assert.match(e.message, expected);
      return true;
    });
  }
});

Deno.test("expectWireType() rejects a field of the wrong wire type", () => {
  const r = new ProtobufReader(
    protobuf.Writer.create().uint32(tag(1, WireType.LengthDelimited)).string("x").finish(),
  );
  assert.ok(r.next());
  assert.throws(
    () => r.expectWireType(WireType.Varint, "id"),
    /Cannot decode protobuf message: field id \(1\)/,
  );
  r.expectWireType(WireType.LengthDelimited, "id");
});

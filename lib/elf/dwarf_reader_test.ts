import assert from "node:assert/strict";
import { DW_EH_PE, DwarfReader } from "./dwarf_reader.ts";
import { ElfFile } from "./elf_file.ts";

function reader(bytes: number[], start = 0, end = bytes.length): DwarfReader {
  return new DwarfReader(Uint8Array.from(bytes), start, end);
}

/** Test vectors from the DWARF 5 specification, figures 7.6 and 7.7. */
const ULEB_VECTORS: [number, number[]][] = [
  [2, [2]],
  [127, [127]],
  [128, [0x80, 1]],
  [129, [0x81, 1]],
  [130, [0x82, 1]],
  [12857, [0xb9, 0x64]],
];
const SLEB_VECTORS: [number, number[]][] = [
  [2, [2]],
  [-2, [0x7e]],
  [127, [0xff, 0]],
  [-127, [0x81, 0x7f]],
  [128, [0x80, 1]],
  [-128, [0x80, 0x7f]],
  [129, [0x81, 1]],
  [-129, [0xff, 0x7e]],
];

Deno.test("DwarfReader.uleb128() and sleb128() decode the DWARF specification's examples", () => {
  for (const [value, bytes] of ULEB_VECTORS) {
    const r = reader(bytes);
    assert.equal(r.uleb128(), value);
    assert.equal(r.remaining, 0);
  }
  for (const [value, bytes] of SLEB_VECTORS) {
    const r = reader(bytes);
    assert.equal(r.sleb128(), value);
    assert.equal(r.remaining, 0);
  }
});

Deno.test("DwarfReader LEB128 round-trips values up to 2^53 and saturates beyond 56 bits", () => {
  let seed = 12345;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  for (let i = 0; i < 2000; i++) {
    const value = Math.floor(random() * 2 ** Math.floor(random() * 53));
    const bytes: number[] = [];
    let v = value;
    do {
      bytes.push((v % 128) | (v >= 128 ? 0x80 : 0));
      v = Math.floor(v / 128);
    } while (v > 0);
    assert.equal(reader(bytes).uleb128(), value);
    // The same magnitude, negated, in two's complement groups.
    const negative = -value - 1;
    const signed: number[] = [];
    let n = negative;
    while (true) {
      const byte = ((n % 128) + 128) % 128;
      n = Math.floor(n / 128);
      const done = n === -1 && (byte & 0x40) !== 0;
      signed.push(done ? byte : byte | 0x80);
      if (done) break;
    }
    assert.equal(reader(signed).sleb128(), negative);
  }
  // Padded encodings (redundant 0x80 groups) are valid.
  assert.equal(reader([0x85, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00]).uleb128(), 5);
  assert.equal(reader([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]).sleb128(), -1);
  assert.equal(reader([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).uleb128(), Infinity);
  assert.equal(reader([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40]).sleb128(), -Infinity);
  assert.equal(reader([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]).sleb128(), Infinity);
});

Deno.test("DwarfReader throws RangeError at its end, never reading past it", () => {
  const bytes = [0x80, 0x80, 0x80, 0x01, 0xaa, 0xbb];
  assert.throws(() => reader(bytes, 0, 3).uleb128(), /unterminated LEB128 at offset 3/);
  assert.throws(() => reader(bytes, 0, 3).sleb128(), /unterminated LEB128/);
  assert.throws(() => reader(bytes, 4, 5).u16(), /2-byte value truncated/);
  assert.throws(() => reader(bytes, 4, 7), /outside 6 bytes/);
  assert.throws(() => reader(bytes, 3, 6).u32(), /4-byte value truncated/);
  assert.throws(() => reader(bytes, 0, 6).skip(7), /cannot skip 7 bytes/);
  assert.throws(() => reader(bytes, 0, 6).skip(NaN), /cannot skip NaN bytes/);
  assert.throws(() => reader([0x41, 0x42], 0, 2).cstring(), /unterminated string/);
  assert.throws(() => reader([0x41, 0x42, 0x43, 0], 0, 4).cstring(2), /unterminated string/);
  const r = reader([0x41, 0x42, 0, 7]);
  assert.equal(r.cstring(), "AB");
  assert.equal(r.u8(), 7);
  assert.throws(() => r.u8(), /1-byte value truncated/);
});

Deno.test("DwarfReader reads fixed-size little-endian values as numbers", () => {
  const r = reader([
    0x34,
    0x12,
    0x78,
    0x56,
    0x34,
    0x12,
    0xff,
    0xff,
    0xff,
    0xff,
    0xff,
    0xff,
    0xff,
    0xff,
    0x01,
    0,
    0,
    0,
    0,
    0,
    0x20,
    0,
  ]);
  assert.equal(r.u16(), 0x1234);
  assert.equal(r.u32(), 0x12345678);
  assert.equal(r.s64(), -1);
  // 0x0020_0000_0000_0001 is 2^53 + 1: not exact as a number, but still at least 2^53.
  assert.ok(r.u64() >= 2 ** 53);
});

Deno.test("DwarfReader.encodedPointer() applies pcrel, datarel and textrel and rejects the rest", () => {
  // sdata4 -8 at offset 4 of a buffer loaded at 0x1000: 0x1000 + 4 - 8.
  const bytes = [0, 0, 0, 0, 0xf8, 0xff, 0xff, 0xff];
  const r = reader(bytes, 4);
  assert.equal(r.encodedPointer(DW_EH_PE.pcrel | DW_EH_PE.sdata4, 0x1000), 0xffc);
  assert.equal(
    reader(bytes, 4).encodedPointer(DW_EH_PE.datarel | DW_EH_PE.sdata4, 0, { data: 0x2000 }),
    0x1ff8,
  );
  assert.equal(
    reader(bytes, 4).encodedPointer(DW_EH_PE.textrel | DW_EH_PE.udata4, 0, { text: 0 }),
    0xfffffff8,
  );
  // A pc-relative result below zero or a udata8 beyond 2^53 is not an address.
  assert.ok(Number.isNaN(reader(bytes, 4).encodedPointer(DW_EH_PE.sdata4, 0)));
  const big = [0, 0, 0, 0, 0, 0, 0, 0x80];
  assert.ok(Number.isNaN(reader(big).encodedPointer(DW_EH_PE.udata8, 0)));
  // pcrel udata8 wraps like 64-bit arithmetic: 0xffff...fff0 is -16.
  const minus16 = [0xf0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
  assert.equal(reader(minus16).encodedPointer(DW_EH_PE.pcrel | DW_EH_PE.udata8, 0x100), 0xf0);
  assert.equal(reader([0x10, 0x00]).encodedPointer(DW_EH_PE.udata2, 0), 16);
  assert.equal(reader([0x7f]).encodedPointer(DW_EH_PE.sleb128 | DW_EH_PE.pcrel, 0x10), 0xf);
  assert.throws(
    () => reader(bytes).encodedPointer(DW_EH_PE.indirect | DW_EH_PE.pcrel | DW_EH_PE.sdata4, 0),
    /indirect/,
  );
  assert.throws(() => reader(bytes).encodedPointer(DW_EH_PE.datarel | DW_EH_PE.sdata4, 0), /unsupported/);
  assert.throws(() => reader(bytes).encodedPointer(DW_EH_PE.aligned, 0), /unsupported/);
  assert.throws(() => reader(bytes).encodedPointer(0x07, 0), /unknown pointer format 0x7/);
  assert.throws(() => reader(bytes, 6).encodedPointer(DW_EH_PE.sdata4, 0), /truncated/);
});

Deno.test("DwarfReader.encodedPointer() finds .eh_frame from a real .eh_frame_hdr", () => {
  using elf = ElfFile.open("/bin/true");
  const hdr = elf.section(".eh_frame_hdr");
  const eh = elf.section(".eh_frame");
  // Every distribution's linker writes both (--eh-frame-hdr is gcc's default).
  assert.ok(hdr !== undefined && eh !== undefined, "/bin/true has .eh_frame_hdr and .eh_frame");
  const bytes = elf.readSection(hdr);
  assert.equal(bytes[0], 1, "version 1");
  // eh_frame_ptr follows the 4-byte header, pc-relative to its own address.
  assert.equal(new DwarfReader(bytes, 4).encodedPointer(bytes[1]!, hdr.addr), eh.addr);
});

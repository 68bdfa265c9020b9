import assert from "node:assert/strict";
import { findMapping, parseProcMaps } from "./proc_maps.ts";

const SAMPLE = `55a4c8e00000-55a4c8e02000 r--p 00000000 fd:01 131090                     /usr/bin/cat
55a4c8e02000-55a4c8e07000 r-xp 00002000 fd:01 131090                     /usr/bin/cat
55a4c9f0e000-55a4c9f2f000 rw-p 00000000 00:00 0                          [heap]
7f1c2e028000-7f1c2e1bd000 r-xp 00028000 fd:01 1836                       /usr/lib/x86_64-linux-gnu/libc.so.6
7f1c2e3c0000-7f1c2e3c1000 r-xp 00000000 00:00 0 
7f1c2e3d0000-7f1c2e3d2000 r-xp 00001000 fd:01 999                        /tmp/my lib.so (deleted)
7ffd4c9f1000-7ffd4c9f3000 r-xp 00000000 00:00 0                          [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
`;

Deno.test("parseProcMaps() keeps executable mappings with their file offsets", () => {
  const mappings = parseProcMaps(SAMPLE);
  assert.deepEqual(mappings.map((m) => m.path), [
    "/usr/bin/cat",
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
    "",
    "/tmp/my lib.so",
    "[vdso]",
    "[vsyscall]",
  ]);
  const cat = mappings[0]!;
  assert.equal(cat.start, 0x55a4c8e02000);
  assert.equal(cat.end, 0x55a4c8e07000);
  assert.equal(cat.fileOffset, 0x2000);
  assert.equal(cat.device, "fd:01");
  assert.equal(cat.inode, 131090);
  assert.equal(mappings[3]!.deleted, true);
  assert.equal(mappings[0]!.deleted, false);
});

Deno.test("parseProcMaps() reads the real maps of this process", () => {
  const mappings = parseProcMaps(Deno.readTextFileSync("/proc/self/maps"));
  assert.ok(mappings.some((m) => m.path.endsWith("libc.so.6")));
  for (let i = 1; i < mappings.length; i++) assert.ok(mappings[i - 1]!.start < mappings[i]!.start);
});

Deno.test("parseProcMaps() rejects text that is not a maps file", () => {
  assert.throws(() => parseProcMaps("hello r-xp world\n"), RangeError);
});

Deno.test("parseProcMaps() rejects numbers no kernel writes: over 64 bits, or an empty range", () => {
  const line = (range: string, inode = "1", device = "fd:01") =>
    `${range} r-xp 00000000 ${device} ${inode} /x\n`;
  assert.equal(parseProcMaps(line("ffffffffff600000-ffffffffff601000", "18446744073709551615")).length, 1);
  for (
    const text of [
      line("10000000000000000-10000000000001000"),
      line("7f0000001000-7f0000001000"),
      line("7f0000002000-7f0000001000"),
      line("1000-2000", "18446744073709551616000"),
      line("1000-2000", "1", "123456789:01"),
    ]
  ) {
    assert.throws(() => parseProcMaps(text), /^RangeError: Cannot parse maps line: /, text);
  }
});

Deno.test("findMapping() finds the mapping containing an address, or -1", () => {
  const mappings = parseProcMaps(SAMPLE);
  assert.equal(findMapping(mappings, 0x55a4c8e02000), 0);
  assert.equal(findMapping(mappings, 0x55a4c8e06fff), 0);
  assert.equal(findMapping(mappings, 0x55a4c8e07000), -1);
  assert.equal(findMapping(mappings, 0x7f1c2e100000), 1);
  assert.equal(findMapping(mappings, 0x1000), -1);
});

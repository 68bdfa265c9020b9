import assert from "node:assert/strict";
import { ElfFile, SHT_NOTE } from "./elf_file.ts";
import { findGnuBuildId, parseDebugLink, parseNotes, toHex } from "./notes.ts";
import { run } from "../testing/commands.ts";
import { programs, requiring } from "../testing/requirements.ts";

const tools = programs("readelf", "ldd");

function libcPath(): string {
  const match = run("ldd", "/bin/true").match(/libc\.so\.\d+ => (\S+)/);
  if (match?.[1] === undefined) throw new Error("ldd /bin/true names no libc");
  return match[1];
}

Deno.test(requiring([tools], {
  name: "parseNotes() lists the notes readelf -n shows",
  fn() {
    for (const path of [libcPath(), "/bin/true"]) {
      const expected = [...run("readelf", "-nW", path).matchAll(/^\s+(\S+)\s+0x([0-9a-f]+)\s/gm)]
        .map((m) => ({ owner: m[1], size: parseInt(m[2] ?? "", 16) }));
      assert.ok(expected.length > 0);
      using elf = ElfFile.open(path);
      const got = elf.sections.filter((s) => s.type === SHT_NOTE).flatMap((s) =>
        [...parseNotes(elf.readSection(s), s.addralign)].map((n) => ({ owner: n.name, size: n.desc.length }))
      );
      assert.deepEqual(got, expected);
    }
  },
}));

Deno.test(requiring([tools], {
  name: "findGnuBuildId() reads the build ID readelf shows",
  fn() {
    const path = libcPath();
    const expected = run("readelf", "-n", path).match(/Build ID: ([0-9a-f]+)/)?.[1];
    assert.ok(expected !== undefined, "libc has no build ID");
    using elf = ElfFile.open(path);
    const section = elf.section(".note.gnu.build-id");
    assert.ok(section !== undefined);
    const bytes = elf.readSection(section);
    assert.equal(findGnuBuildId(bytes, 4), expected);
    // A truncated note area yields no build ID instead of reading past its end.
    assert.equal(findGnuBuildId(bytes.subarray(0, bytes.length - 1), 4), "");
    assert.equal(findGnuBuildId(bytes.subarray(0, 11), 4), "");
    assert.equal(toHex(new Uint8Array([0, 15, 16, 255])), "000f10ff");
  },
}));

function debugLinkBytes(name: string, crc: number): Uint8Array {
  const encoded = new TextEncoder().encode(name);
  const crcOffset = Math.ceil((encoded.length + 1) / 4) * 4;
  const bytes = new Uint8Array(crcOffset + 4);
  bytes.set(encoded);
  new DataView(bytes.buffer).setUint32(crcOffset, crc, true);
  return bytes;
}

Deno.test("parseDebugLink() reads a plain name and refuses paths", () => {
  assert.deepEqual(parseDebugLink(debugLinkBytes("libfoo.so.debug", 0xdeadbeef)), {
    fileName: "libfoo.so.debug",
    crc32: 0xdeadbeef,
  });
  for (const name of ["../../etc/shadow", "/etc/shadow", "a/b.debug", "..", "."]) {
    assert.equal(parseDebugLink(debugLinkBytes(name, 1)), null, name);
  }
  const good = debugLinkBytes("x.debug", 7);
  assert.equal(parseDebugLink(good.subarray(0, good.length - 1)), null);
  assert.equal(parseDebugLink(new Uint8Array([0, 0, 0, 0, 0, 0, 0, 0])), null);
  assert.equal(parseDebugLink(new Uint8Array(0)), null);
});

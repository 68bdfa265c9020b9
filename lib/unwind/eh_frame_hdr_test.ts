import assert from "node:assert/strict";
import { ElfFile } from "../elf/elf_file.ts";
import { indexCfi, SkipCounter } from "./cfi.ts";
import { indexUnwindTable } from "./unwind_table.ts";
import { EhFrameHeader, PT_GNU_EH_FRAME } from "./eh_frame_hdr.ts";

Deno.test("EhFrameHeader finds every FDE of libc and python3 that a walk of .eh_frame finds", () => {
  for (const path of ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/bin/python3"]) {
    using elf = ElfFile.open(path);
    const header = EhFrameHeader.read(elf);
    assert.ok(header !== null, `${path} has a usable .eh_frame_hdr`);
    const section = elf.section(".eh_frame")!;
    assert.equal(header.ehFrameAddress, section.addr);
    const { fdes } = indexCfi(
      { kind: "eh_frame", bytes: elf.readSection(section), vaddr: section.addr },
      new SkipCounter(),
    );
    assert.equal(header.count, fdes.length);
    for (let i = 0; i < fdes.length; i++) {
      const entry = header.find(fdes.starts[i]!);
      assert.equal(header.location(entry), fdes.starts[i]);
      assert.equal(header.fdeAddress(entry) - section.addr, fdes.entryOffsets[i]);
    }
    assert.equal(header.find(header.location(0) - 1), -1);
    console.log(`${path}: ${header.count} FDEs found through .eh_frame_hdr`);
  }
});

Deno.test("EhFrameHeader.read() refuses a table that is not sorted", () => {
  using elf = ElfFile.open("/lib/x86_64-linux-gnu/libc.so.6");
  const segment = elf.programHeaders.find((p) => p.type === PT_GNU_EH_FRAME)!;
  const bytes = Deno.readFileSync(elf.name);
  // Swap the locations of the first two entries (the table follows 12 bytes of header).
  const view = new DataView(bytes.buffer, segment.offset);
  const first = view.getInt32(12, true);
  view.setInt32(12, view.getInt32(20, true), true);
  view.setInt32(20, first, true);
  const path = Deno.makeTempFileSync({ prefix: "omniprof-eh-frame-hdr-" });
  try {
    Deno.writeFileSync(path, bytes);
    using changed = ElfFile.open(path);
    assert.equal(EhFrameHeader.read(changed), null);
  } finally {
    Deno.removeSync(path);
  }
});

Deno.test("pages of libc read through a corrupted .eh_frame_hdr give a table or a RangeError", () => {
  const path = "/lib/x86_64-linux-gnu/libc.so.6";
  const bytes = Deno.readFileSync(path);
  let regions: { offset: number; size: number }[];
  let text: { start: number; end: number };
  {
    using elf = ElfFile.open(path);
    const header = elf.programHeaders.find((p) => p.type === PT_GNU_EH_FRAME)!;
    const ehFrame = elf.section(".eh_frame")!;
    regions = [{ offset: header.offset, size: header.filesz }, {
      offset: ehFrame.offset,
      size: ehFrame.size,
    }];
    const code = elf.section(".text")!;
    text = { start: code.addr, end: code.addr + code.size };
  }
  // A small deterministic generator, so that a failing case can be rerun from its number.
  let state = 0x5eed;
  const random = (n: number) => {
    state = (state * 1103515245 + 12345) >>> 0;
    return state % n;
  };
  const PAGE = 65536;
  let tables = 0;
  let rangeErrors = 0;
  for (let c = 0; c < 400; c++) {
    const saved: [number, number][] = [];
    for (let flips = 1 + random(8); flips > 0; flips--) {
      const region = regions[random(regions.length)]!;
      const at = region.offset + random(region.size);
      saved.push([at, bytes[at]!]);
      bytes[at] = random(256);
    }
    try {
      using elf = ElfFile.fromBytes(bytes, `case-${c}`);
      const index = indexUnwindTable(elf, { lazy: true, maxRows: 1 << 16 });
      for (let p = 0; p < 4; p++) {
        const page = Math.floor((text.start + random(text.end - text.start)) / PAGE);
        const table = index.range(page * PAGE, (page + 1) * PAGE);
        for (let i = 1; i < table.length; i++) {
          assert.ok(table.addresses[i]! > table.addresses[i - 1]!, `case ${c}: rows out of order`);
        }
        tables++;
      }
    } catch (error) {
      if (!(error instanceof RangeError)) throw new Error(`case ${c}: ${error}`, { cause: error });
      rangeErrors++;
    } finally {
      for (const [at, value] of saved.reverse()) bytes[at] = value;
    }
  }
  console.log(`corrupted .eh_frame_hdr/.eh_frame: ${tables} page tables, ${rangeErrors} RangeErrors`);
  assert.ok(tables > 0);
});

import assert from "node:assert/strict";
import { ElfFile } from "../elf/elf_file.ts";
import { CfiSkip, indexCfi, SkipCounter } from "./cfi.ts";
import { parseReadelfFrames, runReadelf } from "./testdata/readelf_frames.ts";
import { CfiWriter, uleb } from "./testdata/cfi_builder.ts";
import { programs, requiring } from "../testing/requirements.ts";

const decoder = new TextDecoder();

const tools = programs("gcc", "g++", "readelf", "ldd");

let tempDir: string | undefined;
function temp(): string {
  if (tempDir === undefined) {
    tempDir = Deno.makeTempDirSync({ prefix: "omniprof_cfi_test_" });
    globalThis.addEventListener("unload", () => Deno.removeSync(tempDir!, { recursive: true }));
  }
  return tempDir;
}

function compile(name: string, compiler: string, flags: string[], ...sources: string[]): string {
  const path = `${temp()}/${name}`;
  const files = sources.map((s) => new URL(`./testdata/${s}`, import.meta.url).pathname);
  const out = new Deno.Command(compiler, { args: [...flags, "-o", path, ...files], stderr: "piped" })
    .outputSync();
  if (!out.success) throw new Error(`${compiler} failed: ${decoder.decode(out.stderr)}`);
  return path;
}

/** Compares every CIE's fields and every FDE's CIE and range with readelf's; returns the FDE count. */
function compareEntries(path: string): number {
  using elf = ElfFile.open(path);
  const readelf = parseReadelfFrames(runReadelf(path, "--debug-dump=frames"), path);
  let fdes = 0;
  for (const name of [".eh_frame", ".debug_frame"]) {
    const header = elf.section(name);
    const reference = readelf.find((s) => s.name === name);
    if (header === undefined || reference === undefined) continue;
    const skips = new SkipCounter();
    const index = indexCfi({
      kind: name === ".eh_frame" ? "eh_frame" : "debug_frame",
      bytes: elf.readSection(header),
      vaddr: name === ".eh_frame" ? header.addr : 0,
    }, skips);
    assert.deepEqual(skips.list(), [], `${path} ${name}`);
    const expectedCies = reference.entries.filter((e) => e.kind === "CIE").map((e) => ({
      offset: e.offset,
      augmentation: e.augmentation,
      codeAlignment: e.codeAlignment,
      dataAlignment: e.dataAlignment,
      returnAddressRegister: e.returnAddressColumn,
    }));
    const cies = index.cies.map((c) => ({
      offset: c.offset,
      augmentation: c.augmentation,
      codeAlignment: c.codeAlignment,
      dataAlignment: c.dataAlignment,
      returnAddressRegister: c.returnAddressRegister,
    }));
    assert.deepEqual(cies, expectedCies, `${path} ${name} CIEs`);
    const expectedFdes = reference.entries.filter((e) => e.kind === "FDE").map((
      e,
    ) => [e.offset, e.cieOffset, e.start, e.end]);
    const got = Array.from(index.fdes.entryOffsets, (offset, i) => [
      offset,
      index.cies[index.fdes.cieIndex[i]!]!.offset,
      index.fdes.starts[i],
      index.fdes.ends[i],
    ]);
    assert.deepEqual(got, expectedFdes, `${path} ${name} FDEs`);
    console.log(`${path} ${name}: ${cies.length} CIEs and ${got.length} FDEs identical to readelf's`);
    fdes += got.length;
  }
  return fdes;
}

Deno.test(requiring([tools], {
  name: "indexCfi() reads the same CIEs and FDEs as readelf in libraries, C++ code and .debug_frame",
  fn() {
    const ldd = decoder.decode(
      new Deno.Command("ldd", { args: ["/bin/true"], stdout: "piped" }).outputSync().stdout,
    );
    const cxx = compile("frames_cc", "g++", ["-O2"], "frames.cc");
    const lddCxx = decoder.decode(
      new Deno.Command("ldd", { args: [cxx], stdout: "piped" }).outputSync().stdout,
    );
    const files = [
      ldd.match(/libc\.so\.\d+ => (\S+)/)?.[1],
      lddCxx.match(/libstdc\+\+\.so\.\d+ => (\S+)/)?.[1],
      cxx,
      compile("cfi_ops", "gcc", ["-O2"], "cfi_ops.s", "ops_main.c"),
      compile("frames_dwarf5", "gcc", ["-O2", "-gdwarf-5", "-fno-asynchronous-unwind-tables"], "frames.c"),
      compile("frames_dwarf2", "gcc", ["-O2", "-gdwarf-2", "-fno-asynchronous-unwind-tables"], "frames.c"),
    ];
    for (const file of files) {
      if (file === undefined) continue;
      assert.ok(compareEntries(Deno.realPathSync(file)) > 0);
    }
  },
}));

/** Indexes crafted `.eh_frame` bytes loaded at 0x2000. */
function index(bytes: Uint8Array, kind: "eh_frame" | "debug_frame" = "eh_frame", stopAtTerminator = false) {
  const skips = new SkipCounter();
  const result = indexCfi({ kind, bytes, vaddr: kind === "eh_frame" ? 0x2000 : 0, stopAtTerminator }, skips);
  return { result, skips: Object.fromEntries(skips.list().map((s) => [s.reason, s.count])) };
}

function u32(value: number): number[] {
  return [value & 0xff, (value >>> 8) & 0xff, (value >>> 16) & 0xff, value >>> 24];
}

Deno.test("indexCfi() decodes augmentations z, P, L, R and S and the FDE's augmentation data", () => {
  const w = new CfiWriter(0x2000);
  // zPLRS: personality (udata4 absolute), LSDA encoding, FDE encoding pcrel|sdata4, signal frame.
  const cie = w.cie({ augmentation: "zPLRS", augmentationData: [0x03, ...u32(0x12345678), 0x1b, 0x1b] });
  const fde = w.offset;
  // FDE with 4 bytes of augmentation data (its LSDA pointer), then a program.
  w.raw([...u32(24), ...u32(fde + 4 - cie), ...u32((0x1100 - (0x2000 + fde + 8)) >>> 0), ...u32(0x30)]);
  w.raw([4, 0, 0, 0, 0, 0x41, 0x0e, 16, 0, 0, 0, 0]);
  const { result, skips } = index(w.finish());
  assert.deepEqual(skips, {});
  const parsed = result.cies[0]!;
  assert.equal(parsed.augmentation, "zPLRS");
  assert.equal(parsed.fdeEncoding, 0x1b);
  assert.equal(parsed.lsdaEncoding, 0x1b);
  assert.equal(parsed.signalFrame, true);
  assert.equal(result.fdes.starts[0], 0x1100);
  assert.equal(result.fdes.ends[0], 0x1130);
  // The program starts after the augmentation data.
  assert.equal(result.fdes.instructionsStart[0], fde + 4 + 4 + 4 + 4 + 1 + 4);
});

Deno.test("indexCfi() skips FDEs whose CIE pointer is out of range, points at an FDE or at itself", () => {
  const w = new CfiWriter(0x2000);
  const cie = w.cie();
  const good = w.fde(cie, 0x1100, 0x10);
  w.fde(good, 0x1200, 0x10); // points at an FDE
  const self = w.offset;
  w.raw([...u32(12), ...u32(0), ...u32(0), ...u32(0x10)]); // id 0 makes it a CIE... of version 0
  w.fde(self, 0x1300, 0x10); // its CIE is malformed
  const loop = w.offset;
  w.raw([...u32(12), ...u32(4 + 0x100000), ...u32(0), ...u32(0x10)]); // points before the section
  w.fde(loop, 0x1400, 0x10); // points at that FDE
  const { result, skips } = index(w.finish());
  assert.equal(result.fdes.length, 1);
  assert.deepEqual(skips, { [CfiSkip.noCie]: 3, [CfiSkip.badCie]: 1, [CfiSkip.badCieOfFde]: 1 });
});

Deno.test("indexCfi() walks past zero terminators unless told to stop at the first", () => {
  const w = new CfiWriter(0x2000);
  const cie = w.cie();
  w.fde(cie, 0x1100, 0x10);
  w.raw(u32(0));
  w.fde(cie, 0x1200, 0x10);
  assert.equal(index(w.finish()).result.fdes.length, 2);
  assert.equal(index(w.finish(), "eh_frame", true).result.fdes.length, 1);
});

Deno.test("indexCfi() reads 64-bit entries and stops at lengths past the end or reserved", () => {
  const w = new CfiWriter(0x2000);
  // A 64-bit CIE: 0xffffffff, 8-byte length, 8-byte id 0, version 1, "zR", 1, -8, 16, 1, 0x1b.
  const body = [0, 0, 0, 0, 0, 0, 0, 0, 1, 0x7a, 0x52, 0, 1, 0x78, 16, 1, 0x1b, 0x0c, 7, 8, 0x90, 1];
  w.raw([...u32(0xffffffff), ...u32(body.length), ...u32(0), ...body]);
  // A 64-bit FDE: 8-byte CIE pointer back to offset 0, pcrel sdata4 start, length, no augmentation data.
  const fde = w.offset;
  const rel = 0x1100 - (0x2000 + fde + 12 + 8);
  const fdeBody = [...u32(fde + 12), 0, 0, 0, 0, ...u32(rel >>> 0), ...u32(0x20), 0];
  w.raw([...u32(0xffffffff), ...u32(fdeBody.length), ...u32(0), ...fdeBody]);
  const { result, skips } = index(w.finish());
  assert.deepEqual(skips, {});
  assert.equal(result.fdes.starts[0], 0x1100);
  assert.equal(result.fdes.ends[0], 0x1120);

  const huge = new CfiWriter(0x2000);
  huge.cie();
  huge.raw([...u32(0xffffffff), ...u32(0xffffff00), ...u32(0x7fffffff)]);
  assert.deepEqual(index(huge.finish()).skips, { [CfiSkip.lengthPastEnd]: 1 });
  const reserved = new CfiWriter(0x2000);
  reserved.raw([...u32(0xfffffff5), 0, 0, 0, 0]);
  assert.deepEqual(index(reserved.finish()).skips, { [CfiSkip.reservedLength]: 1 });
  const short = new CfiWriter(0x2000);
  short.raw([...u32(2), 0, 0]);
  assert.deepEqual(index(short.finish()).skips, { [CfiSkip.shortEntry]: 1 });
});

Deno.test("indexCfi() resolves .debug_frame CIE pointers forward and reads version 4 address sizes", () => {
  const w = new CfiWriter(0, "debug_frame");
  // An FDE before its CIE (at offset 32): 4-byte addresses, from a version 4 CIE with address size 4.
  w.raw([...u32(28), ...u32(32), ...u32(0x1100), ...u32(0x40), 0x41, 0x0e, 16, 0, ...new Array(12).fill(0)]);
  const cieBody = [...u32(0xffffffff), 4, 0, 4, 0, 1, 0x78, 16, 0x0c, 7, 8, 0x90, 1, 0, 0];
  assert.equal(w.offset, 32);
  w.raw([...u32(cieBody.length), ...cieBody]);
  const { result, skips } = index(w.finish(false), "debug_frame");
  assert.deepEqual(skips, {});
  assert.equal(result.cies[0]!.addressSize, 4);
  assert.equal(result.fdes.starts[0], 0x1100);
  assert.equal(result.fdes.ends[0], 0x1140);
});

Deno.test("indexCfi() rejects malformed CIEs and FDE headers, counting each", () => {
  const cases: [string, (w: CfiWriter) => void, string][] = [
    ["version 2", (w) => w.fde(w.cie({ version: 2 }), 0x1100, 0x10), CfiSkip.badCieOfFde],
    ["unknown augmentation", (w) => w.fde(w.cie({ augmentation: "xy" }), 0x1100, 0x10), CfiSkip.badCieOfFde],
    [
      "huge augmentation length",
      (w) => w.fde(w.cie({ augmentationLength: uleb(2 ** 35) }), 0x1100, 0x10),
      CfiSkip.badCieOfFde,
    ],
    [
      "indirect FDE encoding",
      (w) => w.fde(w.cie({ augmentationData: [0x9b] }), 0x1100, 0x10),
      CfiSkip.badFde,
    ],
    ["empty range", (w) => w.fde(w.cie(), 0x1100, 0), CfiSkip.emptyRange],
    ["address below zero", (w) => w.fde(w.cie(), -0x10, 0x10), CfiSkip.addressRange],
  ];
  for (const [what, write, reason] of cases) {
    const w = new CfiWriter(0x2000);
    write(w);
    const bytes = w.finish();
    const { result, skips } = index(bytes);
    assert.equal(result.fdes.length, 0, what);
    assert.equal(skips[reason], 1, `${what}: ${JSON.stringify(skips)}`);
  }
});

import assert from "node:assert/strict";
import { crc32 } from "node:zlib";
import { ElfFile, ET_DYN, ET_REL, PT_LOAD, SHF_COMPRESSED, SHT_NOBITS } from "./elf_file.ts";
import type { Address, FileOffset } from "../types.ts";
import { run } from "../testing/commands.ts";
import { programs, requiring } from "../testing/requirements.ts";

const tools = programs("gcc", "readelf", "objcopy", "strip", "ldd", "mkfifo");

let tempDir: string | undefined;
function temp(): string {
  if (tempDir === undefined) {
    tempDir = Deno.makeTempDirSync({ prefix: "omniprof_elf_test_" });
    globalThis.addEventListener("unload", () => Deno.removeSync(tempDir!, { recursive: true }));
  }
  return tempDir;
}

/** Compiles testdata/hello.c once, with a build ID and zlib-compressed debug sections. */
let fixturePath: string | undefined;
function fixture(): string {
  if (fixturePath === undefined) {
    const source = new URL("./testdata/hello.c", import.meta.url).pathname;
    fixturePath = `${temp()}/hello`;
    run("gcc", "-O1", "-g", "-gz=zlib", "-Wl,--build-id=sha1", "-o", fixturePath, source);
  }
  return fixturePath;
}

function libcPath(): string {
  const match = run("ldd", "/bin/true").match(/libc\.so\.\d+ => (\S+)/);
  if (match?.[1] === undefined) throw new Error("ldd /bin/true names no libc");
  return match[1];
}

interface ReadelfSection {
  index: number;
  name: string;
  type: string;
  addr: number;
  offset: number;
  size: number;
  entsize: number;
  flags: string;
  link: number;
  info: number;
  align: number;
}

function readelfSections(path: string): ReadelfSection[] {
  const out: ReadelfSection[] = [];
  for (const line of run("readelf", "-SW", path).split("\n")) {
    const match = line.match(/^\s*\[\s*(\d+)\]\s(.*)$/);
    if (match === null) continue;
    const index = Number(match[1]);
    const tokens = (match[2] ?? "").trim().split(/\s+/);
    if (index === 0) tokens.unshift("");
    const hex = (i: number) => parseInt(tokens[i] ?? "", 16);
    const tail = tokens.slice(-3).map(Number);
    out.push({
      index,
      name: tokens[0] ?? "",
      type: tokens[1] ?? "",
      addr: hex(2),
      offset: hex(3),
      size: hex(4),
      entsize: hex(5),
      flags: tokens.length === 10 ? tokens[6] ?? "" : "",
      link: tail[0] ?? -1,
      info: tail[1] ?? -1,
      align: tail[2] ?? -1,
    });
  }
  return out;
}

interface ReadelfSegment {
  type: string;
  offset: number;
  vaddr: number;
  filesz: number;
  memsz: number;
  flags: string;
  align: number;
}

function readelfSegments(path: string): ReadelfSegment[] {
  const out: ReadelfSegment[] = [];
  for (const line of run("readelf", "-lW", path).split("\n")) {
    const match = line.match(
      /^\s+(\S+)\s+0x([0-9a-f]+) 0x([0-9a-f]+) 0x[0-9a-f]+ 0x([0-9a-f]+) 0x([0-9a-f]+) (.{3}) 0x([0-9a-f]+)$/,
    );
    if (match === null) continue;
    out.push({
      type: match[1] ?? "",
      offset: parseInt(match[2] ?? "", 16),
      vaddr: parseInt(match[3] ?? "", 16),
      filesz: parseInt(match[4] ?? "", 16),
      memsz: parseInt(match[5] ?? "", 16),
      flags: (match[6] ?? "").replaceAll(" ", ""),
      align: parseInt(match[7] ?? "", 16),
    });
  }
  return out;
}

const SECTION_TYPES: Record<string, number> = {
  NULL: 0,
  PROGBITS: 1,
  SYMTAB: 2,
  STRTAB: 3,
  RELA: 4,
  HASH: 5,
  DYNAMIC: 6,
  NOTE: 7,
  NOBITS: 8,
  DYNSYM: 11,
  INIT_ARRAY: 14,
  FINI_ARRAY: 15,
  GNU_HASH: 0x6ffffff6,
  VERSYM: 0x6fffffff,
  VERNEED: 0x6ffffffe,
  VERDEF: 0x6ffffffd,
};

function flagString(flags: number): string {
  const p = (flags & 4 ? "R" : "") + (flags & 2 ? "W" : "") + (flags & 1 ? "E" : "");
  return p;
}

function assertMatchesReadelf(path: string): void {
  using elf = ElfFile.open(path);
  const expected = readelfSections(path);
  assert.ok(expected.length > 0, `readelf lists no sections of ${path}`);
  assert.equal(elf.sections.length, expected.length);
  for (const want of expected) {
    const got = elf.sections[want.index];
    assert.ok(got !== undefined);
    assert.equal(got.name, want.name);
    const type = SECTION_TYPES[want.type];
    if (type !== undefined) assert.equal(got.type, type, `type of ${want.name}`);
    assert.equal(got.addr, want.addr, `address of ${want.name}`);
    assert.equal(got.offset, want.offset, `offset of ${want.name}`);
    assert.equal(got.size, want.size, `size of ${want.name}`);
    assert.equal(got.entsize, want.entsize, `entsize of ${want.name}`);
    assert.equal(got.link, want.link, `link of ${want.name}`);
    assert.equal(got.info, want.info, `info of ${want.name}`);
    assert.equal(got.addralign, want.align, `align of ${want.name}`);
    assert.equal((got.flags & 4) !== 0, want.flags.includes("X"), `X flag of ${want.name}`);
    assert.equal((got.flags & SHF_COMPRESSED) !== 0, want.flags.includes("C"), `C flag of ${want.name}`);
  }

  const segments = readelfSegments(path);
  assert.equal(elf.programHeaders.length, segments.length);
  const loads = segments.filter((s) => s.type === "LOAD");
  assert.ok(loads.length > 0);
  assert.deepEqual(
    elf.loadSegments.map((s) => ({ ...s, flags: flagString(s.flags) })),
    loads.map(({ type: _, ...s }) => s),
  );

  const buildId = run("readelf", "-n", path).match(/Build ID: ([0-9a-f]+)/)?.[1] ?? "";
  assert.equal(elf.buildId(), buildId);
}

Deno.test(requiring([tools], {
  name: "open() reads the sections, segments and build ID readelf shows (fixture)",
  fn() {
    assertMatchesReadelf(fixture());
    using elf = ElfFile.open(fixture());
    assert.equal(elf.type, ET_DYN);
    assert.notEqual(elf.buildId(), "");
  },
}));

Deno.test(requiring([tools], {
  name: "open() reads the sections, segments and build ID readelf shows (libc)",
  fn() {
    assertMatchesReadelf(libcPath());
  },
}));

Deno.test(requiring([tools], {
  name: "fromBytes() parses like open()",
  fn() {
    using fromFile = ElfFile.open(libcPath());
    using fromBytes = ElfFile.fromBytes(Deno.readFileSync(libcPath()), "libc");
    assert.deepEqual(fromBytes.sections, fromFile.sections);
    assert.deepEqual(fromBytes.loadSegments, fromFile.loadSegments);
    assert.equal(fromBytes.buildId(), fromFile.buildId());
    assert.deepEqual(fromBytes.readSection(".dynstr"), fromFile.readSection(".dynstr"));
  },
}));

Deno.test(requiring([tools], {
  name: "fileOffsetToVaddr() maps through the PT_LOAD that holds the offset",
  fn() {
    for (const path of [fixture(), libcPath()]) {
      using elf = ElfFile.open(path);
      const loads = readelfSegments(path).filter((s) => s.type === "LOAD" && s.filesz > 0);
      for (const seg of loads) {
        for (const delta of [0, 1, seg.filesz >> 1, seg.filesz - 1]) {
          assert.equal(elf.fileOffsetToVaddr((seg.offset + delta) as FileOffset), seg.vaddr + delta);
          assert.equal(elf.vaddrToFileOffset((seg.vaddr + delta) as Address), seg.offset + delta);
        }
      }
      const end = Math.max(...loads.map((s) => s.offset + s.filesz));
      assert.equal(elf.fileOffsetToVaddr(end as FileOffset), null);
    }
  },
}));

Deno.test(requiring([tools], {
  name: "readSection() inflates compressed sections",
  fn() {
    const plain = `${temp()}/hello.plain`;
    run("objcopy", "--decompress-debug-sections", fixture(), plain);
    using compressed = ElfFile.open(fixture());
    using decompressed = ElfFile.open(plain);
    const names = compressed.sections.filter((s) => (s.flags & SHF_COMPRESSED) !== 0).map((s) => s.name);
    assert.ok(names.includes(".debug_info"), "gcc -gz=zlib compressed no .debug_info");
    for (const name of names) {
      assert.deepEqual(compressed.readSection(name), decompressed.readSection(name), name);
    }
  },
}));

Deno.test(requiring([tools], {
  name: "debugLink() reads the name and CRC objcopy wrote",
  fn() {
    const debug = `${temp()}/hello.debug`;
    const linked = `${temp()}/hello.linked`;
    run("objcopy", "--only-keep-debug", fixture(), debug);
    run("strip", "--strip-all", "-o", `${temp()}/hello.stripped`, fixture());
    run("objcopy", `--add-gnu-debuglink=${debug}`, `${temp()}/hello.stripped`, linked);
    using elf = ElfFile.open(linked);
    assert.deepEqual(elf.debugLink(), {
      fileName: "hello.debug",
      crc32: crc32(Deno.readFileSync(debug)) >>> 0,
    });
    assert.equal(elf.hasSymtab, false);
    using original = ElfFile.open(fixture());
    assert.equal(original.debugLink(), null);
    assert.equal(original.hasSymtab, true);
    using debugElf = ElfFile.open(debug);
    assert.equal(debugElf.section(".text")?.type, SHT_NOBITS);
    assert.deepEqual(debugElf.readSection(".text"), new Uint8Array(0));
  },
}));

Deno.test(requiring([tools], {
  name: "open() reads relocatable objects",
  fn() {
    const object = `${temp()}/hello.o`;
    run("gcc", "-c", "-O1", "-o", object, new URL("./testdata/hello.c", import.meta.url).pathname);
    using elf = ElfFile.open(object);
    assert.equal(elf.type, ET_REL);
    assert.equal(elf.loadSegments.length, 0);
    assert.ok(elf.section(".text") !== undefined);
    // Relocatable symbols are section offsets, so functions of different sections share address 0.
    const functions = run("readelf", "-sW", object).split("\n").filter((l) => / FUNC /.test(l));
    const atZero = functions.filter((l) => /:\s+0+\s/.test(l)).map((l) => l.trim().split(/\s+/).at(-1));
    assert.ok(atZero.length > 0);
    assert.ok(atZero.includes(elf.symbols().lookup(0)?.name), `lookup(0) is none of ${atZero.join(", ")}`);
  },
}));

Deno.test(requiring([tools], {
  name: "open() refuses files that are not regular, without blocking",
  fn() {
    const notRegular = { name: "FileRefusedError", reason: "not-regular" };
    assert.throws(() => ElfFile.open("/dev/zero"), notRegular);
    const fifo = `${temp()}/fifo`;
    run("mkfifo", fifo);
    assert.throws(() => ElfFile.open(fifo), notRegular);
    assert.throws(() => ElfFile.open(temp()), notRegular);
  },
}));

Deno.test(requiring([tools], {
  name: "close() is idempotent and later reads throw",
  fn() {
    const elf = ElfFile.open(fixture());
    elf.close();
    elf.close();
    assert.throws(() => elf.readSection(".text"), /closed/);
  },
}));

/** Patches the size field of the section header `name` in `bytes`. */
function patchSectionSize(bytes: Uint8Array, elf: ElfFile, name: string, size: number): void {
  const view = new DataView(bytes.buffer);
  const shoff = Number(view.getBigUint64(40, true));
  const index = elf.section(name)?.index;
  assert.ok(index !== undefined);
  view.setBigUint64(shoff + index * 64 + 32, BigInt(size), true);
}

Deno.test(requiring([tools], {
  name: "a sparse multi-GiB file cannot make readSection() allocate past the budget",
  fn() {
    const bytes = Deno.readFileSync(fixture());
    const sparse = `${temp()}/sparse`;
    {
      using elf = ElfFile.fromBytes(bytes, "fixture");
      const text = elf.section(".comment");
      assert.ok(text !== undefined);
      // A 3 GiB section inside a 5 GiB sparse file: within the file, over the budget.
      patchSectionSize(bytes, elf, ".comment", 3 * 2 ** 30);
      patchSectionSize(bytes, elf, ".symtab", 3 * 2 ** 30);
    }
    Deno.writeFileSync(sparse, bytes);
    Deno.truncateSync(sparse, 5 * 2 ** 30);
    const rssBefore = Deno.memoryUsage().rss;
    using elf = ElfFile.open(sparse);
    assert.throws(
      () => elf.readSection(".comment"),
      (e) => e instanceof RangeError && /budget/.test(e.message),
    );
    assert.throws(() => elf.symbols(), RangeError);
    assert.ok(Deno.memoryUsage().rss - rssBefore < 512 * 2 ** 20, "reading the sparse file grew the RSS");
  },
}));

Deno.test(requiring([tools], {
  name: "readSection() refuses sections over maxSectionBytes",
  fn() {
    const budget = 64 * 1024;
    using elf = ElfFile.open(libcPath(), { maxSectionBytes: budget });
    const sections = elf.sections.filter((s) => s.type !== SHT_NOBITS && (s.flags & SHF_COMPRESSED) === 0);
    assert.ok(sections.some((s) => s.size > budget) && sections.some((s) => s.size > 0 && s.size <= budget));
    for (const section of sections) {
      if (section.size > budget) assert.throws(() => elf.readSection(section), RangeError, section.name);
      else assert.equal(elf.readSection(section).length, section.size);
    }
  },
}));

/** mulberry32: a small seeded PRNG so failures reproduce. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Uses every reading API of a (possibly broken) ELF; only RangeError may escape. */
function exercise(elf: ElfFile, random: () => number): void {
  for (const s of elf.sections) {
    try {
      elf.readSection(s);
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
    }
  }
  elf.buildId();
  elf.debugLink();
  const symbols = elf.symbols();
  for (let i = 0; i < 20; i++) symbols.lookup(Math.floor(random() * 0x10000));
  for (let i = 0; i < 5; i++) elf.fileOffsetToVaddr(Math.floor(random() * elf.size) as FileOffset);
}

Deno.test(requiring([tools], {
  name: "truncated and bit-flipped ELF files parse or throw RangeError, quickly",
  fn() {
    const original = Deno.readFileSync(fixture());
    using reference = ElfFile.fromBytes(original, "fixture");
    const shoff = Number(new DataView(original.buffer).getBigUint64(40, true));
    const symtab = reference.section(".symtab");
    assert.ok(symtab !== undefined);
    const random = prng(0x5eed);
    const cases = 4000;
    const maxMs = 250;
    let parsed = 0;
    let rejected = 0;
    let slowest = 0;
    const started = performance.now();
    for (let c = 0; c < cases; c++) {
      let bytes: Uint8Array;
      if (c % 4 === 0) {
        // Truncation, biased toward the headers at both ends of the file.
        const cut = random() < 0.5 ? Math.floor(random() * 1024) : Math.floor(random() * original.length);
        bytes = original.slice(0, cut);
      } else {
        bytes = original.slice();
        const flips = 1 + Math.floor(random() * 8);
        for (let f = 0; f < flips; f++) {
          // Flip bits where parsing decisions are made: ELF header and program headers, section headers,
          // the symbol table, or anywhere.
          const region = random();
          const at = region < 0.3
            ? Math.floor(random() * 64 + (random() < 0.5 ? 0 : 64 + random() * 13 * 56))
            : region < 0.6
            ? shoff + Math.floor(random() * (original.length - shoff))
            : region < 0.8
            ? symtab.offset + Math.floor(random() * symtab.size)
            : Math.floor(random() * original.length);
          if (at < bytes.length) bytes[at] = (bytes[at] ?? 0) ^ (1 << Math.floor(random() * 8));
        }
      }
      const t0 = performance.now();
      try {
        using elf = ElfFile.fromBytes(bytes, `case ${c}`);
        exercise(elf, random);
        parsed++;
      } catch (error) {
        if (!(error instanceof RangeError)) throw new Error(`case ${c}: ${error}`, { cause: error });
        assert.match(error.message, /^Cannot /);
        rejected++;
      }
      const ms = performance.now() - t0;
      slowest = Math.max(slowest, ms);
      assert.ok(ms < maxMs, `case ${c} took ${ms.toFixed(1)} ms`);
    }
    console.log(
      `hostile ELF: ${cases} cases, ${parsed} parsed, ${rejected} rejected, ` +
        `${(performance.now() - started).toFixed(0)} ms total, slowest ${slowest.toFixed(1)} ms`,
    );
    assert.ok(rejected > 0 && parsed > 0);
  },
}));

Deno.test(requiring([tools], {
  name: "bit-flipped ELF files read through open() parse or throw RangeError",
  fn() {
    const original = Deno.readFileSync(fixture());
    const random = prng(0xf11e);
    const path = `${temp()}/flipped`;
    for (let c = 0; c < 200; c++) {
      const bytes = original.slice(0, c % 2 === 0 ? original.length : Math.floor(random() * original.length));
      for (let f = 0; f < 4; f++) {
        const at = random() < 0.5 ? Math.floor(random() * 128) : Math.floor(random() * bytes.length);
        if (at < bytes.length) bytes[at] = (bytes[at] ?? 0) ^ (1 << Math.floor(random() * 8));
      }
      Deno.writeFileSync(path, bytes);
      try {
        using elf = ElfFile.open(path);
        exercise(elf, random);
      } catch (error) {
        if (!(error instanceof RangeError)) throw new Error(`case ${c}: ${error}`, { cause: error });
      }
    }
  },
}));

Deno.test(requiring([tools], {
  name: "open() and symbols() handle the largest ELF files at hand",
  fn() {
    const candidates = [Deno.execPath(), ...jvmLibraries()];
    for (const path of candidates) {
      const t0 = performance.now();
      using elf = ElfFile.open(path);
      const opened = performance.now() - t0;
      const t1 = performance.now();
      const symbols = elf.symbols();
      const loaded = performance.now() - t1;
      console.log(
        `${path}: ${(elf.size / 2 ** 20).toFixed(0)} MiB, open ${opened.toFixed(1)} ms, ` +
          `${symbols.size} function symbols in ${loaded.toFixed(1)} ms (${
            (symbols.byteSize / 2 ** 20).toFixed(1)
          } MiB retained)`,
      );
      assert.ok(elf.loadSegments.some((s) => s.flags & 1));
      assert.ok(elf.programHeaders.some((p) => p.type === PT_LOAD));
    }
  },
}));

function jvmLibraries(): string[] {
  const out: string[] = [];
  try {
    for (const jdk of Deno.readDirSync("/usr/lib/jvm")) {
      const path = `/usr/lib/jvm/${jdk.name}/lib/server/libjvm.so`;
      try {
        if (Deno.statSync(path).isFile) out.push(path);
      } catch {
        // Not every JDK directory has a server VM.
      }
    }
  } catch {
    // No JDK installed.
  }
  return out;
}

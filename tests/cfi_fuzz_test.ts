/**
 * Fuzzes the CFI reader: at least 100,000 in-memory ELF files built around real `.eh_frame` bytes (libc's
 * and /bin/true's) and crafted entries, truncated, bit-flipped and hand-broken (CIE loops, huge lengths
 * and counts, 64-bit lengths, overlapping FDEs, zero-length entries, unterminated LEB128s, deep
 * remember_state nesting, lying section and segment headers), each through `extractUnwindTable`. Every
 * case must either succeed with a well-formed table or throw `RangeError`; any other error, a case over
 * the time bound, or a worker that stops reporting (a hang) fails the test (lib/testing/fuzz.ts runs
 * them, split over two workers, each case reproducible from its seed).
 *
 * @module
 */
import assert from "node:assert/strict";
import { ElfFile, PF_X } from "../lib/elf/elf_file.ts";
import { CfaRule, extractUnwindTable, FpRule } from "../lib/unwind/unwind_table.ts";
import { buildElf, CfiWriter, type SectionSpec, sleb, uleb } from "../lib/unwind/testdata/cfi_builder.ts";
import { registerFuzzTest } from "../lib/testing/fuzz.ts";

const TOTAL_CASES = 120_000;
const MAX_ROWS = 1 << 16;

/** Real `.eh_frame` bytes to mutate, and where they are loaded. */
interface Base {
  name: string;
  bytes: Uint8Array;
  vaddr: number;
}

/** The prefix of a real `.eh_frame` up to the first entry boundary past `limit` bytes. */
function entryPrefix(bytes: Uint8Array, limit: number): Uint8Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let pos = 0;
  while (pos + 4 <= bytes.length && pos < limit) {
    const length = view.getUint32(pos, true);
    if (length === 0 || length >= 0xfffffff0) break;
    pos += 4 + length;
  }
  return bytes.slice(0, Math.min(pos, bytes.length));
}

/** Reads the `.eh_frame` of `path` as a fuzzing base, or null when the file is not there. */
function loadBase(path: string, name: string, limit: number): Base | null {
  try {
    using elf = ElfFile.open(path);
    const section = elf.section(".eh_frame");
    if (section === undefined) return null;
    return { name, bytes: entryPrefix(elf.readSection(section), limit), vaddr: section.addr };
  } catch (error) {
    console.log(`${path}: not usable as a fuzzing base (${(error as Error).message})`);
    return null;
  }
}

/** The libc this process runs on, from its own memory map. */
function libcPath(): string | null {
  const maps = Deno.readTextFileSync("/proc/self/maps");
  return maps.match(/\s(\/\S*\/libc\.so\.6)$/m)?.[1] ?? null;
}

// ---------------------------------------------------------------------------------------------------
// Case generation

const INTERESTING_U32 = [0, 1, 0x7f, 0x80, 0xff, 0xffff, 0x7fffffff, 0x80000000, 0xfffffff0, 0xffffffff];

function u32(value: number): number[] {
  return [value & 0xff, (value >>> 8) & 0xff, (value >>> 16) & 0xff, value >>> 24];
}

/** A random CFA program: valid opcodes with random operands, and the odd random byte. */
function randomProgram(random: () => number, length: number): number[] {
  const out: number[] = [];
  const reg = () => [0, 3, 6, 7, 12, 16, 17, 200][Math.floor(random() * 8)]!;
  const small = () => Math.floor(random() * 64);
  while (out.length < length) {
    const pick = Math.floor(random() * 24);
    switch (pick) {
      case 0:
        out.push(0x40 | Math.floor(random() * 64));
        break;
      case 1:
        out.push(0x80 | reg() % 64, ...uleb(small()));
        break;
      case 2:
        out.push(0xc0 | reg() % 64);
        break;
      case 3:
        out.push(0x02, Math.floor(random() * 256));
        break;
      case 4:
        out.push(0x03, Math.floor(random() * 256), Math.floor(random() * 256));
        break;
      case 5:
        out.push(0x04, ...u32(Math.floor(random() * 2 ** 32)));
        break;
      case 6:
        out.push(0x0c, ...uleb(reg()), ...uleb(small() * 8));
        break;
      case 7:
        out.push(0x0d, ...uleb(reg()));
        break;
      case 8:
        out.push(0x0e, ...uleb(small() * 8));
        break;
      case 9:
        out.push(0x0a);
        break;
      case 10:
        out.push(0x0b);
        break;
      case 11:
        out.push(0x07, ...uleb(reg()));
        break;
      case 12:
        out.push(0x08, ...uleb(reg()));
        break;
      case 13:
        out.push(0x09, ...uleb(reg()), ...uleb(reg()));
        break;
      case 14:
        out.push(0x0f, 0x0b, 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22);
        break;
      case 15:
        out.push(0x0f, 2, 0x77, small());
        break;
      case 16:
        out.push(0x10, ...uleb(reg()), 2, 0x77, 8);
        break;
      case 17:
        out.push(0x16, ...uleb(reg()), 2, 0x77, 8);
        break;
      case 18:
        out.push(0x12, ...uleb(reg()), ...sleb(small() - 32));
        break;
      case 19:
        out.push(0x13, ...sleb(small() - 32));
        break;
      case 20:
        out.push(0x2e, ...uleb(small()));
        break;
      case 21:
        out.push(0x01, ...u32(Math.floor(random() * 2 ** 32)));
        break;
      case 22:
        out.push(0x00);
        break;
      default:
        out.push(Math.floor(random() * 256));
    }
  }
  return out;
}

/** Crafted `.eh_frame` content of one hostile kind, loaded at `vaddr`. */
function crafted(random: () => number, vaddr: number, kind: number): Uint8Array {
  const w = new CfiWriter(vaddr);
  const text = 0x10000;
  const range = () => 1 + Math.floor(random() * 0x400);
  const start = () => text + Math.floor(random() * 0x8000);
  switch (kind) {
    case 0: { // CIE loops: pointers at FDEs, at themselves, into the middle of entries, before the start
      const cie = w.cie();
      const fdes = [cie];
      for (let i = 0; i < 8; i++) {
        const target = random() < 0.5
          ? fdes[Math.floor(random() * fdes.length)]!
          : Math.floor(random() * (w.offset + 8));
        const at = w.offset;
        const pointer = random() < 0.2 ? Math.floor(random() * 2 ** 32) : at + 4 - target;
        w.raw([...u32(16), ...u32(pointer >>> 0), ...u32(0), ...u32(range()), 0, 0, 0, 0]);
        fdes.push(at);
      }
      break;
    }
    case 1: { // huge lengths: 64-bit, reserved, past the end
      const cie = w.cie();
      w.fde(cie, start(), range(), randomProgram(random, 8));
      const choice = Math.floor(random() * 4);
      if (choice === 0) {
        w.raw([
          ...u32(0xffffffff),
          ...u32(Math.floor(random() * 2 ** 32)),
          ...u32(Math.floor(random() * 2 ** 32)),
        ]);
      } else if (choice === 1) w.raw([...u32(0xfffffff0 + Math.floor(random() * 15)), 0, 0, 0, 0]);
      else if (choice === 2) w.raw([...u32(1000 + Math.floor(random() * 2 ** 31)), 0, 0, 0, 0]);
      else w.raw([...u32(0xffffffff), ...u32(12), 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x7a, 0x52, 0]);
      w.fde(cie, start(), range());
      break;
    }
    case 2: { // huge counts: LEB128 fields that claim far more than there is
      const hugeLeb = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
      const field = Math.floor(random() * 5);
      const cie = w.cie({
        augmentationLength: field === 0 ? hugeLeb : undefined,
        codeAlignment: field === 1 ? 2 ** 40 : 1,
        dataAlignment: field === 2 ? -(2 ** 40) : -8,
      });
      const program = field === 3
        ? [0x0f, ...hugeLeb, 0x77]
        : [0x04, 0xff, 0xff, 0xff, 0xff, 0x0e, ...hugeLeb];
      w.fde(cie, start(), range(), program);
      if (field === 4) {
        w.raw([...u32(20), ...u32(w.offset + 4 - cie), ...u32(0), ...u32(range()), ...hugeLeb.slice(0, 8)]);
      }
      break;
    }
    case 3: { // overlapping FDEs
      const cie = w.cie();
      const base = start();
      for (let i = 0; i < 16; i++) {
        w.fde(
          cie,
          base + Math.floor(random() * 0x100),
          range(),
          randomProgram(random, Math.floor(random() * 24)),
        );
      }
      break;
    }
    case 4: { // zero-length and tiny entries between real ones
      const cie = w.cie();
      for (let i = 0; i < 12; i++) {
        const r = random();
        if (r < 0.4) w.raw([0, 0, 0, 0]);
        else if (r < 0.7) {
          w.raw([...u32(Math.floor(random() * 8)), ...new Array(Math.floor(random() * 8)).fill(0)]);
        } else w.fde(cie, start(), range());
      }
      break;
    }
    case 5: { // unterminated LEB128 and truncated operands at the very end
      const cie = w.cie();
      w.fde(cie, start(), range(), [0x41, 0x0e, 16]);
      const at = w.offset;
      const tail = [0x0e, 0x80, 0x80, 0x80][Math.floor(random() * 4)]!;
      w.raw([...u32(17), ...u32(at + 4 - cie), ...u32(0), ...u32(range()), 0, 0x41, 0x0c, tail, 0x80, 0x80]);
      return w.finish(false);
    }
    case 6: { // deep remember_state nesting and long advance sequences
      const cie = w.cie();
      const depth = Math.floor(random() * 2000);
      w.fde(cie, start(), range(), [...new Array(depth).fill(0x0a), ...new Array(depth).fill(0x0b)]);
      const rows: number[] = [];
      for (let i = 0; i < Math.floor(random() * 3000); i++) rows.push(0x41, 0x0e, 16 + 8 * (i % 2));
      w.fde(cie, start() + 0x10000, 0x100000, rows);
      break;
    }
    case 7: { // random CIEs (versions, augmentations, alignments) with random programs
      const augmentations = ["zR", "zPLR", "zRS", "", "S", "zRB", "eh", "zQ", "z"];
      for (let i = 0; i < 4; i++) {
        const cie = w.cie({
          version: [1, 3, 4, 0, 2][Math.floor(random() * 5)],
          augmentation: augmentations[Math.floor(random() * augmentations.length)],
          codeAlignment: 1 + Math.floor(random() * 4),
          dataAlignment: -8 + Math.floor(random() * 16),
          returnAddressRegister: random() < 0.9 ? 16 : Math.floor(random() * 40),
          augmentationData: random() < 0.8 ? [0x1b] : [Math.floor(random() * 256), 0x1b, 0x1b],
          instructions: random() < 0.7 ? undefined : randomProgram(random, 6),
        });
        for (let j = 0; j < 4; j++) {
          w.fde(cie, start(), range(), randomProgram(random, Math.floor(random() * 40)));
        }
      }
      break;
    }
  }
  return w.finish(random() < 0.8);
}

/** Crafted `.debug_frame` content: absolute addresses, forward and backward CIE pointers. */
function craftedDebugFrame(random: () => number): Uint8Array {
  const w = new CfiWriter(0, "debug_frame");
  const cie = w.cie({ version: [1, 3, 4][Math.floor(random() * 3)] === 1 ? 1 : 3 });
  for (let i = 0; i < 6; i++) {
    const pointer = random() < 0.8 ? cie : Math.floor(random() * 256);
    w.fde(
      pointer,
      0x10000 + Math.floor(random() * 0x8000),
      1 + Math.floor(random() * 0x200),
      randomProgram(random, 10),
    );
  }
  return w.finish(false);
}

/** Flips `count` random bits of `bytes` in place. */
function flipBits(random: () => number, bytes: Uint8Array, count: number): void {
  if (bytes.length === 0) return;
  for (let i = 0; i < count; i++) {
    bytes[Math.floor(random() * bytes.length)]! ^= 1 << Math.floor(random() * 8);
  }
}

/** Overwrites random aligned words of `bytes` with interesting values. */
function smashWords(random: () => number, bytes: Uint8Array, count: number): void {
  if (bytes.length < 4) return;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < count; i++) {
    const at = Math.floor(random() * (bytes.length - 3));
    view.setUint32(at, INTERESTING_U32[Math.floor(random() * INTERESTING_U32.length)]!, true);
  }
}

/** Builds a case from `random`: returns its kind and ELF bytes. */
function makeCase(random: () => number, bases: Base[]): { kind: string; bytes: Uint8Array } {
  const base = bases[Math.floor(random() * bases.length)]!;
  // Text covers the real FDEs of the bases and the crafted ones.
  const segments = [{ flags: PF_X | 4, vaddr: 0, memsz: 2 ** 32 }];
  let eh: Uint8Array = base.bytes.slice();
  let kind: string;
  let debug: Uint8Array | undefined;
  let claimedSize: number | undefined;
  let claimedOffset: number | undefined;
  const pick = random();
  if (pick < 0.15) {
    kind = "truncated";
    eh = eh.slice(0, Math.floor(random() * eh.length));
    if (random() < 0.3) claimedSize = base.bytes.length;
  } else if (pick < 0.35) {
    kind = "bit-flipped";
    flipBits(random, eh, 1 + Math.floor(random() * 16));
  } else if (pick < 0.45) {
    kind = "word-smashed";
    smashWords(random, eh, 1 + Math.floor(random() * 6));
  } else if (pick < 0.75) {
    const craftKind = Math.floor(random() * 8);
    kind = `crafted-${
      [
        "cie-loop",
        "huge-length",
        "huge-count",
        "overlap",
        "zero-length",
        "unterminated",
        "deep",
        "random-cie",
      ][craftKind]
    }`;
    eh = crafted(random, base.vaddr, craftKind);
    if (random() < 0.2) flipBits(random, eh, 1 + Math.floor(random() * 4));
  } else if (pick < 0.85) {
    kind = "debug-frame";
    debug = craftedDebugFrame(random);
    if (random() < 0.5) flipBits(random, debug, 1 + Math.floor(random() * 8));
    if (random() < 0.5) eh = eh.slice(0, Math.floor(random() * eh.length));
  } else if (pick < 0.9) {
    kind = "spliced";
    const piece = crafted(random, base.vaddr, Math.floor(random() * 8));
    const at = Math.floor(random() * eh.length);
    const joined = new Uint8Array(eh.length + piece.length);
    joined.set(eh.subarray(0, at));
    joined.set(piece, at);
    joined.set(eh.subarray(at), at + piece.length);
    eh = joined;
  } else {
    kind = "elf-headers";
    if (random() < 0.5) claimedSize = [2 ** 32, 2 ** 40, eh.length + 1, 0][Math.floor(random() * 4)];
    else claimedOffset = [2 ** 33, 1, 0xffffffff][Math.floor(random() * 3)];
  }
  const sections: SectionSpec[] = [{
    name: ".eh_frame",
    addr: base.vaddr,
    bytes: eh,
    claimedSize,
    claimedOffset,
  }];
  if (debug) sections.push({ name: ".debug_frame", addr: 0, bytes: debug });
  const bytes = buildElf(sections, segments);
  if (kind === "elf-headers" && random() < 0.5) {
    // Lie in the section header table or the program header itself.
    const shoff = Number(new DataView(bytes.buffer).getBigUint64(40, true));
    flipBits(
      random,
      bytes.subarray(random() < 0.5 ? shoff : 64, random() < 0.5 ? bytes.length : 64 + 56),
      1 + Math.floor(random() * 6),
    );
  }
  return { kind, bytes };
}

/** Checks a table's shape: sorted addresses, known rules, length within the cap. */
function checkTable(table: ReturnType<typeof extractUnwindTable>): string | null {
  if (table.length > MAX_ROWS) return `length ${table.length} over the cap`;
  for (let i = 0; i < table.length; i++) {
    if (i > 0 && !(table.addresses[i]! > table.addresses[i - 1]!)) return `addresses not increasing at ${i}`;
    if (table.cfaRules[i]! > CfaRule.Stop) return `CFA rule ${table.cfaRules[i]} at ${i}`;
    if (table.fpRules[i]! > FpRule.CfaOffset) return `FP rule ${table.fpRules[i]} at ${i}`;
  }
  return null;
}

let bases: Base[] | null = null;

/**
 * The fuzzing bases, read once per worker: real entries are what the fuzzing starts from, and Debian's
 * libc and programs all have .eh_frame.
 */
function fuzzingBases(): Base[] {
  if (bases !== null) return bases;
  const libc = libcPath();
  // libc's first 12 KiB of entries hold its CIEs, the .plt FDE and the signal trampoline's "S" CIE.
  const libcBase = libc === null ? null : loadBase(libc, "libc", 12 * 1024);
  const trueBase = loadBase("/bin/true", "true", 64 * 1024);
  assert.ok(libcBase !== null && trueBase !== null, "libc or /bin/true has no usable .eh_frame");
  bases = [libcBase, trueBase];
  return bases;
}

registerFuzzTest(import.meta.url, {
  name:
    "extractUnwindTable() survives 120,000 truncated, bit-flipped and crafted files: RangeError or a table",
  cases: TOTAL_CASES,
  seed: 0x5eed,
  workers: 2,
  // Most damaged files still hold entries to read: a generator that broke them all would test little.
  minAcceptedShare: 0.25,
  makeCase(random) {
    const { kind, bytes } = makeCase(random, fuzzingBases());
    return {
      kind,
      run() {
        using elf = ElfFile.fromBytes(bytes, kind);
        const problem = checkTable(extractUnwindTable(elf, { maxRows: MAX_ROWS }));
        if (problem !== null) throw new Error(`bad table: ${problem}`);
      },
    };
  },
  isOwnError: (error) => error instanceof RangeError,
});

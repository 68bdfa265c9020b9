/**
 * Fuzzes the Go symbol reader with a real stripped Go binary whose `.gopclntab`, module data or read-only
 * data (inline trees) are damaged: truncated, bit-flipped, overwritten, cut, repeated, spliced with garbage
 * (kept at the section's length, so the rest of the file stays in place), and with hand-made lies in the
 * header's counts and offsets. Every case must either be refused by `GoSymbols.read()` with its own
 * `RangeError`, or read; then looking up addresses all over the code must never throw and must give
 * well-formed frames.
 *
 * @module
 */
import { ElfFile } from "../../elf/elf_file.ts";
import { below, garbage, mutate, pick, registerFuzzTest } from "../../testing/fuzz.ts";
import { programs, requiring } from "../../testing/requirements.ts";
import { buildGoWorkload } from "../../../tests/helpers.ts";
import { GoSymbols } from "./go_symbols.ts";

const NAME = "GoSymbols on damaged Go binaries";
const missing = programs("go");

interface Base {
  bytes: Uint8Array;
  /** File ranges to damage, by what they hold. */
  areas: { kind: string; offset: number; size: number }[];
  text: { start: number; end: number };
}

async function loadBase(): Promise<Base> {
  const path = await buildGoWorkload("chain", { ldflags: "-s -w" }, "-go-stripped");
  const bytes = Deno.readFileSync(path);
  using elf = ElfFile.fromBytes(bytes, path);
  const area = (kind: string, name: string) => {
    const s = elf.section(name);
    if (s === undefined) throw new Error(`${path} has no ${name}`);
    return { kind, offset: s.offset, size: s.size };
  };
  const text = elf.section(".text")!;
  return {
    bytes,
    areas: [area("pclntab", ".gopclntab"), area("module data", ".noptrdata"), area("rodata", ".rodata")],
    text: { start: text.addr, end: text.addr + text.size },
  };
}

function damaged(random: () => number, base: Base): { kind: string; bytes: Uint8Array } {
  const bytes = base.bytes.slice();
  const area = pick(random, base.areas);
  const view = new DataView(bytes.buffer);
  if (area.kind === "pclntab" && random() < 0.3) {
    // A lie in the header: a count or table offset (words 0-7), as a small, huge or edge value.
    const word = below(random, 8);
    const value = pick(random, [0, 1, 7, 0xffffffff, area.size, area.size - 1, below(random, 1 << 20)]);
    view.setUint32(area.offset + 8 + 8 * word, value, true);
    view.setUint32(area.offset + 12 + 8 * word, random() < 0.1 ? below(random, 4) : 0, true);
    return { kind: "pclntab header lie", bytes };
  }
  // Damage a window of the area, at most 64 KiB, written back at its own length.
  const size = Math.min(area.size, 1 + below(random, 65536));
  const start = area.offset + below(random, area.size - size + 1);
  const { bytes: out, how } = random() < 0.1
    ? { bytes: garbage(random, size), how: "garbage" }
    : mutate(random, bytes.subarray(start, start + size));
  const window = new Uint8Array(size);
  window.set(out.subarray(0, size));
  bytes.set(window, start);
  return { kind: `${area.kind} ${how}`, bytes };
}

if (missing.missing !== null) {
  Deno.test(requiring([missing], { name: NAME, fn() {} }));
} else {
  const base = await loadBase();
  registerFuzzTest(import.meta.url, {
    name: NAME,
    cases: 2000,
    seed: 0x60f0,
    caseTimeBoundMs: 3000,
    makeCase(random) {
      const { kind, bytes } = damaged(random, base);
      return {
        kind,
        run() {
          using elf = ElfFile.fromBytes(bytes, "damaged");
          const symbols = GoSymbols.read(elf);
          if (symbols === null) return;
          for (let i = 0; i < 300; i++) {
            const pc = base.text.start + below(random, base.text.end - base.text.start);
            const frames = symbols.frames(pc);
            if (frames === null) continue;
            if (frames.length === 0) throw new TypeError(`no frames at ${pc}`);
            for (const frame of frames) {
              if (typeof frame.functionName !== "string" || typeof frame.sourceFile !== "string") {
                throw new TypeError(`malformed frame at ${pc}`);
              }
              if (!Number.isInteger(frame.line) || frame.line < 0) throw new TypeError(`line ${frame.line}`);
            }
          }
        },
      };
    },
    isOwnError: (error) =>
      error instanceof RangeError && /^Cannot parse (\.gopclntab|ELF)/.test(error.message),
  });
}

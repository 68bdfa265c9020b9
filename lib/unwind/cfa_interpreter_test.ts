import assert from "node:assert/strict";
import { ElfFile } from "../elf/elf_file.ts";
import { CfaInterpreter, CfaKind, type CfaRowSink, type CfaState, RegisterRule } from "./cfa_interpreter.ts";
import { type Cie, indexCfi, SkipCounter } from "./cfi.ts";
import { parseReadelfFrames, runReadelf } from "./testdata/readelf_frames.ts";
import { sleb, uleb } from "./testdata/cfi_builder.ts";
import { programs, requiring } from "../testing/requirements.ts";

const decoder = new TextDecoder();

const tools = programs("gcc", "readelf", "ldd");

/** readelf's names of the x86-64 DWARF registers 0..16. */
const REGISTER_NAMES = [
  "rax",
  "rdx",
  "rcx",
  "rbx",
  "rsi",
  "rdi",
  "rbp",
  "rsp",
  "r8",
  "r9",
  "r10",
  "r11",
  "r12",
  "r13",
  "r14",
  "r15",
  "rip",
];

/** A register rule written the way `readelf -wF` prints a cell. */
function ruleCell(rule: number, offset: number): string {
  switch (rule) {
    case RegisterRule.Unreferenced:
    case RegisterRule.Undefined:
      return "u";
    case RegisterRule.SameValue:
      return "s";
    case RegisterRule.Offset:
      return `c${offset >= 0 ? "+" : ""}${offset}`;
    case RegisterRule.ValOffset:
      return `v${offset >= 0 ? "+" : ""}${offset}`;
    case RegisterRule.Register:
      return `r${offset} (${REGISTER_NAMES[offset] ?? "?"})`;
    case RegisterRule.Expression:
      return "exp";
    default:
      return "vexp";
  }
}

/** The CFA, rbp and return address cells for a state, in readelf's notation. */
function cells(state: CfaState): string[] {
  const cfa = state.cfaKind === CfaKind.Expression
    ? "exp"
    : `${REGISTER_NAMES[state.cfaRegister] ?? `r${state.cfaRegister}`}${
      state.cfaOffset >= 0 ? "+" : ""
    }${state.cfaOffset}`;
  return [cfa, ruleCell(state.rbpRule, state.rbpOffset), ruleCell(state.raRule, state.raOffset)];
}

/** Collects rows as text, the last at an address replacing earlier ones. */
class TextSink implements CfaRowSink {
  rows: { address: number; cells: string[] }[] = [];
  row(address: number, state: CfaState): void {
    if (this.rows.at(-1)?.address === address) this.rows.pop();
    this.rows.push({ address, cells: cells(state) });
  }
}

/**
 * Runs every FDE of `path`'s CFI sections through the interpreter and compares each row (location, CFA,
 * rbp, return address) with readelf's; returns the number of rows compared.
 */
function compareFile(path: string): number {
  using elf = ElfFile.open(path);
  const readelf = parseReadelfFrames(runReadelf(path, "--debug-dump=frames-interp"), path);
  const interpreter = new CfaInterpreter();
  let compared = 0;
  for (const name of [".eh_frame", ".debug_frame"]) {
    const header = elf.section(name);
    const reference = readelf.find((s) => s.name === name);
    if (header === undefined || reference === undefined) continue;
    const section = {
      kind: name === ".eh_frame" ? "eh_frame" as const : "debug_frame" as const,
      bytes: elf.readSection(header),
      vaddr: name === ".eh_frame" ? header.addr : 0,
    };
    const skips = new SkipCounter();
    const index = indexCfi(section, skips);
    assert.deepEqual(skips.list(), [], `${path} ${name}: nothing skipped`);
    const entries = new Map(reference.entries.map((e) => [e.offset, e]));
    const initial = new Map<Cie, Float64Array>();
    for (let i = 0; i < index.fdes.length; i++) {
      const cie = index.cies[index.fdes.cieIndex[i]!]!;
      const start = index.fdes.starts[i]!;
      const end = index.fdes.ends[i]!;
      let state = initial.get(cie);
      if (state === undefined) {
        state = interpreter.runCie(section.bytes, cie, cie.instructionsStart, cie.instructionsEnd);
        initial.set(cie, state);
      }
      const sink = new TextSink();
      interpreter.runFde(
        section.bytes,
        cie,
        state,
        index.fdes.instructionsStart[i]!,
        index.fdes.instructionsEnd[i]!,
        start,
        end,
        section.vaddr,
        sink,
      );
      const fde = entries.get(index.fdes.entryOffsets[i]!)!;
      const cieEntry = entries.get(cie.offset)!;
      const raColumn = cie.returnAddressRegister === 16 ? "ra" : "rip";
      // readelf prints no table for a program of only nops: the CIE's rule holds.
      const rows = fde.rows.length > 0
        ? fde.rows
        : cieEntry.rows.slice(-1).map((r) => ({ ...r, loc: start }));
      const expected = rows.filter((r, k) => r.loc < end && rows[k + 1]?.loc !== r.loc).map((r) => ({
        address: r.loc,
        cells: [r.cells.get("CFA"), r.cells.get("rbp") ?? "u", r.cells.get(raColumn) ?? "u"],
      }));
      assert.deepEqual(sink.rows, expected, `${path} ${name} FDE at 0x${fde.offset.toString(16)}`);
      compared += expected.length;
    }
  }
  console.log(`${path}: ${compared} rows identical to readelf's`);
  return compared;
}

let tempDir: string | undefined;
function temp(): string {
  if (tempDir === undefined) {
    tempDir = Deno.makeTempDirSync({ prefix: "omniprof_cfa_test_" });
    globalThis.addEventListener("unload", () => Deno.removeSync(tempDir!, { recursive: true }));
  }
  return tempDir;
}

Deno.test(requiring([tools], {
  name: "CfaInterpreter gives readelf's rows for every FDE of libc, python3 and the CFI fixture",
  fn() {
    const ldd = decoder.decode(
      new Deno.Command("ldd", { args: ["/bin/true"], stdout: "piped" }).outputSync().stdout,
    );
    const libc = ldd.match(/libc\.so\.\d+ => (\S+)/)?.[1];
    assert.ok(libc !== undefined);
    const ops = `${temp()}/cfi_ops`;
    const sources = ["cfi_ops.s", "ops_main.c"].map((s) =>
      new URL(`./testdata/${s}`, import.meta.url).pathname
    );
    const built = new Deno.Command("gcc", { args: ["-O2", "-o", ops, ...sources], stderr: "piped" })
      .outputSync();
    assert.ok(built.success, decoder.decode(built.stderr));
    for (const path of [Deno.realPathSync(libc), Deno.realPathSync("/usr/bin/python3"), ops]) {
      assert.ok(compareFile(path) > 0);
    }
  },
}));

/** A CIE like GCC's on x86-64, with the given alignment factors. */
function testCie(codeAlignment = 1, dataAlignment = -8): Cie {
  return {
    offset: 0,
    version: 1,
    augmentation: "zR",
    codeAlignment,
    dataAlignment,
    returnAddressRegister: 16,
    fdeEncoding: 0x1b,
    lsdaEncoding: 0xff,
    hasAugmentationData: true,
    signalFrame: false,
    addressSize: 8,
    segmentSelectorSize: 0,
    instructionsStart: 0,
    instructionsEnd: 0,
  };
}

/** Runs `program` as an FDE over [0x1000, 0x1000 + length) after the CIE program `initial`. */
function runProgram(
  program: number[],
  options: { initial?: number[]; length?: number; cie?: Cie; interpreter?: CfaInterpreter } = {},
): { address: number; cells: string[] }[] {
  const initialProgram = options.initial ?? [0x0c, 7, 8, 0x90, 1];
  const bytes = Uint8Array.from([...initialProgram, ...program]);
  const cie = options.cie ?? testCie();
  const interpreter = options.interpreter ?? new CfaInterpreter();
  const initial = interpreter.runCie(bytes, cie, 0, initialProgram.length);
  const sink = new TextSink();
  interpreter.runFde(
    bytes,
    cie,
    initial,
    initialProgram.length,
    bytes.length,
    0x1000,
    0x1000 + (options.length ?? 0x100),
    0,
    sink,
  );
  return sink.rows;
}

Deno.test("CfaInterpreter handles every advance form with the code alignment factor", () => {
  const rows = runProgram(
    [0x41, 0x0e, 16, 0x02, 2, 0x0e, 24, 0x03, ...[1, 0], 0x0e, 32, 0x04, ...[1, 0, 0, 0], 0x0e, 40],
    { cie: testCie(4), length: 0x100 },
  );
  assert.deepEqual(rows.map((r) => [r.address, r.cells[0]]), [
    [0x1000, "rsp+8"],
    [0x1004, "rsp+16"],
    [0x100c, "rsp+24"],
    [0x1010, "rsp+32"],
    [0x1014, "rsp+40"],
  ]);
});

Deno.test("CfaInterpreter applies the data alignment factor to offsets and _sf forms", () => {
  const rows = runProgram([
    0x86,
    2, // offset rbp, 2 * -8
    0x41,
    0x05,
    6,
    3, // offset_extended rbp, 3 * -8
    0x41,
    0x11,
    6,
    ...sleb(-4), // offset_extended_sf rbp, -4 * -8
    0x41,
    0x12,
    6,
    ...sleb(-2), // def_cfa_sf rbp, -2 * -8
    0x41,
    0x13,
    ...sleb(-3), // def_cfa_offset_sf, -3 * -8
    0x41,
    0x14,
    6,
    1, // val_offset rbp, 1 * -8
    0x41,
    0x15,
    6,
    ...sleb(1), // val_offset_sf rbp, 1 * -8
    0x41,
    0x2f,
    6,
    1, // GNU_negative_offset_extended rbp, -(1 * -8)
  ]);
  assert.deepEqual(rows.map((r) => r.cells.slice(0, 2)), [
    ["rsp+8", "c-16"],
    ["rsp+8", "c-24"],
    ["rsp+8", "c+32"],
    ["rbp+16", "c+32"],
    ["rbp+24", "c+32"],
    ["rbp+24", "v-8"],
    ["rbp+24", "v-8"],
    ["rbp+24", "c+8"],
  ]);
});

Deno.test("CfaInterpreter restores the CIE's rules and remembered states, CFA included", () => {
  const rows = runProgram([
    0x86,
    2, // rbp at cfa-16
    0x0a, // remember
    0x0e,
    32,
    0xc6, // restore rbp (CIE: unreferenced)
    0x07,
    16, // undefined rip
    0x41,
    0x0b, // restore state: rsp+8, rbp at cfa-16, rip at cfa-8
    0x41,
    0x06,
    16, // restore_extended rip: back to the CIE's cfa-8
    0x08,
    6, // same_value rbp
    0x09,
    6,
    3, // rbp in rbx
    0x41,
    0x0d,
    6, // def_cfa_register rbp
    0x10,
    6,
    2,
    0x77,
    0x08, // expression rbp
    0x41,
    0x16,
    6,
    2,
    0x77,
    0x08, // val_expression rbp
    0x0f,
    3,
    0x77,
    0x10,
    0x06, // def_cfa_expression
    0x0e,
    48, // an offset after an expression keeps the expression
    0x2e,
    16, // GNU_args_size
    0x41,
    0x0c,
    7,
    8, // def_cfa rsp+8
  ]);
  assert.deepEqual(rows.map((r) => r.cells), [
    ["rsp+32", "u", "u"],
    ["rsp+8", "c-16", "c-8"],
    ["rsp+8", "r3 (rbx)", "c-8"],
    ["rbp+8", "exp", "c-8"],
    ["exp", "vexp", "c-8"],
    ["rsp+8", "vexp", "c-8"],
  ]);
});

Deno.test("CfaInterpreter stops at the end of the FDE's range", () => {
  const rows = runProgram([0x48, 0x0e, 16, 0x48, 0x0e, 24, 0x02, 0xff, 0x3f], { length: 0x10 });
  // The unknown opcode 0x3f after the end is never read.
  assert.deepEqual(rows.map((r) => [r.address, r.cells[0]]), [[0x1000, "rsp+8"], [0x1008, "rsp+16"]]);
});

Deno.test("CfaInterpreter throws RangeError on malformed programs", () => {
  const cases: [string, number[], RegExp][] = [
    ["unknown opcode", [0x41, 0x3f], /unknown opcode 0x3f/],
    ["restore_state underflow", [0x0b], /underflows/],
    ["truncated operand", [0x0c, 7], /truncated|unterminated/],
    ["unterminated LEB128", [0x0e, 0x80, 0x80], /unterminated LEB128/],
    ["expression longer than the program", [0x0f, 10, 0x77], /cannot skip/],
    ["set_loc backwards", [0x41, 0x01, ...new Array(4).fill(0xff)], /set_loc moves backwards/],
  ];
  for (const [what, program, message] of cases) {
    assert.throws(() => runProgram(program), (error: unknown) => {
      assert.ok(error instanceof RangeError, what);
      assert.match(error.message, message, what);
      return true;
    });
  }
});

Deno.test("CfaInterpreter bounds the remember_state stack", () => {
  const interpreter = new CfaInterpreter(4);
  assert.equal(runProgram([0x0a, 0x0a, 0x0a, 0x0a, 0x0b, 0x0b, 0x0b, 0x0b], { interpreter }).length, 1);
  assert.throws(() => runProgram(new Array(5).fill(0x0a), { interpreter }), /nests over 4/);
});

Deno.test("CfaInterpreter.runCie() rejects initial instructions that advance the location", () => {
  assert.throws(() => runProgram([], { initial: [0x0c, 7, 8, 0x41] }), /advance the location/);
});

Deno.test("CfaInterpreter survives huge operands without NaN rows", () => {
  // A LEB128 past 2^56 saturates; offsets and locations stay comparable.
  const huge = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
  const rows = runProgram([0x0e, ...huge, 0x41, 0x0e, ...uleb(2 ** 40)]);
  assert.deepEqual(rows.map((r) => r.cells[0]), ["rsp+Infinity", `rsp+${2 ** 40}`]);
  const zeroAlignment = runProgram([0x04, ...[0xff, 0xff, 0xff, 0xff]], { cie: testCie(0) });
  assert.deepEqual(zeroAlignment.map((r) => r.address), [0x1000]);
});

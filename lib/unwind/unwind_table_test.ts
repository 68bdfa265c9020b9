import assert from "node:assert/strict";
import { ElfFile, PF_X } from "../elf/elf_file.ts";
import { CfaRule, extractUnwindTable, findRow, FpRule, TableSkip, type UnwindTable } from "./unwind_table.ts";
import {
  parseReadelfFrames,
  type ReadelfEntry,
  type ReadelfRow,
  runReadelf,
} from "./testdata/readelf_frames.ts";
import { buildElf, CfiWriter } from "./testdata/cfi_builder.ts";
import { run } from "../testing/commands.ts";

function missingTools(...tools: string[]): string[] {
  return tools.filter((tool) =>
    !new Deno.Command("sh", { args: ["-c", `command -v ${tool}`], stdout: "null" }).outputSync().success
  );
}

const missing = missingTools("gcc", "g++", "readelf", "objcopy", "ldd", "truncate");
if (missing.length > 0) {
  console.log(`unwind table tests against readelf are skipped: ${missing.join(", ")} not installed`);
}
const ignore = missing.length > 0;

let tempDir: string | undefined;
function temp(): string {
  if (tempDir === undefined) {
    tempDir = Deno.makeTempDirSync({ prefix: "omniprof_unwind_test_" });
    globalThis.addEventListener("unload", () => Deno.removeSync(tempDir!, { recursive: true }));
  }
  return tempDir;
}

const fixtures = new Map<string, string>();
/** Compiles testdata `sources` with `compiler` and `flags` once; returns the binary's path. */
function fixture(name: string, compiler: string, flags: string[], ...sources: string[]): string {
  let path = fixtures.get(name);
  if (path === undefined) {
    path = `${temp()}/${name}`;
    const files = sources.map((s) => new URL(`./testdata/${s}`, import.meta.url).pathname);
    run(compiler, ...flags, "-o", path, ...files);
    fixtures.set(name, path);
  }
  return path;
}

function libraryPath(binary: string, pattern: RegExp): string | null {
  return run("ldd", binary).match(pattern)?.[1] ?? null;
}

/** A rule as the table holds it. */
interface Rule {
  cfa: number;
  cfaOffset: number;
  fp: number;
  fpOffset: number;
}

function ruleAt(table: UnwindTable, index: number): Rule {
  return {
    cfa: table.cfaRules[index]!,
    cfaOffset: table.cfaOffsets[index]!,
    fp: table.fpRules[index]!,
    fpOffset: table.fpOffsets[index]!,
  };
}

const INVALID: Rule = { cfa: CfaRule.Invalid, cfaOffset: 0, fp: FpRule.Unchanged, fpOffset: 0 };

/** An FDE chosen for the table, with what readelf says about it. */
interface Chosen {
  section: string;
  fde: ReadelfEntry;
  cie: ReadelfEntry;
  rawInstructions: string[];
}

const PLT_EXPRESSION = new RegExp(
  "^DW_CFA_def_cfa_expression \\(DW_OP_breg7 \\(rsp\\): (-?\\d+); DW_OP_breg16 \\(rip\\): 0; DW_OP_lit15; " +
    "DW_OP_and; DW_OP_lit11; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus\\)$",
);

/**
 * What the table must say for a readelf row: Signal for an "S" CIE, Stop for an undefined return
 * address, Invalid unless the return address is at c-8 and the CFA is rsp/rbp+N or the PLT expression;
 * rbp saved at c+N gives FpRule.CfaOffset, any other rbp cell Unchanged.
 */
function expectedRule(
  row: ReadelfRow,
  chosen: Chosen,
  inPlt: (address: number) => boolean,
  pltAnywhere: boolean,
): Rule {
  if (chosen.cie.augmentation.includes("S")) return { ...INVALID, cfa: CfaRule.Signal };
  if (chosen.cie.returnAddressColumn !== 16) return INVALID;
  const ra = row.cells.get("ra");
  if (ra === "u") return { ...INVALID, cfa: CfaRule.Stop };
  if (ra !== "c-8") return INVALID;
  const cfa = row.cells.get("CFA") ?? "";
  let rule: Rule;
  const registerOffset = cfa.match(/^(rsp|rbp)([+-]\d+)$/);
  if (registerOffset) {
    rule = {
      ...INVALID,
      cfa: registerOffset[1] === "rsp" ? CfaRule.Rsp : CfaRule.Rbp,
      cfaOffset: Number(registerOffset[2]),
    };
  } else if (cfa === "exp") {
    const plt = chosen.rawInstructions.map((line) => line.match(PLT_EXPRESSION)).find((m) => m !== null);
    // Toolchains emit the PLT expression only for .plt sections; the hand-written fixture also uses it
    // elsewhere, where the rule is just as exact.
    if (plt === undefined || (!inPlt(row.loc) && !pltAnywhere)) return INVALID;
    rule = { ...INVALID, cfa: CfaRule.Plt, cfaOffset: Number(plt[1]) };
  } else {
    return INVALID;
  }
  const rbp = (row.cells.get("rbp") ?? "u").match(/^c([+-]\d+)$/);
  if (rbp) return { ...rule, fp: FpRule.CfaOffset, fpOffset: Number(rbp[1]) };
  return rule;
}

interface Comparison {
  rows: number;
  between: number;
  fdes: number;
  pltRows: number;
  signalFdes: number;
  stopRows: number;
}

/**
 * Compares `table` with readelf's tables for `path`: for every row readelf lists inside a chosen FDE,
 * the rule in force at its location, and every table row up to readelf's next row; an Invalid row at
 * each FDE end not followed directly by another FDE; and no table row outside those places. FDEs are
 * chosen as documented in unwind_table.ts, from readelf's FDE list.
 */
function compareWithReadelf(path: string, elf: ElfFile, table: UnwindTable, pltAnywhere = false): Comparison {
  const interp = parseReadelfFrames(runReadelf(path, "--debug-dump=frames-interp"), path);
  const raw = parseReadelfFrames(runReadelf(path, "--debug-dump=frames"), path);
  const executable = elf.loadSegments.filter((s) => (s.flags & PF_X) !== 0);
  const isExecutable = (start: number, end: number) =>
    executable.length === 0 || executable.some((s) => start >= s.vaddr && end <= s.vaddr + s.memsz);
  const pltSections = elf.sections.filter((s) => s.name === ".plt" || s.name === ".plt.sec");
  const inPlt = (address: number) => pltSections.some((s) => address >= s.addr && address < s.addr + s.size);

  const chosen: Chosen[] = [];
  const ehRanges: [number, number][] = [];
  for (const name of [".eh_frame", ".debug_frame"]) {
    const section = interp.find((s) => s.name === name);
    if (section === undefined) continue;
    const rawEntries = new Map(raw.find((s) => s.name === name)?.entries.map((e) => [e.offset, e]));
    const cies = new Map(section.entries.filter((e) => e.kind === "CIE").map((e) => [e.offset, e]));
    const fdes = section.entries.filter((e) => e.kind === "FDE" && e.end > e.start && cies.has(e.cieOffset))
      .sort((x, y) => x.start - y.start || x.offset - y.offset);
    let watermark = -1;
    for (const fde of fdes) {
      if (!isExecutable(fde.start, fde.end) || fde.start < watermark) continue;
      if (name === ".debug_frame" && ehRanges.some(([s, e]) => s < fde.end && fde.start < e)) continue;
      watermark = fde.end;
      const rawInstructions = rawEntries.get(fde.offset)?.instructions ?? [];
      chosen.push({ section: name, fde, cie: cies.get(fde.cieOffset)!, rawInstructions });
    }
    if (name === ".eh_frame") { for (const c of chosen) ehRanges.push([c.fde.start, c.fde.end]); }
  }
  chosen.sort((x, y) => x.fde.start - y.fde.start);

  const result: Comparison = {
    rows: 0,
    between: 0,
    fdes: chosen.length,
    pltRows: 0,
    signalFdes: 0,
    stopRows: 0,
  };
  const explained = new Set<number>();
  for (const [k, c] of chosen.entries()) {
    const { start, end } = c.fde;
    // An FDE of only nops has no table: the CIE's rule holds from its start.
    let rows = c.fde.rows.length > 0 ? c.fde.rows : c.cie.rows.slice(-1).map((r) => ({ ...r, loc: start }));
    if (rows.length === 0) rows = [{ loc: start, cells: new Map() }];
    // The last row at a location is the one in force there.
    rows = rows.filter((r, i) => r.loc >= start && r.loc < end && rows[i + 1]?.loc !== r.loc);
    if (c.cie.augmentation.includes("S")) result.signalFdes++;
    for (const [i, row] of rows.entries()) {
      const expected = expectedRule(row, c, inPlt, pltAnywhere);
      const next = rows[i + 1]?.loc ?? end;
      const at = findRow(table, row.loc);
      assert.ok(at >= 0, `${path}: no row in force at 0x${row.loc.toString(16)}`);
      assert.deepEqual(
        ruleAt(table, at),
        expected,
        `${path}: rule at 0x${row.loc.toString(16)} (${[...row.cells].join(" ")})`,
      );
      result.rows++;
      if (expected.cfa === CfaRule.Plt) result.pltRows++;
      if (expected.cfa === CfaRule.Stop) result.stopRows++;
      if (table.addresses[at] === row.loc) explained.add(at);
      // And in between: halfway to readelf's next row.
      const middle = Math.floor((row.loc + next) / 2);
      assert.deepEqual(
        ruleAt(table, findRow(table, middle)),
        expected,
        `${path}: rule at 0x${middle.toString(16)}`,
      );
      for (let j = at + 1; j < table.length && table.addresses[j]! < next; j++) {
        assert.deepEqual(
          ruleAt(table, j),
          expected,
          `${path}: rule at 0x${table.addresses[j]!.toString(16)} between readelf rows`,
        );
        explained.add(j);
        result.between++;
      }
    }
    if (chosen[k + 1]?.fde.start !== end) {
      // Invalid from the end on: a gap row, unless the FDE's own last rule was already Invalid.
      const gap = findRow(table, end);
      assert.deepEqual(
        ruleAt(table, gap),
        INVALID,
        `${path}: rule at the end 0x${end.toString(16)} of an FDE`,
      );
      if (table.addresses[gap] === end) explained.add(gap);
    }
  }
  for (let j = 0; j < table.length; j++) {
    assert.ok(
      explained.has(j),
      `${path}: table row at 0x${table.addresses[j]!.toString(16)} is not from a chosen FDE`,
    );
  }
  return result;
}

function checkFile(path: string, options: { debugFile?: string; pltAnywhere?: boolean } = {}): Comparison {
  using elf = ElfFile.open(path);
  const debugFile = options.debugFile ? ElfFile.open(options.debugFile) : undefined;
  try {
    const table = extractUnwindTable(elf, { debugFile });
    const result = compareWithReadelf(path, elf, table, options.pltAnywhere);
    console.log(
      `${path}: ${result.rows} readelf rows (and the midpoint after each) compared over ${result.fdes} FDEs, ` +
        `${result.between} table rows between them checked; ${table.length} table rows, ${result.pltRows} PLT ` +
        `rows, ${result.signalFdes} signal FDEs, ${result.stopRows} stop rows`,
    );
    assert.ok(result.rows > 0);
    return result;
  } finally {
    debugFile?.close();
  }
}

Deno.test({
  name: "extractUnwindTable() matches readelf -wF on system libraries and binaries",
  ignore,
  fn() {
    const libc = libraryPath("/bin/true", /libc\.so\.\d+ => (\S+)/);
    assert.ok(libc !== null, "ldd names no libc");
    const files = [libc, "/usr/bin/python3", "/bin/bash"];
    const libstdcxx = libraryPath(
      fixture("frames_cc", "g++", ["-O2"], "frames.cc"),
      /libstdc\+\+\.so\.\d+ => (\S+)/,
    );
    if (libstdcxx) files.push(libstdcxx);
    else console.log("libstdc++ is not installed: not compared");
    for (const file of files) {
      const real = Deno.realPathSync(file);
      const result = checkFile(real);
      if (file === libc) {
        assert.ok(result.pltRows > 0, "libc has PLT rows");
        assert.ok(result.signalFdes > 0, "libc has a signal trampoline FDE");
      }
    }
  },
});

/** node and a JDK's libjvm.so, the installed ones: large, JIT-hosting programs (none is installed by default). */
const runtimes = ["/usr/bin/node", ...jvmLibraries()].flatMap((file) => {
  try {
    return [Deno.realPathSync(file)];
  } catch {
    return [];
  }
});
const runtimesName = "extractUnwindTable() matches readelf -wF on node and libjvm when present";
if (!ignore && runtimes.length === 0) {
  console.log(`SKIP ${runtimesName}: neither node nor a JDK is installed`);
}

Deno.test({
  name: runtimesName,
  ignore: ignore || runtimes.length === 0,
  fn() {
    for (const file of runtimes) checkFile(file);
  },
});

function jvmLibraries(): string[] {
  try {
    for (const entry of Deno.readDirSync("/usr/lib/jvm")) {
      const path = `/usr/lib/jvm/${entry.name}/lib/server/libjvm.so`;
      try {
        Deno.statSync(path);
        return [path];
      } catch {
        // not this one
      }
    }
  } catch {
    // no JVMs
  }
  return [];
}

Deno.test({
  name: "extractUnwindTable() matches readelf -wF on C and C++ fixtures with and without frame pointers",
  ignore,
  fn() {
    checkFile(fixture("frames_omit", "gcc", ["-O2", "-fomit-frame-pointer"], "frames.c"));
    const withFp = checkFile(fixture("frames_fp", "gcc", ["-O2", "-fno-omit-frame-pointer"], "frames.c"));
    assert.ok(withFp.stopRows > 0, "_start has an undefined return address");
    checkFile(fixture("frames_o0", "gcc", ["-O0"], "frames.c"));
    checkFile(fixture("frames_cc", "g++", ["-O2"], "frames.cc"));
    checkFile(fixture("frames_static", "gcc", ["-O2", "-static"], "frames.c"));
  },
});

Deno.test({
  name: "extractUnwindTable() reads .debug_frame, merged with .eh_frame which wins where both cover",
  ignore,
  fn() {
    // C code without unwind tables: its functions are only in .debug_frame, the C runtime's in .eh_frame.
    const debugOnly = fixture(
      "frames_debug",
      "gcc",
      ["-O2", "-g", "-fno-asynchronous-unwind-tables"],
      "frames.c",
    );
    const result = checkFile(debugOnly);
    assert.ok(result.fdes > 3);
    // Hand-written CFI in both sections: every DW_CFA_* the assembler emits.
    const ops = fixture("cfi_ops", "gcc", ["-O2"], "cfi_ops.s", "ops_main.c");
    checkFile(ops, { pltAnywhere: true });
    using elf = ElfFile.open(ops);
    const table = extractUnwindTable(elf);
    const covered = table.skipped.find((s) => s.reason === TableSkip.coveredByEhFrame)?.count ?? 0;
    assert.ok(covered >= 6, `the .debug_frame copies of the fixture's FDEs lose to .eh_frame (${covered})`);
  },
});

Deno.test({
  name: "extractUnwindTable() uses the .debug_frame of a separate debug file",
  ignore,
  fn() {
    const debugOnly = fixture(
      "frames_debug",
      "gcc",
      ["-O2", "-g", "-fno-asynchronous-unwind-tables"],
      "frames.c",
    );
    const stripped = `${temp()}/frames_debug_stripped`;
    const debug = `${temp()}/frames_debug.debug`;
    run("objcopy", "--only-keep-debug", "--compress-debug-sections=zlib", debugOnly, debug);
    run("objcopy", "--strip-debug", debugOnly, stripped);
    using whole = ElfFile.open(debugOnly);
    using alone = ElfFile.open(stripped);
    using debugFile = ElfFile.open(debug);
    const expected = extractUnwindTable(whole);
    const withoutDebug = extractUnwindTable(alone);
    const withDebug = extractUnwindTable(alone, { debugFile });
    assert.ok(withoutDebug.fdeCount < expected.fdeCount);
    assert.deepEqual(withDebug, expected);
  },
});

Deno.test({
  name: "extractUnwindTable() marks libc's rt_sigreturn trampoline as a signal frame",
  ignore,
  fn() {
    const libc = Deno.realPathSync(libraryPath("/bin/true", /libc\.so\.\d+ => (\S+)/)!);
    using elf = ElfFile.open(libc);
    const table = extractUnwindTable(elf);
    // __restore_rt is `mov $15, %rax; syscall` (rt_sigreturn); find it by its code, not by its CFI.
    const pattern = [0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05];
    const text = elf.section(".text")!;
    const code = elf.readSection(text);
    const hits: number[] = [];
    for (
      let i = code.indexOf(0x48);
      i >= 0 && i + pattern.length <= code.length;
      i = code.indexOf(0x48, i + 1)
    ) {
      if (pattern.every((b, k) => code[i + k] === b)) hits.push(text.addr + i);
    }
    assert.ok(hits.length > 0, "libc has an rt_sigreturn trampoline");
    const signal = hits.filter((address) => table.cfaRules[findRow(table, address)] === CfaRule.Signal);
    console.log(
      `${libc}: rt_sigreturn at ${
        hits.map((h) => `0x${h.toString(16)}`).join(", ")
      }; signal rule at ${signal.length}`,
    );
    assert.equal(signal.length, 1);
    // The trampoline's FDE starts one byte early (the unwinder looks up return address - 1).
    assert.equal(table.cfaRules[findRow(table, signal[0]! - 1)], CfaRule.Signal);
  },
});

Deno.test({
  name: "extractUnwindTable() gives .plt entries the Plt rule and _start the Stop rule",
  ignore,
  fn() {
    for (const flags of [["-O2"], ["-O2", "-no-pie", "-fno-pie"]]) {
      const path = fixture(`frames_plt${flags.length}`, "gcc", flags, "frames.c");
      using elf = ElfFile.open(path);
      const table = extractUnwindTable(elf);
      const plt = elf.section(".plt")!;
      // The first 16 bytes of .plt push the link map (rsp-based rules); 16-byte entries follow.
      let entries = 0;
      for (let address = plt.addr + 16; address < plt.addr + plt.size; address += 16) {
        const rule = ruleAt(table, findRow(table, address));
        assert.deepEqual(
          rule,
          { ...INVALID, cfa: CfaRule.Plt, cfaOffset: 8 },
          `${path} .plt entry 0x${address.toString(16)}`,
        );
        entries++;
      }
      console.log(`${path} (${flags.join(" ")}): ${entries} .plt entries with the Plt rule`);
      assert.ok(entries > 0);
      assert.equal(
        table.cfaRules[findRow(table, elf.entry)],
        CfaRule.Stop,
        `${path}: _start stops the unwind`,
      );
    }
  },
});

Deno.test({
  name: "extractUnwindTable() leaves the IBT lazy .plt Invalid and .plt.sec entries rsp-based",
  ignore,
  fn() {
    const path = fixture("frames_ibt", "gcc", ["-O2", "-fcf-protection=full", "-Wl,-z,ibtplt"], "frames.c");
    using elf = ElfFile.open(path);
    const plt = elf.section(".plt");
    const sec = elf.section(".plt.sec");
    // binutils has made the IBT PLT for -z ibtplt since 2.29.
    assert.ok(
      plt !== undefined && sec !== undefined,
      `${path}: the linker made an IBT PLT (.plt and .plt.sec)`,
    );
    const table = extractUnwindTable(elf);
    // The IBT entries push at offset 9 (DW_OP_lit9), which the Plt rule (threshold 11) cannot express.
    for (let address = plt.addr + 16; address < plt.addr + plt.size; address += 16) {
      assert.deepEqual(ruleAt(table, findRow(table, address)), INVALID);
    }
    assert.ok(table.skipped.some((s) => s.reason === TableSkip.cfaExpression));
    for (let address = sec.addr; address < sec.addr + sec.size; address += 16) {
      assert.deepEqual(ruleAt(table, findRow(table, address)), {
        ...INVALID,
        cfa: CfaRule.Rsp,
        cfaOffset: 8,
      });
    }
  },
});

/** A small ELF with one executable segment and the given CFI sections. */
function craftedElf(eh: Uint8Array, debug?: Uint8Array): ElfFile {
  const sections = [{ name: ".eh_frame", addr: 0x2000, bytes: eh }];
  if (debug) sections.push({ name: ".debug_frame", addr: 0, bytes: debug });
  return ElfFile.fromBytes(
    buildElf(sections, [{ flags: PF_X | 4, vaddr: 0x1000, memsz: 0x1000 }]),
    "crafted",
  );
}

Deno.test("extractUnwindTable() keeps the earlier FDE where FDEs overlap and counts the other", () => {
  const w = new CfiWriter(0x2000);
  const cie = w.cie();
  w.fde(cie, 0x1100, 0x40, [0x41, 0x0e, 16]); // advance 1; def_cfa_offset 16
  w.fde(cie, 0x1120, 0x40, [0x0e, 32]); // starts inside the first: dropped
  w.fde(cie, 0x1100, 0x10, [0x0e, 48]); // same start, later in the section: dropped
  w.fde(cie, 0x1140, 0x10, [0x0e, 24]); // starts right at the first's end: no gap row
  w.fde(cie, 0x0100, 0x10, []); // outside the executable segment
  using elf = craftedElf(w.finish());
  const table = extractUnwindTable(elf);
  assert.deepEqual([...table.addresses], [0x1100, 0x1101, 0x1140, 0x1150]);
  assert.deepEqual([...table.cfaRules], [CfaRule.Rsp, CfaRule.Rsp, CfaRule.Rsp, CfaRule.Invalid]);
  assert.deepEqual([...table.cfaOffsets], [8, 16, 24, 0]);
  assert.equal(table.fdeCount, 2);
  assert.deepEqual(
    table.skipped,
    [
      { reason: TableSkip.overlap, count: 2 },
      { reason: TableSkip.notExecutable, count: 1 },
    ].sort((a, b) => a.reason < b.reason ? -1 : 1),
  );
});

Deno.test("extractUnwindTable() orders thousands of FDEs written in any order, the first of equal starts winning", () => {
  const count = 3000;
  const w = new CfiWriter(0x2000);
  const cie = w.cie();
  let seed = 7;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const order = Array.from({ length: count }, (_, i) => i);
  for (let i = count - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const start = (i: number) => 0x100000 + 0x10 * i;
  for (const i of order) w.fde(cie, start(i), 0x10, [0x41, 0x0e, 16 + 8 * (i % 5)]);
  // Later copies with the same starts lose to the ones before them in the section.
  for (let i = 0; i < count; i += 7) w.fde(cie, start(i), 0x10, [0x0e, 200]);
  using elf = ElfFile.fromBytes(
    buildElf([{ name: ".eh_frame", addr: 0x2000, bytes: w.finish() }], [
      { flags: PF_X | 4, vaddr: 0x100000, memsz: 0x100000 },
    ]),
    "shuffled",
  );
  const table = extractUnwindTable(elf);
  assert.equal(table.length, 2 * count + 1);
  for (let i = 0; i < count; i++) {
    assert.deepEqual([table.addresses[2 * i], table.cfaOffsets[2 * i]], [start(i), 8]);
    assert.deepEqual([table.addresses[2 * i + 1], table.cfaOffsets[2 * i + 1]], [
      start(i) + 1,
      16 + 8 * (i % 5),
    ]);
  }
  assert.deepEqual(table.skipped, [{ reason: TableSkip.overlap, count: Math.ceil(count / 7) }]);
});

Deno.test("extractUnwindTable() prefers .eh_frame over an overlapping .debug_frame FDE", () => {
  const eh = new CfiWriter(0x2000);
  const ehCie = eh.cie();
  eh.fde(ehCie, 0x1100, 0x20, [0x0e, 16]);
  const debug = new CfiWriter(0, "debug_frame");
  const debugCie = debug.cie();
  debug.fde(debugCie, 0x10f0, 0x20, [0x0e, 32]); // overlaps the .eh_frame FDE: dropped
  debug.fde(debugCie, 0x1200, 0x20, [0x0e, 48]); // alone: used
  using elf = craftedElf(eh.finish(), debug.finish(false));
  const table = extractUnwindTable(elf);
  assert.deepEqual([...table.addresses], [0x1100, 0x1120, 0x1200, 0x1220]);
  assert.deepEqual([...table.cfaOffsets], [16, 0, 48, 0]);
  assert.deepEqual(table.skipped, [{ reason: TableSkip.coveredByEhFrame, count: 1 }]);
});

Deno.test("extractUnwindTable() replaces a malformed FDE program by one Invalid row", () => {
  const w = new CfiWriter(0x2000);
  const cie = w.cie();
  w.fde(cie, 0x1100, 0x20, [0x41, 0x0e, 16, 0x41, 0x0b]); // restore_state without remember_state
  w.fde(cie, 0x1200, 0x20, [0x41, 0x0e, 16, 0x41, 0x3f]); // unknown opcode
  w.fde(cie, 0x1300, 0x20, [0x41, 0x07, 16]); // undefined rip: stop
  using elf = craftedElf(w.finish());
  const table = extractUnwindTable(elf);
  assert.deepEqual([...table.addresses], [0x1100, 0x1300, 0x1301, 0x1320]);
  assert.deepEqual([...table.cfaRules], [CfaRule.Invalid, CfaRule.Rsp, CfaRule.Stop, CfaRule.Invalid]);
  assert.deepEqual(table.skipped, [{ reason: TableSkip.badProgram, count: 2 }]);
});

Deno.test("extractUnwindTable() fails the file past maxRows, with the file name", () => {
  const w = new CfiWriter(0x2000);
  const cie = w.cie();
  const program: number[] = [];
  for (let i = 0; i < 40; i++) program.push(0x41, 0x0e, 16 + 8 * (i % 2));
  w.fde(cie, 0x1100, 0x100, program);
  using elf = craftedElf(w.finish());
  assert.equal(extractUnwindTable(elf, { maxRows: 64 }).length, 42);
  assert.throws(() => extractUnwindTable(elf, { maxRows: 32 }), (error: unknown) => {
    assert.ok(error instanceof RangeError);
    assert.match(error.message, /^Cannot parse CFI of crafted: .*more than 32 rows/);
    return true;
  });
});

Deno.test({
  name: "extractUnwindTable() finds .eh_frame through .eh_frame_hdr without section headers",
  ignore,
  fn() {
    const path = fixture("frames_omit", "gcc", ["-O2", "-fomit-frame-pointer"], "frames.c");
    const bytes = Deno.readFileSync(path);
    using elf = ElfFile.fromBytes(bytes, path);
    const expected = extractUnwindTable(elf);
    const headerless = bytes.slice();
    const view = new DataView(headerless.buffer);
    view.setBigUint64(40, 0n, true); // e_shoff
    view.setUint16(60, 0, true); // e_shnum
    view.setUint16(62, 0, true); // e_shstrndx
    using bare = ElfFile.fromBytes(headerless, "headerless");
    assert.equal(bare.sections.length, 0);
    assert.deepEqual(extractUnwindTable(bare), expected);
  },
});

Deno.test({
  name: "extractUnwindTable() on a sparse 4 GiB ELF stays within its memory budget",
  ignore,
  fn() {
    const path = `${temp()}/sparse.elf`;
    const eh = new CfiWriter(0x2000);
    eh.fde(eh.cie(), 0x1100, 0x20, []);
    const content = eh.finish();
    const big = 2 ** 32;
    const claims = [
      // Each: a CFI section claiming (nearly) the whole sparse file.
      { name: ".eh_frame", addr: 0x2000, bytes: content, claimedSize: big, claimedOffset: 0 },
      {
        name: ".debug_frame",
        addr: 0,
        bytes: new Uint8Array(0),
        claimedSize: 16 * 2 ** 20,
        claimedOffset: big - 2 ** 26,
      },
    ];
    const rssBefore = Deno.memoryUsage().rss;
    for (const variant of [0, 1]) {
      const sections = variant === 0
        ? claims
        : [{ ...claims[0]!, claimedSize: undefined, claimedOffset: undefined }, claims[1]!];
      const header = buildElf(sections, [{ flags: PF_X | 4, vaddr: 0x1000, memsz: 0x1000 }]);
      Deno.writeFileSync(path, header);
      run("truncate", "-s", String(big + 4096), path);
      using elf = ElfFile.open(path);
      if (variant === 0) {
        assert.throws(() => extractUnwindTable(elf), /^RangeError: Cannot parse CFI of .*over the .*budget/);
      } else {
        // The 16 MiB .debug_frame of zeros is read (within the 64 MiB budget) and walked quickly.
        const table = extractUnwindTable(elf);
        assert.equal(table.fdeCount, 1);
      }
    }
    const grown = (Deno.memoryUsage().rss - rssBefore) / 2 ** 20;
    console.log(`sparse 4 GiB ELF: RSS grew by ${grown.toFixed(1)} MiB`);
    assert.ok(grown < 64, `RSS grew by ${grown.toFixed(1)} MiB`);
  },
});

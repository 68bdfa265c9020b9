import assert from "node:assert/strict";
import { ElfFile } from "../elf/elf_file.ts";
import { StackDeltaConstants, UnwindCommand, UnwindFpOpcode, UnwindOpcode } from "../../support/types.ts";
import {
  buildStackDeltas,
  deltasOfPage,
  findDeltaRow,
  framePointerDeltas,
  type StackDeltaFile,
  UnwindInfoRegistry,
} from "./stack_deltas.ts";
import {
  CfaRule,
  extractUnwindTable,
  findRow,
  FpRule,
  indexUnwindTable,
  type UnwindTable,
} from "./unwind_table.ts";

interface Rule {
  cfa: number; // CfaRule
  cfaOffset: number;
  fp: number; // FpRule
  fpOffset: number;
}

/** The registry's rules, kept in memory as the BPF array would hold them. */
function registryWithStore() {
  const store: { opcode: number; fpOpcode: number; merge: number; param: number; fpParam: number }[] = [];
  const registry = new UnwindInfoRegistry(16384, (index, opcode, fpOpcode, merge, param, fpParam) => {
    store[index] = { opcode, fpOpcode, merge, param, fpParam };
  });
  return { registry, store };
}

/**
 * What the BPF unwinder (bpf/stack_deltas.bpf.h + native_unwinder.bpf.c) computes for an address: the
 * same page lookup, binary search and merge arithmetic, in TypeScript.
 */
function lookup(
  deltas: StackDeltaFile,
  store: ReturnType<typeof registryWithStore>["store"],
  address: number,
) {
  const page = Math.floor(address / 65536);
  const pageIndex = Array.prototype.indexOf.call(deltas.pages, page);
  if (pageIndex < 0) return null;
  const target = address % 65536;
  let low = deltas.pageFirst[pageIndex]!;
  let high = low + deltas.pageCount[pageIndex]!;
  for (let i = 0; i < 16 && low + 1 < high; i++) {
    const middle = (low + high) >>> 1;
    if (deltas.deltas[2 * middle]! <= target) low = middle;
    else high = middle;
  }
  const addrLow = deltas.deltas[2 * low]!;
  const info = deltas.deltas[2 * low + 1]!;
  if (addrLow > target) return null;
  if (info & StackDeltaConstants.DeltaCommandFlag) {
    return { command: info & ~StackDeltaConstants.DeltaCommandFlag };
  }
  const rule = store[info]!;
  let param = rule.param;
  const distance = rule.merge & ~StackDeltaConstants.MergeOpcodeNegative;
  if (rule.merge && target >= addrLow + distance) {
    param += rule.merge & StackDeltaConstants.MergeOpcodeNegative ? -8 : 8;
  }
  return { opcode: rule.opcode, param, fpOpcode: rule.fpOpcode, fpParam: rule.fpParam };
}

function expected(table: UnwindTable, address: number) {
  const row = findRow(table, address);
  if (row < 0) return null;
  const cfa = table.cfaRules[row]!;
  switch (cfa) {
    case CfaRule.Rsp:
    case CfaRule.Rbp:
      return {
        opcode: cfa === CfaRule.Rsp ? UnwindOpcode.BaseSp : UnwindOpcode.BaseFp,
        param: table.cfaOffsets[row]!,
        fpOpcode: table.fpRules[row] === FpRule.CfaOffset
          ? UnwindFpOpcode.CfaOffset
          : UnwindFpOpcode.Unchanged,
        fpParam: table.fpRules[row] === FpRule.CfaOffset ? table.fpOffsets[row]! : 0,
      };
    case CfaRule.Plt:
      return { command: UnwindCommand.Plt };
    case CfaRule.Signal:
      return { command: UnwindCommand.Signal };
    case CfaRule.Stop:
      return { command: UnwindCommand.Stop };
    default:
      return { command: UnwindCommand.Invalid };
  }
}

function tableOf(rows: [number, Rule][]): UnwindTable {
  return {
    length: rows.length,
    addresses: Float64Array.from(rows.map(([address]) => address)),
    cfaRules: Uint8Array.from(rows.map(([, rule]) => rule.cfa)),
    cfaOffsets: Int32Array.from(rows.map(([, rule]) => rule.cfaOffset)),
    fpRules: Uint8Array.from(rows.map(([, rule]) => rule.fp)),
    fpOffsets: Int32Array.from(rows.map(([, rule]) => rule.fpOffset)),
    fdeCount: 1,
    skipped: [],
  };
}

function checkEveryAddress(table: UnwindTable, from: number, to: number) {
  const { registry, store } = registryWithStore();
  const deltas = buildStackDeltas(table, registry);
  for (let address = from; address < to; address++) {
    const want = expected(table, address);
    const got = lookup(deltas, store, address);
    // The host's search (for copied stacks) finds the row the BPF search finds.
    const row = findDeltaRow(deltas, address);
    if (got === null) assert.equal(row, -1, `address 0x${address.toString(16)}`);
    else if (got.command !== undefined) {
      assert.equal(deltas.deltas[2 * row + 1], StackDeltaConstants.DeltaCommandFlag | got.command);
    } else assert.equal(store[deltas.deltas[2 * row + 1]!]!.opcode, got.opcode);
    // An Invalid rule and a missing page both stop the unwinder: the same outcome.
    if (want && "command" in want && want.command === UnwindCommand.Invalid && got === null) continue;
    assert.deepEqual(got, want, `address 0x${address.toString(16)}`);
  }
  return deltas;
}

const rsp = (cfaOffset: number, fpOffset?: number): Rule => ({
  cfa: CfaRule.Rsp,
  cfaOffset,
  fp: fpOffset === undefined ? FpRule.Unchanged : FpRule.CfaOffset,
  fpOffset: fpOffset ?? 0,
});
const invalid: Rule = { cfa: CfaRule.Invalid, cfaOffset: 0, fp: 0, fpOffset: 0 };

Deno.test("buildStackDeltas() merges push/pop rows and the BPF lookup reproduces every address", () => {
  const table = tableOf([
    [0x1000, rsp(8)],
    [0x1001, rsp(16)], // push: merged into the row above
    [0x1004, rsp(16, -16)],
    [0x1020, rsp(8)], // pop
    [0x1021, invalid],
    [0x1030, rsp(8)],
    [0x1031, rsp(16)],
    [0x1090, rsp(8)],
    [0x1091, { cfa: CfaRule.Plt, cfaOffset: 8, fp: 0, fpOffset: 0 }],
    [0x10a0, invalid],
  ]);
  const deltas = checkEveryAddress(table, 0xff0, 0x10b0);
  assert.ok(deltas.count < table.length, `merging saved rows (${deltas.count} < ${table.length})`);
});

Deno.test("buildStackDeltas() opens each page a rule runs into with that rule", () => {
  const table = tableOf([
    [0xfff0, rsp(8)],
    [0xfff1, rsp(16)], // merged, and the merged rule runs across two page boundaries
    [0x2_0010, rsp(8)],
    [0x2_0011, invalid],
    [0x3_0000, rsp(8)],
    [0x3_0001, invalid],
  ]);
  const deltas = checkEveryAddress(table, 0xffe0, 0x3_0010);
  assert.deepEqual([...deltas.pages], [0, 1, 2, 3]);
});

Deno.test("buildStackDeltas() of a real libc matches its unwind table at every address", () => {
  const libc = "/lib/x86_64-linux-gnu/libc.so.6";
  using elf = ElfFile.open(libc);
  const table = extractUnwindTable(elf);
  const { registry, store } = registryWithStore();
  const deltas = buildStackDeltas(table, registry);
  const first = table.addresses[0]!;
  const last = table.addresses[table.length - 1]!;
  let checked = 0;
  for (let address = first; address < last; address += 3) {
    const want = expected(table, address);
    const got = lookup(deltas, store, address);
    // The host's search (for copied stacks) finds the row the BPF search finds.
    const row = findDeltaRow(deltas, address);
    if (got === null) assert.equal(row, -1, `address 0x${address.toString(16)}`);
    else if (got.command !== undefined) {
      assert.equal(deltas.deltas[2 * row + 1], StackDeltaConstants.DeltaCommandFlag | got.command);
    } else assert.equal(store[deltas.deltas[2 * row + 1]!]!.opcode, got.opcode);
    if (want && "command" in want && want.command === UnwindCommand.Invalid && got === null) continue;
    assert.deepEqual(got, want, `libc 0x${address.toString(16)}`);
    checked++;
  }
  console.log(
    `libc: ${table.length} rows -> ${deltas.count} deltas, ${registry.size} rules, ${checked} addresses`,
  );
  assert.ok(deltas.count < table.length);
  assert.ok(deltas.bucket >= 8 && deltas.bucket <= 23 && 2 ** deltas.bucket >= deltas.count);
});

Deno.test("a page of libc or python3 built alone holds the rows the whole file gives it", () => {
  const PAGE = 2 ** StackDeltaConstants.StackDeltaPageBits;
  const cases = [
    ["/lib/x86_64-linux-gnu/libc.so.6", true],
    ["/usr/bin/python3", true],
    ["/lib/x86_64-linux-gnu/libc.so.6", false],
  ] as const;
  for (const [path, lazy] of cases) {
    using elf = ElfFile.open(path);
    // Pages come from FDEs found through .eh_frame_hdr (lazy) or from the walked section.
    const index = indexUnwindTable(elf, { lazy });
    assert.equal(index.throughHeader, lazy);
    const { registry } = registryWithStore();
    const whole = buildStackDeltas(indexUnwindTable(elf).table(), registry);
    const firstPage = whole.pages[0]!;
    const lastPage = whole.pages[whole.pages.length - 1]!;
    let withRows = 0;
    // One page past each end too: those have no CFI.
    for (let page = firstPage - 1; page <= lastPage + 1; page++) {
      const alone = deltasOfPage(
        buildStackDeltas(index.range(page * PAGE, (page + 1) * PAGE), registry),
        page,
      );
      const at = whole.pages.indexOf(page);
      const want = at < 0 ? [0, StackDeltaConstants.DeltaCommandFlag | UnwindCommand.Invalid] : [
        ...whole.deltas.subarray(
          2 * whole.pageFirst[at]!,
          2 * (whole.pageFirst[at]! + whole.pageCount[at]!),
        ),
      ];
      assert.deepEqual([...alone.deltas], want, `${path} page 0x${page.toString(16)}`);
      assert.equal(alone.count, want.length / 2);
      assert.ok(2 ** alone.bucket >= alone.count);
      if (at >= 0) withRows++;
    }
    console.log(
      `${path}${lazy ? " (through .eh_frame_hdr)" : ""}: ${withRows} pages, each built alone as in the ` +
        `whole file (${whole.count} rows)`,
    );
    assert.ok(withRows > 4);
  }
});

Deno.test("framePointerDeltas() covers each page of a range with one FRAME_POINTER row", () => {
  const deltas = framePointerDeltas(0x1000, 0x30000);
  assert.deepEqual([...deltas.pages], [0, 1, 2]);
  assert.equal(deltas.count, 3);
  assert.equal(deltas.deltas[1], StackDeltaConstants.DeltaCommandFlag | UnwindCommand.FramePointer);
});

Deno.test("UnwindInfoRegistry deduplicates rules and reports when it is full", () => {
  let writes = 0;
  const registry = new UnwindInfoRegistry(2, () => writes++);
  assert.equal(registry.indexOf(1, 0, 0, 8, 0), 0);
  assert.equal(registry.indexOf(1, 0, 0, 8, 0), 0);
  assert.equal(registry.indexOf(1, 1, 0, 16, -16), 1);
  assert.equal(registry.indexOf(2, 0, 0, 16, 0), -1);
  assert.equal(writes, 2);
});

import assert from "node:assert/strict";
import { ElfFile } from "../elf/elf_file.ts";
import { programs, requiring } from "../testing/requirements.ts";
import { buildGoWorkload } from "../../tests/helpers.ts";
import { StackDeltaConstants, UnwindCommand, UnwindFpOpcode, UnwindOpcode } from "../../support/types.ts";
import { GoSymbols } from "../symbolize/go/go_symbols.ts";
import {
  findCallbackCall,
  findCgoCalls,
  goUnwindRules,
  standardFrame,
  withGoRules,
} from "./go_unwind_rules.ts";
import { buildStackDeltas, type StackDeltaFile, UnwindInfoRegistry } from "./stack_deltas.ts";
import { CfaRule, extractUnwindTable, findRow, FpRule, type UnwindTable } from "./unwind_table.ts";

const hex = (text: string) =>
  Uint8Array.from(text.split(/\s+/).filter(Boolean), (byte) => parseInt(byte, 16));

/** runtime.asmcgocall.abi0 of a Go 1.19.8 amd64 binary, as `go tool objdump` lists it, at 0x45e880. */
const GO_1_19 = hex(`
  48 8b 44 24 08  48 8b 5c 24 10  48 89 e2  64 48 8b 3c 25 f8 ff ff ff  48 83 ff 00  74 67
  4c 8b 47 30  49 8b 70 50  48 39 f7  74 5a  49 8b 30  48 39 f7  74 52  e8 6a d3 ff ff
  64 48 89 34 25 f8 ff ff ff  48 8b 66 38  48 83 ec 40  48 83 e4 f0  48 89 7c 24 30  48 8b 7f 08
  48 29 d7  48 89 7c 24 28  48 89 df  48 89 d9  ff d0  48 8b 7c 24 30  48 8b 77 08  48 2b 74 24 28
  64 48 89 3c 25 f8 ff ff ff  48 89 f4  89 44 24 18  c3
  48 83 ec 40  48 83 e4 f0  48 c7 44 24 30 00 00 00 00  48 89 54 24 28  48 89 df  48 89 d9  ff d0
  48 8b 74 24 28  48 89 f4  89 44 24 18  c3`);

/**
 * The switch of later releases (src/runtime/asm_amd64.s): SUBQ $16, SP; ANDQ $~15, SP; MOVQ DI, 8(SP);
 * MOVQ 8(DI), DI; SUBQ DX, DI; MOVQ DI, 0(SP); CALL asmcgocall_landingpad (rel32 0x100), assembled by hand.
 */
const LANDING_PAD = hex(`
  48 89 e2  48 83 ec 10  48 83 e4 f0  48 89 7c 24 08  48 8b 7f 08  48 29 d7  48 89 3c 24  e8 00 01 00 00  c3`);

Deno.test("findCgoCalls finds both calls of Go 1.19's asmcgocall and the slots each saved", () => {
  // Addresses and slots from the listing: CALL AX at 0x45e8e2 (switched: g at 0x30(SP), depth at
  // 0x28(SP)) and 0x45e91f (already on a system stack: 0 at 0x30(SP), DX at 0x28(SP)).
  assert.deepEqual(findCgoCalls(GO_1_19, 0x45e880), [
    { start: 0x45e8e2, end: 0x45e8e4, depthSlot: 0x28, gSlot: 0x30, callerRbpSaved: false, target: null },
    { start: 0x45e91f, end: 0x45e921, depthSlot: 0x28, gSlot: 0x30, callerRbpSaved: false, target: null },
  ]);
});

Deno.test("findCgoCalls reads the slots of a later layout, and a call through a landing pad", () => {
  // The call is at offset 27, 5 bytes; its target is the return address + 0x100.
  assert.deepEqual(findCgoCalls(LANDING_PAD, 0x1000), [
    { start: 0x101b, end: 0x1020, depthSlot: 0, gSlot: 8, callerRbpSaved: false, target: 0x1120 },
  ]);
});

/** runtime.asmcgocall.abi0 of Go 1.24.4 at 0x46f5a0, as `go tool objdump` lists it. */
const GO_1_24 = hex(`
  55 48 89 e5 48 8b 44 24 10 48 8b 5c 24 18 48 89 e2 64 48 8b 3c 25 f8 ff ff ff 48 83 ff 00 74 63
  4c 8b 47 30 49 8b 70 50 48 39 f7 74 56 49 8b 30 48 39 f7 74 4e e8 66 d5 ff ff 64 48 89 34 25 f8
  ff ff ff 48 8b 66 38 48 83 ec 10 48 83 e4 f0 48 89 7c 24 08 48 8b 7f 08 48 29 d7 48 89 3c 24 e8
  7c ff ff ff 48 8b 7c 24 08 48 8b 77 08 48 2b 34 24 64 48 89 3c 25 f8 ff ff ff 48 89 f4 89 44 24
  20 5d c3 48 83 ec 10 48 83 e4 f0 48 c7 44 24 08 00 00 00 00 48 89 14 24 e8 43 ff ff ff 48 8b 34
  24 48 89 f4 89 44 24 20 5d c3`);

Deno.test("findCgoCalls reads Go 1.24's asmcgocall, which pushes rbp first and calls C through its landing pad", () => {
  // From the listing: CALL runtime.asmcgocall_landingpad at 0x46f5ff (g at 0x8(SP), depth at 0(SP))
  // and 0x46f638 (already on a system stack: 0 at 0x8(SP), DX at 0(SP)); the landing pad at 0x46f580.
  assert.deepEqual(findCgoCalls(GO_1_24, 0x46f5a0), [
    { start: 0x46f5ff, end: 0x46f604, depthSlot: 0, gSlot: 8, callerRbpSaved: true, target: 0x46f580 },
    { start: 0x46f638, end: 0x46f63d, depthSlot: 0, gSlot: 8, callerRbpSaved: true, target: 0x46f580 },
  ]);
});

Deno.test("findCgoCalls marks no call whose save sequence differs from asmcgocall's", () => {
  const variants: [string, Uint8Array][] = [
    ["g.stack.lo instead of hi", GO_1_19.map((byte, i) => i === 0x53 ? 0x00 : byte)],
    ["a g slot not right above the depth slot", GO_1_19.map((byte, i) => i === 0x4f ? 0x38 : byte)],
    ["no MOVQ SP, DX", GO_1_19.map((byte, i) => i === 0x0c ? 0xe3 : byte)],
  ];
  // The bytes changed are in the listing's 0x45e8d0, 0x45e8cb and 0x45e88a.
  assert.equal(GO_1_19[0x53], 0x08);
  assert.equal(GO_1_19[0x4f], 0x30);
  assert.equal(GO_1_19[0x0c], 0xe2);
  const [stackLo, unaligned, noEntrySp] = variants.map(([, code]) => findCgoCalls(code, 0x45e880));
  // Only the second (already on a system stack) call is left where the switched sequence broke.
  assert.deepEqual(stackLo!.map((call) => call.start), [0x45e91f], variants[0]![0]);
  assert.deepEqual(unaligned!.map((call) => call.start), [0x45e91f], variants[1]![0]);
  assert.deepEqual(noEntrySp, [], variants[2]![0]);
});

/** runtime.cgocallback.abi0 of the same Go 1.19.8, at 0x45e940. */
const CGOCALLBACK_1_19 = hex(`
  48 83 ec 20  48 89 6c 24 18  48 8d 6c 24 18  64 48 8b 1c 25 f8 ff ff ff  48 83 fb 00  74 0b  48 8b 5b 30
  48 89 5c 24 10  eb 2d  45 0f 57 ff  4d 31 f6  48 8d 05 2a aa fd ff  ff d0  48 c7 44 24 10 00 00 00 00
  64 48 8b 1c 25 f8 ff ff ff  48 8b 5b 30  48 8b 33  48 89 66 38  48 8b 33  48 8b 46 38  48 89 04 24
  48 89 66 38  48 8b b3 c0 00 00 00  64 48 89 34 25 f8 ff ff ff  48 8b 7e 38  48 8b 5e 40  48 89 5f f8
  48 8b 5c 24 28  48 8b 4c 24 30  48 8b 54 24 38  48 8d 44 24 28  48 29 e0  48 29 c7  48 89 fc
  48 89 1c 24  48 89 4c 24 08  48 89 54 24 10  48 8d 05 8e 24 00 00  ff d0  48 8d 44 24 28  48 29 e0
  64 48 8b 34 25 f8 ff ff ff  48 89 e7  48 01 c7  48 8b 5f f8  48 89 5e 40  48 89 7e 38
  64 48 8b 1c 25 f8 ff ff ff  48 8b 5b 30  48 8b 33  64 48 89 34 25 f8 ff ff ff  48 8b 66 38  48 8b 04 24
  48 89 46 38  48 8b 5c 24 10  48 83 fb 00  75 09  48 8d 05 12 27 00 00  ff d0  48 8b 6c 24 18
  48 83 c4 20  c3`);

Deno.test("findCallbackCall finds Go 1.19 cgocallback's call of cgocallbackg after the switch", () => {
  // The listing: LEAQ runtime.cgocallbackg.abi0(SB), AX at 0x45e9eb (0x460e80), CALL AX at 0x45e9f2; the
  // CALL AX of needm (0x45e976) and of dropm (0x45ea4e) are not it.
  assert.deepEqual(findCallbackCall(CGOCALLBACK_1_19, 0x45e940), {
    start: 0x45e9f2,
    end: 0x45e9f4,
    target: 0x460e80,
  });
  // Without the frame prologue, rbp is not known at the call.
  assert.equal(findCallbackCall(CGOCALLBACK_1_19.map((byte, i) => i === 5 ? 0x90 : byte), 0x45e940), null);
});

Deno.test("standardFrame reads Go's prologue with short and long frame sizes, and nothing else", () => {
  // runtime.cgocallbackg.abi0 and runtime.cgocallbackg of the listing.
  assert.deepEqual(standardFrame(hex("48 83 ec 20  48 89 6c 24 18  48 8d 6c 24 18  48 8b 44 24 28")), {
    size: 0x20,
    saved: 9,
  });
  assert.deepEqual(
    standardFrame(
      hex("48 81 ec 88 00 00 00  48 89 ac 24 80 00 00 00  48 8d ac 24 80 00 00 00  48 89 4c 24 20"),
    ),
    { size: 0x88, saved: 15 },
  );
  // rbp saved elsewhere than at the frame's top, or the frame pointer not set.
  assert.equal(standardFrame(hex("48 83 ec 20  48 89 6c 24 10  48 8d 6c 24 10")), null);
  assert.equal(standardFrame(hex("48 83 ec 20  48 89 6c 24 18  48 89 e5")), null);
  assert.equal(standardFrame(hex("55 48 89 e5")), null);
});

function table(rows: [number, number, number][]): UnwindTable {
  return {
    length: rows.length,
    addresses: Float64Array.from(rows, (r) => r[0]),
    cfaRules: Uint8Array.from(rows, (r) => r[1]),
    cfaOffsets: Int32Array.from(rows, (r) => r[2]),
    fpRules: new Uint8Array(rows.length),
    fpOffsets: new Int32Array(rows.length),
    fdeCount: rows.length,
    skipped: [],
  };
}

function rowsOf(t: UnwindTable): [number, number, number, number][] {
  return Array.from(
    { length: t.length },
    (_, i) => [t.addresses[i]!, t.cfaRules[i]!, t.cfaOffsets[i]!, t.fpOffsets[i]!],
  );
}

Deno.test("withGoRules gives cgocallbackg's saved rbp to its CFI rows, and cgocallback's call its frame pointer", () => {
  // The callee at 0x5000 (CFA rsp+8, then rsp+40 after its SUBQ at 0x5004; rbp saved from 0x5009; rsp+8
  // again at its RET 0x5038); the caller's call at 0x4010-0x4012 inside CFI rsp+40.
  const { Rsp, Rbp, Invalid } = CfaRule;
  const out = withGoRules(
    table([[0x4000, Rsp, 40], [0x4100, Invalid, 0], [0x5000, Rsp, 8], [0x5004, Rsp, 40], [0x5038, Rsp, 8], [
      0x5040,
      Invalid,
      0,
    ]]),
    {
      code: null,
      cgoCalls: [],
      frameless: [],
      callbacks: [{ start: 0x4010, end: 0x4012, callee: { start: 0x5009, end: 0x5040, cfaOffset: 40 } }],
      signal: null,
      duff: [],
    },
  );
  const rows = Array.from({ length: out.length }, (_, i) => [
    out.addresses[i],
    out.cfaRules[i],
    out.cfaOffsets[i],
    out.fpRules[i],
    out.fpOffsets[i],
  ]);
  const { Unchanged, CfaOffset } = FpRule;
  assert.deepEqual(rows, [
    [0x4000, Rsp, 40, Unchanged, 0],
    [0x4010, Rbp, 16, CfaOffset, -16],
    [0x4012, Rsp, 40, Unchanged, 0],
    [0x4100, Invalid, 0, Unchanged, 0],
    [0x5000, Rsp, 8, Unchanged, 0],
    [0x5004, Rsp, 40, Unchanged, 0],
    [0x5009, Rsp, 40, CfaOffset, -16],
    [0x5038, Rsp, 8, Unchanged, 0],
    [0x5040, Invalid, 0, Unchanged, 0],
  ]);
});

Deno.test("withGoRules fills Go code's gaps with frame pointers and lays the cgo call over its rule", () => {
  // C code with CFI at 0x2000-0x2100 inside Go code 0x1000-0x4000; asmcgocall's call at 0x3010-0x3012
  // in a gap.
  const out = withGoRules(
    table([[0x2000, CfaRule.Rsp, 8], [0x2100, CfaRule.Invalid, 0]]),
    {
      code: { start: 0x1000, end: 0x4000 },
      cgoCalls: [{ start: 0x3010, end: 0x3012, depthSlot: 40, gSlot: 48, callerRbpSaved: false }],
      frameless: [],
      callbacks: [],
      signal: null,
      duff: [],
    },
  );
  const { Rsp, FramePointer, GoCgoCall, Invalid } = CfaRule;
  assert.deepEqual(rowsOf(out), [
    [0x1000, FramePointer, 0, 0],
    [0x2000, Rsp, 8, 0],
    [0x2100, FramePointer, 0, 0],
    [0x3010, GoCgoCall, 40, 0],
    [0x3012, FramePointer, 0, 0],
    [0x4000, Invalid, 0, 0],
  ]);
  // A call inside code with CFI (a .debug_frame row) overrides it, and the row is back after the call.
  const covered = withGoRules(table([[0x3000, Rsp, 8], [0x3100, Invalid, 0]]), {
    code: null,
    cgoCalls: [{ start: 0x3010, end: 0x3012, depthSlot: 40, gSlot: 48, callerRbpSaved: false }],
    frameless: [],
    callbacks: [],
    signal: null,
    duff: [],
  });
  assert.deepEqual(rowsOf(covered), [
    [0x3000, Rsp, 8, 0],
    [0x3010, GoCgoCall, 40, 0],
    [0x3012, Rsp, 8, 0],
    [0x3100, Invalid, 0, 0],
  ]);
  assert.equal(out.fpRules.every((rule) => rule === FpRule.Unchanged), true);
});

Deno.test("withGoRules unwinds Go's Duff's devices by their callers' pretend frame where no CFI covers them", () => {
  // Go code 0x1000-0x4000 without CFI but for a .debug_frame row of the second device at 0x3000-0x3400.
  const { Rsp, Rbp, FramePointer, Invalid } = CfaRule;
  const out = withGoRules(table([[0x3000, Rsp, 8], [0x3400, Invalid, 0]]), {
    code: { start: 0x1000, end: 0x4000 },
    cgoCalls: [],
    frameless: [],
    callbacks: [],
    signal: null,
    duff: [{ start: 0x2000, end: 0x2171 }, { start: 0x3000, end: 0x3391 }],
  });
  const rows = Array.from(
    { length: out.length },
    (_, i) => [out.addresses[i], out.cfaRules[i], out.cfaOffsets[i], out.fpRules[i], out.fpOffsets[i]],
  );
  const { Unchanged, CfaOffset } = FpRule;
  assert.deepEqual(rows, [
    [0x1000, FramePointer, 0, Unchanged, 0],
    [0x2000, Rbp, 16, CfaOffset, -16],
    [0x2171, FramePointer, 0, Unchanged, 0],
    [0x3000, Rsp, 8, Unchanged, 0],
    [0x3400, FramePointer, 0, Unchanged, 0],
    [0x4000, Invalid, 0, Unchanged, 0],
  ]);
});

/** The rule the stack deltas give `address` (the last row at or before it in its page). */
function deltaAt(deltas: StackDeltaFile, address: number): number {
  const page = deltas.pages.indexOf(Math.floor(address / 65536));
  assert.ok(page >= 0, `a page for 0x${address.toString(16)}`);
  let info = -1;
  for (let i = deltas.pageFirst[page]!; i < deltas.pageFirst[page]! + deltas.pageCount[page]!; i++) {
    if (deltas.deltas[2 * i]! <= address % 65536) info = deltas.deltas[2 * i + 1]!;
  }
  return info;
}

/** A call of C code in runtime.asmcgocall, as Go's own disassembler lists it. */
interface ObjdumpCall {
  address: number;
  /** The call instruction's length in bytes: 2 for `CALL AX`, 5 for a direct call. */
  length: number;
  /** The last `MOVQ DI, n(SP)` or `MOVQ DX, n(SP)` before it: the depth slot (or the saved rsp). */
  depthSlot: number;
  /** asmcgocall begins with PUSHQ BP (later releases). */
  pushesBp: boolean;
}

/**
 * The calls of C code in runtime.asmcgocall of `binary`, as Go's own disassembler lists them: `CALL AX`
 * (Go 1.19), or the call of runtime.asmcgocall_landingpad, which jumps to the C code (later releases).
 */
async function callsByObjdump(binary: string): Promise<ObjdumpCall[]> {
  const result = await new Deno.Command("go", {
    args: ["tool", "objdump", "-s", "^runtime\\.asmcgocall(\\.abi0)?$", binary],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(result.success, new TextDecoder().decode(result.stderr));
  const calls: ObjdumpCall[] = [];
  let pushesBp = false;
  let first = false;
  let depthSlot = -1;
  for (const line of new TextDecoder().decode(result.stdout).split("\n")) {
    if (line.startsWith("TEXT ")) {
      first = true;
      depthSlot = -1;
      continue;
    }
    const fields = line.trim().split(/\s+/);
    if (fields.length < 4) continue;
    // file:line, address, bytes, then the instruction.
    const text = line.slice(
      line.indexOf(fields[2]!, line.indexOf(fields[1]!) + fields[1]!.length) + fields[2]!.length,
    )
      .trim();
    if (first) pushesBp = /^PUSHQ BP\b/.test(text);
    first = false;
    const store = /^MOVQ (?:DI|DX), (?:(0x[0-9a-f]+|\d+))?\(SP\)/.exec(text);
    if (store) depthSlot = store[1] === undefined ? 0 : Number(store[1]);
    if (/^CALL (AX|runtime\.asmcgocall_landingpad(\.abi0)?\(SB\))/.test(text)) {
      calls.push({ address: parseInt(fields[1]!, 16), length: fields[2]!.length / 2, depthSlot, pushesBp });
    }
  }
  return calls;
}

Deno.test(requiring([programs("go", "gcc")], {
  name:
    "the stack deltas of a cgo binary, stripped or not, mark each C call of asmcgocall Go's objdump lists",
  async fn() {
    const plain = await buildGoWorkload("cgo_chain", {}, "");
    const stripped = await buildGoWorkload("cgo_chain", { ldflags: "-s -w" }, "-stripped");
    const listed = await callsByObjdump(plain);
    assert.ok(listed.length > 0, "objdump lists asmcgocall's calls of C code");
    const expected = listed.map((call) => call.address);
    for (const binary of [plain, stripped]) {
      using elf = ElfFile.open(binary);
      const rules = goUnwindRules(elf);
      assert.ok(rules, `${binary} is a Go binary`);
      // Stripping keeps the code where it was (the stripped binary has no symbols for objdump).
      assert.deepEqual(rules.cgoCalls.map((call) => call.start), expected, binary);
      const store: { opcode: number; fpOpcode: number; param: number; fpParam: number }[] = [];
      const registry = new UnwindInfoRegistry(16384, (index, opcode, fpOpcode, _merge, param, fpParam) => {
        store[index] = { opcode, fpOpcode, param, fpParam };
      });
      const cfi = extractUnwindTable(elf);
      const deltas = buildStackDeltas(withGoRules(cfi, rules), registry);
      for (const { address: call, length, depthSlot, pushesBp } of listed) {
        // The BPF unwinder looks up a return address less one: the call's last byte.
        for (const address of [call, call + length - 1]) {
          const info = deltaAt(deltas, address);
          assert.ok(info >= 0 && !(info & StackDeltaConstants.DeltaCommandFlag), `0x${address.toString(16)}`);
          // The depth slot objdump shows stored (40(SP) in Go 1.19, 0(SP) later), and rbp saved at the
          // entry rsp where asmcgocall pushes it.
          assert.deepEqual(store[info], {
            opcode: UnwindOpcode.GoCgoCall,
            fpOpcode: pushesBp ? UnwindFpOpcode.CfaOffset : UnwindFpOpcode.Unchanged,
            param: depthSlot,
            fpParam: pushesBp ? -16 : 0,
          });
        }
        // Right after the call, asmcgocall's own rule is back.
        assert.notDeepEqual(store[deltaAt(deltas, call + length)], store[deltaAt(deltas, call)]);
      }
      // Go code without CFI (all of it once stripped) follows frame pointers: main.b, found by its name.
      const b = [...GoSymbols.read(elf)!.functions()].find((f) => f.name === "main.b");
      assert.ok(b, "main.b");
      if (binary === stripped) {
        assert.equal(
          findRow(cfi, b.entry) < 0 || cfi.cfaRules[findRow(cfi, b.entry)] === CfaRule.Invalid,
          true,
        );
        assert.equal(
          deltaAt(deltas, b.entry),
          StackDeltaConstants.DeltaCommandFlag | UnwindCommand.FramePointer,
        );
      }
    }
  },
}));

Deno.test(requiring([programs("go", "gcc")], {
  name: "the stack deltas of a cgo binary that C calls back mark cgocallback's call of cgocallbackg",
  async fn() {
    const plain = await buildGoWorkload("cgo_callback", {}, "");
    // Go's disassembler: the CALL AX right after LEAQ runtime.cgocallbackg.abi0(SB), AX.
    const result = await new Deno.Command("go", {
      args: ["tool", "objdump", "-s", "^runtime\\.cgocallback", plain],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(result.success, new TextDecoder().decode(result.stderr));
    const lines = new TextDecoder().decode(result.stdout).split("\n");
    const lea = lines.findIndex((line) => /LEAQ runtime\.cgocallbackg(\.abi0)?\(SB\), AX/.test(line));
    assert.ok(lea >= 0 && /\bCALL AX\b/.test(lines[lea + 1]!), "objdump lists LEAQ cgocallbackg; CALL AX");
    const call = parseInt(lines[lea + 1]!.trim().split(/\s+/)[1]!, 16);
    using elf = ElfFile.open(plain);
    const rules = goUnwindRules(elf)!;
    assert.deepEqual(rules.callbacks.map((callback) => callback.start), [call]);
    const store: { opcode: number; fpOpcode: number; param: number; fpParam: number }[] = [];
    const registry = new UnwindInfoRegistry(16384, (index, opcode, fpOpcode, _merge, param, fpParam) => {
      store[index] = { opcode, fpOpcode, param, fpParam };
    });
    const deltas = buildStackDeltas(withGoRules(extractUnwindTable(elf), rules), registry);
    // The return address less one: CFA = rbp + 16, rbp saved at CFA - 16.
    assert.deepEqual(store[deltaAt(deltas, call + 1)], {
      opcode: UnwindOpcode.BaseFp,
      fpOpcode: UnwindFpOpcode.CfaOffset,
      param: 16,
      fpParam: -16,
    });
  },
}));

Deno.test(requiring([programs("go")], {
  name:
    "the stack deltas of a stripped Go binary give its signal handler the frames Go's CFI gives, and its restorer a Signal row",
  async fn() {
    const plain = await buildGoWorkload("labels", {}, "-symbols");
    const stripped = await buildGoWorkload("labels", { ldflags: "-s -w" }, "-stripped");
    // The restorer, as Go's disassembler lists it: MOVQ $0xf, AX (rt_sigreturn); SYSCALL.
    const result = await new Deno.Command("go", {
      args: ["tool", "objdump", "-s", "^runtime\\.sigreturn", plain],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(result.success, new TextDecoder().decode(result.stderr));
    const lines = new TextDecoder().decode(result.stdout).split("\n");
    const first = lines.findIndex((line) => line.startsWith("TEXT runtime.sigreturn"));
    assert.ok(first >= 0 && /MOVQ \$0xf, AX/.test(lines[first + 1]!), "objdump lists the restorer");
    assert.ok(/\bSYSCALL\b/.test(lines[first + 2]!));
    const restorer = parseInt(lines[first + 1]!.trim().split(/\s+/)[1]!, 16);
    const syscall = parseInt(lines[first + 2]!.trim().split(/\s+/)[1]!, 16);

    // Go's linker writes .debug_frame (CFA = rsp + frame) from the same SP delta tables; -w drops it.
    using plainElf = ElfFile.open(plain);
    const cfi = extractUnwindTable(plainElf);
    using elf = ElfFile.open(stripped);
    const rules = goUnwindRules(elf)!;
    assert.ok(rules.signal, "sigtramp, sigtrampgo and the restorer recognized");
    const store: { opcode: number; fpOpcode: number; param: number; fpParam: number }[] = [];
    const registry = new UnwindInfoRegistry(16384, (index, opcode, fpOpcode, _merge, param, fpParam) => {
      store[index] = { opcode, fpOpcode, param, fpParam };
    });
    const deltas = buildStackDeltas(withGoRules(extractUnwindTable(elf), rules), registry);
    const symbols = GoSymbols.read(elf)!;
    let checked = 0;
    for (const run of rules.signal.frames) {
      const name = symbols.functionAt(run.start)?.name;
      assert.ok(name === "runtime.sigtramp" || name === "runtime.sigtrampgo", name);
      for (let address = run.start; address < run.end; address++) {
        const row = findRow(cfi, address);
        assert.ok(row >= 0 && cfi.cfaRules[row] === CfaRule.Rsp, `CFI at 0x${address.toString(16)}`);
        const rule = store[deltaAt(deltas, address)]!;
        assert.equal(rule.opcode, UnwindOpcode.BaseSp);
        assert.equal(rule.param, cfi.cfaOffsets[row], `CFA offset at 0x${address.toString(16)} (${name})`);
        // sigtramp keeps the interrupted rbp; sigtrampgo saves it below its return address.
        assert.equal(rule.fpOpcode, run.rbpSaved ? UnwindFpOpcode.CfaOffset : UnwindFpOpcode.Unchanged);
        checked++;
      }
    }
    const tramp = [...symbols.functionsNamed(["runtime.sigtramp", "runtime.sigtrampgo"])];
    assert.ok(rules.signal.frames.some((run) => run.rbpSaved), "sigtrampgo saves rbp");
    console.log(`${checked} addresses of ${tramp.map((f) => f.name).join(" and ")} as Go's CFI says`);
    // The handler returns to the restorer's entry, looked up less one; an interrupted system call is in it.
    for (const address of [restorer - 1, restorer, syscall]) {
      assert.equal(
        deltaAt(deltas, address),
        StackDeltaConstants.DeltaCommandFlag | UnwindCommand.Signal,
        `0x${address.toString(16)}`,
      );
    }
  },
}));

Deno.test(requiring([programs("go")], {
  name:
    "the stack deltas of a stripped Go binary unwind runtime.duffzero and runtime.duffcopy by their callers' pretend frame",
  async fn() {
    const plain = await buildGoWorkload("duff", {}, "-symbols");
    const stripped = await buildGoWorkload("duff", { ldflags: "-s -w" }, "-stripped");
    // Each device from its first instruction to its RET, as Go's disassembler lists them.
    const result = await new Deno.Command("go", {
      args: ["tool", "objdump", "-s", "^runtime\\.duff(zero|copy)$", plain],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(result.success, new TextDecoder().decode(result.stderr));
    const listed: { start: number; end: number }[] = [];
    for (const line of new TextDecoder().decode(result.stdout).split("\n")) {
      const address = parseInt(line.trim().split(/\s+/)[1] ?? "", 16);
      if (line.startsWith("TEXT ")) listed.push({ start: -1, end: -1 });
      else if (Number.isFinite(address) && listed.length > 0) {
        const device = listed[listed.length - 1]!;
        if (device.start < 0) device.start = address;
        if (/\bRET\b/.test(line)) device.end = address + 1;
      }
    }
    assert.equal(listed.length, 2, "objdump lists runtime.duffzero and runtime.duffcopy");

    using elf = ElfFile.open(stripped);
    const rules = goUnwindRules(elf)!;
    assert.deepEqual(rules.duff, listed.sort((x, y) => x.start - y.start));
    const store: { opcode: number; fpOpcode: number; param: number; fpParam: number }[] = [];
    const registry = new UnwindInfoRegistry(16384, (index, opcode, fpOpcode, _merge, param, fpParam) => {
      store[index] = { opcode, fpOpcode, param, fpParam };
    });
    const deltas = buildStackDeltas(withGoRules(extractUnwindTable(elf), rules), registry);
    for (const { start, end } of rules.duff) {
      // CFA = rbp + 16, the caller's rbp at CFA - 16; and past the RET, frame pointers again.
      for (const address of [start, start + 1, end - 1]) {
        assert.deepEqual(store[deltaAt(deltas, address)], {
          opcode: UnwindOpcode.BaseFp,
          fpOpcode: UnwindFpOpcode.CfaOffset,
          param: 16,
          fpParam: -16,
        }, `0x${address.toString(16)}`);
      }
      assert.equal(deltaAt(deltas, end), StackDeltaConstants.DeltaCommandFlag | UnwindCommand.FramePointer);
    }

    // With Go's .debug_frame, its rows stay: CFA = rsp + 8, and the callers have CFI rows too.
    using plainElf = ElfFile.open(plain);
    const cfi = extractUnwindTable(plainElf);
    const covered = withGoRules(cfi, goUnwindRules(plainElf)!);
    for (const { start } of rules.duff) {
      const row = findRow(covered, start);
      assert.deepEqual([covered.cfaRules[row], covered.cfaOffsets[row]], [CfaRule.Rsp, 8]);
    }
  },
}));

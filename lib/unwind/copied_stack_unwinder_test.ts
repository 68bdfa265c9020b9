import assert from "node:assert/strict";
import type { MappedFile, ResolvedAddress, ResolvedMapping } from "../process/mapped_file.ts";
import { unreadableFile } from "../process/mapped_file.ts";
import type { Pid } from "../types.ts";
import {
  Limits,
  StackDeltaConstants,
  UnwindCommand,
  UnwindFpOpcode,
  UnwindOpcode,
  UnwindStopReason,
} from "../../support/types.ts";
import { type CopiedStack, CopiedStackUnwinder } from "./copied_stack_unwinder.ts";
import { RuleLookup } from "./stack_delta_loader.ts";
import type { ResolvedRule } from "./stack_deltas.ts";

const PID = 42 as Pid;
/** One file mapped at 0x400000 with bias 0: process addresses are its ELF addresses. */
const FILE: MappedFile = unreadableFile("test", "file", "/test/program", null);
const MAPPING: ResolvedMapping = {
  start: 0x400000,
  end: 0x500000,
  fileOffset: 0,
  path: FILE.path,
  file: FILE,
} as ResolvedMapping;

function resolveInMapping(_pid: Pid, address: number): ResolvedAddress | null {
  return address >= MAPPING.start && address < MAPPING.end
    ? { mapping: MAPPING, fileOffset: address - MAPPING.start }
    : null;
}

type Rule =
  | Omit<ResolvedRule, "unwindInfo"> & { unwindInfo?: number }
  | { command: number }
  | "frame-pointer";

/** Rules by the ELF address looked up (return addresses minus one). */
function unwinder(rules: Map<number, Rule>) {
  const lookups: number[] = [];
  const instance = new CopiedStackUnwinder(
    { resolve: resolveInMapping, resolveAsRead: resolveInMapping },
    {
      elfAddress: (_mapping, address) => address,
      ruleAt: (_file, lookup, out) => {
        lookups.push(lookup);
        const rule = rules.get(lookup);
        if (rule === undefined) return RuleLookup.NoInfo;
        if (rule === "frame-pointer") return RuleLookup.FramePointer;
        if ("command" in rule) {
          Object.assign(out, { unwindInfo: StackDeltaConstants.DeltaCommandFlag | rule.command });
          return RuleLookup.Found;
        }
        Object.assign(out, { unwindInfo: 0, ...rule });
        return RuleLookup.Found;
      },
    },
  );
  return { instance, lookups };
}

/** A copied stack at `sp` holding `words` (8 bytes each) from `start` (default: sp), taken at the leaf. */
function copyOf(pc: number, sp: number, fp: number, words: number[], start = sp): CopiedStack {
  const view = new DataView(new ArrayBuffer(16 + words.length * 8));
  words.forEach((word, i) => {
    view.setUint32(16 + i * 8, word % 2 ** 32, true);
    view.setUint32(16 + i * 8 + 4, Math.floor(word / 2 ** 32), true);
  });
  return {
    takenAtNs: -1,
    pc,
    sp,
    fp,
    returnAddress: false,
    framesBefore: 0,
    view,
    data: 16,
    length: words.length * 8,
    start,
  };
}

function run(rules: Map<number, Rule>, copy: CopiedStack) {
  const { instance, lookups } = unwinder(rules);
  const frames: { address: number; returnAddress: boolean; signal: boolean }[] = [];
  const stop = instance.unwind(PID, copy, (address, returnAddress, _resolved, signal) => {
    frames.push({ address, returnAddress, signal });
  });
  return { stop, frames: frames.map((f) => f.address), detail: frames, lookups, stats: instance.stats };
}

const SP = 0x7ffd0000;
const sp = (cfaParam: number): Rule => ({
  cfaOpcode: UnwindOpcode.BaseSp,
  cfaParam,
  fpOpcode: UnwindFpOpcode.Unchanged,
  fpParam: 0,
});

Deno.test("CopiedStackUnwinder follows CFA rules from rsp and rbp to the outermost frame", () => {
  // leaf at 0x401000: CFA = rsp + 16 (one slot of locals, then the return address 0x402005).
  // 0x402005 (lookup 0x402004): pushed rbp, CFA = rbp + 16, rbp saved at CFA - 16; returns to 0x403009.
  // 0x403009 (lookup 0x403008): the outermost frame.
  const rbp = SP + 16; // where the middle frame saved the caller's rbp
  const words = [
    0xdead, // SP + 0: the leaf's local
    0x402005, // SP + 8: the leaf's return address (CFA = SP + 16)
    0x7777, // SP + 16: saved rbp of the outermost frame
    0x403009, // SP + 24: return address of the middle frame
  ];
  const rules = new Map<number, Rule>([
    [0x401000, sp(16)],
    [0x402004, {
      cfaOpcode: UnwindOpcode.BaseFp,
      cfaParam: 16,
      fpOpcode: UnwindFpOpcode.CfaOffset,
      fpParam: -16,
    }],
    [0x403008, { command: UnwindCommand.Stop }],
  ]);
  const result = run(rules, copyOf(0x401000, SP, rbp, words));
  assert.deepEqual(result.frames, [0x401000, 0x402005, 0x403009]);
  assert.deepEqual(result.lookups, [0x401000, 0x402004, 0x403008], "return addresses are looked up at - 1");
  assert.deepEqual(result.detail.map((f) => f.returnAddress), [false, true, true]);
  assert.equal(result.stop, UnwindStopReason.EndOfStack);
  assert.deepEqual(result.stats, { samples: 1, frames: 3, stops: { EndOfStack: 1 } });
});

Deno.test("CopiedStackUnwinder goes on from a frame above the leaf where BPF stopped", () => {
  // BPF unwound two frames and met a file whose deltas were not loaded at the return address 0x402005:
  // the copy starts there, so the lookup is at the call (0x402004), and the frames it gives share the
  // trace's limit with BPF's two.
  const words = [
    0x403009, // SP + 0: return address of the frame at 0x402005 (CFA = SP + 8)
  ];
  const rules = new Map<number, Rule>([
    [0x402004, sp(8)],
    [0x403008, { command: UnwindCommand.Stop }],
  ]);
  const copy = { ...copyOf(0x402005, SP, 0, words), returnAddress: true, framesBefore: 2 };
  const result = run(rules, copy);
  assert.deepEqual(result.frames, [0x402005, 0x403009]);
  assert.deepEqual(result.lookups, [0x402004, 0x403008]);
  assert.deepEqual(result.detail.map((f) => f.returnAddress), [true, true]);
  assert.equal(result.stop, UnwindStopReason.EndOfStack);

  const full = { ...copy, framesBefore: Limits.MaxFrameUnwinds - 1 };
  const limited = run(rules, full);
  assert.deepEqual(limited.frames, [0x402005], "one frame left of the trace's limit");
  assert.equal(limited.stop, UnwindStopReason.Truncated);
});

Deno.test("CopiedStackUnwinder applies the PLT expression and the frame-pointer command", () => {
  // A PLT stub past its push (pc & 15 >= 11): CFA = rsp + 16. Its caller follows rbp.
  const fp = SP + 16;
  const words = [
    0x1, // SP + 0: what the stub pushed
    0x402005, // SP + 8: return address
    0, // SP + 16 = rbp: saved rbp 0 (the chain ends above)
    0x403009, // SP + 24: return address
  ];
  const rules = new Map<number, Rule>([
    [0x40100b, { command: UnwindCommand.Plt }],
    [0x402004, { command: UnwindCommand.FramePointer }],
    [0x403008, { command: UnwindCommand.Stop }],
  ]);
  const result = run(rules, copyOf(0x40100b, SP, fp, words));
  assert.deepEqual(result.frames, [0x40100b, 0x402005, 0x403009]);
  assert.equal(result.stop, UnwindStopReason.EndOfStack);
});

Deno.test("CopiedStackUnwinder follows frame pointers where a file has no tables, and outside every mapping", () => {
  const fp = SP + 8;
  const words = [
    0, // SP + 0
    SP + 24, // SP + 8 = rbp: saved rbp
    0x7f0000001234, // return address outside the mapping
    SP + 40, // SP + 24: saved rbp
    0x403009, // SP + 32: return address
    0, // SP + 40: saved rbp 0
    0, // SP + 48: return address 0: the end
  ];
  const rules = new Map<number, Rule>([[0x401000, "frame-pointer"], [0x403008, "frame-pointer"]]);
  const result = run(rules, copyOf(0x401000, SP, fp, words));
  assert.deepEqual(result.frames, [0x401000, 0x7f0000001234, 0x403009]);
  assert.equal(result.stop, UnwindStopReason.EndOfStack);
});

Deno.test("CopiedStackUnwinder crosses a signal frame into the interrupted registers", () => {
  // The trampoline at 0x401000: the ucontext at rsp, its mcontext 40 bytes in (rbp +80, rsp +120, rip +128).
  const words = new Array<number>(40).fill(0);
  words[(40 + 80) / 8] = 0; // rbp
  words[(40 + 120) / 8] = SP + 256; // rsp
  words[(40 + 128) / 8] = 0x402000; // rip: interrupted, not a return address
  words[256 / 8] = 0x403009; // return address of the interrupted frame (CFA = rsp + 8)
  while (words.length < 256 / 8 + 1) words.push(0);
  const rules = new Map<number, Rule>([
    [0x401000, { command: UnwindCommand.Signal }],
    [0x402000, sp(8)],
    [0x403008, { command: UnwindCommand.Stop }],
  ]);
  const result = run(rules, copyOf(0x401000, SP, 0, words));
  assert.deepEqual(result.frames, [0x401000, 0x402000, 0x403009]);
  assert.deepEqual(result.detail.map((f) => f.signal), [true, false, false]);
  assert.deepEqual(
    result.lookups,
    [0x401000, 0x402000, 0x403008],
    "the interrupted pc is looked up as it is",
  );
});

Deno.test("CopiedStackUnwinder stops where the copy ends, saying whether the stack went on", () => {
  const rules = new Map<number, Rule>([[0x401000, sp(64)]]);
  // The return address would be at SP + 56, past a 16-byte copy of a stack that ended there.
  const ended = run(rules, copyOf(0x401000, SP, 0, [1, 2]));
  assert.equal(ended.stop, UnwindStopReason.ReadFailed);
  // A whole window was copied: the stack went on past it.
  const words = new Array<number>(Limits.CopiedStackBytes / 8).fill(0);
  const rulesDeep = new Map<number, Rule>([[0x401000, sp(Limits.CopiedStackBytes + 8)]]);
  assert.equal(run(rulesDeep, copyOf(0x401000, SP, 0, words)).stop, UnwindStopReason.CopyExhausted);
});

Deno.test("CopiedStackUnwinder reads a copy that starts past rsp's page at each value's own address", () => {
  // rsp's page was not copied: the copy starts at the next page, where the CFA's return address is.
  const start = SP + 0x100;
  const rules = new Map<number, Rule>([[0x401000, sp(0x108)], [0x402004, { command: UnwindCommand.Stop }]]);
  const result = run(rules, copyOf(0x401000, SP, 0, [0x402005], start));
  assert.deepEqual(result.frames, [0x401000, 0x402005]);
  assert.equal(result.stop, UnwindStopReason.EndOfStack);
});

Deno.test("CopiedStackUnwinder stops on a missing rule, a bad frame pointer, and after the most frames", () => {
  assert.equal(run(new Map(), copyOf(0x401000, SP, 0, [0])).stop, UnwindStopReason.NoUnwindInfo);
  // rbp below rsp: not a frame record of a caller.
  assert.equal(
    run(new Map<number, Rule>([[0x401000, "frame-pointer"]]), copyOf(0x401000, SP, SP - 16, [0])).stop,
    UnwindStopReason.BadFramePointer,
  );
  // A function that calls itself forever: CFA = rsp + 8, every return address 0x401005.
  const words = new Array<number>(200).fill(0x401005);
  const recursive = new Map<number, Rule>([[0x401000, sp(8)], [0x401004, sp(8)]]);
  const result = run(recursive, copyOf(0x401000, SP, 0, words));
  assert.equal(result.stop, UnwindStopReason.Truncated);
  assert.equal(result.frames.length, Limits.MaxFrameUnwinds);
});

Deno.test("CopiedStackUnwinder reads the process again only for the interrupted instruction", () => {
  const calls: string[] = [];
  const instance = new CopiedStackUnwinder(
    {
      resolve: (pid, address) => {
        calls.push(`resolve 0x${address.toString(16)}`);
        return resolveInMapping(pid, address);
      },
      resolveAsRead: (pid, address) => {
        calls.push(`as read 0x${address.toString(16)}`);
        return resolveInMapping(pid, address);
      },
    },
    {
      elfAddress: (_mapping, address) => address,
      ruleAt: (_file, _lookup, out) => {
        Object.assign(out, { unwindInfo: StackDeltaConstants.DeltaCommandFlag | UnwindCommand.FramePointer });
        return RuleLookup.Found;
      },
    },
  );
  // A frame-pointer chain leading out of every mapping: its garbage return address is no reason to read.
  const words = [0, SP + 24, 0x7f0000001234, 0, 0];
  instance.unwind(PID, copyOf(0x401000, SP, SP + 8, words), () => {});
  assert.deepEqual(calls, ["resolve 0x401000", "as read 0x7f0000001234"]);
});

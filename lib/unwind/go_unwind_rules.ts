/**
 * The rows a Go binary's unwind table needs besides its CFI, found from its `.gopclntab`:
 *
 * - Go code has no `.eh_frame` (only `.debug_frame`, which `-ldflags=-w` strips), but keeps frame
 *   pointers on amd64: where the table has no rule in the range of Go's functions, frame pointers are
 *   followed, so a cgo binary's Go frames are not cut off where its C code's `.eh_frame` ends.
 * - runtime.asmcgocall switches from the goroutine's stack to the thread's system stack (g0) to call C
 *   code. Its call of the C function gets a {@linkcode CfaRule.GoCgoCall} row, which the BPF unwinder
 *   follows back onto the goroutine's stack, so that a sample in C code shows the Go callers too. The
 *   slots asmcgocall saves its g and its depth below the goroutine's stack top in are read from its code
 *   (they moved between Go releases): a call is marked only where the instructions before it are the
 *   known save sequence, so an unknown layout loses the Go callers but never makes up frames.
 * - runtime.cgocallback, which runs Go code that C calls, does so on the goroutine's stack while its own
 *   frame stays on the system stack: its call unwinds by its frame pointer, back to the C code (see
 *   {@linkcode GoCallback}).
 * - Go's signal handler runs on the thread's signal stack, and its frame-pointer chain leads straight into
 *   the interrupted goroutine's stack, which may lie below it: a chain that goes down the stack is taken
 *   for garbage. So runtime.sigtramp, the handler the kernel calls, and runtime.sigtrampgo, which it calls,
 *   get their frames from the SP delta table: no frame pointer is followed out of them, the kernel's
 *   return address (Go's own restorer) is found, the restorer gets a Signal row, and the unwinder goes on
 *   from the interrupted registers in the signal frame, as it does at libc's (see
 *   {@linkcode GoSignalFrames}).
 * - runtime.duffzero and runtime.duffcopy, the Duff's devices the compiler calls to zero and copy blocks,
 *   have no frame of their own, and each call of them gets a pretend one instead, just below the caller's
 *   rsp: rbp lies below rsp in them, which the frame-pointer walk refuses. Where no CFI covers them, they
 *   unwind by that pretend frame (see {@linkcode GoUnwindRules.duff}).
 *
 * @example
 * ```ts ignore
 * import { ElfFile } from "../elf/elf_file.ts";
 * import { extractUnwindTable } from "./unwind_table.ts";
 * import { goUnwindRules, withGoRules } from "./go_unwind_rules.ts";
 * using elf = ElfFile.open("./server");
 * const rules = goUnwindRules(elf); // null: not a Go binary
 * const table = rules ? withGoRules(extractUnwindTable(elf), rules) : extractUnwindTable(elf);
 * ```
 *
 * @module
 */

import type { ElfFile } from "../elf/elf_file.ts";
import type { Address } from "../types.ts";
import { type GoFunction, GoSymbols } from "../symbolize/go/go_symbols.ts";
import { CfaRule, FpRule, type UnwindTable } from "./unwind_table.ts";

/** One call of C code by runtime.asmcgocall: the call instruction and asmcgocall's saved slots. */
export interface GoCgoCall {
  /** The call instruction's bytes [start, end) (ELF addresses); `end` is the return address. */
  start: number;
  end: number;
  /** Where asmcgocall saved, from rsp at the call: its entry rsp's depth below g.stack.hi, and g. */
  depthSlot: number;
  gSlot: number;
  /**
   * Whether asmcgocall pushed rbp at entry, before saving its entry rsp (Go 1.23 and later): the caller's
   * rbp then lies at that rsp and the return address 8 bytes above it.
   */
  callerRbpSaved: boolean;
}

/** A rule without its address. */
type Rule = Omit<Row, "address">;

/**
 * Where a Go binary that installs its own signal handlers (not through libc: a binary linked by Go) has
 * the code the kernel enters and leaves a handler through.
 */
export interface GoSignalFrames {
  /**
   * The code of runtime.sigtramp and runtime.sigtrampgo, in runs of one frame: CFA = rsp + `cfaOffset`
   * (sigtramp's CFA is where the kernel left the signal frame, right above the return address it pushed:
   * the restorer), and the caller's rbp saved at CFA - 16 (`rbpSaved`, sigtrampgo once its prologue ran)
   * or still in rbp (sigtramp never changes it).
   */
  frames: GoFrameRun[];
  /**
   * The restorer (runtime.sigreturn__sigaction; runtime.sigreturn up to Go 1.20) [start, end), from one
   * byte before its entry: a return address is looked up less one, and the handler's is the entry.
   */
  restorer: { start: number; end: number };
}

/** Code [start, end) with one frame, from a function's SP delta table. */
export interface GoFrameRun {
  start: number;
  end: number;
  cfaOffset: number;
  rbpSaved: boolean;
}

/** A range of code [start, end) (ELF addresses), and how it changes each rule in force there. */
interface Overlay {
  start: number;
  end: number;
  map: (rule: Rule) => Rule;
}

/** What {@linkcode withGoRules} adds to a Go binary's table. */
export interface GoUnwindRules {
  /** The range of Go's functions. */
  code: { start: number; end: number } | null;
  /** The C calls of runtime.asmcgocall whose save sequence was recognized. */
  cgoCalls: GoCgoCall[];
  /** asmcgocall_landingpad's calls of C code: it has no frame (CFA = rsp + 8). */
  frameless: { start: number; end: number }[];
  /** runtime.cgocallback's calls of Go code, on the goroutine's stack, for C code calling Go. */
  callbacks: GoCallback[];
  /** The handler and restorer of Go's signals, or null when they were not both recognized. */
  signal: GoSignalFrames | null;
  /**
   * The code [start, end) of runtime.duffzero and runtime.duffcopy, whose SP delta tables say they never
   * move rsp. Go's assembler wraps each direct call of them (cmd/internal/obj/x86/asm6.go, `bpduff1` and
   * `bpduff2`, amd64) in a pretend frame record, since they cannot push rbp themselves (callers jump into
   * their middle):
   *
   * ```
   * MOVQ BP, -16(SP)   48 89 6c 24 f0
   * LEAQ -16(SP), BP   48 8d 6c 24 f0
   * CALL runtime.duffzero+off
   * MOVQ 0(BP), BP     48 8b 6d 00
   * ```
   *
   * So in them rbp = rsp - 8 (below rsp: a frame-pointer walk stops there), [rbp] is the caller's rbp and
   * [rbp + 8] the return address: CFA = rbp + 16 (= rsp + 8), rbp saved at CFA - 16. Were a call ever made
   * without that frame (code built with -dynlink calls them through a register, without it), rbp is still
   * the caller's own frame pointer, and the same rule unwinds the caller's frame record instead: the caller
   * is left out, as any frame-pointer walk from a leaf without a frame leaves it out, but no frame is made
   * up.
   */
  duff: { start: number; end: number }[];
}

/**
 * runtime.cgocallback, which C code calls (through crosscall2) to run Go code, switches to the
 * goroutine's stack and calls runtime.cgocallbackg there with rbp still its own frame pointer, on the
 * system stack; the return address Go leaves above that frame is no caller's. So cgocallback's call
 * unwinds by frame pointer (back onto the system stack, to crosscall2), and the callee's rows say where it
 * saved rbp, which CFI from Go does not.
 */
export interface GoCallback {
  /** The call instruction's bytes [start, end) in cgocallback. */
  start: number;
  end: number;
  /** The callee's code after its prologue saved rbp, and the CFA offset of its frame there. */
  callee: { start: number; end: number; cfaOffset: number };
}

/** Functions larger than this are not asmcgocall (a few dozen instructions): their code is not read. */
const MAX_FUNCTION_BYTES = 4096;

/**
 * The rows for Go code of `elf`, or null when it is not a Go binary (no `.gopclntab` this reads).
 *
 * @throws {RangeError} when its `.gopclntab` is malformed.
 */
export function goUnwindRules(elf: ElfFile): GoUnwindRules | null {
  const symbols = GoSymbols.read(elf);
  if (symbols === null) return null;
  const cgoCalls: GoCgoCall[] = [];
  const frameless: { start: number; end: number }[] = [];
  const landingPads = new Map<number, number>();
  const asmcgocalls: { entry: number; end: number }[] = [];
  const cgocallbacks: { entry: number; end: number }[] = [];
  const cgocallbackgs = new Map<number, number>();
  const sigtramps: GoFunction[] = [];
  const sigtrampgos: GoFunction[] = [];
  const restorers: GoFunction[] = [];
  const duff: { start: number; end: number }[] = [];
  const names = [
    "runtime.asmcgocall",
    "runtime.asmcgocall_landingpad",
    "runtime.cgocallback",
    "runtime.cgocallbackg",
    "runtime.sigtramp",
    "runtime.sigtrampgo",
    "runtime.sigreturn__sigaction",
    "runtime.sigreturn",
    "runtime.duffzero",
    "runtime.duffcopy",
  ];
  for (const f of symbols.functionsNamed(names)) {
    if (f.name === "runtime.asmcgocall") asmcgocalls.push(f);
    if (f.name === "runtime.asmcgocall_landingpad") landingPads.set(f.entry, f.end);
    if (f.name === "runtime.cgocallback") cgocallbacks.push(f);
    if (f.name === "runtime.cgocallbackg") cgocallbackgs.set(f.entry, f.end);
    if (f.name === "runtime.sigtramp") sigtramps.push(f);
    if (f.name === "runtime.sigtrampgo") sigtrampgos.push(f);
    if (f.name.startsWith("runtime.sigreturn")) restorers.push(f);
    if (f.name === "runtime.duffzero" || f.name === "runtime.duffcopy") {
      // One run from the entry with no frame: rsp is never moved, so rbp is still what the call site made.
      const runs = frameRuns(symbols, f, null);
      if (runs.length === 1 && runs[0]!.start === f.entry && runs[0]!.cfaOffset === 8) {
        duff.push({ start: f.entry, end: runs[0]!.end });
      }
    }
  }
  const callbacks: GoCallback[] = [];
  for (const f of cgocallbacks) {
    const code = codeOf(elf, f.entry, f.end);
    const call = code === null ? null : findCallbackCall(code, f.entry);
    if (call === null) continue;
    const calleeEnd = cgocallbackgs.get(call.target);
    const callee = calleeEnd === undefined ? null : codeOf(elf, call.target, calleeEnd);
    const frame = callee === null ? null : standardFrame(callee);
    if (frame === null) continue;
    callbacks.push({
      start: call.start,
      end: call.end,
      callee: { start: call.target + frame.saved, end: calleeEnd!, cfaOffset: frame.size + 8 },
    });
  }
  for (const f of asmcgocalls) {
    const code = codeOf(elf, f.entry, f.end);
    if (code === null) continue;
    for (const call of findCgoCalls(code, f.entry)) {
      cgoCalls.push(call);
      // Later releases call C through asmcgocall_landingpad, which has no frame.
      const target = call.target;
      if (target === null) continue;
      const padEnd = landingPads.get(target);
      const pad = padEnd === undefined ? null : codeOf(elf, target, padEnd);
      const at = pad === null ? -1 : framelessCallAt(pad);
      if (at >= 0) frameless.push({ start: target + at, end: target + at + 2 });
    }
  }
  return {
    code: symbols.codeRange,
    cgoCalls: cgoCalls.map(({ start, end, depthSlot, gSlot, callerRbpSaved }) => ({
      start,
      end,
      depthSlot,
      gSlot,
      callerRbpSaved,
    })),
    frameless,
    callbacks,
    signal: signalFrames(elf, symbols, { sigtramps, sigtrampgos, restorers }),
    duff,
  };
}

/** `MOVQ $SYS_rt_sigreturn, AX` (either encoding Go's assembler uses), then `SYSCALL`. */
const RT_SIGRETURN = [
  [0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05],
  [0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05],
];

/**
 * The signal handler's frames and the restorer of a Go binary: only when there is one of each function,
 * sigtrampgo starts with one of Go's prologues, and the restorer's code starts with the rt_sigreturn
 * system call (Go's src/runtime/sys_linux_amd64.s).
 */
function signalFrames(
  elf: ElfFile,
  symbols: GoSymbols,
  found: { sigtramps: GoFunction[]; sigtrampgos: GoFunction[]; restorers: GoFunction[] },
): GoSignalFrames | null {
  const { sigtramps, sigtrampgos, restorers } = found;
  if (sigtramps.length !== 1 || sigtrampgos.length !== 1 || restorers.length !== 1) return null;
  const restorer = restorers[0]!;
  const code = codeOf(elf, restorer.entry, restorer.end);
  if (code === null || !RT_SIGRETURN.some((call) => call.every((byte, i) => code[i] === byte))) return null;
  const go = sigtrampgos[0]!;
  const goCode = codeOf(elf, go.entry, go.end);
  const prologue = goCode === null ? null : standardFrame(goCode);
  if (prologue === null) return null;
  const tramp = frameRuns(symbols, sigtramps[0]!, null);
  const handler = frameRuns(symbols, go, go.entry + prologue.saved);
  if (tramp.length === 0 || handler.length === 0) return null;
  return { frames: [...tramp, ...handler], restorer: { start: restorer.entry - 1, end: restorer.end } };
}

/**
 * The frames of `f` from its SP delta table, one run per change; rbp is saved at CFA - 16 from `saved` on
 * wherever the function has a frame (never when `saved` is null). Empty for a function over
 * {@linkcode MAX_FUNCTION_BYTES}.
 */
function frameRuns(symbols: GoSymbols, f: GoFunction, saved: number | null): GoFrameRun[] {
  const runs: GoFrameRun[] = [];
  if (f.end - f.entry > MAX_FUNCTION_BYTES) return runs;
  for (let pc = f.entry; pc < f.end; pc++) {
    const delta = symbols.spDelta(pc);
    if (delta === null || delta < 0) break; // the table ends at the padding
    const rbpSaved = saved !== null && pc >= saved && delta >= 8;
    const last = runs[runs.length - 1];
    if (last !== undefined && last.cfaOffset === delta + 8 && last.rbpSaved === rbpSaved) last.end = pc + 1;
    else runs.push({ start: pc, end: pc + 1, cfaOffset: delta + 8, rbpSaved });
  }
  return runs;
}

/** The bytes of code [start, end) of `elf`, or null when they are not all in the file. */
function codeOf(elf: ElfFile, start: number, end: number): Uint8Array | null {
  if (!(end > start && end - start <= MAX_FUNCTION_BYTES)) return null;
  const offset = elf.vaddrToFileOffset(start as Address);
  const last = elf.vaddrToFileOffset((end - 1) as Address);
  if (offset === null || last === null || last - offset !== end - 1 - start) return null;
  try {
    return elf.read(offset, end - start);
  } catch (error) {
    if (error instanceof RangeError) return null;
    throw error;
  }
}

// The instructions of asmcgocall's save sequences (Go's assembler, amd64). A displacement from rsp is
// either one byte (mod 01) or none, for 0 (mod 00).
const MOVQ_SP_DX = [0x48, 0x89, 0xe2];
const PUSHQ_BP_MOVQ_SP_BP = [0x55, 0x48, 0x89, 0xe5];
const ANDQ_SP_ALIGN = [0x48, 0x83, 0xe4, 0xf0]; // ANDQ $~15, SP
const MOVQ_STACK_HI_DI = [0x48, 0x8b, 0x7f, 0x08]; // MOVQ 8(DI), DI: g.stack.hi
const SUBQ_DX_DI = [0x48, 0x29, 0xd7];
const MOVQ_BX_DI = [0x48, 0x89, 0xdf];
const MOVQ_BX_CX = [0x48, 0x89, 0xd9];
const CALL_AX = [0xff, 0xd0];
const CALL_REL32 = 0xe8;
const MOVQ_DI_SP = [0x48, 0x89, 0xfc];
/** ModRM register fields of MOVQ r, d(SP): DI and DX. */
const REG_DI = 7;
const REG_DX = 2;

/** A cursor over code that matches instructions and moves past them. */
class Matcher {
  constructor(readonly code: Uint8Array, public at: number) {}

  bytes(expected: readonly number[]): boolean {
    for (let i = 0; i < expected.length; i++) {
      if (this.code[this.at + i] !== expected[i]) return false;
    }
    this.at += expected.length;
    return true;
  }

  /** MOVQ reg, d(SP) with the register `reg`: d, or -1. */
  storeToStack(reg: number): number {
    const c = this.code;
    const at = this.at;
    if (c[at] !== 0x48 || c[at + 1] !== 0x89 || c[at + 3] !== 0x24) return -1;
    const modrm = c[at + 2]!;
    if (((modrm >> 3) & 7) !== reg || (modrm & 7) !== 4) return -1;
    if (modrm >> 6 === 0) {
      this.at += 4;
      return 0;
    }
    if (modrm >> 6 !== 1 || at + 4 >= c.length) return -1;
    this.at += 5;
    return c[at + 4]!;
  }

  /** MOVQ $0, d(SP): d, or -1. */
  zeroToStack(): number {
    const c = this.code;
    const at = this.at;
    if (c[at] !== 0x48 || c[at + 1] !== 0xc7 || c[at + 3] !== 0x24) return -1;
    const modrm = c[at + 2]!;
    if (((modrm >> 3) & 7) !== 0 || (modrm & 7) !== 4) return -1;
    const displacement = modrm >> 6 === 1 ? 1 : modrm >> 6 === 0 ? 0 : -1;
    if (displacement < 0) return -1;
    const imm = at + 4 + displacement;
    if (imm + 4 > c.length || c[imm] !== 0 || c[imm + 1] !== 0 || c[imm + 2] !== 0 || c[imm + 3] !== 0) {
      return -1;
    }
    this.at = imm + 4;
    return displacement === 1 ? c[at + 4]! : 0;
  }
}

/**
 * The calls of C code in runtime.asmcgocall's `code` (at ELF address `address`) that follow one of its
 * two save sequences (Go's src/runtime/asm_amd64.s), with the call's target when it is a direct call:
 *
 * ```
 * ANDQ $~15, SP; MOVQ DI, g(SP); MOVQ 8(DI), DI; SUBQ DX, DI; MOVQ DI, depth(SP) [MOVQ BX, DI; MOVQ BX, CX] CALL
 * ANDQ $~15, SP; MOVQ $0, g(SP); MOVQ DX, depth(SP)                              [MOVQ BX, DI; MOVQ BX, CX] CALL
 * ```
 *
 * where DX holds the entry rsp (`MOVQ SP, DX` must come earlier) and the second, already on a system
 * stack, saves that rsp itself. The depth slot must be 8-byte aligned, and the g slot right above it.
 */
export function findCgoCalls(code: Uint8Array, address: number): (GoCgoCall & { target: number | null })[] {
  const calls: (GoCgoCall & { target: number | null })[] = [];
  const entrySpSaved = indexOf(code, MOVQ_SP_DX, 0);
  if (entrySpSaved < 0) return calls;
  // PUSHQ BP; MOVQ SP, BP first: a frame pointer of its own, below which the entry rsp is saved.
  const callerRbpSaved = PUSHQ_BP_MOVQ_SP_BP.every((byte, i) => code[i] === byte) &&
    entrySpSaved >= PUSHQ_BP_MOVQ_SP_BP.length;
  for (
    let at = indexOf(code, ANDQ_SP_ALIGN, entrySpSaved);
    at >= 0;
    at = indexOf(code, ANDQ_SP_ALIGN, at + 1)
  ) {
    const m = new Matcher(code, at + ANDQ_SP_ALIGN.length);
    let gSlot: number;
    let depthSlot: number;
    const switched = new Matcher(code, m.at);
    gSlot = switched.storeToStack(REG_DI);
    if (gSlot >= 0 && switched.bytes(MOVQ_STACK_HI_DI) && switched.bytes(SUBQ_DX_DI)) {
      depthSlot = switched.storeToStack(REG_DI);
      m.at = switched.at;
    } else {
      gSlot = m.zeroToStack();
      depthSlot = gSlot < 0 ? -1 : m.storeToStack(REG_DX);
    }
    // The BPF unwinder reads both slots at once.
    if (depthSlot < 0 || depthSlot % 8 !== 0 || gSlot !== depthSlot + 8) continue;
    m.bytes(MOVQ_BX_DI);
    m.bytes(MOVQ_BX_CX);
    const start = m.at;
    let target: number | null = null;
    if (!m.bytes(CALL_AX)) {
      if (code[start] !== CALL_REL32 || start + 5 > code.length) continue;
      const view = new DataView(code.buffer, code.byteOffset + start + 1, 4);
      target = address + start + 5 + view.getInt32(0, true);
      m.at += 5;
    }
    calls.push({ start: address + start, end: address + m.at, depthSlot, gSlot, callerRbpSaved, target });
  }
  return calls;
}

/**
 * Where runtime.asmcgocall_landingpad's `code` calls AX before anything moves rsp (the C function's
 * return address then lies right above the landing pad's: CFA = rsp + 8), or -1.
 */
function framelessCallAt(code: Uint8Array): number {
  const m = new Matcher(code, 0);
  m.bytes(MOVQ_BX_DI);
  m.bytes(MOVQ_BX_CX);
  const at = m.at;
  return m.bytes(CALL_AX) ? at : -1;
}

/**
 * The frame of a function whose `code` starts with one of Go's prologues, `SUBQ $size, SP; MOVQ BP,
 * size-8(SP); LEAQ size-8(SP), BP` (Go 1.19) or `PUSHQ BP; MOVQ SP, BP; SUBQ $n, SP` (later releases,
 * size n + 8): its size (the CFA is rsp + size + 8 once it is set up), and the offset of the first
 * instruction after rbp is saved (at CFA - 16); or null.
 */
export function standardFrame(code: Uint8Array): { size: number; saved: number } | null {
  const view = new DataView(code.buffer, code.byteOffset, code.byteLength);
  if (PUSHQ_BP_MOVQ_SP_BP.every((byte, i) => code[i] === byte)) {
    const at = PUSHQ_BP_MOVQ_SP_BP.length;
    let n = -1;
    if (code.length >= at + 4 && code[at] === 0x48 && code[at + 1] === 0x83 && code[at + 2] === 0xec) {
      n = code[at + 3]! < 0x80 ? code[at + 3]! : -1;
    } else if (code.length >= at + 7 && code[at] === 0x48 && code[at + 1] === 0x81 && code[at + 2] === 0xec) {
      n = view.getInt32(at + 3, true);
    }
    return n >= 8 && n % 8 === 0 ? { size: n + 8, saved: 1 } : null;
  }
  let size: number;
  let at: number;
  if (code.length >= 4 && code[0] === 0x48 && code[1] === 0x83 && code[2] === 0xec) {
    size = code[3]! < 0x80 ? code[3]! : -1;
    at = 4;
  } else if (code.length >= 7 && code[0] === 0x48 && code[1] === 0x81 && code[2] === 0xec) {
    size = view.getInt32(3, true);
    at = 7;
  } else return null;
  if (!(size >= 16 && size % 8 === 0)) return null;
  const slot = size - 8;
  /** MOVQ BP, slot(SP) (0x89) or LEAQ slot(SP), BP (0x8d) at `at`: its length, or 0. */
  const rbpAtSlot = (opcode: number): number => {
    if (code[at] !== 0x48 || code[at + 1] !== opcode || code[at + 3] !== 0x24) return 0;
    if (code[at + 2] === 0x6c && slot < 0x80 && code[at + 4] === slot) return 5;
    if (code[at + 2] === 0xac && at + 8 <= code.length && view.getInt32(at + 4, true) === slot) return 8;
    return 0;
  };
  const store = rbpAtSlot(0x89);
  if (store === 0) return null;
  at += store;
  const saved = at;
  return rbpAtSlot(0x8d) === 0 ? null : { size, saved };
}

/**
 * runtime.cgocallback's (`code` at `address`) call of runtime.cgocallbackg on the goroutine's stack,
 * when cgocallback keeps Go's frame prologue (rbp is its frame at the call); or null. The call follows
 * the switch (`MOVQ DI, SP`) and the stores of the callee's arguments (`MOVQ reg, d(SP)`): `LEAQ
 * target(IP), AX; CALL AX` or `CALL target`.
 */
export function findCallbackCall(
  code: Uint8Array,
  address: number,
): { start: number; end: number; target: number } | null {
  if (standardFrame(code) === null) return null;
  const view = new DataView(code.buffer, code.byteOffset, code.byteLength);
  const switched = indexOf(code, MOVQ_DI_SP, 0);
  if (switched < 0) return null;
  let at = switched + MOVQ_DI_SP.length;
  // MOVQ reg, d(SP): REX.W 89, ModRM with rm = 100 (SIB) and mod 00 or 01, SIB 0x24.
  while (code[at] === 0x48 && code[at + 1] === 0x89 && (code[at + 2]! & 7) === 4 && code[at + 3] === 0x24) {
    const mod = code[at + 2]! >> 6;
    if (mod === 0) at += 4;
    else if (mod === 1) at += 5;
    else return null;
  }
  if (at + 9 <= code.length && code[at] === 0x48 && code[at + 1] === 0x8d && code[at + 2] === 0x05) {
    const target = address + at + 7 + view.getInt32(at + 3, true);
    if (code[at + 7] !== 0xff || code[at + 8] !== 0xd0) return null;
    return { start: address + at + 7, end: address + at + 9, target };
  }
  if (at + 5 <= code.length && code[at] === CALL_REL32) {
    return {
      start: address + at,
      end: address + at + 5,
      target: address + at + 5 + view.getInt32(at + 1, true),
    };
  }
  return null;
}

function indexOf(code: Uint8Array, pattern: readonly number[], from: number): number {
  outer: for (let i = from; i + pattern.length <= code.length; i++) {
    for (let j = 0; j < pattern.length; j++) if (code[i + j] !== pattern[j]) continue outer;
    return i;
  }
  return -1;
}

/** `table` with the rows of `rules`: frame pointers in Go code's gaps, then the calls, over all else. */
export function withGoRules(table: UnwindTable, rules: GoUnwindRules): UnwindTable {
  const overlays: Overlay[] = [];
  const rule = (cfaRule: number, cfaOffset: number, fpRule: number, fpOffset: number): Rule => ({
    cfaRule,
    cfaOffset,
    fpRule,
    fpOffset,
  });
  if (rules.code) {
    const framePointer = rule(CfaRule.FramePointer, 0, FpRule.Unchanged, 0);
    overlays.push({ ...rules.code, map: (r) => r.cfaRule === CfaRule.Invalid ? framePointer : r });
  }
  for (const { callee, start, end } of rules.callbacks) {
    // Once the callee saved rbp, its CFI rows (rsp-based, its whole frame) say so.
    overlays.push({
      ...callee,
      map: (r) =>
        r.cfaRule === CfaRule.Rsp && r.cfaOffset === callee.cfaOffset
          ? rule(CfaRule.Rsp, r.cfaOffset, FpRule.CfaOffset, -16)
          : r,
    });
    // cgocallback's frame, on the system stack: rbp + 16 is the CFA, its caller's rbp is at rbp.
    const byFramePointer = rule(CfaRule.Rbp, 16, FpRule.CfaOffset, -16);
    overlays.push({ start, end, map: () => byFramePointer });
  }
  // Only where no CFI covers them: Go's .debug_frame gives them CFA = rsp + 8 and callers with CFI rows of
  // their own, which need no rbp.
  const pretendFrame = rule(CfaRule.Rbp, 16, FpRule.CfaOffset, -16);
  for (const range of rules.duff) {
    overlays.push({
      ...range,
      map: (r) => r.cfaRule === CfaRule.Invalid || r.cfaRule === CfaRule.FramePointer ? pretendFrame : r,
    });
  }
  for (const pad of rules.frameless) {
    const frameless = rule(CfaRule.Rsp, 8, FpRule.Unchanged, 0);
    overlays.push({ ...pad, map: () => frameless });
  }
  if (rules.signal) {
    for (const run of rules.signal.frames) {
      const frame = run.rbpSaved
        ? rule(CfaRule.Rsp, run.cfaOffset, FpRule.CfaOffset, -16)
        : rule(CfaRule.Rsp, run.cfaOffset, FpRule.Unchanged, 0);
      overlays.push({ start: run.start, end: run.end, map: () => frame });
    }
    const signal = rule(CfaRule.Signal, 0, FpRule.Unchanged, 0);
    overlays.push({ ...rules.signal.restorer, map: () => signal });
  }
  for (const call of rules.cgoCalls) {
    // The g slot is right above the depth slot (findCgoCalls keeps no other): BPF needs only the depth's.
    const cgoCall = call.callerRbpSaved
      ? rule(CfaRule.GoCgoCall, call.depthSlot, FpRule.CfaOffset, -16)
      : rule(CfaRule.GoCgoCall, call.depthSlot, FpRule.Unchanged, 0);
    overlays.push({ start: call.start, end: call.end, map: () => cgoCall });
  }
  let out = table;
  for (const overlay of overlays) out = paint(out, overlay);
  return out;
}

/** One row of a table, as the builder of a new one holds it. */
interface Row {
  address: number;
  cfaRule: number;
  cfaOffset: number;
  fpRule: number;
  fpOffset: number;
}

function rowOf(table: UnwindTable, i: number): Row {
  return {
    address: table.addresses[i]!,
    cfaRule: table.cfaRules[i]!,
    cfaOffset: table.cfaOffsets[i]!,
    fpRule: table.fpRules[i]!,
    fpOffset: table.fpOffsets[i]!,
  };
}

const NO_RULE: Rule = { cfaRule: CfaRule.Invalid, cfaOffset: 0, fpRule: FpRule.Unchanged, fpOffset: 0 };

/** `table` with the rules in force over [start, end) changed by `overlay`, split at its ends. */
function paint(table: UnwindTable, overlay: Overlay): UnwindTable {
  const { start, end, map } = overlay;
  // Rows before `first` and from `last` on stay as they are: only the few between are rebuilt.
  const first = firstAtOrAfter(table, start);
  const last = firstAtOrAfter(table, end);
  const ruleAt = (i: number): Rule => i < 0 ? NO_RULE : ruleOf(rowOf(table, i));
  const same = (a: Rule, b: Rule) =>
    a.cfaRule === b.cfaRule && a.cfaOffset === b.cfaOffset && a.fpRule === b.fpRule &&
    a.fpOffset === b.fpOffset;
  const middle: Row[] = [];
  const push = (row: Row) => {
    if (middle.length > 0 && middle[middle.length - 1]!.address === row.address) middle.pop();
    const previous = middle.length > 0 ? middle[middle.length - 1]! : ruleAt(first - 1);
    if (!same(previous, row)) middle.push(row);
  };
  push({ ...map(ruleAt(first - 1)), address: start });
  for (let i = first; i < last; i++) push({ ...map(ruleAt(i)), address: table.addresses[i]! });
  if (last >= table.length || table.addresses[last]! > end) push({ ...ruleAt(last - 1), address: end });
  // The first row after is redundant when the rebuilt rows end in its rule.
  const tail = middle.length > 0 && last < table.length &&
      same(middle[middle.length - 1]!, ruleAt(last))
    ? last + 1
    : last;
  const length = first + middle.length + table.length - tail;
  const column = <T extends Float64Array | Uint8Array | Int32Array>(
    source: T,
    fresh: T,
    value: (row: Row) => number,
  ): T => {
    fresh.set(source.subarray(0, first));
    middle.forEach((row, k) => fresh[first + k] = value(row));
    fresh.set(source.subarray(tail), first + middle.length);
    return fresh;
  };
  return {
    length,
    addresses: column(table.addresses.subarray(0, table.length), new Float64Array(length), (r) => r.address),
    cfaRules: column(table.cfaRules.subarray(0, table.length), new Uint8Array(length), (r) => r.cfaRule),
    cfaOffsets: column(
      table.cfaOffsets.subarray(0, table.length),
      new Int32Array(length),
      (r) => r.cfaOffset,
    ),
    fpRules: column(table.fpRules.subarray(0, table.length), new Uint8Array(length), (r) => r.fpRule),
    fpOffsets: column(table.fpOffsets.subarray(0, table.length), new Int32Array(length), (r) => r.fpOffset),
    fdeCount: table.fdeCount,
    skipped: table.skipped,
  };
}

function ruleOf({ cfaRule, cfaOffset, fpRule, fpOffset }: Rule): Rule {
  return { cfaRule, cfaOffset, fpRule, fpOffset };
}

/** The index of the first row of `table` at or after `address` (`table.length` when none is). */
function firstAtOrAfter(table: UnwindTable, address: number): number {
  let low = 0;
  let high = table.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (table.addresses[middle]! < address) low = middle + 1;
    else high = middle;
  }
  return low;
}

/**
 * The `DW_CFA_*` interpreter: runs a CIE's initial instructions and an FDE's program and reports, at
 * every location where the program advances, the rules in force for what an x86-64 unwinder needs: the
 * CFA (a register plus offset, or an expression, with the `.plt` expression recognised), the rule of
 * `rbp` (DWARF register 6) and that of the return address (register 16, `rip`). Other registers' rules
 * are decoded and dropped. The state lives in fields of one reusable object and the remember/restore
 * stack in one preallocated array, so running a program allocates nothing.
 *
 * Like binutils and libgcc, `DW_CFA_remember_state` saves the CFA rule with the register rules, and
 * `DW_CFA_def_cfa_offset` after a CFA expression changes only the offset (the CFA stays an expression).
 * A program stops once its location reaches the FDE's end. A malformed program (unknown opcode, truncated
 * operand, stack overflow or underflow, `DW_CFA_set_loc` moving backwards) throws `RangeError`; the
 * caller decides what becomes of the rows already reported.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CfaInterpreter, type CfaRowSink } from "./cfa_interpreter.ts";
 * import type { Cie } from "./cfi.ts";
 * const cie = { codeAlignment: 1, dataAlignment: -8, fdeEncoding: 0x1b, addressSize: 8 } as Cie;
 * // def_cfa rsp+8; offset rip at cfa-8 | advance 1; def_cfa_offset 16; offset rbp at cfa-16
 * const bytes = new Uint8Array([0x0c, 7, 8, 0x90, 1, 0x41, 0x0e, 16, 0x86, 2]);
 * const interpreter = new CfaInterpreter();
 * const initial = interpreter.runCie(bytes, cie, 0, 5);
 * const rows: string[] = [];
 * const sink: CfaRowSink = {
 *   row: (address, s) => rows.push(`${address} r${s.cfaRegister}+${s.cfaOffset} rbp@${s.rbpOffset}`),
 * };
 * interpreter.runFde(bytes, cie, initial, 5, bytes.length, 0x1000, 0x1010, 0, sink);
 * assert.deepEqual(rows, ["4096 r7+8 rbp@0", "4097 r7+16 rbp@-16"]);
 * ```
 *
 * @module
 */

import { DwarfReader } from "../elf/dwarf_reader.ts";
import type { Cie } from "./cfi.ts";

/** A register's rule, as DWARF defines them. */
export const RegisterRule = {
  /** Never mentioned: for a callee-saved register, the same as `SameValue`. */
  Unreferenced: 0,
  Undefined: 1,
  SameValue: 2,
  /** Saved at CFA + offset. */
  Offset: 3,
  /** Its value is CFA + offset. */
  ValOffset: 4,
  /** Saved in another register. */
  Register: 5,
  Expression: 6,
  ValExpression: 7,
} as const;

/** How the CFA is computed. */
export const CfaKind = {
  /** `cfaRegister` + `cfaOffset`. */
  RegisterOffset: 0,
  /** A DWARF expression; `cfaPlt` says whether it is the `.plt` one. */
  Expression: 1,
} as const;

/** The rules in force at a location; the interpreter itself is passed to sinks as this view. */
export interface CfaState {
  readonly cfaKind: number;
  /** NaN until a CFA rule is defined. */
  readonly cfaRegister: number;
  readonly cfaOffset: number;
  /** For a CFA expression: 1 when it is `rsp + pltOffset (+8 when (rip & 15) >= 11)`, else 0. */
  readonly cfaPlt: number;
  readonly pltOffset: number;
  /** {@linkcode RegisterRule} of rbp. */
  readonly rbpRule: number;
  readonly rbpOffset: number;
  /** {@linkcode RegisterRule} of the return address (register 16). */
  readonly raRule: number;
  readonly raOffset: number;
}

/** Receives one row per advance of the location (possibly several at one address: the last wins). */
export interface CfaRowSink {
  row(address: number, state: CfaState): void;
}

/** DWARF register numbers on x86-64. */
export const X86_64_RBP = 6;
export const X86_64_RSP = 7;
export const X86_64_RIP = 16;

/** Words of one saved state: the nine fields of {@linkcode CfaState}. */
const STATE_WORDS = 9;
/** Default depth of the remember/restore stack; compilers nest it once or twice. */
const DEFAULT_MAX_DEPTH = 64;

const DW_OP_LIT3 = 0x33;
const DW_OP_LIT11 = 0x3b;
const DW_OP_LIT15 = 0x3f;
const DW_OP_AND = 0x1a;
const DW_OP_GE = 0x2a;
const DW_OP_SHL = 0x24;
const DW_OP_PLUS = 0x22;
const DW_OP_BREG7 = 0x77;
const DW_OP_BREG16 = 0x80;

/**
 * A reusable `DW_CFA_*` interpreter. Not reentrant: one program at a time; the state seen by a sink is
 * valid only during its `row` call.
 */
export class CfaInterpreter implements CfaState {
  cfaKind = 0;
  cfaRegister = 0;
  cfaOffset = 0;
  cfaPlt = 0;
  pltOffset = 0;
  rbpRule = 0;
  rbpOffset = 0;
  raRule = 0;
  raOffset = 0;

  readonly #reader = new DwarfReader(new Uint8Array(0));
  readonly #stack: Float64Array;
  readonly #maxDepth: number;
  #depth = 0;
  /** The CIE's rules, for `DW_CFA_restore`. */
  #initial: Float64Array = new Float64Array(STATE_WORDS);

  /** @param maxDepth the deepest `DW_CFA_remember_state` nesting accepted. */
  constructor(maxDepth = DEFAULT_MAX_DEPTH) {
    this.#maxDepth = maxDepth;
    this.#stack = new Float64Array(maxDepth * STATE_WORDS);
  }

  /**
   * Runs a CIE's initial instructions (`bytes[start..end)`) from an empty state and returns the rules
   * they set up, to pass to {@linkcode CfaInterpreter.runFde} for each FDE of that CIE.
   *
   * @throws {RangeError} when the instructions are malformed or advance the location (an initial rule
   *   must hold for the whole FDE).
   */
  runCie(bytes: Uint8Array, cie: Cie, start: number, end: number): Float64Array {
    this.#load(EMPTY_STATE);
    this.#initial = EMPTY_STATE;
    this.#depth = 0;
    const reader = this.#reader;
    reader.reset(bytes, start, end);
    const advanced = this.#execute(reader, cie, 0, 0, 0, null);
    if (advanced) throw new RangeError("Cannot interpret CIE: its initial instructions advance the location");
    const state = new Float64Array(STATE_WORDS);
    this.#save(state, 0);
    return state;
  }

  /**
   * Runs an FDE's program (`bytes[start..end)`) from the CIE's `initial` rules, reporting rows for
   * `[pcBegin, pcEnd)` to `sink`: one at each advance (for the location before it) and one for the last
   * location. `pcBase` is the address of `bytes[0]`, for pc-relative `DW_CFA_set_loc` operands.
   *
   * @throws {RangeError} when the program is malformed; rows already reported stay reported.
   */
  runFde(
    bytes: Uint8Array,
    cie: Cie,
    initial: Float64Array,
    start: number,
    end: number,
    pcBegin: number,
    pcEnd: number,
    pcBase: number,
    sink: CfaRowSink,
  ): void {
    this.#load(initial);
    this.#initial = initial;
    this.#depth = 0;
    const reader = this.#reader;
    reader.reset(bytes, start, end);
    this.#execute(reader, cie, pcBegin, pcEnd, pcBase, sink);
  }

  /**
   * The loop over instructions. With a sink (an FDE), reports rows and stops at `pcEnd`; without one (a
   * CIE), returns whether the location advanced. Each iteration reads at least one byte, so it ends.
   */
  #execute(
    reader: DwarfReader,
    cie: Cie,
    pcBegin: number,
    pcEnd: number,
    pcBase: number,
    sink: CfaRowSink | null,
  ): boolean {
    const codeAlignment = cie.codeAlignment;
    const dataAlignment = cie.dataAlignment;
    let loc = pcBegin;
    let advanced = false;
    while (reader.pos < reader.end) {
      const op = reader.u8();
      let delta = -1;
      switch (op >> 6) {
        case 1: // DW_CFA_advance_loc
          delta = (op & 0x3f) * codeAlignment;
          break;
        case 2: // DW_CFA_offset
          this.#setRule(op & 0x3f, RegisterRule.Offset, reader.uleb128() * dataAlignment);
          continue;
        case 3: // DW_CFA_restore
          this.#restore(op & 0x3f);
          continue;
      }
      if (delta < 0) {
        switch (op) {
          case 0x00: // DW_CFA_nop
            continue;
          case 0x01: { // DW_CFA_set_loc
            const target = reader.encodedPointer(cie.fdeEncoding, pcBase, undefined, cie.addressSize);
            if (!(target >= loc)) {
              throw new RangeError("Cannot interpret CFA program: set_loc moves backwards");
            }
            delta = target - loc;
            break;
          }
          case 0x02: // DW_CFA_advance_loc1
            delta = reader.u8() * codeAlignment;
            break;
          case 0x03: // DW_CFA_advance_loc2
            delta = reader.u16() * codeAlignment;
            break;
          case 0x04: // DW_CFA_advance_loc4
            delta = reader.u32() * codeAlignment;
            break;
          case 0x05: // DW_CFA_offset_extended
            this.#setRule(reader.uleb128(), RegisterRule.Offset, reader.uleb128() * dataAlignment);
            continue;
          case 0x06: // DW_CFA_restore_extended
            this.#restore(reader.uleb128());
            continue;
          case 0x07: // DW_CFA_undefined
            this.#setRule(reader.uleb128(), RegisterRule.Undefined, 0);
            continue;
          case 0x08: // DW_CFA_same_value
            this.#setRule(reader.uleb128(), RegisterRule.SameValue, 0);
            continue;
          case 0x09: // DW_CFA_register
            this.#setRule(reader.uleb128(), RegisterRule.Register, reader.uleb128());
            continue;
          case 0x0a: // DW_CFA_remember_state
            if (this.#depth >= this.#maxDepth) {
              throw new RangeError(
                `Cannot interpret CFA program: remember_state nests over ${this.#maxDepth}`,
              );
            }
            this.#save(this.#stack, this.#depth++ * STATE_WORDS);
            continue;
          case 0x0b: // DW_CFA_restore_state
            if (this.#depth === 0) {
              throw new RangeError("Cannot interpret CFA program: restore_state underflows");
            }
            this.#load(this.#stack, --this.#depth * STATE_WORDS);
            continue;
          case 0x0c: // DW_CFA_def_cfa
            this.cfaRegister = reader.uleb128();
            this.cfaOffset = reader.uleb128();
            this.cfaKind = CfaKind.RegisterOffset;
            continue;
          case 0x0d: // DW_CFA_def_cfa_register
            this.cfaRegister = reader.uleb128();
            this.cfaKind = CfaKind.RegisterOffset;
            continue;
          case 0x0e: // DW_CFA_def_cfa_offset
            this.cfaOffset = reader.uleb128();
            continue;
          case 0x0f: { // DW_CFA_def_cfa_expression
            const length = reader.uleb128();
            const blockStart = reader.pos;
            reader.skip(length);
            this.cfaKind = CfaKind.Expression;
            this.#matchPlt(reader.bytes, blockStart, reader.pos);
            continue;
          }
          case 0x10: { // DW_CFA_expression
            const register = reader.uleb128();
            reader.skip(reader.uleb128());
            this.#setRule(register, RegisterRule.Expression, 0);
            continue;
          }
          case 0x11: // DW_CFA_offset_extended_sf
            this.#setRule(reader.uleb128(), RegisterRule.Offset, reader.sleb128() * dataAlignment);
            continue;
          case 0x12: // DW_CFA_def_cfa_sf
            this.cfaRegister = reader.uleb128();
            this.cfaOffset = reader.sleb128() * dataAlignment;
            this.cfaKind = CfaKind.RegisterOffset;
            continue;
          case 0x13: // DW_CFA_def_cfa_offset_sf
            this.cfaOffset = reader.sleb128() * dataAlignment;
            continue;
          case 0x14: // DW_CFA_val_offset
            this.#setRule(reader.uleb128(), RegisterRule.ValOffset, reader.uleb128() * dataAlignment);
            continue;
          case 0x15: // DW_CFA_val_offset_sf
            this.#setRule(reader.uleb128(), RegisterRule.ValOffset, reader.sleb128() * dataAlignment);
            continue;
          case 0x16: { // DW_CFA_val_expression
            const register = reader.uleb128();
            reader.skip(reader.uleb128());
            this.#setRule(register, RegisterRule.ValExpression, 0);
            continue;
          }
          case 0x2e: // DW_CFA_GNU_args_size: only matters for landing pads
            reader.uleb128();
            continue;
          case 0x2f: // DW_CFA_GNU_negative_offset_extended
            this.#setRule(reader.uleb128(), RegisterRule.Offset, -reader.uleb128() * dataAlignment);
            continue;
          default:
            throw new RangeError(`Cannot interpret CFA program: unknown opcode 0x${op.toString(16)}`);
        }
      }
      // An advance: the rules so far hold from `loc` up to the new location.
      advanced = true;
      if (sink === null) continue;
      sink.row(loc, this);
      loc += delta;
      // Negated so that a NaN location (0 x Infinity) also stops.
      if (!(loc < pcEnd)) return advanced;
    }
    if (sink !== null) sink.row(loc, this);
    return advanced;
  }

  #setRule(register: number, rule: number, offset: number): void {
    if (register === X86_64_RBP) {
      this.rbpRule = rule;
      this.rbpOffset = offset;
    } else if (register === X86_64_RIP) {
      this.raRule = rule;
      this.raOffset = offset;
    }
  }

  #restore(register: number): void {
    const initial = this.#initial;
    if (register === X86_64_RBP) {
      this.rbpRule = initial[5]!;
      this.rbpOffset = initial[6]!;
    } else if (register === X86_64_RIP) {
      this.raRule = initial[7]!;
      this.raOffset = initial[8]!;
    }
  }

  /** Recognises `DW_OP_breg7 N; DW_OP_breg16 0; lit15; and; lit11; ge; lit3; shl; plus`. */
  #matchPlt(bytes: Uint8Array, start: number, end: number): void {
    this.cfaPlt = 0;
    if (end - start < 11 || bytes[start] !== DW_OP_BREG7) return;
    const reader = new DwarfReader(bytes, start + 1, end);
    const offset = reader.sleb128();
    if (end - reader.pos !== 9) return;
    const p = reader.pos;
    if (
      bytes[p] === DW_OP_BREG16 && bytes[p + 1] === 0 && bytes[p + 2] === DW_OP_LIT15 &&
      bytes[p + 3] === DW_OP_AND && bytes[p + 4] === DW_OP_LIT11 && bytes[p + 5] === DW_OP_GE &&
      bytes[p + 6] === DW_OP_LIT3 && bytes[p + 7] === DW_OP_SHL && bytes[p + 8] === DW_OP_PLUS
    ) {
      this.cfaPlt = 1;
      this.pltOffset = offset;
    }
  }

  #save(into: Float64Array, at: number): void {
    into[at] = this.cfaKind;
    into[at + 1] = this.cfaRegister;
    into[at + 2] = this.cfaOffset;
    into[at + 3] = this.cfaPlt;
    into[at + 4] = this.pltOffset;
    into[at + 5] = this.rbpRule;
    into[at + 6] = this.rbpOffset;
    into[at + 7] = this.raRule;
    into[at + 8] = this.raOffset;
  }

  #load(from: Float64Array, at = 0): void {
    this.cfaKind = from[at]!;
    this.cfaRegister = from[at + 1]!;
    this.cfaOffset = from[at + 2]!;
    this.cfaPlt = from[at + 3]!;
    this.pltOffset = from[at + 4]!;
    this.rbpRule = from[at + 5]!;
    this.rbpOffset = from[at + 6]!;
    this.raRule = from[at + 7]!;
    this.raOffset = from[at + 8]!;
  }
}

/**
 * Before any instruction: no CFA rule (an invalid register), every register unreferenced. NaN marks
 * the CFA register as never defined, which no real register number equals.
 */
const EMPTY_STATE = Float64Array.of(CfaKind.RegisterOffset, NaN, 0, 0, 0, 0, 0, 0, 0);

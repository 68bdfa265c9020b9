/**
 * Names V8 frames as the BPF unwinder recorded them (bpf/v8_tracer.h, `enum v8_frame_type`): a function
 * (its SharedFunctionInfo), its script, and the line from the source position tables, with the calls
 * TurboFan inlined at the position expanded. Everything is read from the live process, checked for type
 * on every step; results are cached by what BPF recorded.
 *
 * @example
 * ```ts ignore
 * import { V8Symbolizer } from "./symbolize.ts";
 * const symbolizer = new V8Symbolizer(new V8Heap(memory, layout));
 * const frames = symbolizer.symbolize(fileId, addrOrLine); // innermost first
 * ```
 *
 * @module
 */
import { V8CodeCookie, V8FrameType } from "../../../support/types.ts";
import { type SymbolizedFrame, TOP_LEVEL_FUNCTION_NAME, UNKNOWN_SOURCE_FILE } from "../interpreter.ts";
import { bytecodeOffsetAt } from "./baseline_offsets.ts";
import { type V8Heap, type V8Object, V8ObjectError } from "./heap.ts";
import {
  inliningIdOf,
  lineOf,
  lineStarts,
  lineStartsFromEnds,
  positionAt,
  scriptOffsetOf,
} from "./source_positions.ts";

/** The name of a function whose name V8 does not know (an anonymous function expression). */
export const ANONYMOUS_FUNCTION_NAME = "<anonymous>";
/** Frames kept named; a hot program has a few hundred distinct positions. */
const CACHE_ENTRIES = 4096;
/** Scripts whose line starts are kept. */
const SCRIPT_CACHE_ENTRIES = 128;
/** The longest source read to find lines (V8 keeps sources in one string; a read is bounded). */
const MAX_SOURCE_LENGTH = 1 << 20;
/** A ScopeInfo keeps its context locals' names inline up to this many, else in a hash table (one slot). */
const MAX_INLINED_LOCAL_NAMES = 75;
/** Slots after the context locals where the function's name is looked for. */
const NAME_SLOTS = 16;
/** The longest position table read. */
const MAX_TABLE_BYTES = 1 << 20;
/** Bytes of one InliningPosition: the call's SourcePosition (u64), the inlined function's index (i32), padding. */
const INLINING_POSITION_BYTES = 16;
const TWO_POW_32 = 4294967296;

/** Why a frame was not named in full, counted per reason. */
export interface V8SymbolizeStats {
  named: number;
  /** Frames named without a line: no position table, an external source, a stale code object. */
  withoutLine: number;
  /** Frames whose objects were not what BPF saw any more (freed or moved): not named. */
  failed: number;
}

interface FunctionInfo {
  readonly name: string;
  readonly script: V8Object | null;
  readonly sourceFile: string;
}

/** The V8 frames of one process. */
export class V8Symbolizer {
  readonly #heap: V8Heap;
  readonly #frames = new Map<string, readonly SymbolizedFrame[]>();
  readonly #functions = new Map<number, FunctionInfo>();
  readonly #scripts = new Map<number, readonly number[] | null>();
  readonly stats: V8SymbolizeStats = { named: 0, withoutLine: 0, failed: 0 };

  constructor(heap: V8Heap) {
    this.#heap = heap;
  }

  /**
   * The source frames of one recorded frame, innermost first (more than one where TurboFan inlined calls).
   *
   * @throws {V8ObjectError} when the objects BPF recorded are not what they were.
   * @throws {RemoteMemoryError} when the process's memory cannot be read.
   */
  symbolize(fileId: number, addrOrLine: number): readonly SymbolizedFrame[] {
    const key = `${fileId}:${addrOrLine}`;
    const cached = this.#frames.get(key);
    if (cached !== undefined) return cached;
    this.#heap.refresh();
    let frames: readonly SymbolizedFrame[];
    try {
      frames = this.#symbolize(fileId, addrOrLine);
    } catch (error) {
      if (error instanceof V8ObjectError) this.stats.failed++;
      throw error;
    }
    this.stats.named++;
    if (frames.some((frame) => frame.line === 0)) this.stats.withoutLine++;
    if (this.#frames.size >= CACHE_ENTRIES) this.#frames.clear();
    this.#frames.set(key, frames);
    return frames;
  }

  #symbolize(fileId: number, addrOrLine: number): readonly SymbolizedFrame[] {
    const L = this.#heap.layout;
    const type = fileId % 8;
    const object = (fileId - type) as V8Object;
    switch (type) {
      case V8FrameType.Bytecode: {
        const shared = this.#heap.expect(object, L.types.sharedFunctionInfo, "SharedFunctionInfo");
        const bytecodeOffset = addrOrLine - (L.bytecodeArray.data - 1);
        const table = this.#bytecodeTable(shared);
        const position = table === null ? null : positionAt(table, bytecodeOffset);
        return [this.#frame(shared, position)];
      }
      case V8FrameType.Function: {
        const shared = this.#heap.expect(object, L.types.sharedFunctionInfo, "SharedFunctionInfo");
        return [this.#frame(shared, null)];
      }
      case V8FrameType.Code:
        return this.#optimised(object, addrOrLine);
      case V8FrameType.Baseline:
        return [this.#baseline(object, addrOrLine)];
      default:
        throw new V8ObjectError(`a V8 frame of type ${type}`);
    }
  }

  /** A frame of optimised code, with the calls inlined at its position. */
  #optimised(object: V8Object, addrOrLine: number): readonly SymbolizedFrame[] {
    const L = this.#heap.layout;
    const code = this.#heap.expect(object, L.types.code, "Code");
    const cookie = Math.floor(addrOrLine / 2 ** V8CodeCookie.Shift);
    const pcOffset = addrOrLine % 2 ** V8CodeCookie.Shift;
    const memory = this.#heap;
    const deopt = memory.expect(
      memory.field(code, L.code.deoptimizationData),
      L.types.deoptimizationData,
      "DeoptimizationData",
    );
    let sharedSlot = memory.element(deopt, L.deoptimizationData.sharedFunctionInfo);
    const wrapper = L.sharedFunctionInfoWrapper;
    if (wrapper !== null) {
      const wrapped = memory.expect(sharedSlot, wrapper.type, "SharedFunctionInfoWrapper");
      sharedSlot = memory.field(wrapped, wrapper.sharedInfo);
    }
    const shared = memory.expect(sharedSlot, L.types.sharedFunctionInfo, "SharedFunctionInfo");
    if (!this.#cookieMatches(code, cookie)) return [this.#frame(shared, null)];
    const tableObject = memory.field(code, L.code.sourcePositionTable);
    if (tableObject === null || memory.type(tableObject) !== L.types.positionTable) {
      return [this.#frame(shared, null)];
    }
    let position = positionAt(memory.byteArray(tableObject, MAX_TABLE_BYTES), pcOffset);
    if (position === null) return [this.#frame(shared, null)];

    const frames: SymbolizedFrame[] = [];
    let inlining = inliningIdOf(position);
    if (inlining !== 0) {
      const literals = memory.element(deopt, L.deoptimizationData.literalArray);
      const positions = memory.element(deopt, L.deoptimizationData.inliningPositions);
      if (literals === null || positions === null) {
        throw new V8ObjectError("DeoptimizationData without inlining");
      }
      const records = memory.byteArray(positions, MAX_TABLE_BYTES);
      const view = new DataView(records.buffer, records.byteOffset, records.byteLength);
      for (let depth = 0; inlining !== 0 && depth < 64; depth++) {
        const at = (inlining - 1) * INLINING_POSITION_BYTES;
        if (at + INLINING_POSITION_BYTES > records.length) {
          throw new V8ObjectError(`no inlining position ${inlining}`);
        }
        const functionIndex = view.getInt32(at + 8, true);
        const inlined = functionIndex < 0 ? shared : memory.expect(
          memory.weakElement(literals, functionIndex),
          L.types.sharedFunctionInfo,
          "SharedFunctionInfo",
        );
        frames.push({ ...this.#frame(inlined, position), inlined: true });
        position = view.getUint32(at + 4, true) * TWO_POW_32 + view.getUint32(at, true);
        inlining = inliningIdOf(position);
      }
    }
    frames.push(this.#frame(shared, position));
    return frames;
  }

  /** A frame of Sparkplug code (`fn` is its JSFunction): the bytecode its pc offset was compiled from. */
  #baseline(fn: V8Object, addrOrLine: number): SymbolizedFrame {
    const L = this.#heap.layout;
    const memory = this.#heap;
    const shared = memory.expect(
      memory.field(fn, L.jsFunction.shared),
      L.types.sharedFunctionInfo,
      "SharedFunctionInfo",
    );
    const code = memory.jsFunctionCode(fn);
    const cookie = Math.floor(addrOrLine / 2 ** V8CodeCookie.Shift);
    const pcOffset = addrOrLine % 2 ** V8CodeCookie.Shift;
    // The function may have tiered up since: its code is then no longer the one BPF saw.
    if (code === null || memory.type(code) !== L.types.code || !this.#cookieMatches(code, cookie)) {
      return this.#frame(shared, null);
    }
    const bytecode = memory.field(code, L.code.deoptimizationData);
    const offsets = memory.field(code, L.code.sourcePositionTable);
    if (
      L.bytecodeSizes === null || bytecode === null || offsets === null ||
      memory.type(bytecode) !== L.types.bytecodeArray || memory.type(offsets) !== L.types.positionTable
    ) {
      return this.#frame(shared, null);
    }
    const length = memory.smi(bytecode, L.fixedArray.length);
    if (length === null || length < 0 || length > MAX_TABLE_BYTES) return this.#frame(shared, null);
    const bytecodes = memory.bytes(bytecode + L.bytecodeArray.data, length);
    const offset = bytecodeOffsetAt(
      memory.byteArray(offsets, MAX_TABLE_BYTES),
      bytecodes,
      L.bytecodeSizes,
      pcOffset,
    );
    const table = offset === null ? null : this.#positionTable(bytecode);
    return this.#frame(shared, table === null ? null : positionAt(table, offset!));
  }

  /** Whether `code` is still the code BPF saw: the same instruction size and kind. */
  #cookieMatches(code: V8Object, cookie: number): boolean {
    const L = this.#heap.layout;
    const memory = this.#heap;
    const size = memory.u32(code + L.code.instructionSize);
    const kind = ((memory.u32(code + L.code.flags) & L.code.kindMask) >>> L.code.kindShift) & 0xf;
    return ((size * 16 + kind) % TWO_POW_32) === cookie;
  }

  /** The bytecode's position table of `shared`, or null when V8 has not made one (lazy source positions). */
  #bytecodeTable(shared: V8Object): Uint8Array | null {
    const L = this.#heap.layout;
    const memory = this.#heap;
    let data = memory.field(shared, L.sharedFunctionInfo.functionData);
    if (data !== null && memory.type(data) === L.types.code) {
      // Baseline code in place of the bytecode: the bytecode is its first data field.
      data = memory.field(data, L.code.deoptimizationData);
    }
    if (data === null || memory.type(data) !== L.types.bytecodeArray) return null;
    return this.#positionTable(data);
  }

  /** The position table of BytecodeArray `bytecode`, or null when V8 has not made one. */
  #positionTable(bytecode: V8Object): Uint8Array | null {
    const L = this.#heap.layout;
    const memory = this.#heap;
    const table = memory.field(bytecode, L.bytecodeArray.sourcePositionTable);
    if (table === null || memory.type(table) !== L.types.positionTable) return null;
    return memory.byteArray(table, MAX_TABLE_BYTES);
  }

  /** The frame of function `shared` at source position `position` (null: no line). */
  #frame(shared: V8Object, position: number | null): SymbolizedFrame {
    const fn = this.#function(shared);
    const offset = position === null ? -1 : scriptOffsetOf(position);
    const starts = offset < 0 || fn.script === null ? null : this.#lineStarts(fn.script);
    return {
      kind: "v8",
      functionName: fn.name,
      sourceFile: fn.sourceFile,
      line: starts === null ? 0 : lineOf(starts, offset),
    };
  }

  #function(shared: V8Object): FunctionInfo {
    let fn = this.#functions.get(shared);
    if (fn !== undefined) return fn;
    const L = this.#heap.layout;
    const memory = this.#heap;
    let script = memory.field(shared, L.sharedFunctionInfo.scriptOrDebugInfo);
    if (script !== null && memory.type(script) !== L.types.script) script = null;
    const nameObject = script === null ? null : memory.field(script, L.script.name);
    let sourceFile = "";
    try {
      if (nameObject !== null && memory.isString(nameObject)) sourceFile = memory.string(nameObject);
    } catch (error) {
      // A name this cannot read (an uncached external string): the function is still worth naming.
      if (!(error instanceof V8ObjectError)) throw error;
    }
    fn = { name: this.#functionName(shared, script), script, sourceFile: sourceFile || UNKNOWN_SOURCE_FILE };
    if (this.#functions.size >= CACHE_ENTRIES) this.#functions.clear();
    this.#functions.set(shared, fn);
    return fn;
  }

  /**
   * The function's name: SharedFunctionInfo's own string, or the first non-empty name its ScopeInfo keeps
   * after the context locals (the declared name, else the name V8 inferred, `Module._compile`).
   */
  #functionName(shared: V8Object, script: V8Object | null): string {
    const L = this.#heap.layout;
    const memory = this.#heap;
    const value = memory.field(shared, L.sharedFunctionInfo.nameOrScopeInfo);
    if (value === null) return script === null ? ANONYMOUS_FUNCTION_NAME : TOP_LEVEL_FUNCTION_NAME;
    if (memory.isString(value)) return memory.string(value) || ANONYMOUS_FUNCTION_NAME;
    if (memory.type(value) !== L.types.scopeInfo) return ANONYMOUS_FUNCTION_NAME;
    const slot = (index: number) => value + L.scopeInfo.slots + index * 8;
    const locals = memory.smiAt(slot(L.scopeInfo.contextLocalCount));
    if (locals === null || locals < 0) return ANONYMOUS_FUNCTION_NAME;
    const first = L.scopeInfo.firstVars + (locals > MAX_INLINED_LOCAL_NAMES ? 1 : locals) + locals;
    // The optional fields after the locals: a saved class variable, the function variable (its name, a
    // slot index), the inferred name, then the function's start and end positions (two Smis) and objects
    // that are no names (the outer scope, a module's info). A name lies before the positions.
    let smis = 0;
    for (let i = first; i < first + NAME_SLOTS && smis < 2; i++) {
      const candidate = memory.objectAt(slot(i));
      if (candidate === null) {
        smis = memory.smiAt(slot(i)) === null ? 0 : smis + 1;
        continue;
      }
      smis = 0;
      if (!memory.isString(candidate)) continue;
      const name = memory.string(candidate);
      if (name !== "") return name;
    }
    return ANONYMOUS_FUNCTION_NAME;
  }

  /** Where the lines of `script` start, or null when its source cannot be read (an external string). */
  #lineStarts(script: V8Object): readonly number[] | null {
    if (this.#scripts.has(script)) return this.#scripts.get(script) ?? null;
    const L = this.#heap.layout;
    const memory = this.#heap;
    let starts: readonly number[] | null = null;
    const ends = memory.field(script, L.script.lineEnds);
    if (ends !== null && memory.type(ends) === L.types.fixedArray) {
      const count = memory.smi(ends, L.fixedArray.length) ?? 0;
      const values: number[] = [];
      for (let i = 0; i < count && i < MAX_SOURCE_LENGTH; i++) values.push(memory.smiElement(ends, i) ?? 0);
      starts = lineStartsFromEnds(values);
    } else {
      const source = memory.field(script, L.script.source);
      const text = source !== null && memory.isString(source)
        ? memory.stringOrNull(source, MAX_SOURCE_LENGTH)
        : null;
      starts = text === null ? null : lineStarts(text);
    }
    if (this.#scripts.size >= SCRIPT_CACHE_ENTRIES) this.#scripts.clear();
    this.#scripts.set(script, starts);
    return starts;
  }
}

/**
 * V8's layouts, read from the file that holds V8: its version (`v8::internal::Version`) and its
 * post-mortem introspection data, the `v8dbg_*` symbols V8 builds export for debuggers (Node.js keeps
 * them: 531 in Node 20). Each is an int32 in the file's data: a struct field's offset, an instance type,
 * a frame slot's offset from fp, a tag. A few fields a version does not describe are filled in from what
 * is known of that version (each fallback below says which versions it holds for); a layout that still
 * lacks a field is refused rather than guessed.
 *
 * @example
 * ```ts ignore
 * import { readV8Layout } from "./introspection.ts";
 * const layout = readV8Layout(elf, "/usr/bin/node"); // null: no V8 in the file
 * layout?.version; // { major: 11, minor: 3, build: 244, patch: 8 }
 * ```
 *
 * @module
 */
import type { ElfFile } from "../../elf/elf_file.ts";
import { PT_LOAD } from "../../elf/elf_file.ts";
import { findDynamicSymbol } from "../dynamic_symbol_lookup.ts";
import { DISPATCH_TABLE_SYMBOLS, findDispatchTable, type V8DispatchTableLocation } from "./dispatch_table.ts";
import { findElfSymbols } from "../elf_symbols.ts";
import type { ElfSymbol } from "../elf_symbols.ts";
import type { Address } from "../../types.ts";

/** V8's version, as `v8::internal::Version` holds it. */
export interface V8Version {
  readonly major: number;
  readonly minor: number;
  readonly build: number;
  readonly patch: number;
}

/** The oldest V8 the layouts are known for: Node 18's. */
export const MIN_V8_VERSION: V8Version = { major: 10, minor: 2, build: 0, patch: 0 };

/** The string representations and encodings (`String::map().instance_type()` bits). */
export interface V8StringLayout {
  readonly firstNonString: number;
  readonly representationMask: number;
  readonly encodingMask: number;
  readonly seqTag: number;
  readonly consTag: number;
  readonly externalTag: number;
  readonly slicedTag: number;
  readonly thinTag: number;
  readonly oneByteTag: number;
  readonly length: number;
  readonly seqOneByteChars: number;
  readonly seqTwoByteChars: number;
  readonly consFirst: number;
  readonly consSecond: number;
  readonly thinActual: number;
  readonly slicedParent: number;
  readonly slicedOffset: number;
  /** ExternalString.resource; the characters' address, cached, follows it. */
  readonly externalResource: number;
}

/** Everything the unwinder and the namer read of V8's objects, in bytes. */
export interface V8Layout {
  readonly version: V8Version;
  /** Frame slots, as offsets from fp (negative). */
  readonly frame: { readonly marker: number; readonly function: number; readonly bytecodeOffset: number };
  readonly types: {
    readonly jsFunctionFirst: number;
    readonly jsFunctionLast: number;
    readonly sharedFunctionInfo: number;
    readonly code: number;
    readonly script: number;
    readonly scopeInfo: number;
    readonly bytecodeArray: number;
    readonly byteArray: number;
    readonly fixedArray: number;
    /**
     * The type of the source position tables of Code and BytecodeArray: TrustedByteArray since V8 12
     * moved both to the trusted space, ByteArray before.
     */
    readonly positionTable: number;
    /** The type of Code's DeoptimizationData: TrustedFixedArray in V8 12, FixedArray before. */
    readonly deoptimizationData: number;
  };
  readonly heapObjectMap: number;
  readonly mapInstanceType: number;
  readonly string: V8StringLayout;
  /**
   * JSFunction: its SharedFunctionInfo, and its code, or with {@linkcode V8Layout.dispatchTable} the u32
   * handle of its dispatch table entry.
   */
  readonly jsFunction: { readonly shared: number; readonly code: number };
  /** Where V8 13's JS dispatch table is found in a process, or null for a V8 whose JSFunctions hold their code. */
  readonly dispatchTable: V8DispatchTableLocation | null;
  readonly sharedFunctionInfo: {
    readonly nameOrScopeInfo: number;
    readonly functionData: number;
    readonly scriptOrDebugInfo: number;
  };
  /** ScopeInfo: where its slots begin, and the indexes of the counts that say where its name lies. */
  readonly scopeInfo: {
    readonly slots: number;
    readonly contextLocalCount: number;
    readonly firstVars: number;
  };
  readonly script: { readonly name: number; readonly source: number; readonly lineEnds: number };
  readonly bytecodeArray: { readonly sourcePositionTable: number; readonly data: number };
  /**
   * Each bytecode's size by operand scale (single, double, quadruple), from `Bytecodes::kBytecodeSizes`:
   * how Sparkplug's pc offsets map back to bytecodes. Null when the file does not export the table.
   */
  readonly bytecodeSizes: readonly [Uint8Array, Uint8Array, Uint8Array] | null;
  readonly fixedArray: { readonly length: number; readonly data: number };
  readonly code: {
    readonly instructionStart: number;
    /** Whether instructionStart holds the address of the instructions (V8 11.1+) or is where they begin. */
    readonly instructionStartIsPointer: boolean;
    readonly instructionSize: number;
    readonly flags: number;
    readonly kindMask: number;
    readonly kindShift: number;
    readonly kindBaseline: number;
    readonly deoptimizationData: number;
    readonly sourcePositionTable: number;
  };
  /** Indexes into a DeoptimizationData array. */
  readonly deoptimizationData: {
    readonly inlinedFunctionCount: number;
    readonly literalArray: number;
    readonly sharedFunctionInfo: number;
    readonly inliningPositions: number;
  };
  /**
   * V8 13 keeps the optimised function's SharedFunctionInfo in a wrapper (its type, and the field that
   * holds it); null where DeoptimizationData holds it itself.
   */
  readonly sharedFunctionInfoWrapper: { readonly type: number; readonly sharedInfo: number } | null;
}

const BYTECODE_SIZES = "_ZN2v88internal11interpreter9Bytecodes14kBytecodeSizesE";
/** More bytecodes than any V8 has (198 in 10.2 and 11.3). */
const MAX_BYTECODES = 1024;

const VERSION_SYMBOLS = {
  major: "_ZN2v88internal7Version6major_E",
  minor: "_ZN2v88internal7Version6minor_E",
  build: "_ZN2v88internal7Version6build_E",
  patch: "_ZN2v88internal7Version6patch_E",
} as const;

/** The symbol that marks a file with V8's introspection data: looked up through the hash table first. */
const MARKER_SYMBOL = "v8dbg_type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE";

/** The introspection symbols read, by the name the layout uses; several names are tried in order. */
const FIELDS = {
  fpMarker: ["v8dbg_off_fp_context_or_frame_type", "v8dbg_off_fp_context"],
  fpFunction: ["v8dbg_off_fp_function"],
  fpBytecodeOffset: ["v8dbg_off_fp_bytecode_offset"],
  typeJsFunction: ["v8dbg_type_JSFunction__JS_FUNCTION_TYPE"],
  typeFirstJsFunction: ["v8dbg_FirstJSFunctionType"],
  typeLastJsFunction: ["v8dbg_LastJSFunctionType"],
  typeSharedFunctionInfo: [MARKER_SYMBOL],
  typeCode: ["v8dbg_type_Code__CODE_TYPE"],
  typeScript: ["v8dbg_type_Script__SCRIPT_TYPE"],
  typeScopeInfo: ["v8dbg_type_ScopeInfo__SCOPE_INFO_TYPE"],
  typeBytecodeArray: ["v8dbg_type_BytecodeArray__BYTECODE_ARRAY_TYPE"],
  typeByteArray: ["v8dbg_type_ByteArray__BYTE_ARRAY_TYPE"],
  typeFixedArray: ["v8dbg_type_FixedArray__FIXED_ARRAY_TYPE"],
  typeTrustedByteArray: ["v8dbg_type_TrustedByteArray__TRUSTED_BYTE_ARRAY_TYPE"],
  typeTrustedFixedArray: ["v8dbg_type_TrustedFixedArray__TRUSTED_FIXED_ARRAY_TYPE"],
  typeProtectedFixedArray: ["v8dbg_type_ProtectedFixedArray__PROTECTED_FIXED_ARRAY_TYPE"],
  typeSharedFunctionInfoWrapper: ["v8dbg_type_SharedFunctionInfoWrapper__SHARED_FUNCTION_INFO_WRAPPER_TYPE"],
  sfiWrapperSharedInfo: ["v8dbg_class_SharedFunctionInfoWrapper__shared_info__Tagged_SharedFunctionInfo_"],
  heapObjectMap: ["v8dbg_class_HeapObject__map__Map"],
  mapInstanceType: ["v8dbg_class_Map__instance_type__uint16_t"],
  firstNonString: ["v8dbg_FirstNonstringType"],
  representationMask: ["v8dbg_StringRepresentationMask"],
  encodingMask: ["v8dbg_StringEncodingMask"],
  seqTag: ["v8dbg_SeqStringTag"],
  consTag: ["v8dbg_ConsStringTag"],
  externalTag: ["v8dbg_ExternalStringTag"],
  slicedTag: ["v8dbg_SlicedStringTag"],
  thinTag: ["v8dbg_ThinStringTag"],
  oneByteTag: ["v8dbg_OneByteStringTag"],
  stringLength: ["v8dbg_class_String__length__int32_t"],
  seqOneByteChars: ["v8dbg_class_SeqOneByteString__chars__char"],
  seqTwoByteChars: ["v8dbg_class_SeqTwoByteString__chars__char"],
  consFirst: ["v8dbg_class_ConsString__first__String"],
  consSecond: ["v8dbg_class_ConsString__second__String"],
  thinActual: ["v8dbg_class_ThinString__actual__String"],
  slicedParent: ["v8dbg_class_SlicedString__parent__String"],
  slicedOffset: ["v8dbg_class_SlicedString__offset__SMI"],
  externalResource: ["v8dbg_class_ExternalString__resource__Object"],
  jsFunctionShared: ["v8dbg_class_JSFunction__shared__SharedFunctionInfo"],
  // V8 12 names fields with their type as `Tagged<T>`.
  jsFunctionCode: [
    "v8dbg_class_JSFunction__code__Code",
    "v8dbg_class_JSFunction__code__CodeT",
    "v8dbg_class_JSFunction__code__Tagged_Code_",
  ],
  sfiNameOrScopeInfo: [
    "v8dbg_class_SharedFunctionInfo__name_or_scope_info__Object",
    "v8dbg_class_SharedFunctionInfo__name_or_scope_info__Tagged_Object_",
    "v8dbg_class_SharedFunctionInfo__name_or_scope_info__Tagged_NameOrScopeInfoT_",
  ],
  sfiFunctionData: ["v8dbg_class_SharedFunctionInfo__function_data__Object"],
  // V8 12 keeps a function's DebugInfo aside: the field holds the Script alone.
  sfiScriptOrDebugInfo: [
    "v8dbg_class_SharedFunctionInfo__script_or_debug_info__Object",
    "v8dbg_class_SharedFunctionInfo__script_or_debug_info__HeapObject",
    "v8dbg_class_SharedFunctionInfo__script__Tagged_HeapObject_",
  ],
  scopeInfoContextLocalCount: ["v8dbg_scopeinfo_idx_ncontextlocals"],
  scopeInfoFirstVars: ["v8dbg_scopeinfo_idx_first_vars"],
  scopeInfoIsHeapObject: ["v8dbg_parent_ScopeInfo__HeapObject"],
  scriptName: ["v8dbg_class_Script__name__Object"],
  scriptSource: ["v8dbg_class_Script__source__Object"],
  scriptLineEnds: ["v8dbg_class_Script__line_ends__Object"],
  bytecodeArraySourcePositions: [
    "v8dbg_class_BytecodeArray__source_position_table__Object",
    "v8dbg_class_BytecodeArray__source_position_table__HeapObject",
  ],
  bytecodeArrayData: ["v8dbg_class_BytecodeArray__data__uintptr_t"],
  bytecodeArrayWrapper: ["v8dbg_class_BytecodeArray__wrapper__Tagged_BytecodeWrapper_"],
  fixedArrayLength: ["v8dbg_class_FixedArrayBase__length__SMI"],
  fixedArrayData: ["v8dbg_class_FixedArray__data__uintptr_t"],
  codeInstructionStart: [
    "v8dbg_class_Code__instruction_start__uintptr_t",
    "v8dbg_class_Code__instruction_start__Address",
  ],
  codeInstructionSize: ["v8dbg_class_Code__instruction_size__int"],
  codeFlags: ["v8dbg_class_Code__flags__uint32_t"],
  codeWrapper: ["v8dbg_class_Code__wrapper__Tagged_CodeWrapper_"],
  codeDeoptimizationData: ["v8dbg_class_Code__deoptimization_data__FixedArray"],
  codeSourcePositions: ["v8dbg_class_Code__source_position_table__ByteArray"],
  codeKindMask: ["v8dbg_CodeKindFieldMask"],
  codeKindShift: ["v8dbg_CodeKindFieldShift"],
  codeKindBaseline: ["v8dbg_CodeKindBaseline"],
  deoptInlinedFunctionCount: ["v8dbg_DeoptimizationDataInlinedFunctionCountIndex"],
  deoptLiteralArray: ["v8dbg_DeoptimizationDataLiteralArrayIndex"],
  deoptSharedFunctionInfo: [
    "v8dbg_DeoptimizationDataSharedFunctionInfoIndex",
    "v8dbg_DeoptimizationDataWrappedSharedFunctionInfoIndex",
  ],
  deoptInliningPositions: ["v8dbg_DeoptimizationDataInliningPositionsIndex"],
} as const satisfies Record<string, readonly string[]>;

type Field = keyof typeof FIELDS;

/** Whether `elf` may hold V8, from its dynamic symbol table's hash (a few dozen bytes read). */
export function mayHoldV8(elf: ElfFile): boolean {
  return findDynamicSymbol(elf, MARKER_SYMBOL) !== null;
}

/** Orders versions: negative when `a` is older than `b`. */
export function compareV8Versions(a: V8Version, b: V8Version): number {
  return a.major - b.major || a.minor - b.minor || a.build - b.build || a.patch - b.patch;
}

/** `major.minor.build.patch`. */
export function formatV8Version(version: V8Version): string {
  return `${version.major}.${version.minor}.${version.build}.${version.patch}`;
}

/**
 * V8's layouts in `elf`, or null when the file holds no V8 introspection data.
 *
 * @throws {RangeError} when it does, but of a version or with a layout this profiler cannot read.
 */
export function readV8Layout(elf: ElfFile, fileName: string): V8Layout | null {
  if (!mayHoldV8(elf)) return null;
  // Every one of them is exported: looked up through the hash table, each costs a few reads where a scan
  // of the symbol tables costs about 100 ms in Node 20's node (110,000 symbols).
  const names = [...Object.values(VERSION_SYMBOLS), ...Object.values(FIELDS).flat(), BYTECODE_SIZES];
  const symbols = new Map<string, ElfSymbol>();
  for (const name of names) {
    const symbol = findDynamicSymbol(elf, name);
    if (symbol !== null) symbols.set(name, symbol);
  }
  const int32 = (symbol: ElfSymbol | undefined): number | null =>
    symbol === undefined ? null : readInt32(elf, symbol.value);

  const versionPart = (name: string): number => {
    const value = int32(symbols.get(name));
    if (value === null) throw new RangeError(`Cannot unwind V8 in ${fileName}: no ${name}`);
    return value;
  };
  const version: V8Version = {
    major: versionPart(VERSION_SYMBOLS.major),
    minor: versionPart(VERSION_SYMBOLS.minor),
    build: versionPart(VERSION_SYMBOLS.build),
    patch: versionPart(VERSION_SYMBOLS.patch),
  };
  if (compareV8Versions(version, MIN_V8_VERSION) < 0) {
    throw new RangeError(
      `Cannot unwind V8 ${formatV8Version(version)} in ${fileName}: versions before ` +
        `${MIN_V8_VERSION.major}.${MIN_V8_VERSION.minor} are not supported`,
    );
  }

  const optional = (field: Field): number | null => {
    for (const name of FIELDS[field]) {
      const value = int32(symbols.get(name));
      if (value !== null) return value;
    }
    return null;
  };
  const missing: string[] = [];
  const required = (field: Field, fallback: number | null = null): number => {
    const value = optional(field) ?? fallback;
    if (value === null) {
      missing.push(FIELDS[field][0]);
      return 0;
    }
    return value;
  };
  const atLeast = (major: number, minor: number, build = 0): boolean =>
    compareV8Versions(version, { major, minor, build, patch: 0 }) >= 0;

  // V8 12 moved Code to the trusted space and gave it a wrapper in the heap, which it points to after its
  // DeoptimizationData and source positions (measured in Node 22: 8, 16, wrapper 24); before, the source
  // positions came at 24.
  const codeWrapper = optional("codeWrapper");
  const bytecodeWrapper = optional("bytecodeArrayWrapper");
  const codeSourcePositions = required("codeSourcePositions", codeWrapper !== null ? codeWrapper - 8 : 24);
  // V8 11.1.204 made Code's instructions an address field (the InstructionStream split): the start lies
  // right after the source positions and the InstructionStream pointer; flags and the size follow it
  // (the builtin id and kind-specific flags, 2 + 2 bytes, sit between them before 11.4.59).
  const instructionStartIsPointer = atLeast(11, 1, 204);
  const codeInstructionStart = required(
    "codeInstructionStart",
    instructionStartIsPointer ? codeSourcePositions + 16 : null,
  );
  const codeFlags = required("codeFlags", instructionStartIsPointer ? codeInstructionStart + 8 : null);
  const codeInstructionSize = required(
    "codeInstructionSize",
    instructionStartIsPointer ? codeFlags + 4 + (atLeast(11, 4, 59) ? 0 : 4) : null,
  );
  const jsFunctionShared = required("jsFunctionShared");
  // V8 13 gave JSFunctions a dispatch handle for their code (leaptiering): the table is found through
  // V8's accessor of it, in the symbol table, which is read only for such a version (about 100 ms for
  // Node 24). V8 13 no longer exports the bytecode sizes either: they are read from there too.
  let dispatchTable: V8DispatchTableLocation | null = null;
  if (optional("jsFunctionCode") === null && atLeast(13, 0)) {
    const local = findElfSymbols(elf, [...DISPATCH_TABLE_SYMBOLS, BYTECODE_SIZES]);
    dispatchTable = findDispatchTable(elf, local);
    const sizes = local.get(BYTECODE_SIZES);
    if (sizes !== undefined && !symbols.has(BYTECODE_SIZES)) symbols.set(BYTECODE_SIZES, sizes);
  }
  const typeJsFunction = required("typeJsFunction");
  const layout: V8Layout = {
    version,
    frame: {
      marker: required("fpMarker"),
      function: required("fpFunction"),
      bytecodeOffset: required("fpBytecodeOffset"),
    },
    types: {
      // The JSFunction types: JS_FUNCTION_TYPE and the constructors' own types after it (typed arrays,
      // Array, Promise, RegExp, class constructors: 16 in 10.2 to 11.3).
      jsFunctionFirst: optional("typeFirstJsFunction") ?? typeJsFunction,
      jsFunctionLast: optional("typeLastJsFunction") ?? typeJsFunction + 15,
      sharedFunctionInfo: required("typeSharedFunctionInfo"),
      code: required("typeCode"),
      script: required("typeScript"),
      scopeInfo: required("typeScopeInfo"),
      bytecodeArray: required("typeBytecodeArray"),
      byteArray: required("typeByteArray"),
      fixedArray: required("typeFixedArray"),
      positionTable: optional("typeTrustedByteArray") ?? required("typeByteArray"),
      // ProtectedFixedArray from V8 12.5 (Node 24's 13.6 measured), TrustedFixedArray in 12.4.
      deoptimizationData: (atLeast(12, 5) ? optional("typeProtectedFixedArray") : null) ??
        optional("typeTrustedFixedArray") ?? required("typeFixedArray"),
    },
    heapObjectMap: required("heapObjectMap"),
    mapInstanceType: required("mapInstanceType"),
    string: {
      firstNonString: required("firstNonString"),
      representationMask: required("representationMask"),
      encodingMask: required("encodingMask"),
      seqTag: required("seqTag"),
      consTag: required("consTag"),
      externalTag: required("externalTag"),
      slicedTag: required("slicedTag"),
      thinTag: required("thinTag"),
      oneByteTag: required("oneByteTag"),
      length: required("stringLength"),
      seqOneByteChars: required("seqOneByteChars"),
      seqTwoByteChars: required("seqTwoByteChars"),
      consFirst: required("consFirst"),
      consSecond: required("consSecond"),
      thinActual: required("thinActual"),
      slicedParent: required("slicedParent"),
      slicedOffset: required("slicedOffset"),
      externalResource: required("externalResource"),
    },
    jsFunction: {
      shared: jsFunctionShared,
      // Right after the SharedFunctionInfo's neighbours (context, feedback cell) before 11.7. V8 13's
      // dispatch handle takes the code's place, right before the SharedFunctionInfo (Node 24 measured).
      code: required(
        "jsFunctionCode",
        dispatchTable !== null ? jsFunctionShared - 8 : atLeast(11, 7) ? null : jsFunctionShared + 24,
      ),
    },
    dispatchTable,
    sharedFunctionInfo: {
      nameOrScopeInfo: required("sfiNameOrScopeInfo"),
      // Right after the map in every version read (V8 12 no longer describes it: Node 22 measured).
      functionData: required("sfiFunctionData", 8),
      scriptOrDebugInfo: required("sfiScriptOrDebugInfo"),
    },
    scopeInfo: {
      // A HeapObject's slots follow its map; a FixedArray's follow its length too.
      // V8 12 describes no parents; its ScopeInfo is a HeapObject (Node 22 measured).
      slots: optional("scopeInfoIsHeapObject") !== null || atLeast(12, 0) ? 8 : 16,
      contextLocalCount: required("scopeInfoContextLocalCount"),
      firstVars: required("scopeInfoFirstVars"),
    },
    script: {
      name: required("scriptName"),
      source: required("scriptSource"),
      lineEnds: required("scriptLineEnds"),
    },
    bytecodeArray: {
      // BytecodeArray: map, length, constant pool, handler table, then the source positions; since V8 12
      // map, length, its wrapper in the heap, then the source positions (Node 22 measured).
      sourcePositionTable: required(
        "bytecodeArraySourcePositions",
        bytecodeWrapper !== null ? bytecodeWrapper + 8 : 32,
      ),
      data: required("bytecodeArrayData"),
    },
    bytecodeSizes: bytecodeSizes(elf, symbols.get(BYTECODE_SIZES)),
    fixedArray: { length: required("fixedArrayLength"), data: required("fixedArrayData") },
    code: {
      instructionStart: codeInstructionStart,
      instructionStartIsPointer,
      instructionSize: codeInstructionSize,
      flags: codeFlags,
      kindMask: required("codeKindMask"),
      kindShift: required("codeKindShift"),
      kindBaseline: required("codeKindBaseline"),
      deoptimizationData: required(
        "codeDeoptimizationData",
        codeWrapper !== null ? codeSourcePositions - 8 : 16,
      ),
      sourcePositionTable: codeSourcePositions,
    },
    // The same indexes from 10.2 (which does not describe them) to 11.3 (which does).
    sharedFunctionInfoWrapper: symbols.has("v8dbg_DeoptimizationDataWrappedSharedFunctionInfoIndex")
      ? { type: required("typeSharedFunctionInfoWrapper"), sharedInfo: required("sfiWrapperSharedInfo") }
      : null,
    deoptimizationData: {
      inlinedFunctionCount: required("deoptInlinedFunctionCount", 1),
      literalArray: required("deoptLiteralArray", 2),
      sharedFunctionInfo: required("deoptSharedFunctionInfo", 6),
      inliningPositions: required("deoptInliningPositions", 7),
    },
  };
  if (missing.length > 0) {
    throw new RangeError(
      `Cannot unwind V8 ${formatV8Version(version)} in ${fileName}: its introspection data lacks ` +
        missing.join(", "),
    );
  }
  return layout;
}

/** `Bytecodes::kBytecodeSizes[3][N]` (one byte each), or null when absent or of an unexpected size. */
function bytecodeSizes(
  elf: ElfFile,
  symbol: ElfSymbol | undefined,
): readonly [Uint8Array, Uint8Array, Uint8Array] | null {
  if (symbol === undefined || symbol.size === 0 || symbol.size % 3 !== 0 || symbol.size / 3 > MAX_BYTECODES) {
    return null;
  }
  const count = symbol.size / 3;
  const offset = elf.vaddrToFileOffset(symbol.value as Address);
  if (offset === null) return null;
  const bytes = elf.read(offset, symbol.size);
  return [bytes.slice(0, count), bytes.slice(count, 2 * count), bytes.slice(2 * count)];
}

/**
 * The int32 at ELF address `vaddr`: in file-backed data, or 0 in a segment's zero-filled part (`.bss`,
 * where V8 puts the symbols whose value is 0).
 *
 * @throws {RangeError} when no PT_LOAD segment holds it.
 */
function readInt32(elf: ElfFile, vaddr: number): number {
  for (const header of elf.programHeaders) {
    if (header.type !== PT_LOAD || vaddr < header.vaddr || vaddr + 4 > header.vaddr + header.memsz) continue;
    if (vaddr + 4 > header.vaddr + header.filesz) return 0;
    const offset = elf.vaddrToFileOffset(vaddr as Address);
    if (offset === null) break;
    const bytes = elf.read(offset, 4);
    return new DataView(bytes.buffer, bytes.byteOffset, 4).getInt32(0, true);
  }
  throw new RangeError(`Cannot read V8's introspection data at 0x${vaddr.toString(16)} of ${elf.name}`);
}

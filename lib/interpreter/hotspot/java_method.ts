/**
 * Java methods as HotSpot keeps them, read from a JVM's memory: a `Method` points to its `ConstMethod`
 * (bytecodes, then the compressed line number table), whose `ConstantPool` holds the method's name and
 * signature and, through its holder class, the class's name and source file. Layouts come from the JVM's
 * introspection tables ({@linkcode VmStructs}); what moved between releases (the line table's number
 * encoding in JDK 20, `ConstMethod::_flags` in 21) is decided from the tables and the JVM's version.
 *
 * Everything read is bounded: a name by the `Symbol`'s 16-bit length, a line table by the 64 KiB of
 * bytecodes a method can have. A pointer that does not lead to a well-formed method is refused with a
 * {@linkcode VmStructsError} (or the memory's own error), never followed further.
 *
 * @example
 * ```ts ignore
 * import { javaMethodLayout, readJavaMethod, lineAt } from "./java_method.ts";
 * const layout = javaMethodLayout(vm, version);
 * const method = readJavaMethod(memory, layout, methodAddress);
 * console.log(`${method.className}.${method.name}${method.signature} at ${method.sourceFile}:${lineAt(method, 7)}`);
 * ```
 *
 * @module
 */
import type { RemoteMemory } from "../remote_memory.ts";
import { type VmStructs, VmStructsError } from "./vm_structs.ts";
import type { JdkVersion } from "./jdk_version.ts";

/** `ConstMethod` flag: the method has a line number table (bit 0 in every release). */
const HAS_LINE_NUMBER_TABLE = 0x1;
/** Most bytecodes a method can have (JVMS 4.7.3: code_length < 65536). */
const MAX_CODE_BYTES = 0xffff;
/** The most a line table is read: entries are at most 11 bytes, and one per bytecode at most. */
const MAX_LINE_TABLE_BYTES = 1 << 16;
/** A line table is read in chunks of this size until its end marker. */
const LINE_TABLE_CHUNK = 256;

/** Where the fields a method's names and lines are read from lie. */
export interface JavaMethodLayout {
  methodConstMethod: number;
  constMethodSize: number;
  constMethodConstants: number;
  constMethodCodeSize: number;
  /** `_flags` (u2 up to JDK 20) or `_flags._flags` (u4): the bit read is in the first byte either way. */
  constMethodFlags: number;
  constMethodNameIndex: number;
  constMethodSignatureIndex: number;
  constantPoolSize: number;
  constantPoolHolder: number;
  constantPoolSourceFileIndex: number;
  klassName: number;
  symbolLength: number;
  symbolBody: number;
  /**
   * Bytes excluded from the line table's UNSIGNED5 numbers: 1 from JDK 20 on (no encoded byte is 0),
   * 0 before.
   */
  unsigned5Excluded: number;
}

/**
 * The layout of `vm`'s method classes. JDK 15 and later (the source file's index moved to the constant
 * pool in 15).
 *
 * @throws {VmStructsError} when the tables lack a field this reads.
 */
export function javaMethodLayout(vm: VmStructs, version: JdkVersion): JavaMethodLayout {
  const offset = (type: string, ...names: string[]): number => {
    for (const name of names) {
      const field = vm.field(type, name);
      if (field !== null && field.address === null) return field.offset;
    }
    throw new VmStructsError(`no field ${type}.${names.join(" or ")} in the tables`);
  };
  const size = (type: string): number => {
    const value = vm.size(type);
    if (value === null || value === 0) throw new VmStructsError(`no size of ${type} in the tables`);
    return value;
  };
  const lengthAndRefcount = vm.field("Symbol", "_length_and_refcount");
  return {
    methodConstMethod: offset("Method", "_constMethod"),
    constMethodSize: size("ConstMethod"),
    constMethodConstants: offset("ConstMethod", "_constants"),
    constMethodCodeSize: offset("ConstMethod", "_code_size"),
    constMethodFlags: offset("ConstMethod", "_flags", "_flags._flags"),
    constMethodNameIndex: offset("ConstMethod", "_name_index"),
    constMethodSignatureIndex: offset("ConstMethod", "_signature_index"),
    constantPoolSize: size("ConstantPool"),
    constantPoolHolder: offset("ConstantPool", "_pool_holder"),
    constantPoolSourceFileIndex: offset("ConstantPool", "_source_file_name_index"),
    klassName: offset("Klass", "_name"),
    // The 16-bit length is the upper half of `_length_and_refcount` where the tables name that instead.
    symbolLength: lengthAndRefcount !== null ? lengthAndRefcount.offset + 2 : offset("Symbol", "_length"),
    symbolBody: offset("Symbol", "_body"),
    unsigned5Excluded: version.major >= 20 ? 1 : 0,
  };
}

/** One line number table entry: from bytecode index `bci` on, the code is of source line `line`. */
export interface LineEntry {
  bci: number;
  line: number;
}

/** A Java method's names and lines. */
export interface JavaMethod {
  /** The class's binary name with dots (`java.util.HashMap`, `Outer$Inner`). */
  className: string;
  /** The method's name (`main`, `<init>`, `lambda$run$0`). */
  name: string;
  /** Its descriptor (`([Ljava/lang/String;)V`). */
  signature: string;
  /** The class's source file (`Chain.java`), or null when the class has none (generated code). */
  sourceFile: string | null;
  bytecodeSize: number;
  /** The line number table in the order the class file lists it (not always by bci); empty when none. */
  lines: LineEntry[];
}

/**
 * Reads the method at `address` (a `Method*` of the process `memory` reads).
 *
 * @throws {VmStructsError} when what it points to is not a well-formed method.
 * @throws {RemoteMemoryError} when a read fails (the method was freed, the process exited).
 */
export function readJavaMethod(memory: RemoteMemory, layout: JavaMethodLayout, address: number): JavaMethod {
  const constMethod = memory.pointer(address + layout.methodConstMethod);
  if (constMethod === 0) throw new VmStructsError(`method 0x${address.toString(16)} has no ConstMethod`);
  const header = memory.read(constMethod, layout.constMethodSize);
  const view = new DataView(header.buffer);
  const pool = Number(view.getBigUint64(layout.constMethodConstants, true));
  const codeSize = view.getUint16(layout.constMethodCodeSize, true);
  const flags = header[layout.constMethodFlags]!;
  const nameIndex = view.getUint16(layout.constMethodNameIndex, true);
  const signatureIndex = view.getUint16(layout.constMethodSignatureIndex, true);
  if (pool === 0) throw new VmStructsError(`method 0x${address.toString(16)} has no constant pool`);

  const holder = memory.pointer(pool + layout.constantPoolHolder);
  if (holder === 0) throw new VmStructsError(`constant pool 0x${pool.toString(16)} has no holder class`);
  const sourceIndex = memory.u16(pool + layout.constantPoolSourceFileIndex);
  const poolSymbol = (index: number) =>
    readSymbol(memory, layout, poolSymbolAddress(memory, layout, pool, index));
  const lines = flags & HAS_LINE_NUMBER_TABLE
    ? readLineTable(
      memory,
      constMethod + layout.constMethodSize + codeSize,
      layout.unsigned5Excluded,
      codeSize,
    )
    : [];
  return {
    className: readSymbol(memory, layout, memory.pointer(holder + layout.klassName)).replaceAll("/", "."),
    name: poolSymbol(nameIndex),
    signature: poolSymbol(signatureIndex),
    sourceFile: sourceIndex === 0 ? null : poolSymbol(sourceIndex),
    bytecodeSize: codeSize,
    lines,
  };
}

/**
 * The source line of bytecode index `bci` in `method`: the line of the entry with the largest bci not
 * above it (javac's tables need not be sorted); 0 when the method has no line there.
 */
export function lineAt(method: JavaMethod, bci: number): number {
  let best = -1;
  let line = 0;
  for (const entry of method.lines) {
    if (entry.bci <= bci && entry.bci >= best) {
      best = entry.bci;
      line = entry.line;
    }
  }
  return line;
}

/** The `Symbol*` in slot `index` of the constant pool at `pool` (its low bit marks it resolved). */
function poolSymbolAddress(
  memory: RemoteMemory,
  layout: JavaMethodLayout,
  pool: number,
  index: number,
): number {
  if (index === 0) throw new VmStructsError(`constant pool index 0 at 0x${pool.toString(16)}`);
  const [high, low] = memory.u64Halves(pool + layout.constantPoolSize + 8 * index);
  const value = high * 2 ** 32 + ((low & ~1) >>> 0);
  if (value === 0 || high >= 0x8000) {
    throw new VmStructsError(`constant pool 0x${pool.toString(16)} slot ${index} is not a symbol`);
  }
  return value;
}

/** The text of the `Symbol` at `address` (modified UTF-8, decoded as UTF-8). */
function readSymbol(memory: RemoteMemory, layout: JavaMethodLayout, address: number): string {
  if (address === 0) throw new VmStructsError("a NULL symbol");
  const length = memory.u16(address + layout.symbolLength);
  if (length === 0) return "";
  return new TextDecoder().decode(memory.read(address + layout.symbolBody, length));
}

/**
 * Decodes HotSpot's compressed line number table (`CompressedLineNumberReadStream`) at `address`: each
 * entry a byte `bciDelta << 3 | lineDelta`, or 0xff and two signed UNSIGNED5 deltas; a 0 byte ends it.
 * Bytecode indexes beyond `codeSize` mean the bytes are not a line table.
 */
function readLineTable(
  memory: RemoteMemory,
  address: number,
  excluded: number,
  codeSize: number,
): LineEntry[] {
  let bytes = new Uint8Array(0);
  const more = () => {
    if (bytes.length >= MAX_LINE_TABLE_BYTES) throw new VmStructsError("a line table without end");
    const chunk = memory.read(address + bytes.length, LINE_TABLE_CHUNK);
    const grown = new Uint8Array(bytes.length + chunk.length);
    grown.set(bytes);
    grown.set(chunk, bytes.length);
    bytes = grown;
  };
  const reader = {
    at: 0,
    byte(): number {
      while (this.at >= bytes.length) more();
      return bytes[this.at++]!;
    },
  };
  const lines: LineEntry[] = [];
  let bci = 0;
  let line = 0;
  while (true) {
    const first = reader.byte();
    if (first === 0) return lines;
    if (first === 0xff) {
      bci += readSigned5(reader, excluded);
      line += readSigned5(reader, excluded);
    } else {
      bci += first >> 3;
      line += first & 7;
    }
    if (bci < 0 || bci > Math.min(codeSize, MAX_CODE_BYTES) || line < 0) {
      throw new VmStructsError(`line table entry bci ${bci} line ${line} of a ${codeSize}-byte method`);
    }
    lines.push({ bci, line });
  }
}

/**
 * One signed number in HotSpot's UNSIGNED5 coding (`unsigned5.hpp`), zigzag-encoded: up to five bytes, each
 * less the excluded count a base-64 digit, the first digit below 192 (L) the last.
 */
function readSigned5(reader: { byte(): number }, excluded: number): number {
  let value = 0;
  let multiplier = 1;
  for (let i = 0; i < 5; i++) {
    const byte = reader.byte();
    if (byte < excluded) throw new VmStructsError(`byte ${byte} in a number of a line table`);
    value += (byte - excluded) * multiplier;
    if (byte - excluded < 192) break;
    multiplier *= 64;
  }
  const unsigned = value >>> 0;
  return (unsigned >>> 1) ^ -(unsigned & 1);
}

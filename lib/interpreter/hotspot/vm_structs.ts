/**
 * HotSpot's introspection tables, read from a running JVM. `libjvm.so` describes its own classes for
 * debuggers (the Serviceability Agent, `jhsdb`) in four arrays built from `vmStructs.cpp`: the fields of
 * its C++ classes (offsets, or addresses of static fields), the classes' sizes, and integer and long
 * constants. The arrays hold pointers to names, which the dynamic loader relocates, and the size and
 * layout of their entries are variables the JVM sets as it starts (`gHotSpotVMStructEntryArrayStride`
 * and friends, in `.bss`): so the tables are read from the process's memory, not from the file.
 *
 * What is read is true of the file (`libjvm.so` build), whatever process maps it: addresses of static
 * fields are kept as ELF addresses (less the process's load bias), so one reading serves every JVM of
 * the same file.
 *
 * The process is hostile input: every entry, name and count is bounded, and a table that does not end
 * within {@linkcode MAX_ENTRIES} or has a malformed entry is refused with a {@linkcode VmStructsError}.
 *
 * @example
 * ```ts ignore
 * import { ElfFile } from "../../elf/elf_file.ts";
 * import { RemoteMemory } from "../remote_memory.ts";
 * import { VmStructs, vmStructsSymbols } from "./vm_structs.ts";
 * using elf = ElfFile.open("/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so");
 * const symbols = vmStructsSymbols(elf)!;
 * using memory = RemoteMemory.open(pid, { cachePages: 256 });
 * const vm = VmStructs.read(memory, symbols, bias);
 * console.log(vm.size("Method"), vm.field("Method", "_constMethod")?.offset);
 * ```
 *
 * @module
 */
import type { ElfFile } from "../../elf/elf_file.ts";
import { findDynamicSymbol } from "../dynamic_symbol_lookup.ts";
import { findElfSymbols } from "../elf_symbols.ts";
import { type RemoteMemory, RemoteMemoryError } from "../remote_memory.ts";

/** Most entries read from one table (JDK 17 has about 2,700 fields and 900 types; JDK 25 about 3,100). */
export const MAX_ENTRIES = 1 << 15;
/** Longest type, field or constant name read (the longest in JDK 17-25 are about 80 bytes). */
export const MAX_NAME_BYTES = 256;
/** Deepest chain of superclasses followed (a loop in a hostile table ends there). */
const MAX_CLASS_DEPTH = 32;
/** Largest entry stride accepted (JDK 17: 48 bytes for a field entry). */
const MAX_STRIDE = 256;

/** A table's exported symbols: the pointer to its array, the array's stride, and one offset per column. */
interface TableLayout<Column extends string> {
  array: string;
  stride: string;
  columns: Record<Column, string>;
}

const STRUCTS: TableLayout<"typeName" | "fieldName" | "typeString" | "isStatic" | "offset" | "address"> = {
  array: "gHotSpotVMStructs",
  stride: "gHotSpotVMStructEntryArrayStride",
  columns: {
    typeName: "gHotSpotVMStructEntryTypeNameOffset",
    fieldName: "gHotSpotVMStructEntryFieldNameOffset",
    typeString: "gHotSpotVMStructEntryTypeStringOffset",
    isStatic: "gHotSpotVMStructEntryIsStaticOffset",
    offset: "gHotSpotVMStructEntryOffsetOffset",
    address: "gHotSpotVMStructEntryAddressOffset",
  },
};

const TYPES: TableLayout<"typeName" | "superclassName" | "size"> = {
  array: "gHotSpotVMTypes",
  stride: "gHotSpotVMTypeEntryArrayStride",
  columns: {
    typeName: "gHotSpotVMTypeEntryTypeNameOffset",
    superclassName: "gHotSpotVMTypeEntrySuperclassNameOffset",
    size: "gHotSpotVMTypeEntrySizeOffset",
  },
};

const INT_CONSTANTS: TableLayout<"name" | "value"> = {
  array: "gHotSpotVMIntConstants",
  stride: "gHotSpotVMIntConstantEntryArrayStride",
  columns: { name: "gHotSpotVMIntConstantEntryNameOffset", value: "gHotSpotVMIntConstantEntryValueOffset" },
};

const LONG_CONSTANTS: TableLayout<"name" | "value"> = {
  array: "gHotSpotVMLongConstants",
  stride: "gHotSpotVMLongConstantEntryArrayStride",
  columns: { name: "gHotSpotVMLongConstantEntryNameOffset", value: "gHotSpotVMLongConstantEntryValueOffset" },
};

const LAYOUTS = [STRUCTS, TYPES, INT_CONSTANTS, LONG_CONSTANTS];

/** Every symbol the tables need. */
const SYMBOL_NAMES: readonly string[] = LAYOUTS.flatMap((
  t,
) => [t.array, t.stride, ...Object.values(t.columns)]);

/** The ELF addresses of the tables' symbols in one `libjvm.so`, by symbol name. */
export type VmStructsSymbols = ReadonlyMap<string, number>;

/**
 * The addresses of the introspection symbols of `elf` (from `.dynsym`, where `libjvm.so` exports them),
 * or null when it exports none of them (not a HotSpot VM).
 *
 * @throws {VmStructsError} when it exports some but not all of them.
 */
export function vmStructsSymbols(elf: ElfFile): VmStructsSymbols | null {
  // Every file a process maps is asked: the dynamic symbol hash rejects one without the tables after a
  // few small reads, where scanning the symbol tables costs tens of milliseconds for a large binary (54
  // ms for node). libjvm.so exports the tables, so a file that has them has them in the hash.
  if (SYMBOL_NAMES.every((name) => findDynamicSymbol(elf, name) === null)) return null;
  const found = findElfSymbols(elf, SYMBOL_NAMES);
  if (found.size === 0) return null;
  const missing = SYMBOL_NAMES.filter((name) => !found.has(name));
  if (missing.length > 0) throw new VmStructsError(`${elf.name} does not export ${missing.join(", ")}`);
  return new Map([...found].map(([name, symbol]) => [name, symbol.value]));
}

/** A field of a HotSpot class. */
export interface VmField {
  /**
   * The field's C++ type, as the table spells it (`ConstMethod*`, `int`, `GrowableArray<int>*`); null
   * where the table gives none.
   */
  typeString: string | null;
  /** Offset in its object; 0 for a static field. */
  offset: number;
  /** A static field's ELF address (less the load bias), or null for a field of each object. */
  address: number | null;
}

/** Why the tables could not be read. */
export class VmStructsError extends Error {
  constructor(message: string) {
    super(`Cannot read HotSpot's introspection tables: ${message}`);
    this.name = "VmStructsError";
  }
}

/**
 * The JVM has not filled the tables, or what they lead to, yet (it is starting): try again later. A
 * {@linkcode VmStructsError} of another kind is permanent for the file.
 */
export class VmNotReadyError extends VmStructsError {
  constructor(message: string) {
    super(message);
    this.name = "VmNotReadyError";
  }
}

/** The introspection tables of one `libjvm.so`. */
export class VmStructs {
  readonly #fields: Map<string, Map<string, VmField>>;
  readonly #sizes: Map<string, number>;
  readonly #superclasses: Map<string, string>;
  readonly #intConstants: Map<string, number>;
  readonly #longConstants: Map<string, bigint>;

  private constructor(
    fields: Map<string, Map<string, VmField>>,
    sizes: Map<string, number>,
    superclasses: Map<string, string>,
    intConstants: Map<string, number>,
    longConstants: Map<string, bigint>,
  ) {
    this.#fields = fields;
    this.#sizes = sizes;
    this.#superclasses = superclasses;
    this.#intConstants = intConstants;
    this.#longConstants = longConstants;
  }

  /**
   * Reads the tables of the `libjvm.so` mapped with load bias `bias` in the process whose memory is
   * `memory`, at the ELF addresses `symbols` gives. The JVM must have started (it fills the strides as
   * it initializes). Reads a few thousand names: give `memory` a cache of a few hundred pages.
   *
   * @throws {VmStructsError} when a table is malformed, does not end, or cannot be read.
   */
  static read(memory: RemoteMemory, symbols: VmStructsSymbols, bias: number): VmStructs {
    try {
      const fields = new Map<string, Map<string, VmField>>();
      for (const entry of readTable(memory, symbols, bias, STRUCTS)) {
        const type = entry.string("typeName");
        const field = entry.string("fieldName");
        const isStatic = entry.u32("isStatic") !== 0;
        const value: VmField = {
          typeString: entry.optionalString("typeString"),
          offset: isStatic ? 0 : entry.u64("offset"),
          address: isStatic ? entry.pointer("address") - bias : null,
        };
        let ofType = fields.get(type);
        if (ofType === undefined) fields.set(type, ofType = new Map());
        ofType.set(field, value);
      }
      const sizes = new Map<string, number>();
      const superclasses = new Map<string, string>();
      for (const entry of readTable(memory, symbols, bias, TYPES)) {
        const type = entry.string("typeName");
        sizes.set(type, entry.u64("size"));
        const superclass = entry.optionalString("superclassName");
        if (superclass !== null) superclasses.set(type, superclass);
      }
      const intConstants = new Map<string, number>();
      for (const entry of readTable(memory, symbols, bias, INT_CONSTANTS)) {
        intConstants.set(entry.string("name"), entry.i32("value"));
      }
      const longConstants = new Map<string, bigint>();
      for (const entry of readTable(memory, symbols, bias, LONG_CONSTANTS)) {
        longConstants.set(entry.string("name"), entry.u64Big("value"));
      }
      return new VmStructs(fields, sizes, superclasses, intConstants, longConstants);
    } catch (error) {
      if (error instanceof RemoteMemoryError && error.failure === "gone") throw error;
      if (error instanceof RemoteMemoryError) throw new VmStructsError(error.message);
      throw error;
    }
  }

  /** The size of class `type` in bytes, or null when the tables do not list it. */
  size(type: string): number | null {
    return this.#sizes.get(type) ?? null;
  }

  /** The class `type` derives from, or null (a root class, or not listed). */
  superclass(type: string): string | null {
    return this.#superclasses.get(type) ?? null;
  }

  /**
   * Field `name` of class `type`, declared there or in a class it derives from (the tables list a field
   * once, with the class that declares it); null when the tables do not list it.
   */
  field(type: string, name: string): VmField | null {
    let current: string | null = type;
    for (let depth = 0; current !== null && depth < MAX_CLASS_DEPTH; depth++) {
      const found = this.#fields.get(current)?.get(name);
      if (found !== undefined) return found;
      current = this.superclass(current);
    }
    return null;
  }

  /** The fields the tables list for class `type` (not those of its superclasses), by name. */
  fieldsOf(type: string): ReadonlyMap<string, VmField> {
    return this.#fields.get(type) ?? new Map();
  }

  /** Integer constant `name`, or null. */
  intConstant(name: string): number | null {
    return this.#intConstants.get(name) ?? null;
  }

  /** Long constant `name`, or null. */
  longConstant(name: string): bigint | null {
    return this.#longConstants.get(name) ?? null;
  }

  /** Classes with fields, classes with sizes, and constants: what was read. */
  get counts(): { fieldTypes: number; fields: number; types: number; constants: number } {
    let fields = 0;
    for (const ofType of this.#fields.values()) fields += ofType.size;
    return {
      fieldTypes: this.#fields.size,
      fields,
      types: this.#sizes.size,
      constants: this.#intConstants.size + this.#longConstants.size,
    };
  }
}

/** One entry of a table, read as its layout says. */
class Entry<Column extends string> {
  bytes: Uint8Array;
  view: DataView;

  constructor(
    readonly memory: RemoteMemory,
    readonly columns: Record<Column, number>,
    stride: number,
  ) {
    this.bytes = new Uint8Array(stride);
    this.view = new DataView(this.bytes.buffer);
  }

  u32(column: Column): number {
    return this.view.getUint32(this.columns[column], true);
  }

  i32(column: Column): number {
    return this.view.getInt32(this.columns[column], true);
  }

  u64Big(column: Column): bigint {
    const offset = this.columns[column];
    if (offset + 8 > this.bytes.length) {
      throw new VmStructsError(`${column} at ${offset} lies outside the stride ${this.bytes.length}`);
    }
    return this.view.getBigUint64(offset, true);
  }

  /** A 64-bit value that must be below 2^53 (sizes and offsets). */
  u64(column: Column): number {
    const value = this.u64Big(column);
    if (value >= 2n ** 53n) throw new VmStructsError(`${column} ${value} is out of range`);
    return Number(value);
  }

  /** A user-space address held in a column (not NULL). */
  pointer(column: Column): number {
    const value = this.u64Big(column);
    if (value === 0n || value >= 0x800000000000n) {
      throw new VmStructsError(`${column} 0x${value.toString(16)} is not a user-space address`);
    }
    return Number(value);
  }

  /** The string a column points to; it must not be NULL. */
  string(column: Column): string {
    return this.memory.cString(this.pointer(column), MAX_NAME_BYTES);
  }

  /** The string a column points to, or null for NULL. */
  optionalString(column: Column): string | null {
    return this.u64Big(column) === 0n ? null : this.string(column);
  }
}

/**
 * The entries of one table, up to its end marker (an entry whose first name is NULL). The same `Entry`
 * is refilled for each: read what is needed before asking for the next.
 */
function* readTable<Column extends string>(
  memory: RemoteMemory,
  symbols: VmStructsSymbols,
  bias: number,
  layout: TableLayout<Column>,
): Generator<Entry<Column>> {
  const at = (name: string) => symbols.get(name)! + bias;
  const stride = memory.u64(at(layout.stride));
  if (stride === 0) throw new VmNotReadyError(`${layout.stride} is 0 (has the JVM started?)`);
  if (stride < 8 || stride > MAX_STRIDE || stride % 4 !== 0) {
    throw new VmStructsError(`${layout.stride} is ${stride}`);
  }
  const columns = {} as Record<Column, number>;
  for (const [column, symbol] of Object.entries(layout.columns) as [Column, string][]) {
    const offset = memory.u64(at(symbol));
    if (offset + 4 > stride) {
      throw new VmStructsError(`${symbol} ${offset} lies outside the stride ${stride}`);
    }
    columns[column] = offset;
  }
  const first = Object.keys(layout.columns)[0] as Column;
  const array = memory.pointer(at(layout.array));
  if (array === 0) throw new VmStructsError(`${layout.array} is NULL`);
  const entry = new Entry(memory, columns, stride);
  for (let i = 0; i < MAX_ENTRIES; i++) {
    memory.readInto(array + i * stride, entry.bytes);
    if (entry.u64Big(first) === 0n) return;
    yield entry;
  }
  throw new VmStructsError(`${layout.array} does not end within ${MAX_ENTRIES} entries`);
}

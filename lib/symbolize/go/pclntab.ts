/**
 * The header and function table of a Go binary's `.gopclntab` (Go's `runtime.pcHeader`, `functab` and
 * `_func`, in `src/runtime/symtab.go` and `runtime2.go`; `debug/gosym` reads the same): for each function
 * its entry address, name, and the offsets of its pc-value tables (line, file, pcdata) and funcdata. The
 * layouts of Go 1.16 and later are read, each told apart by the header's magic:
 *
 * | magic      | Go        | function table entries               | `_func`                            |
 * |------------|-----------|--------------------------------------|------------------------------------|
 * | 0xfffffffa | 1.16-1.17 | 8-byte entry address, 8-byte offset  | 8-byte entry, 44 bytes; 8-byte funcdata pointers |
 * | 0xfffffff0 | 1.18-1.19 | 4-byte offsets from the text start   | 4-byte entry offset, 40 bytes; 4-byte funcdata offsets |
 * | 0xfffffff1 | 1.20+     | as 1.18                              | as 1.18 plus `startLine`: 44 bytes |
 *
 * (0xfffffffb is Go 1.2-1.15, whose tables are laid out otherwise: not read.) The bytes come from a file
 * the profiler did not write: every offset and count is checked against the table's length before use,
 * and a malformed table throws a `RangeError` "Cannot parse .gopclntab: ...".
 *
 * @example
 * ```ts ignore
 * import { Pclntab } from "./pclntab.ts";
 * const table = Pclntab.parse(sectionBytes, null);
 * const index = table.find(0x401234);
 * if (index >= 0) console.log(table.name(table.func(index).nameOff));
 * ```
 *
 * @module
 */

import { pcValue } from "./pcvalue.ts";

/** The layout generation of a `.gopclntab`, named for the first Go release that wrote it. */
export type PclntabVersion = "1.16" | "1.18" | "1.20";

/** The header magic of each layout read. */
export const PCLNTAB_MAGICS: ReadonlyMap<number, PclntabVersion> = new Map([
  [0xfffffffa, "1.16"],
  [0xfffffff0, "1.18"],
  [0xfffffff1, "1.20"],
]);

/** The pcdata table that gives, for each instruction, its index in the function's inline tree. */
export const PCDATA_INL_TREE_INDEX = 2;
/** The funcdata entry that points at the function's inline tree. */
export const FUNCDATA_INL_TREE = 3;

/** One function's record (`_func`), with its place in the function table. */
export interface GoFunc {
  /** Index in the function table. */
  index: number;
  /** Entry address (ELF virtual address). */
  entry: number;
  /** Where the next function starts (the end of this one and its padding). */
  end: number;
  /** Offset of the name in the function name table. */
  nameOff: number;
  /**
   * Offset of the SP delta table in the pc-value tables (how far rsp is below its value at entry, the
   * return address not counted); 0 when the function has none.
   */
  pcsp: number;
  /** Offsets of the file index and line tables in the pc-value tables; 0 when the function has none. */
  pcfile: number;
  pcln: number;
  /** Number of pcdata tables and funcdata entries after the record. */
  npcdata: number;
  nfuncdata: number;
  /** The function's compilation unit: the first of its entries in the file index table (`cutab`). */
  cuOffset: number;
  /** Offset of the record in the table's bytes. */
  offset: number;
}

/** Header and record sizes of each layout. */
interface Layout {
  /** Words (pointer-sized) after the 8-byte header prefix, before the tables start. */
  headerWords: number;
  /** Size of one field of the function table. */
  functabField: number;
  /** Bytes of `_func` before its pcdata offsets. */
  funcSize: number;
  /** Bytes of `_func`'s first field (the entry). */
  entrySize: number;
  /** Size of one funcdata entry. */
  funcdataSize: number;
}

const LAYOUTS: Readonly<Record<PclntabVersion, Layout>> = {
  "1.16": { headerWords: 7, functabField: 8, funcSize: 44, entrySize: 8, funcdataSize: 8 },
  "1.18": { headerWords: 8, functabField: 4, funcSize: 40, entrySize: 4, funcdataSize: 4 },
  "1.20": { headerWords: 8, functabField: 4, funcSize: 44, entrySize: 4, funcdataSize: 4 },
};

/** Longest name or path read from a table: real ones are at most a few kilobytes. */
export const MAX_STRING_BYTES = 1 << 16;
/** Most distinct names kept decoded; the cache is cleared when full. */
const MAX_CACHED_NAMES = 1 << 16;
const TWO_POW_32 = 4294967296;
const NO_OFFSET = 0xffffffff;

const utf8 = new TextDecoder("utf-8", { fatal: false });

/** A `.gopclntab`, parsed lazily: the header now, function records when asked. */
export class Pclntab {
  readonly version: PclntabVersion;
  /** Instruction size quantum of pc-value tables (1 on x86-64, 4 on arm64). */
  readonly quantum: number;
  readonly functionCount: number;
  /** The address function table offsets count from (Go 1.18+); 0 for 1.16, whose entries are addresses. */
  readonly textStart: number;
  /** The table's bytes (shared with the caller). */
  readonly bytes: Uint8Array;
  /** The pc-value tables (`pctab`): what pcdata, file and line offsets count from. */
  readonly pctab: Uint8Array;
  /** The file index table of every compilation unit (`cutab`, 32-bit offsets into `filetab`). */
  readonly cutab: Uint8Array;
  /** The file names, NUL-terminated (`filetab`). */
  readonly filetab: Uint8Array;
  readonly #layout: Layout;
  readonly #view: DataView;
  readonly #funcnametab: Uint8Array;
  /** Offset of the function table; function records' offsets count from it too. */
  readonly #functab: number;
  readonly #names = new Map<number, string>();

  private constructor(bytes: Uint8Array, version: PclntabVersion, textStart: number | null) {
    this.bytes = bytes;
    this.version = version;
    this.#layout = LAYOUTS[version];
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.quantum = bytes[6]!;
    const headerEnd = 8 + 8 * this.#layout.headerWords;
    if (bytes.length < headerEnd) fail(`${bytes.length} bytes is shorter than the header`);
    const word = (i: number) => this.#u64(8 + 8 * i);
    const count = word(0);
    const tableWord = version === "1.16" ? 2 : 3;
    const offsets = [0, 1, 2, 3, 4].map((i) => word(tableWord + i));
    for (const offset of offsets) {
      if (offset < headerEnd || offset > bytes.length) {
        fail(`table offset ${offset} lies outside the ${bytes.length}-byte table`);
      }
    }
    const [funcname, cu, file, pc, functab] = offsets as [number, number, number, number, number];
    const field = this.#layout.functabField;
    if (count > (bytes.length - functab) / (2 * field)) {
      fail(`${count} functions do not fit in the table`);
    }
    this.functionCount = count;
    this.textStart = version === "1.16" ? 0 : textStart ?? word(2);
    this.#funcnametab = bytes.subarray(funcname);
    this.cutab = bytes.subarray(cu);
    this.filetab = bytes.subarray(file);
    this.pctab = bytes.subarray(pc);
    this.#functab = functab;
  }

  /**
   * The layout of a table starting with `bytes` (its magic, and a header that names a 64-bit target),
   * or null when it is none that is read here.
   */
  static versionOf(bytes: Uint8Array): PclntabVersion | null {
    if (bytes.length < 8) return null;
    const magic = bytes[0]! | (bytes[1]! << 8) | (bytes[2]! << 16) | (bytes[3]! << 24);
    const version = PCLNTAB_MAGICS.get(magic >>> 0) ?? null;
    const quantum = bytes[6];
    if (version === null || bytes[4] !== 0 || bytes[5] !== 0 || bytes[7] !== 8) return null;
    return quantum === 1 || quantum === 2 || quantum === 4 ? version : null;
  }

  /**
   * Parses the header of the table in `bytes`. `textStart`, when not null, replaces the header's text
   * start (Go 1.26 writes 0 there; the module data holds it).
   *
   * @throws {RangeError} when the header is not one read here or its offsets lie outside the table.
   */
  static parse(bytes: Uint8Array, textStart: number | null): Pclntab {
    const version = Pclntab.versionOf(bytes);
    if (version === null) fail("no Go 1.16+ header for a 64-bit target");
    return new Pclntab(bytes, version, textStart);
  }

  /** The text start the header gives (Go 1.18+), 0 when it gives none. */
  static headerTextStart(bytes: Uint8Array): number {
    const version = Pclntab.versionOf(bytes);
    if (version === null || version === "1.16" || bytes.length < 32) return 0;
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    return view.getUint32(28, true) * TWO_POW_32 + view.getUint32(24, true);
  }

  /** Offset of the function name table in the table (what the module data's `funcnametab` points at). */
  get funcnameOffset(): number {
    return this.#funcnametab.byteOffset - this.bytes.byteOffset;
  }

  /** Entry address of function `i`; `i` = {@linkcode functionCount} gives the end of the last one. */
  entryOf(i: number): number {
    const field = this.#layout.functabField;
    const at = this.#functab + 2 * i * field;
    return field === 8 ? this.#u64(at) : this.textStart + this.#u32(at);
  }

  /** Index of the function whose code holds `pc`, or -1 when `pc` is before the first or past the last. */
  find(pc: number): number {
    const n = this.functionCount;
    if (n === 0 || pc < this.entryOf(0) || pc >= this.entryOf(n)) return -1;
    let lo = 0;
    let hi = n; // entryOf(lo) <= pc < entryOf(hi)
    while (hi - lo > 1) {
      const mid = (lo + hi) >>> 1;
      if (this.entryOf(mid) <= pc) lo = mid;
      else hi = mid;
    }
    return lo;
  }

  /**
   * The record of function `i`.
   *
   * @throws {RangeError} when the record lies outside the table or disagrees with the function table.
   */
  func(i: number): GoFunc {
    if (!(i >= 0 && i < this.functionCount)) fail(`function ${i} is not in the table`);
    const layout = this.#layout;
    const field = layout.functabField;
    const offset = this.#functab + this.#field(this.#functab + (2 * i + 1) * field, field);
    if (offset + layout.funcSize > this.bytes.length) fail(`function ${i}'s record lies outside the table`);
    const entry = this.entryOf(i);
    const recorded = layout.entrySize === 8 ? this.#u64(offset) : this.textStart + this.#u32(offset);
    if (recorded !== entry) fail(`function ${i}'s record starts at ${recorded}, not ${entry}`);
    const fields = offset + layout.entrySize;
    return {
      index: i,
      entry,
      end: this.entryOf(i + 1),
      nameOff: this.#u32(fields),
      pcsp: this.#u32(fields + 12),
      pcfile: this.#u32(fields + 16),
      pcln: this.#u32(fields + 20),
      npcdata: this.#u32(fields + 24),
      cuOffset: this.#u32(fields + 28),
      nfuncdata: this.bytes[offset + layout.funcSize - 1]!,
      offset,
    };
  }

  /** The name at `nameOff` of the function name table ("" when it lies outside). */
  name(nameOff: number): string {
    let name = this.#names.get(nameOff);
    if (name === undefined) {
      name = stringAt(this.#funcnametab, nameOff);
      if (this.#names.size >= MAX_CACHED_NAMES) this.#names.clear();
      this.#names.set(nameOff, name);
    }
    return name;
  }

  /** The name offset of function `i`'s record, read alone ({@linkcode func} checks the whole record). */
  nameOffOf(i: number): number {
    if (!(i >= 0 && i < this.functionCount)) fail(`function ${i} is not in the table`);
    const layout = this.#layout;
    const field = layout.functabField;
    const offset = this.#functab + this.#field(this.#functab + (2 * i + 1) * field, field);
    return this.#u32(offset + layout.entrySize);
  }

  /** Whether the name at `nameOff` is `name` (UTF-8): a compare of bytes, without decoding the name. */
  nameIs(nameOff: number, name: Uint8Array): boolean {
    const table = this.#funcnametab;
    if (!(nameOff >= 0 && nameOff + name.length < table.length) || table[nameOff + name.length] !== 0) {
      return false;
    }
    for (let i = 0; i < name.length; i++) if (table[nameOff + i] !== name[i]) return false;
    return true;
  }

  /** The value pc-value table `offset` gives `pc` in function `f`; null without a table or a value. */
  pcValue(offset: number, f: GoFunc, pc: number): number | null {
    return offset === 0 ? null : pcValue(this.pctab, offset, f.entry, pc, this.quantum);
  }

  /** The offset of pcdata table `table` of `f` in the pc-value tables; 0 when it has none. */
  pcdata(f: GoFunc, table: number): number {
    if (table >= f.npcdata) return 0;
    const at = f.offset + this.#layout.funcSize + 4 * table;
    return at + 4 <= this.bytes.length ? this.#u32(at) : 0;
  }

  /**
   * Funcdata entry `i` of `f`, or null when it has none: from Go 1.18 an offset from the module's
   * `gofunc` address, in Go 1.16 an address. `tableVaddr` is where the table is loaded: Go 1.16 aligns
   * the addresses in memory.
   */
  funcdata(f: GoFunc, i: number, tableVaddr: number): number | null {
    if (i >= f.nfuncdata) return null;
    let at = f.offset + this.#layout.funcSize + 4 * f.npcdata;
    const size = this.#layout.funcdataSize;
    if (size === 8 && (tableVaddr + at) % 8 !== 0) at += 4;
    at += i * size;
    if (at + size > this.bytes.length) return null;
    const value = this.#field(at, size);
    if (size === 4) return value === NO_OFFSET ? null : value;
    return value === 0 ? null : value;
  }

  #field(at: number, size: number): number {
    return size === 8 ? this.#u64(at) : this.#u32(at);
  }

  #u32(at: number): number {
    if (!(at >= 0 && at + 4 <= this.bytes.length)) fail(`offset ${at} lies outside the table`);
    return this.#view.getUint32(at, true);
  }

  /** A 64-bit field, which must be an exact number (addresses, counts, offsets). */
  #u64(at: number): number {
    if (!(at >= 0 && at + 8 <= this.bytes.length)) fail(`offset ${at} lies outside the table`);
    const value = this.#view.getUint32(at + 4, true) * TWO_POW_32 + this.#view.getUint32(at, true);
    if (value > Number.MAX_SAFE_INTEGER) fail(`value at offset ${at} is not below 2^53`);
    return value;
  }
}

/** The NUL-terminated string at `offset` of `bytes` ("" when it lies outside or is unterminated). */
export function stringAt(bytes: Uint8Array, offset: number): string {
  if (!(offset >= 0 && offset < bytes.length)) return "";
  const window = bytes.subarray(offset, offset + MAX_STRING_BYTES);
  const end = window.indexOf(0);
  return end < 0 ? "" : utf8.decode(window.subarray(0, end));
}

function fail(reason: string): never {
  throw new RangeError(`Cannot parse .gopclntab: ${reason}`);
}

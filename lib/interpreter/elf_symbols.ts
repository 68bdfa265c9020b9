/**
 * Looking up named symbols of any type in an ELF file: data objects (`_PyRuntime`, `Py_Version`), TLS
 * variables (`_Py_tss_tstate`) and functions. {@linkcode SymbolTable} keeps only code for address lookups;
 * interpreter plug-ins instead ask for a handful of names, so this compares the wanted names against the
 * string table bytes without decoding every name. `.dynsym` is searched first (it survives stripping and
 * is small); `.symtab` only for the names still missing.
 *
 * @example
 * ```ts ignore
 * import { ElfFile } from "../elf/elf_file.ts";
 * import { findElfSymbols, readElfBytes } from "./elf_symbols.ts";
 * using elf = ElfFile.open(libraryPath);
 * const found = findElfSymbols(elf, ["Py_Version"]);
 * const version = readElfBytes(elf, found.get("Py_Version")!.value, 4);
 * ```
 *
 * @module
 */
import { type ElfFile, SHT_DYNSYM, SHT_NOBITS, SHT_SYMTAB } from "../elf/elf_file.ts";
import type { Address } from "../types.ts";

/** `st_info` type: data object. */
export const STT_OBJECT = 1;
/** `st_info` type: function. */
export const STT_FUNC = 2;
/** `st_info` type: thread-local variable; `value` is its offset in the file's TLS segment. */
export const STT_TLS = 6;

/** One defined symbol. */
export interface ElfSymbol {
  name: string;
  /** `st_value`: an ELF virtual address, or for STT_TLS an offset in the TLS segment. */
  value: number;
  size: number;
  /** `st_info & 0xf` (STT_OBJECT, STT_FUNC, STT_TLS, ...). */
  type: number;
  /** `st_info >> 4` (0 local, 1 global, 2 weak). */
  bind: number;
  /** Which table it came from. */
  table: "dynsym" | "symtab";
}

const SYM_SIZE = 24;
const SHN_UNDEF = 0;
const TWO_POW_32 = 4294967296;
/** Bounds the work a hostile table can cause: no real table has more entries. */
const MAX_SYMBOLS = 1 << 24;
const encoder = new TextEncoder();

/**
 * The defined symbols named in `names` (exact names, no version suffix). When a name is defined in both
 * tables the `.dynsym` entry wins; within one table, a global wins over a local.
 *
 * @throws {RangeError} when a symbol table or its string table lies outside the file.
 */
export function findElfSymbols(elf: ElfFile, names: readonly string[]): Map<string, ElfSymbol> {
  const found = new Map<string, ElfSymbol>();
  for (const type of [SHT_DYNSYM, SHT_SYMTAB]) {
    const missing = names.filter((name) => !found.has(name));
    if (missing.length === 0) break;
    for (const section of elf.sections) {
      if (section.type !== type || section.size === 0) continue;
      const strings = elf.sections[section.link];
      if (strings === undefined || strings.type === SHT_NOBITS) {
        throw new RangeError(`Cannot read symbols of ${elf.name}: ${section.name} has no string table`);
      }
      scanTable(
        elf.readSection(section),
        section.entsize === 0 ? SYM_SIZE : section.entsize,
        elf.readSection(strings),
        missing,
        type === SHT_DYNSYM ? "dynsym" : "symtab",
        found,
        elf.name,
      );
    }
  }
  return found;
}

function scanTable(
  symbols: Uint8Array,
  entrySize: number,
  strings: Uint8Array,
  names: readonly string[],
  table: "dynsym" | "symtab",
  found: Map<string, ElfSymbol>,
  fileName: string,
): void {
  if (entrySize < SYM_SIZE) {
    throw new RangeError(`Cannot read symbols of ${fileName}: entry size ${entrySize} is below 24`);
  }
  const count = Math.floor(symbols.length / entrySize);
  if (count > MAX_SYMBOLS) throw new RangeError(`Cannot read symbols of ${fileName}: ${count} is too many`);
  const wanted = names.map((name) => encoder.encode(name));
  const view = new DataView(symbols.buffer, symbols.byteOffset, symbols.byteLength);
  for (let i = 1; i < count; i++) {
    const o = i * entrySize;
    const nameOffset = view.getUint32(o, true);
    const shndx = view.getUint16(o + 6, true);
    if (shndx === SHN_UNDEF || nameOffset === 0 || nameOffset >= strings.length) continue;
    const index = matchName(strings, nameOffset, wanted);
    if (index < 0) continue;
    const name = names[index] as string;
    const info = symbols[o + 4] as number;
    const bind = info >> 4;
    const previous = found.get(name);
    if (previous !== undefined && (previous.table !== table || previous.bind !== 0 || bind === 0)) continue;
    const valueHigh = view.getUint32(o + 12, true);
    const sizeHigh = view.getUint32(o + 20, true);
    // Values that do not fit a number are not user-space symbols.
    if (valueHigh >= 0x200000 || sizeHigh !== 0) continue;
    found.set(name, {
      name,
      value: valueHigh * TWO_POW_32 + view.getUint32(o + 8, true),
      size: view.getUint32(o + 16, true),
      type: info & 0xf,
      bind,
      table,
    });
  }
}

/** Index of the wanted name equal to the NUL-terminated string at `offset`, or -1. */
function matchName(strings: Uint8Array, offset: number, wanted: readonly Uint8Array[]): number {
  outer: for (let w = 0; w < wanted.length; w++) {
    const name = wanted[w] as Uint8Array;
    if (offset + name.length >= strings.length) continue;
    for (let k = 0; k < name.length; k++) {
      if (strings[offset + k] !== name[k]) continue outer;
    }
    if (strings[offset + name.length] === 0) return w;
  }
  return -1;
}

/**
 * Reads `length` bytes of the file's initialized data at ELF virtual address `vaddr` (read-only data of
 * a symbol, such as `Py_Version` or a libthread_db descriptor).
 *
 * @throws {RangeError} when the range is not file-backed data of one PT_LOAD segment.
 */
export function readElfBytes(elf: ElfFile, vaddr: number, length: number): Uint8Array {
  const offset = elf.vaddrToFileOffset(vaddr as Address);
  const end = elf.vaddrToFileOffset((vaddr + length - 1) as Address);
  if (offset === null || end === null || end - offset !== length - 1) {
    throw new RangeError(
      `Cannot read ${length} bytes at 0x${vaddr.toString(16)} of ${elf.name}: not file-backed data`,
    );
  }
  return elf.read(offset, length);
}

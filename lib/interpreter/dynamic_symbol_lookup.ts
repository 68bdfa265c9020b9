/**
 * Looking up one name in `.dynsym` the way the dynamic loader does, through the file's hash table
 * (`.gnu.hash`, else the SysV `.hash`): a loader that must test every file a process maps for a symbol
 * (`_PyRuntime`) reads a few dozen bytes per file instead of the whole symbol and string tables
 * ({@linkcode findElfSymbols} scans them). A name that is absent is, in most files, rejected by the GNU
 * table's Bloom filter after two small reads.
 *
 * The table answers only for what the dynamic loader can find: exported symbols. `ld` emits a hash table
 * with every `.dynsym`, so a file without one has no symbols to look up here.
 *
 * @example
 * ```ts ignore
 * import { ElfFile } from "../elf/elf_file.ts";
 * import { findDynamicSymbol } from "./dynamic_symbol_lookup.ts";
 * using elf = ElfFile.open("/lib/x86_64-linux-gnu/libc.so.6");
 * findDynamicSymbol(elf, "environ"); // { value: ..., size: 8, ... }: a runtime's exported state
 * ```
 *
 * @module
 */
import { type ElfFile, type ElfSection, SHT_DYNSYM, SHT_NOBITS } from "../elf/elf_file.ts";
import type { ElfSymbol } from "./elf_symbols.ts";

/** `sh_type`: SysV symbol hash table. */
export const SHT_HASH = 5;
/** `sh_type`: GNU symbol hash table (with a Bloom filter). */
export const SHT_GNU_HASH = 0x6ffffff6;

const SYM_SIZE = 24;
const SHN_UNDEF = 0;
const TWO_POW_32 = 4294967296;
const GNU_HEADER = 16;
const BLOOM_WORD = 8;
/** Chain entries read in one piece: real chains are a few entries long. */
const CHAIN_BATCH = 16;
const encoder = new TextEncoder();

/**
 * The symbol `name` as `.dynsym` defines it, found through the file's hash table; null when the table
 * has no such defined symbol, or the file has no hash table.
 *
 * @throws {RangeError} when the hash table or the symbol table it indexes lies outside the file.
 */
export function findDynamicSymbol(elf: ElfFile, name: string): ElfSymbol | null {
  const gnu = elf.sections.find((s) => s.type === SHT_GNU_HASH && s.size > 0);
  const sysv = gnu === undefined ? elf.sections.find((s) => s.type === SHT_HASH && s.size > 0) : undefined;
  const hash = gnu ?? sysv;
  if (hash === undefined || hash.type === SHT_NOBITS) return null;
  const symbols = elf.sections[hash.link];
  const strings = symbols === undefined ? undefined : elf.sections[symbols.link];
  if (symbols?.type !== SHT_DYNSYM || strings === undefined || strings.type === SHT_NOBITS) {
    throw new RangeError(`Cannot read symbols of ${elf.name}: ${hash.name} indexes no dynamic symbol table`);
  }
  const table = new DynamicTable(elf, symbols, strings, name);
  return gnu !== undefined ? lookupGnu(elf, gnu, table) : lookupSysv(elf, hash, table);
}

/** The `.dynsym` a hash table indexes, read one entry at a time. */
class DynamicTable {
  readonly count: number;
  /** The wanted name's bytes. */
  readonly wanted: Uint8Array;
  readonly #elf: ElfFile;
  readonly #symbols: ElfSection;
  readonly #entrySize: number;
  readonly #strings: ElfSection;
  readonly #name: string;

  constructor(elf: ElfFile, symbols: ElfSection, strings: ElfSection, name: string) {
    this.#elf = elf;
    this.#symbols = symbols;
    this.#entrySize = symbols.entsize === 0 ? SYM_SIZE : symbols.entsize;
    if (this.#entrySize < SYM_SIZE) {
      throw new RangeError(`Cannot read symbols of ${elf.name}: entry size ${this.#entrySize} is below 24`);
    }
    this.count = Math.floor(symbols.size / this.#entrySize);
    this.#strings = strings;
    this.#name = name;
    this.wanted = encoder.encode(name);
  }

  /** Entry `index` when it defines the wanted name, else null. */
  match(index: number): ElfSymbol | null {
    if (index <= 0 || index >= this.count) return null;
    const entry = readIn(this.#elf, this.#symbols, index * this.#entrySize, SYM_SIZE);
    const view = new DataView(entry.buffer, entry.byteOffset, SYM_SIZE);
    const nameOffset = view.getUint32(0, true);
    if (view.getUint16(6, true) === SHN_UNDEF || nameOffset === 0) return null;
    const length = this.wanted.length + 1;
    if (nameOffset + length > this.#strings.size) return null;
    const stored = readIn(this.#elf, this.#strings, nameOffset, length);
    if (stored[this.wanted.length] !== 0 || this.wanted.some((byte, i) => stored[i] !== byte)) return null;
    const valueHigh = view.getUint32(12, true);
    // Values that do not fit a number are not user-space symbols.
    if (valueHigh >= 0x200000 || view.getUint32(20, true) !== 0) return null;
    const info = entry[4] as number;
    return {
      name: this.#name,
      value: valueHigh * TWO_POW_32 + view.getUint32(8, true),
      size: view.getUint32(16, true),
      type: info & 0xf,
      bind: info >> 4,
      table: "dynsym",
    };
  }
}

/** `length` bytes at `offset` within `section`. */
function readIn(elf: ElfFile, section: ElfSection, offset: number, length: number): Uint8Array {
  if (offset < 0 || offset + length > section.size) {
    throw new RangeError(
      `Cannot read symbols of ${elf.name}: ${section.name} is ${section.size} bytes, ` +
        `not ${offset + length}`,
    );
  }
  return elf.read(section.offset + offset, length);
}

function u32(bytes: Uint8Array, offset: number): number {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(offset, true);
}

/** The GNU hash of a name (`dl_new_hash`): h * 33 + c from 5381, modulo 2^32. */
export function gnuHash(name: Uint8Array): number {
  let h = 5381;
  for (const c of name) h = (Math.imul(h, 33) + c) >>> 0;
  return h;
}

/** The SysV ELF hash of a name (`elf_hash`). */
export function sysvHash(name: Uint8Array): number {
  let h = 0;
  for (const c of name) {
    h = ((h << 4) + c) >>> 0;
    const g = h & 0xf0000000;
    if (g !== 0) h ^= g >>> 24;
    h = (h & ~g) >>> 0;
  }
  return h;
}

/** Whether bit `bit` (0-63) of the little-endian 64-bit word in `word` is set. */
function bitSet(word: Uint8Array, bit: number): boolean {
  return ((word[bit >>> 3] as number) & (1 << (bit & 7))) !== 0;
}

function lookupGnu(elf: ElfFile, section: ElfSection, table: DynamicTable): ElfSymbol | null {
  const header = readIn(elf, section, 0, GNU_HEADER);
  const buckets = u32(header, 0);
  const symbolOffset = u32(header, 4);
  const bloomSize = u32(header, 8);
  const bloomShift = u32(header, 12);
  if (buckets === 0 || bloomSize === 0) return null;
  const h = gnuHash(table.wanted);
  // Two bits per name in one Bloom word: either clear means the name is not in the table.
  const word = readIn(elf, section, GNU_HEADER + BLOOM_WORD * ((h >>> 6) % bloomSize), BLOOM_WORD);
  if (!bitSet(word, h & 63) || !bitSet(word, (bloomShift < 32 ? h >>> bloomShift : 0) & 63)) return null;
  const bucketsAt = GNU_HEADER + BLOOM_WORD * bloomSize;
  const first = u32(readIn(elf, section, bucketsAt + 4 * (h % buckets), 4), 0);
  if (first < symbolOffset) return null;
  // The chain holds each symbol's hash with the low bit marking the end of the bucket's run.
  const chainAt = bucketsAt + 4 * buckets;
  const chainEntries = Math.floor((section.size - chainAt) / 4);
  let index = first;
  while (index - symbolOffset < chainEntries && index < table.count) {
    const batch = Math.min(CHAIN_BATCH, chainEntries - (index - symbolOffset));
    const hashes = readIn(elf, section, chainAt + 4 * (index - symbolOffset), 4 * batch);
    for (let k = 0; k < batch; k++, index++) {
      const stored = u32(hashes, 4 * k);
      if ((stored | 1) === (h | 1)) {
        const symbol = table.match(index);
        if (symbol !== null) return symbol;
      }
      if ((stored & 1) !== 0) return null;
    }
  }
  return null;
}

function lookupSysv(elf: ElfFile, section: ElfSection, table: DynamicTable): ElfSymbol | null {
  const header = readIn(elf, section, 0, 8);
  const buckets = u32(header, 0);
  const chains = u32(header, 4);
  if (buckets === 0) return null;
  let index = u32(readIn(elf, section, 8 + 4 * (sysvHash(table.wanted) % buckets), 4), 0);
  // Each step follows the chain; a chain longer than the table is a loop in a hostile file.
  for (let steps = 0; index !== 0 && index < chains && steps < chains; steps++) {
    const symbol = table.match(index);
    if (symbol !== null) return symbol;
    index = u32(readIn(elf, section, 8 + 4 * buckets + 4 * index, 4), 0);
  }
  return null;
}

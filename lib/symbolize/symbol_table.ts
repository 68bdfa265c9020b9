/**
 * The function symbols of an ELF file as sorted typed arrays, for address-to-name lookups. Built from the
 * raw `.symtab` / `.dynsym` bytes (merged and deduplicated); names stay as bytes in the retained string
 * tables and are decoded only for a lookup result, so loading a table with 100k+ symbols (libjvm, node)
 * costs a sort and a few typed arrays, not 100k strings.
 *
 * @example
 * ```ts
 * import { ElfFile } from "../elf/elf_file.ts";
 * using elf = ElfFile.open("/bin/true");
 * const table = elf.symbols();
 * console.log(table.lookup(0x2a40)); // { name: "...", offset: 16 } or null
 * ```
 *
 * @module
 */

/** What {@linkcode SymbolTable.build} needs of a section header. */
export interface SymbolSectionInfo {
  type: number;
  flags: number;
  addr: number;
  size: number;
}

/** One raw symbol table and its string table, as read from an ELF file. */
export interface SymbolTableSource {
  kind: "symtab" | "dynsym";
  /** The `Elf64_Sym` array. */
  symbols: Uint8Array;
  /** `sh_entsize` of the symbol table (24 for ELF64; 0 is read as 24). */
  entrySize: number;
  /** The linked string table. It is retained by the built table. */
  strings: Uint8Array;
  /** Section headers of the same file, indexed by `st_shndx`. */
  sections: readonly SymbolSectionInfo[];
}

/** The result of {@linkcode SymbolTable.lookup}: the enclosing symbol and how far into it the address is. */
export interface SymbolMatch {
  name: string;
  offset: number;
}

/** A symbol as stored in the table (for iteration and tests). */
export interface SymbolEntry {
  name: string;
  start: number;
  /** Size from the symbol table; 0 when the symbol extends to the next one. */
  size: number;
  /** The end (exclusive) that lookups use. */
  end: number;
}

const SYM_SIZE = 24;
const STT_NOTYPE = 0;
const STT_FUNC = 2;
const STT_GNU_IFUNC = 10;
const STB_LOCAL = 0;
const STB_WEAK = 2;
const SHN_UNDEF = 0;
const SHN_LORESERVE = 0xff00;
const SHN_ABS = 0xfff1;
const SHN_XINDEX = 0xffff;
const SHF_EXECINSTR = 0x4;
const TWO_POW_32 = 4294967296;
/** No real symbol table comes near this; it bounds the typed arrays a hostile file can ask for. */
const MAX_SYMBOLS = 1 << 24;
/** Symbols sizes above this are garbage (no function is 4 GiB) and are treated as unknown (0). */
const MAX_SYMBOL_SIZE = TWO_POW_32;
/** Names are cut here; C++ names beyond it are unreadable anyway. */
const MAX_NAME_BYTES = 1 << 16;
/** How far back a lookup walks to find a sized symbol that encloses a later-starting one. */
const MAX_BACKSCAN = 16;

/**
 * The indices 0..count-1 ordered by start address (then index). Packs (start, index) into one exact double
 * when the addresses leave room (file-relative addresses are below 2^32), so the native numeric sort does
 * the work; a comparator sort is several times slower on 100k+ symbols.
 */
function sortedOrder(starts: Float64Array, count: number): Uint32Array {
  const order = new Uint32Array(count);
  let maxStart = 0;
  for (let i = 0; i < count; i++) maxStart = Math.max(maxStart, starts[i] as number);
  const scale = 2 ** Math.max(1, Math.ceil(Math.log2(count + 1)));
  if (maxStart < Number.MAX_SAFE_INTEGER / scale) {
    const keys = new Float64Array(count);
    for (let i = 0; i < count; i++) keys[i] = (starts[i] as number) * scale + i;
    keys.sort();
    for (let i = 0; i < count; i++) order[i] = (keys[i] as number) % scale;
  } else {
    for (let i = 0; i < count; i++) order[i] = i;
    order.sort((a, b) => (starts[a] as number) - (starts[b] as number) || a - b);
  }
  return order;
}

/**
 * The symbol entries as 32-bit words, `stride` words apart: a view of `bytes` when it is aligned, else a
 * copy of each entry's 24 bytes (an odd `sh_entsize` or offset, which real files do not have).
 */
function symbolWords(bytes: Uint8Array, entrySize: number): { words: Uint32Array; stride: number } {
  if (bytes.byteOffset % 4 === 0 && entrySize % 4 === 0) {
    return {
      words: new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 2),
      stride: entrySize >>> 2,
    };
  }
  const n = Math.floor(bytes.length / entrySize);
  const packed = new Uint8Array(n * SYM_SIZE);
  for (let i = 0; i < n; i++) {
    packed.set(bytes.subarray(i * entrySize, i * entrySize + SYM_SIZE), i * SYM_SIZE);
  }
  return { words: new Uint32Array(packed.buffer), stride: SYM_SIZE / 4 };
}

const utf8 = new TextDecoder("utf-8", { fatal: false });

/**
 * Sorted function symbols with lazy names. `lookup()` is a binary search that allocates only its result.
 */
export class SymbolTable {
  /** A table without symbols. */
  static readonly empty: SymbolTable = new SymbolTable(
    new Float64Array(0),
    new Float64Array(0),
    new Float64Array(0),
    new Uint32Array(0),
    new Uint8Array(0),
    [],
  );

  readonly #starts: Float64Array;
  readonly #ends: Float64Array;
  readonly #sizes: Float64Array;
  readonly #nameOffsets: Uint32Array;
  readonly #nameTables: Uint8Array;
  readonly #strings: readonly Uint8Array[];

  private constructor(
    starts: Float64Array,
    ends: Float64Array,
    sizes: Float64Array,
    nameOffsets: Uint32Array,
    nameTables: Uint8Array,
    strings: readonly Uint8Array[],
  ) {
    this.#starts = starts;
    this.#ends = ends;
    this.#sizes = sizes;
    this.#nameOffsets = nameOffsets;
    this.#nameTables = nameTables;
    this.#strings = strings;
  }

  /**
   * Builds a table from raw ELF symbol tables. Keeps defined STT_FUNC and STT_GNU_IFUNC symbols, and
   * STT_NOTYPE symbols in executable sections (labels of hand-written assembly). When several symbols
   * start at the same address one is kept: a function over a label, a sized symbol over a zero-size one,
   * a global over a local, then the name with the fewest leading underscores (`malloc` over
   * `__libc_malloc`).
   *
   * @throws {RangeError} when a table's entry size is below 24 bytes or it holds too many symbols.
   */
  static build(sources: readonly SymbolTableSource[]): SymbolTable {
    if (sources.length > 255) {
      throw new RangeError(`Cannot read symbols: ${sources.length} tables is too many`);
    }
    let capacity = 0;
    for (const source of sources) {
      const entrySize = source.entrySize === 0 ? SYM_SIZE : source.entrySize;
      if (entrySize < SYM_SIZE) {
        throw new RangeError(`Cannot read symbols: entry size ${source.entrySize} is below 24`);
      }
      capacity += Math.floor(source.symbols.length / entrySize);
    }
    if (capacity > MAX_SYMBOLS) throw new RangeError(`Cannot read symbols: ${capacity} symbols is too many`);

    const starts = new Float64Array(capacity);
    const sizes = new Float64Array(capacity);
    const limits = new Float64Array(capacity);
    const nameOffsets = new Uint32Array(capacity);
    const tables = new Uint8Array(capacity);
    const ranks = new Uint8Array(capacity);
    let count = 0;

    for (const [tableIndex, source] of sources.entries()) {
      const entrySize = source.entrySize === 0 ? SYM_SIZE : source.entrySize;
      const bytes = source.symbols;
      // Fields read as 32-bit words (x86-64 and ELF64 here are both little-endian): a file's symbols are
      // read once, in cold code, where a typed-array load costs far less than a DataView call (libc's
      // .dynsym: 10 -> 7.5 ms).
      const { words, stride } = symbolWords(bytes, entrySize);
      const n = Math.floor(bytes.length / entrySize);
      // Entry 0 is the reserved null symbol.
      for (let i = 1; i < n; i++) {
        const w = i * stride;
        const nameOffset = words[w]!;
        const info = words[w + 1]! & 0xff;
        const shndx = words[w + 1]! >>> 16;
        const valueHigh = words[w + 3]!;
        const sizeHigh = words[w + 5]!;
        const type = info & 0xf;
        const bind = info >> 4;
        if (shndx === SHN_UNDEF || nameOffset === 0 || nameOffset >= source.strings.length) continue;
        // Kernel-image addresses do not fit a number exactly; they are never user-space code.
        if (valueHigh >= 0x200000) continue;
        const value = valueHigh * TWO_POW_32 + words[w + 2]!;

        let limit = Infinity;
        let isCode: boolean;
        if (type === STT_FUNC || type === STT_GNU_IFUNC) {
          isCode = true;
        } else if (type === STT_NOTYPE && bind <= STB_WEAK && shndx < SHN_LORESERVE) {
          const section = source.sections[shndx];
          isCode = section !== undefined && (section.flags & SHF_EXECINSTR) !== 0 &&
            source.strings[nameOffset] !== 0x24 /* "$": mapping symbols */;
        } else {
          isCode = false;
        }
        if (!isCode) continue;
        if (shndx < SHN_LORESERVE) {
          const section = source.sections[shndx];
          if (section !== undefined && section.size > 0) limit = section.addr + section.size;
        } else if (shndx !== SHN_ABS && shndx !== SHN_XINDEX) {
          continue;
        }

        const size = sizeHigh === 0 ? words[w + 4]! : MAX_SYMBOL_SIZE;
        starts[count] = value;
        sizes[count] = size >= MAX_SYMBOL_SIZE ? 0 : size;
        limits[count] = limit;
        nameOffsets[count] = nameOffset;
        tables[count] = tableIndex;
        ranks[count] = (type !== STT_NOTYPE ? 4 : 0) + (size > 0 ? 2 : 0) + (bind !== STB_LOCAL ? 1 : 0);
        count++;
      }
    }

    const order = sortedOrder(starts, count);

    const strings = sources.map((s) => s.strings);
    const underscores = (i: number): number => {
      const table = strings[tables[i] ?? 0];
      if (table === undefined) return 0;
      const offset = nameOffsets[i] ?? 0;
      let n = 0;
      while (table[offset + n] === 0x5f) n++;
      return n;
    };

    // Keep one symbol per start address.
    const kept = new Uint32Array(count);
    let keptCount = 0;
    for (let i = 0; i < count;) {
      const start = starts[order[i] ?? 0] ?? 0;
      let best = order[i] ?? 0;
      let j = i + 1;
      for (; j < count && starts[order[j] ?? 0] === start; j++) {
        const candidate = order[j] ?? 0;
        const rankDelta = (ranks[candidate] ?? 0) - (ranks[best] ?? 0);
        if (rankDelta > 0 || (rankDelta === 0 && underscores(candidate) < underscores(best))) {
          best = candidate;
        }
      }
      kept[keptCount++] = best;
      i = j;
    }

    const outStarts = new Float64Array(keptCount);
    const outEnds = new Float64Array(keptCount);
    const outSizes = new Float64Array(keptCount);
    const outNames = new Uint32Array(keptCount);
    const outTables = new Uint8Array(keptCount);
    for (let k = 0; k < keptCount; k++) {
      const i = kept[k] ?? 0;
      outStarts[k] = starts[i] ?? 0;
      outSizes[k] = sizes[i] ?? 0;
      outNames[k] = nameOffsets[i] ?? 0;
      outTables[k] = tables[i] ?? 0;
    }
    for (let k = 0; k < keptCount; k++) {
      const start = outStarts[k] ?? 0;
      const size = outSizes[k] ?? 0;
      if (size > 0) {
        outEnds[k] = start + size;
      } else {
        // A zero-size symbol runs to the next symbol, but not past its section; the last symbol of an
        // unknown section covers only its first byte.
        const next = k + 1 < keptCount ? outStarts[k + 1] ?? start + 1 : Infinity;
        const limit = limits[kept[k] ?? 0] ?? Infinity;
        const end = Math.min(next, limit);
        outEnds[k] = end === Infinity ? start + 1 : Math.max(end, start + 1);
      }
    }

    // Drop string tables no kept symbol points into (`.dynstr` when `.symtab` covers everything).
    const used = new Uint8Array(strings.length);
    for (let k = 0; k < keptCount; k++) used[outTables[k] ?? 0] = 1;
    const retained = strings.map((s, i) => (used[i] === 1 ? s : new Uint8Array(0)));

    return new SymbolTable(outStarts, outEnds, outSizes, outNames, outTables, retained);
  }

  /** The number of symbols. */
  get size(): number {
    return this.#starts.length;
  }

  /** Approximate bytes retained (typed arrays and string tables), for cache accounting. */
  get byteSize(): number {
    let bytes = this.#starts.length * (8 + 8 + 8 + 4 + 1);
    for (const s of this.#strings) bytes += s.byteLength;
    return bytes;
  }

  /**
   * The symbol whose [start, end) contains `vaddr` (the innermost when sized symbols nest), or null.
   */
  lookup(vaddr: number): SymbolMatch | null {
    const starts = this.#starts;
    const ends = this.#ends;
    // Find the last symbol starting at or before vaddr.
    let lo = 0;
    let hi = starts.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((starts[mid] as number) <= vaddr) lo = mid + 1;
      else hi = mid;
    }
    const stop = Math.max(0, lo - MAX_BACKSCAN);
    for (let i = lo - 1; i >= stop; i--) {
      if (vaddr < (ends[i] as number)) return { name: this.#name(i), offset: vaddr - (starts[i] as number) };
    }
    return null;
  }

  /** The symbol at sorted position `index` (0 <= index < size). */
  symbolAt(index: number): SymbolEntry {
    if (!(index >= 0 && index < this.#starts.length)) {
      throw new RangeError(`Cannot get symbol ${index}: the table has ${this.#starts.length}`);
    }
    return {
      name: this.#name(index),
      start: this.#starts[index] as number,
      size: this.#sizes[index] as number,
      end: this.#ends[index] as number,
    };
  }

  #name(index: number): string {
    const table = this.#strings[this.#nameTables[index] as number] as Uint8Array;
    const start = this.#nameOffsets[index] as number;
    let end = table.indexOf(0, start);
    if (end < 0) end = table.length;
    if (end - start > MAX_NAME_BYTES) end = start + MAX_NAME_BYTES;
    return utf8.decode(table.subarray(start, end));
  }
}

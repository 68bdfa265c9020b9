/**
 * The unwind table of an ELF file: for every code address covered by call-frame information, how an
 * x86-64 unwinder finds the CFA (and so the return address at CFA-8) and the caller's rbp. Built from
 * `.eh_frame` and `.debug_frame` (the file's own or a separate debug file's), streaming over the section
 * bytes into columnar typed arrays sorted by address, one row where the rule changes.
 *
 * Which FDE wins where several cover an address (documented, deterministic): `.eh_frame` before
 * `.debug_frame`; within one section, FDEs are taken in order of start address (ties: section order) and
 * one that starts before the end of an already taken FDE is dropped whole. A `.debug_frame` FDE that
 * overlaps any taken `.eh_frame` FDE is dropped whole. FDEs outside the file's executable PT_LOAD
 * segments (e.g. `.debug_frame` entries of functions the linker discarded, left at address 0) are
 * dropped. Every drop is counted in {@linkcode UnwindTable.skipped}.
 *
 * Rows of an FDE whose CFA program turns out malformed are replaced by one Invalid row for its whole
 * range. Invalid, Signal and Stop rows carry offset 0 and FpRule.Unchanged so that equal rules collapse.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ElfFile } from "../elf/elf_file.ts";
 * import { CfaRule, extractUnwindTable, findRow } from "./unwind_table.ts";
 * using elf = ElfFile.open("/bin/true");
 * const table = extractUnwindTable(elf);
 * const row = findRow(table, elf.entry);
 * assert.ok(row >= 0);
 * console.log(table.length, CfaRule.Rsp === table.cfaRules[row]);
 * ```
 *
 * @module
 */

import { type ElfFile, type ElfSection, PF_X, PT_LOAD, SHF_COMPRESSED, SHT_NOBITS } from "../elf/elf_file.ts";
import { CfaInterpreter, CfaKind, type CfaRowSink, type CfaState, RegisterRule } from "./cfa_interpreter.ts";
import { type CfiIndex, type CfiSection, CieCache, indexCfi, indexCfiAt, SkipCounter } from "./cfi.ts";
import { EhFrameHeader, ehFramePointer, PT_GNU_EH_FRAME } from "./eh_frame_hdr.ts";

/**
 * How the BPF unwinder computes the CFA at an address.
 * - Rsp, Rbp: register + `cfaOffsets[i]`.
 * - Plt: the `.plt`/`.plt.sec` expression: rsp + `cfaOffsets[i]`, plus 8 when (rip & 15) >= 11.
 * - Signal: an FDE of a CIE with augmentation "S" (the rt_sigreturn trampoline): registers come from the
 *   signal frame.
 * - Stop: the return address is undefined (`_start`, thread start): the outermost frame.
 * - Invalid: anything else the BPF side cannot follow (other expressions, other registers, a return
 *   address not at CFA-8, a malformed program), and addresses not covered by CFI (gap rows).
 * - FramePointer: follow rbp (code known to keep frame pointers, without CFI: Go's).
 * - GoCgoCall: Go's runtime.asmcgocall calling C code on the system stack; `cfaOffsets[i]` is where,
 *   from rsp, it saved its depth below the goroutine's stack top (its g is right above), and
 *   `fpRules[i]` says whether it pushed rbp at entry (CfaOffset, at -16 from the caller's CFA) or not
 *   (see `go_unwind_rules.ts`). Never made from CFI.
 */
export const CfaRule = {
  Invalid: 0,
  Rsp: 1,
  Rbp: 2,
  Plt: 3,
  Signal: 4,
  Stop: 5,
  FramePointer: 6,
  GoCgoCall: 7,
} as const;
/** Where the caller's rbp is: saved at CFA + `fpOffsets[i]`, or not saved (still in rbp). */
export const FpRule = { Unchanged: 0, CfaOffset: 1 } as const;

/** The rows of an unwind table, sorted by address; row i holds from `addresses[i]` to the next row. */
export interface UnwindTable {
  length: number;
  /** The ELF virtual address where each row starts. */
  addresses: Float64Array;
  cfaRules: Uint8Array;
  cfaOffsets: Int32Array;
  fpRules: Uint8Array;
  fpOffsets: Int32Array;
  /** FDEs whose ranges are in the table (including those marked Invalid). */
  fdeCount: number;
  /** FDEs dropped and rows degraded to Invalid, by reason. */
  skipped: { reason: string; count: number }[];
}

/** Limits and sources for {@linkcode extractUnwindTable}. */
export interface ExtractUnwindTableOptions {
  /** The most rows in a table; more makes the extraction fail. Default 2^23. */
  maxRows?: number;
  /** The largest CFI section read (after decompression), in bytes. Default 64 MiB. */
  maxSectionBytes?: number;
  /** A separate debug file whose `.debug_frame` is used when the file has none of its own. */
  debugFile?: ElfFile;
  /** Whether to read `.debug_frame` at all. Default true. */
  useDebugFrame?: boolean;
}

/** Reasons counted in {@linkcode UnwindTable.skipped} besides those of `CfiSkip`. */
export const TableSkip = {
  overlap: "FDE overlapping an earlier FDE",
  coveredByEhFrame: ".debug_frame FDE overlapping an .eh_frame FDE",
  notExecutable: "FDE outside the executable segments",
  badProgram: "FDE with a malformed CFA program (Invalid)",
  badCieProgram: "FDE of a CIE with malformed initial instructions (Invalid)",
  raRegister: "FDE of a CIE whose return address register is not 16 (Invalid)",
  raRule: "FDE with rows whose return address is not at CFA-8 (Invalid)",
  cfaRegister: "FDE with rows whose CFA register is not rsp or rbp (Invalid)",
  cfaExpression: "FDE with rows whose CFA is a non-PLT expression (Invalid)",
  offsetRange: "FDE with rows whose offsets do not fit 32 bits (Invalid)",
  fpRule: "FDE with rows whose rbp rule is not an offset (rbp taken as unchanged)",
  unreadableDebugFrame: "unreadable .debug_frame section",
} as const;

const DEFAULT_MAX_ROWS = 2 ** 23;
const DEFAULT_MAX_SECTION_BYTES = 64 * 1024 * 1024;
const CHDR_SIZE = 24;
const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

/** Conditions seen in the rows of the current FDE, counted once per FDE. */
const FLAG_RA = 1;
const FLAG_CFA_REGISTER = 2;
const FLAG_CFA_EXPRESSION = 4;
const FLAG_OFFSET = 8;
const FLAG_FP = 16;

/**
 * Extracts the unwind table of `elf` from its `.eh_frame` and `.debug_frame` (and those of
 * `options.debugFile`). Bad single entries are skipped and counted; the result's memory is bounded by
 * `maxRows` and the work is linear in the section sizes.
 *
 * @throws {RangeError} `"Cannot parse CFI of <file>: ..."` when the `.eh_frame` cannot be read (outside
 *   the file, over the byte budget) or the table would exceed `maxRows`.
 */
export function extractUnwindTable(elf: ElfFile, options: ExtractUnwindTableOptions = {}): UnwindTable {
  return indexUnwindTable(elf, options).table();
}

/** Options of {@linkcode indexUnwindTable}. */
export interface IndexUnwindTableOptions extends ExtractUnwindTableOptions {
  /**
   * Find FDEs through `.eh_frame_hdr` when {@linkcode UnwindTableIndex.range} asks, instead of walking
   * the whole section now; used where the file has a usable search table and no `.debug_frame`.
   * There, the header's table says which FDEs exist, and an FDE overlapping one outside the range is
   * not dropped. Default false.
   */
  lazy?: boolean;
}

/**
 * Indexes the CFI of `elf` (its entries found and chosen as the module doc says) without interpreting
 * any CFA program: the returned index builds the table of the whole file or of one address range.
 *
 * @throws {RangeError} as {@linkcode extractUnwindTable}.
 */
export function indexUnwindTable(elf: ElfFile, options: IndexUnwindTableOptions = {}): UnwindTableIndex {
  const maxBytes = options.maxSectionBytes ?? DEFAULT_MAX_SECTION_BYTES;
  const maxRows = options.maxRows ?? DEFAULT_MAX_ROWS;
  const skips = new SkipCounter();
  return withFileName(elf.name, () => {
    const executable = executableRanges(elf);
    const eh = ehFrameSection(elf, maxBytes);
    const useDebugFrame = options.useDebugFrame ?? true;
    if (options.lazy && eh !== null) {
      const debugFrame = useDebugFrame &&
        (elf.section(".debug_frame") !== undefined ||
          options.debugFile?.section(".debug_frame") !== undefined);
      const header = debugFrame ? null : EhFrameHeader.read(elf);
      if (header !== null && header.ehFrameAddress === eh.vaddr) {
        return new UnwindTableIndex(elf.name, executable, skips, maxRows, { section: eh, header });
      }
    }
    const sections: CfiSection[] = [];
    if (eh !== null) sections.push(eh);
    if (useDebugFrame) {
      const own = debugFrameSection(elf, maxBytes, skips);
      const debug = own ?? (options.debugFile ? debugFrameSection(options.debugFile, maxBytes, skips) : null);
      if (debug !== null) sections.push(debug);
    }
    return new UnwindTableIndex(elf.name, executable, skips, maxRows, { sections });
  });
}

/** Runs `parse`, naming the file in the message of a RangeError it throws. */
function withFileName<T>(name: string, parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    if (error instanceof RangeError && !error.message.startsWith("Cannot parse CFI of ")) {
      throw new RangeError(`Cannot parse CFI of ${name}: ${error.message}`, { cause: error });
    }
    throw error;
  }
}

/** Initial rules per CIE, computed on first use: null = malformed initial instructions. */
type InitialStates = (Float64Array | null | undefined)[];

/** Every FDE of the file, indexed and chosen. */
interface FullIndex {
  indexes: CfiIndex[];
  order: FdeOrder;
  /** End address of each FDE in `order`. */
  ends: Float64Array;
  initialStates: InitialStates[];
}

/** FDEs found through `.eh_frame_hdr` as ranges ask for them. */
interface HeaderIndex {
  section: CfiSection;
  header: EhFrameHeader;
  cies: CieCache;
  initialStates: InitialStates;
}

/**
 * The CFI of one file, ready to be interpreted: all of it at once ({@linkcode table}) or the FDEs of one
 * address range ({@linkcode range}), which is how a large library whose code mostly never runs during a
 * profile is loaded a page at a time.
 *
 * @example
 * ```ts
 * import { ElfFile } from "../elf/elf_file.ts";
 * import { findRow, indexUnwindTable } from "./unwind_table.ts";
 * using elf = ElfFile.open("/bin/true");
 * const index = indexUnwindTable(elf, { lazy: true });
 * const page = index.range(elf.entry, elf.entry + 1);
 * console.log(index.fdeCount, findRow(page, elf.entry));
 * ```
 */
export class UnwindTableIndex {
  /** The FDEs of the file (in lazy mode, the entries of `.eh_frame_hdr`'s table). */
  readonly fdeCount: number;
  readonly #name: string;
  readonly #executable: Float64Array | null;
  readonly #skips: SkipCounter;
  readonly #maxRows: number;
  /** The sections to index when the whole file is needed. */
  readonly #sections: CfiSection[];
  #full: FullIndex | null = null;
  readonly #lazy: HeaderIndex | null = null;

  /** Use {@linkcode indexUnwindTable}. */
  constructor(
    name: string,
    executable: Float64Array | null,
    skips: SkipCounter,
    maxRows: number,
    source: { sections: CfiSection[] } | { section: CfiSection; header: EhFrameHeader },
  ) {
    this.#name = name;
    this.#executable = executable;
    this.#skips = skips;
    this.#maxRows = maxRows;
    if ("header" in source) {
      this.#sections = [source.section];
      this.#lazy = {
        section: source.section,
        header: source.header,
        cies: new CieCache(),
        initialStates: [],
      };
      this.fdeCount = source.header.count;
    } else {
      this.#sections = source.sections;
      this.fdeCount = this.#fullIndex().order.length;
    }
  }

  /** Whether ranges find their FDEs through `.eh_frame_hdr` (until the whole table was asked for). */
  get throughHeader(): boolean {
    return this.#lazy !== null && this.#full === null;
  }

  /** The table of the whole file. */
  table(): UnwindTable {
    const full = this.#fullIndex();
    return this.#build(full.indexes, full.order, 0, full.order.length, full.initialStates);
  }

  /**
   * The rows of the FDEs that cover any address of [start, end), each FDE's rows in full and ended by a
   * gap row, so that every address of the range has the row it has in the whole table.
   */
  range(start: number, end: number): UnwindTable {
    const lazy = this.#lazy;
    if (lazy !== null && this.#full === null) {
      const { header, section } = lazy;
      const first = Math.max(0, header.find(start));
      let last = first;
      while (last < header.count && header.location(last) < end) last++;
      const offsets = new Float64Array(last - first);
      for (let i = first; i < last; i++) offsets[i - first] = header.fdeAddress(i) - section.vaddr;
      return withFileName(this.#name, () => {
        const index = indexCfiAt(section, offsets, lazy.cies, this.#skips);
        const order = chooseFdes([index], this.#executable, this.#skips);
        return this.#build([index], order, 0, order.length, [lazy.initialStates]);
      });
    }
    const { indexes, order, ends, initialStates } = this.#fullIndex();
    // The last FDE starting at or below `start`, if it reaches it; FDEs do not overlap, so their ends
    // are in order too.
    let low = 0;
    let high = order.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (order.starts[mid]! <= start) low = mid + 1;
      else high = mid;
    }
    let from = low;
    if (from > 0 && ends[from - 1]! > start) from--;
    let to = low;
    while (to < order.length && order.starts[to]! < end) to++;
    return this.#build(indexes, order, from, to, initialStates);
  }

  #fullIndex(): FullIndex {
    if (this.#full !== null) return this.#full;
    const skips = this.#skips;
    this.#full = withFileName(this.#name, () => {
      const indexes = this.#sections.map((section) => indexCfi(section, skips));
      const order = chooseFdes(indexes, this.#executable, skips);
      const ends = endsOf(indexes, order);
      return { indexes, order, ends, initialStates: indexes.map((index) => new Array(index.cies.length)) };
    });
    return this.#full;
  }

  #build(
    indexes: CfiIndex[],
    order: FdeOrder,
    from: number,
    to: number,
    states: InitialStates[],
  ): UnwindTable {
    return withFileName(this.#name, () => {
      const builder = new TableBuilder(this.#maxRows, rowEstimate(indexes, order, from, to), this.#skips);
      builder.build(indexes, order, from, to, states);
      return builder.finish();
    });
  }
}

/**
 * The end address of each FDE of `order`. A loop over every FDE of the file, in a function of its own:
 * V8 compiles it by on-stack replacement, and in the function that builds the index, the code after it
 * (not run yet) deoptimized that compiled code in every session.
 */
function endsOf(indexes: CfiIndex[], order: FdeOrder): Float64Array {
  const ends = new Float64Array(order.length);
  for (let k = 0; k < order.length; k++) {
    ends[k] = indexes[order.sections[k]!]!.fdes.ends[order.fdes[k]!]!;
  }
  return ends;
}

/**
 * How many rows to reserve for FDEs `from`..`to` of `order`: real sections give about one row per 5 to
 * 8 bytes of CFA program, and no table can have more rows than its programs have bytes plus two per FDE
 * (each row but an FDE's first and its gap row comes from an advance, at least one byte). Capped so
 * that a hostile section of nops reserves little; larger tables grow by doubling.
 */
function rowEstimate(indexes: CfiIndex[], order: FdeOrder, from: number, to: number): number {
  let bound = 1;
  for (let k = from; k < to; k++) {
    const fdes = indexes[order.sections[k]!]!.fdes;
    const i = order.fdes[k]!;
    bound += 2 + fdes.instructionsEnd[i]! - fdes.instructionsStart[i]!;
  }
  return Math.min(bound, 1024 + Math.floor(bound / 4), 1 << 20);
}

/**
 * The index of the row in force at `address` (the last row starting at or below it), or -1 when the
 * address lies below the first row.
 */
export function findRow(table: UnwindTable, address: number): number {
  const addresses = table.addresses;
  let low = 0;
  let high = table.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (addresses[mid]! <= address) low = mid + 1;
    else high = mid;
  }
  return low - 1;
}

/** The `.eh_frame` section, or else the one `.eh_frame_hdr` (PT_GNU_EH_FRAME) points at, or null. */
export function ehFrameSection(
  elf: ElfFile,
  maxBytes: number = DEFAULT_MAX_SECTION_BYTES,
): CfiSection | null {
  const header = elf.section(".eh_frame");
  if (header !== undefined) {
    if (header.type === SHT_NOBITS || header.size === 0) return null;
    return { kind: "eh_frame", bytes: readBounded(elf, header, maxBytes), vaddr: header.addr };
  }
  if (elf.sections.length > 0) return null;
  return ehFrameFromHeader(elf, maxBytes);
}

/**
 * Without section headers, `.eh_frame_hdr` gives the start of `.eh_frame` but not its size: the bytes
 * up to the end of the containing segment are read and the walk ends at the zero terminator.
 */
function ehFrameFromHeader(elf: ElfFile, maxBytes: number): CfiSection | null {
  const segment = elf.programHeaders.find((p) => p.type === PT_GNU_EH_FRAME);
  if (segment === undefined || segment.filesz < 8) return null;
  const vaddr = ehFramePointer(elf.read(segment.offset, Math.min(segment.filesz, 16)), segment.vaddr);
  if (vaddr === null) return null;
  const load = elf.loadSegments.find((s) => vaddr >= s.vaddr && vaddr - s.vaddr < s.filesz);
  if (load === undefined) throw new RangeError(`.eh_frame at 0x${vaddr.toString(16)} is not in the file`);
  const offset = load.offset + (vaddr - load.vaddr);
  const size = Math.min(load.filesz - (vaddr - load.vaddr), maxBytes);
  return { kind: "eh_frame", bytes: elf.read(offset, size), vaddr, stopAtTerminator: true };
}

/** The `.debug_frame` of `elf`, or null when absent; a section that cannot be read is counted. */
function debugFrameSection(elf: ElfFile, maxBytes: number, skips: SkipCounter): CfiSection | null {
  const header = elf.section(".debug_frame");
  if (header === undefined || header.type === SHT_NOBITS || header.size === 0) return null;
  try {
    return { kind: "debug_frame", bytes: readBounded(elf, header, maxBytes), vaddr: 0 };
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    skips.add(TableSkip.unreadableDebugFrame);
    return null;
  }
}

/** Reads a section after checking its (decompressed) size against the budget. */
function readBounded(elf: ElfFile, header: ElfSection, maxBytes: number): Uint8Array {
  let size = header.size;
  if ((header.flags & SHF_COMPRESSED) !== 0 && header.size >= CHDR_SIZE) {
    const chdr = elf.read(header.offset, CHDR_SIZE);
    const view = new DataView(chdr.buffer, chdr.byteOffset, CHDR_SIZE);
    size = view.getUint32(12, true) * 2 ** 32 + view.getUint32(8, true);
  }
  if (!(size <= maxBytes)) {
    throw new RangeError(`section ${header.name} is ${size} bytes, over the ${maxBytes}-byte budget`);
  }
  return elf.readSection(header);
}

/**
 * The executable address ranges (PF_X PT_LOAD segments), merged and sorted as [start, end) pairs, or
 * null when the file has no load segments (a relocatable object), where no FDE is filtered.
 */
function executableRanges(elf: ElfFile): Float64Array | null {
  if (elf.programHeaders.every((p) => p.type !== PT_LOAD)) return null;
  const ranges = elf.loadSegments.filter((s) => (s.flags & PF_X) !== 0 && s.memsz > 0)
    .map((s) => [s.vaddr, s.vaddr + s.memsz] as const).sort((a, b) => a[0] - b[0]);
  const merged: number[] = [];
  for (const [start, end] of ranges) {
    const last = merged.length - 1;
    if (last > 0 && start <= merged[last]!) merged[last] = Math.max(merged[last]!, end);
    else merged.push(start, end);
  }
  return Float64Array.from(merged);
}

/** Whether [start, end) lies inside one of the merged `ranges`. */
function insideRanges(ranges: Float64Array, start: number, end: number): boolean {
  let low = 0;
  let high = ranges.length >>> 1;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (ranges[2 * mid]! <= start) low = mid + 1;
    else high = mid;
  }
  if (low === 0) return false;
  return end <= ranges[2 * (low - 1) + 1]!;
}

/** The FDEs to interpret, in address order: which section, which FDE, and its start. */
interface FdeOrder {
  length: number;
  sections: Uint8Array;
  fdes: Uint32Array;
  starts: Float64Array;
}

/** Chooses the FDEs that make the table (see the module doc) and orders them by address. */
function chooseFdes(indexes: CfiIndex[], executable: Float64Array | null, skips: SkipCounter): FdeOrder {
  const kept: FdeOrder[] = [];
  // Ranges taken from .eh_frame, which .debug_frame FDEs must not overlap.
  let ehStarts: Float64Array = new Float64Array(0);
  let ehEnds: Float64Array = new Float64Array(0);
  for (const [s, index] of indexes.entries()) {
    const { starts, ends } = index.fdes;
    const sorted = sortByStart(starts);
    const chosen: FdeOrder = {
      length: 0,
      sections: new Uint8Array(sorted.length).fill(s),
      fdes: new Uint32Array(sorted.length),
      starts: new Float64Array(sorted.length),
    };
    const chosenEnds = new Float64Array(sorted.length);
    let watermark = -1;
    let ehCursor = 0;
    const isEh = index.section.kind === "eh_frame";
    for (let k = 0; k < sorted.length; k++) {
      const i = sorted[k]!;
      const start = starts[i]!;
      const end = ends[i]!;
      if (executable !== null && !insideRanges(executable, start, end)) {
        skips.add(TableSkip.notExecutable);
        continue;
      }
      if (start < watermark) {
        skips.add(TableSkip.overlap);
        continue;
      }
      if (!isEh) {
        while (ehCursor < ehEnds.length && ehEnds[ehCursor]! <= start) ehCursor++;
        if (ehCursor < ehStarts.length && ehStarts[ehCursor]! < end) {
          skips.add(TableSkip.coveredByEhFrame);
          continue;
        }
      }
      watermark = end;
      chosen.fdes[chosen.length] = i;
      chosen.starts[chosen.length] = start;
      chosenEnds[chosen.length++] = end;
    }
    kept.push(chosen);
    if (isEh) {
      ehStarts = chosen.starts.subarray(0, chosen.length);
      ehEnds = chosenEnds.subarray(0, chosen.length);
    }
  }
  return mergeByStart(kept);
}

/** Indices 0..n-1 ordered by `starts`, ties in index order. */
function sortByStart(starts: Float64Array): Uint32Array {
  const n = starts.length;
  const order = new Uint32Array(n);
  let sorted = true;
  let maxStart = 0;
  for (let i = 0; i < n; i++) {
    order[i] = i;
    if (i > 0 && starts[i - 1]! > starts[i]!) sorted = false;
    if (starts[i]! > maxStart) maxStart = starts[i]!;
  }
  if (sorted) return order;
  // Libraries and executables live below 4 GiB: each FDE's start and index packed into one exact double
  // (start * 2^21 + index < 2^53), sorted by the typed array's own sort. That runs as native code from the
  // first call, where a sort of our own runs in V8's interpreter until it warms up: libc's 3,713 FDEs
  // took 2.1 to 3.8 ms in a fresh process with a radix sort, 0.7 to 1.8 ms so.
  if (maxStart < 2 ** 32 && n <= INDEX_MASK + 1) {
    const keys = new Float64Array(n);
    for (let i = 0; i < n; i++) keys[i] = starts[i]! * INDEX_SCALE + i;
    keys.sort();
    for (let k = 0; k < n; k++) order[k] = keys[k]! % INDEX_SCALE;
    return order;
  }
  return order.sort((a, b) => starts[a]! - starts[b]! || a - b);
}

/** Packing for {@linkcode sortByStart}: 21 bits of index below a start of at most 32 bits. */
const INDEX_SCALE = 2 ** 21;
const INDEX_MASK = INDEX_SCALE - 1;

/** Merges the per-section chosen lists (disjoint ranges) into one list in address order. */
function mergeByStart(kept: FdeOrder[]): FdeOrder {
  let merged = kept[0] ??
    { length: 0, sections: new Uint8Array(0), fdes: new Uint32Array(0), starts: new Float64Array(0) };
  for (let s = 1; s < kept.length; s++) {
    const other = kept[s]!;
    const total = merged.length + other.length;
    const out: FdeOrder = {
      length: total,
      sections: new Uint8Array(total),
      fdes: new Uint32Array(total),
      starts: new Float64Array(total),
    };
    let a = 0;
    let b = 0;
    for (let n = 0; n < total; n++) {
      const useA = b >= other.length || (a < merged.length && merged.starts[a]! <= other.starts[b]!);
      const from = useA ? merged : other;
      const k = useA ? a++ : b++;
      out.sections[n] = from.sections[k]!;
      out.fdes[n] = from.fdes[k]!;
      out.starts[n] = from.starts[k]!;
    }
    merged = out;
  }
  return merged;
}

/** The table outgrew `maxRows`: fails the whole file, unlike a malformed FDE. */
class RowLimitError extends RangeError {}

/** Collects rows into growing columns, collapsing equal consecutive rules; the interpreter's sink. */
class TableBuilder implements CfaRowSink {
  length = 0;
  addresses: Float64Array;
  cfaRules: Uint8Array;
  cfaOffsets: Int32Array;
  fpRules: Uint8Array;
  fpOffsets: Int32Array;
  fdeCount = 0;
  readonly #maxRows: number;
  readonly #skips: SkipCounter;
  readonly #interpreter = new CfaInterpreter();
  /** Conditions met by rows of the FDE being interpreted. */
  #flags = 0;

  constructor(maxRows: number, estimate: number, skips: SkipCounter) {
    this.#maxRows = maxRows;
    this.#skips = skips;
    const capacity = Math.max(16, Math.min(maxRows, estimate));
    this.addresses = new Float64Array(capacity);
    this.cfaRules = new Uint8Array(capacity);
    this.cfaOffsets = new Int32Array(capacity);
    this.fpRules = new Uint8Array(capacity);
    this.fpOffsets = new Int32Array(capacity);
  }

  /**
   * Interprets FDEs `from` to `to` (exclusive) of `order`. `initialStates` caches each CIE's initial
   * rules (null: malformed) across calls.
   */
  build(
    indexes: CfiIndex[],
    order: FdeOrder,
    from: number,
    to: number,
    initialStates: (Float64Array | null | undefined)[][],
  ): void {
    const interpreter = this.#interpreter;
    const skips = this.#skips;
    for (let k = from; k < to; k++) {
      const s = order.sections[k]!;
      const i = order.fdes[k]!;
      const index = indexes[s]!;
      const fdes = index.fdes;
      const bytes = index.section.bytes;
      const start = fdes.starts[i]!;
      const end = fdes.ends[i]!;
      const cieIndex = fdes.cieIndex[i]!;
      const cie = index.cies[cieIndex]!;
      this.fdeCount++;
      const rowStart = this.length;
      if (cie.signalFrame) {
        this.#push(start, CfaRule.Signal, 0, FpRule.Unchanged, 0);
      } else if (cie.returnAddressRegister !== 16) {
        skips.add(TableSkip.raRegister);
        this.#push(start, CfaRule.Invalid, 0, FpRule.Unchanged, 0);
      } else {
        const states = initialStates[s]!;
        let initial = states[cieIndex];
        if (initial === undefined) {
          try {
            initial = interpreter.runCie(bytes, cie, cie.instructionsStart, cie.instructionsEnd);
          } catch (error) {
            if (!(error instanceof RangeError)) throw error;
            initial = null;
          }
          states[cieIndex] = initial;
        }
        if (initial === null) {
          skips.add(TableSkip.badCieProgram);
          this.#push(start, CfaRule.Invalid, 0, FpRule.Unchanged, 0);
        } else {
          this.#flags = 0;
          try {
            interpreter.runFde(
              bytes,
              cie,
              initial,
              fdes.instructionsStart[i]!,
              fdes.instructionsEnd[i]!,
              start,
              end,
              index.section.vaddr,
              this,
            );
            this.#countFlags();
          } catch (error) {
            if (!(error instanceof RangeError) || error instanceof RowLimitError) throw error;
            this.length = rowStart;
            skips.add(TableSkip.badProgram);
            this.#push(start, CfaRule.Invalid, 0, FpRule.Unchanged, 0);
          }
        }
      }
      // A gap row where the next FDE does not start right at this one's end (or is not built now).
      const next = k + 1 < to ? order.starts[k + 1]! : -1;
      if (next !== end) this.#push(end, CfaRule.Invalid, 0, FpRule.Unchanged, 0);
    }
  }

  /** The interpreter's rules at `address`, mapped to what the BPF unwinder can follow. */
  row(address: number, state: CfaState): void {
    let cfaRule: number = CfaRule.Invalid;
    let cfaOffset = 0;
    let fpRule: number = FpRule.Unchanged;
    let fpOffset = 0;
    if (state.raRule === RegisterRule.Undefined) {
      cfaRule = CfaRule.Stop;
    } else if (state.raRule !== RegisterRule.Offset || state.raOffset !== -8) {
      this.#flags |= FLAG_RA;
    } else {
      if (state.cfaKind === CfaKind.Expression) {
        if (state.cfaPlt === 1) {
          cfaRule = CfaRule.Plt;
          cfaOffset = state.pltOffset;
        } else {
          this.#flags |= FLAG_CFA_EXPRESSION;
        }
      } else if (state.cfaRegister === 7) {
        cfaRule = CfaRule.Rsp;
        cfaOffset = state.cfaOffset;
      } else if (state.cfaRegister === 6) {
        cfaRule = CfaRule.Rbp;
        cfaOffset = state.cfaOffset;
      } else {
        this.#flags |= FLAG_CFA_REGISTER;
      }
      if (cfaRule !== CfaRule.Invalid) {
        const rbpRule = state.rbpRule;
        if (rbpRule === RegisterRule.Offset) {
          fpRule = FpRule.CfaOffset;
          fpOffset = state.rbpOffset;
        } else if (
          rbpRule !== RegisterRule.Unreferenced && rbpRule !== RegisterRule.SameValue &&
          rbpRule !== RegisterRule.Undefined
        ) {
          this.#flags |= FLAG_FP;
        }
        if (
          !(cfaOffset >= INT32_MIN && cfaOffset <= INT32_MAX && fpOffset >= INT32_MIN &&
            fpOffset <= INT32_MAX)
        ) {
          this.#flags |= FLAG_OFFSET;
          cfaRule = CfaRule.Invalid;
          cfaOffset = 0;
          fpRule = FpRule.Unchanged;
          fpOffset = 0;
        }
      }
    }
    this.#push(address, cfaRule, cfaOffset, fpRule, fpOffset);
  }

  finish(): UnwindTable {
    const n = this.length;
    // Views when little capacity is left unused, copies otherwise (to give the memory back).
    const view = this.addresses.length - n <= n / 4;
    const trim = <T extends Float64Array | Uint8Array | Int32Array>(column: T): T =>
      (view ? column.subarray(0, n) : column.slice(0, n)) as T;
    return {
      length: n,
      addresses: trim(this.addresses),
      cfaRules: trim(this.cfaRules),
      cfaOffsets: trim(this.cfaOffsets),
      fpRules: trim(this.fpRules),
      fpOffsets: trim(this.fpOffsets),
      fdeCount: this.fdeCount,
      skipped: this.#skips.list(),
    };
  }

  #countFlags(): void {
    const flags = this.#flags;
    if (flags === 0) return;
    const skips = this.#skips;
    if (flags & FLAG_RA) skips.add(TableSkip.raRule);
    if (flags & FLAG_CFA_REGISTER) skips.add(TableSkip.cfaRegister);
    if (flags & FLAG_CFA_EXPRESSION) skips.add(TableSkip.cfaExpression);
    if (flags & FLAG_OFFSET) skips.add(TableSkip.offsetRange);
    if (flags & FLAG_FP) skips.add(TableSkip.fpRule);
  }

  #push(address: number, cfaRule: number, cfaOffset: number, fpRule: number, fpOffset: number): void {
    let n = this.length;
    // A later row at the same address supersedes the earlier one (an advance by 0).
    if (n > 0 && this.addresses[n - 1] === address) n = --this.length;
    if (
      n > 0 && this.cfaRules[n - 1] === cfaRule && this.cfaOffsets[n - 1] === cfaOffset &&
      this.fpRules[n - 1] === fpRule && this.fpOffsets[n - 1] === fpOffset
    ) {
      return;
    }
    if (n === this.addresses.length) this.#grow();
    this.addresses[n] = address;
    this.cfaRules[n] = cfaRule;
    this.cfaOffsets[n] = cfaOffset;
    this.fpRules[n] = fpRule;
    this.fpOffsets[n] = fpOffset;
    this.length = n + 1;
  }

  #grow(): void {
    const size = this.addresses.length;
    if (size >= this.#maxRows) {
      throw new RowLimitError(`the table has more than ${this.#maxRows} rows`);
    }
    const bigger = Math.min(this.#maxRows, size * 2);
    const grow = <T extends Float64Array | Uint8Array | Int32Array>(old: T, fresh: T): T => {
      fresh.set(old);
      return fresh;
    };
    this.addresses = grow(this.addresses, new Float64Array(bigger));
    this.cfaRules = grow(this.cfaRules, new Uint8Array(bigger));
    this.cfaOffsets = grow(this.cfaOffsets, new Int32Array(bigger));
    this.fpRules = grow(this.fpRules, new Uint8Array(bigger));
    this.fpOffsets = grow(this.fpOffsets, new Int32Array(bigger));
  }
}

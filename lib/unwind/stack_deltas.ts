/**
 * Turns a file's unwind table (one row per address where the rule changes, from .eh_frame) into the
 * compact stack deltas of the OpenTelemetry eBPF profiler, for the BPF unwinder:
 * - rules are deduplicated into one global array shared by all files ({@linkcode UnwindInfoRegistry});
 * - a row is 4 bytes: the address within its 64 KiB page and the rule's index (or a command);
 * - a push or pop right after a row is merged into it (MERGE_OPCODE_NEGATIVE), which removes the
 *   most common kind of row;
 * - every page starts with the rule in force at its first byte, so the BPF side needs no look-back;
 * - the file's rows go into the smallest bucket array of 2^8..2^23 entries that holds them.
 *
 * @example
 * ```ts ignore
 * const deltas = buildStackDeltas(extractUnwindTable(elf), registry);
 * maps.load(fileId, deltas);
 * ```
 *
 * @module
 */
import { CfaRule, FpRule, type UnwindTable } from "./unwind_table.ts";
import { StackDeltaConstants, UnwindCommand, UnwindFpOpcode, UnwindOpcode } from "../../support/types.ts";

const PAGE_SIZE = 2 ** StackDeltaConstants.StackDeltaPageBits;
const MAX_MERGE_DISTANCE = StackDeltaConstants.MergeOpcodeNegative - 1;

/** A file's deltas, ready to be written to the BPF maps. */
export interface StackDeltaFile {
  /** Pairs (addr_low, unwind_info) for `count` rows, grouped by page in address order. */
  readonly deltas: Uint16Array;
  readonly count: number;
  /** Per page: the page number (vaddr >> 16), its first row and its number of rows. */
  readonly pages: Float64Array;
  readonly pageFirst: Uint32Array;
  readonly pageCount: Uint16Array;
  /** log2 of the bucket array size that holds the rows (8..23). */
  readonly bucket: number;
  /** Rules that did not fit the global array and became INVALID rows. */
  readonly droppedRules: number;
}

/** Receives each new rule so it can be written to the BPF map at its index. */
export type UnwindInfoSink = (
  index: number,
  opcode: number,
  fpOpcode: number,
  mergeOpcode: number,
  param: number,
  fpParam: number,
) => void;

/** The global, deduplicated array of unwind rules. */
export class UnwindInfoRegistry {
  readonly capacity: number;
  // Rules are looked up once per row, so the key is a number when the offsets are small (always, in
  // practice) and a string only otherwise.
  #indices = new Map<number | string, number>();
  #sink: UnwindInfoSink;

  constructor(capacity: number, sink: UnwindInfoSink) {
    // Indices must stay below DELTA_COMMAND_FLAG, whose bit marks commands.
    this.capacity = Math.min(capacity, StackDeltaConstants.DeltaCommandFlag);
    this.#sink = sink;
  }

  /** Rules stored so far. */
  get size(): number {
    return this.#indices.size;
  }

  /** The index of a rule, adding it if new; -1 when the array is full. */
  indexOf(opcode: number, fpOpcode: number, mergeOpcode: number, param: number, fpParam: number): number {
    // A small integer key (a V8 "Smi": no allocation, fast hashing) covers real CFA offsets; larger ones
    // fall back to a string.
    const key = Math.abs(param) < 512 && Math.abs(fpParam) < 128
      ? ((((param + 512) << 8) | (fpParam + 128)) << 8 | mergeOpcode) << 3 | (opcode << 1) | fpOpcode
      : `${opcode},${fpOpcode},${mergeOpcode},${param},${fpParam}`;
    let index = this.#indices.get(key);
    if (index !== undefined) return index;
    if (this.#indices.size >= this.capacity) return -1;
    index = this.#indices.size;
    this.#sink(index, opcode, fpOpcode, mergeOpcode, param, fpParam);
    this.#indices.set(key, index);
    return index;
  }
}

const COMMAND_OF_RULE: Record<number, number> = {
  [CfaRule.Plt]: UnwindCommand.Plt,
  [CfaRule.Signal]: UnwindCommand.Signal,
  [CfaRule.Stop]: UnwindCommand.Stop,
  [CfaRule.Invalid]: UnwindCommand.Invalid,
  [CfaRule.FramePointer]: UnwindCommand.FramePointer,
};
const INVALID = StackDeltaConstants.DeltaCommandFlag | UnwindCommand.Invalid;

/**
 * A file whose code has no CFI: one FRAME_POINTER command per page of [start, end) (ELF addresses), so
 * the BPF unwinder follows rbp there instead of stopping.
 */
export function framePointerDeltas(start: number, end: number): StackDeltaFile {
  const first = Math.floor(start / PAGE_SIZE);
  const last = Math.floor((end - 1) / PAGE_SIZE);
  const count = Math.max(0, last - first + 1);
  const deltas = new Uint16Array(count * 2);
  const pages = new Float64Array(count);
  const pageFirst = new Uint32Array(count);
  const pageCount = new Uint16Array(count).fill(1);
  for (let i = 0; i < count; i++) {
    deltas[2 * i + 1] = StackDeltaConstants.DeltaCommandFlag | UnwindCommand.FramePointer;
    pages[i] = first + i;
    pageFirst[i] = i;
  }
  return { deltas, count, pages, pageFirst, pageCount, bucket: bucketFor(count), droppedRules: 0 };
}

/**
 * The rows of one page of `file` (page = ELF address >> 16), as a file of their own; a page without rows
 * becomes one INVALID row, which tells the unwinder that the page has no CFI.
 */
export function deltasOfPage(file: StackDeltaFile, page: number): StackDeltaFile {
  const at = file.pages.indexOf(page);
  let deltas: Uint16Array;
  if (at < 0) {
    deltas = Uint16Array.of(0, INVALID);
  } else {
    const first = file.pageFirst[at]!;
    deltas = file.deltas.slice(2 * first, 2 * (first + file.pageCount[at]!));
  }
  const count = deltas.length / 2;
  return {
    deltas,
    count,
    pages: Float64Array.of(page),
    pageFirst: Uint32Array.of(0),
    pageCount: Uint16Array.of(count),
    bucket: bucketFor(count),
    droppedRules: file.droppedRules,
  };
}

function bucketFor(count: number): number {
  let bucket = StackDeltaConstants.StackDeltaBucketSmallest;
  while (2 ** bucket < count) bucket++;
  if (bucket > StackDeltaConstants.StackDeltaBucketLargest) {
    throw new RangeError(`Cannot store ${count} stack deltas: more than 2^23 rows`);
  }
  return bucket;
}

/**
 * Builds the deltas of one file from its unwind table.
 *
 * Each pass over the rows is a function of its own, without closures: a session runs this on a few
 * files, and V8 compiles each loop by on-stack replacement while it runs. Compiled that way, a loop
 * followed by code that has not run yet is thrown away when that code is reached (no type feedback), and
 * a closure made anew for each file is a new call target for the compiled caller: both were
 * deoptimizations, and recompilations, in every session (`--v8-flags=--trace-deopt`).
 */
export function buildStackDeltas(table: UnwindTable, registry: UnwindInfoRegistry): StackDeltaFile {
  const entries = new DeltaEntries(table.length);
  const droppedRules = collectEntries(table, registry, entries);
  const pages = new PageRows(entries.length);
  spreadOverPages(entries, pages);
  const count = pages.count;
  const pageCount = new Uint16Array(pages.first.length);
  for (let k = 0; k < pageCount.length; k++) {
    pageCount[k] = (k + 1 < pageCount.length ? pages.first[k + 1]! : count) - pages.first[k]!;
  }
  return {
    deltas: pages.deltas.subarray(0, count * 2),
    count,
    pages: Float64Array.from(pages.numbers),
    pageFirst: Uint32Array.from(pages.first),
    pageCount,
    bucket: bucketFor(count),
    droppedRules,
  };
}

/** A file's rows as (address, unwind_info) entries, with the rule in force at each entry's end. */
class DeltaEntries {
  length = 0;
  readonly addresses: Float64Array;
  readonly infos: Uint16Array;
  /** Differs from the info only for merged entries; it opens the following pages when the entry runs on. */
  readonly tails: Uint16Array;

  constructor(capacity: number) {
    this.addresses = new Float64Array(capacity);
    this.infos = new Uint16Array(capacity);
    this.tails = new Uint16Array(capacity);
  }
}

/** Pass 1: rows -> entries, with merges; at most one entry per row. Returns the rules dropped. */
function collectEntries(table: UnwindTable, registry: UnwindInfoRegistry, out: DeltaEntries): number {
  const { addresses, cfaRules, cfaOffsets, fpRules, fpOffsets, length } = table;
  const entryAddresses = out.addresses;
  const entryInfos = out.infos;
  const tailInfos = out.tails;
  let entries = 0;
  let droppedRules = 0;
  for (let i = 0; i < length; i++) {
    const address = addresses[i]!;
    const rule = cfaRules[i]!;
    let info: number;
    let tail: number;
    if (rule === CfaRule.Rsp || rule === CfaRule.Rbp) {
      const opcode = rule === CfaRule.Rsp ? UnwindOpcode.BaseSp : UnwindOpcode.BaseFp;
      const fpOpcode = fpRules[i] === FpRule.CfaOffset ? UnwindFpOpcode.CfaOffset : UnwindFpOpcode.Unchanged;
      const fpParam = fpOpcode === UnwindFpOpcode.CfaOffset ? fpOffsets[i]! : 0;
      let merge = 0;
      const next = i + 1;
      if (
        next < length && cfaRules[next] === rule && fpRules[next] === fpRules[i] &&
        fpOffsets[next] === fpOffsets[i]
      ) {
        const distance = addresses[next]! - addresses[i]!;
        const change = cfaOffsets[next]! - cfaOffsets[i]!;
        if (
          distance > 0 && distance <= MAX_MERGE_DISTANCE && (change === 8 || change === -8) &&
          Math.floor(addresses[i]! / PAGE_SIZE) === Math.floor(addresses[next]! / PAGE_SIZE)
        ) {
          merge = distance | (change < 0 ? StackDeltaConstants.MergeOpcodeNegative : 0);
        }
      }
      const index = registry.indexOf(opcode, fpOpcode, merge, cfaOffsets[i]!, fpParam);
      const tailIndex = merge === 0
        ? index
        : registry.indexOf(opcode, fpOpcode, 0, cfaOffsets[i + 1]!, fpParam);
      if (index < 0 || tailIndex < 0) {
        droppedRules++;
        info = tail = INVALID;
      } else {
        info = index;
        tail = tailIndex;
        if (merge !== 0) i++; // the next row is folded into this one
      }
    } else if (rule === CfaRule.GoCgoCall) {
      // The slot where asmcgocall saved its depth (its g right above), and whether it pushed rbp first.
      const rbpSaved = fpRules[i] === FpRule.CfaOffset;
      const index = registry.indexOf(
        UnwindOpcode.GoCgoCall,
        rbpSaved ? UnwindFpOpcode.CfaOffset : UnwindFpOpcode.Unchanged,
        0,
        cfaOffsets[i]!,
        rbpSaved ? fpOffsets[i]! : 0,
      );
      if (index < 0) droppedRules++;
      info = tail = index < 0 ? INVALID : index;
    } else {
      info = tail = StackDeltaConstants.DeltaCommandFlag | (COMMAND_OF_RULE[rule] ?? UnwindCommand.Invalid);
    }
    // Repeats of the rule in force add nothing (a merged entry is tied to its own address, so it is kept).
    if (entries > 0 && info === tail && tailInfos[entries - 1] === info) continue;
    // Two rows at one address (an empty FDE range): the later one is in force.
    if (entries > 0 && entryAddresses[entries - 1] === address) entries--;
    entryAddresses[entries] = address;
    entryInfos[entries] = info;
    tailInfos[entries] = tail;
    entries++;
  }
  out.length = entries;
  return droppedRules;
}

/** The rows of a file grouped by page, as pass 2 writes them. */
class PageRows {
  count = 0;
  /** Pairs (addr_low, unwind_info); grows by doubling. */
  deltas: Uint16Array;
  /** Each page's number and first row, in order: a page holds the rows up to the next page's first. */
  readonly numbers: number[] = [];
  readonly first: number[] = [];

  constructor(entries: number) {
    this.deltas = new Uint16Array(Math.max(16, entries * 2) * 2);
  }
}

/** Pass 2: spreads entries over pages; each page starts with the rule in force at its first byte. */
function spreadOverPages(entries: DeltaEntries, out: PageRows): void {
  const { addresses, infos, tails, length } = entries;
  let deltas = out.deltas;
  let count = 0;
  let currentPage = -1;
  for (let e = 0; e < length; e++) {
    const start = addresses[e]!;
    const firstPage = Math.floor(start / PAGE_SIZE);
    const tail = tails[e]!;
    // A rule that runs into later pages opens each of them.
    const lastPage = tail === INVALID || e + 1 >= length
      ? firstPage
      : Math.floor((addresses[e + 1]! - 1) / PAGE_SIZE);
    const needed = count + 1 + Math.max(0, lastPage - firstPage);
    if (2 * needed > deltas.length) {
      const grown = new Uint16Array(2 * Math.max(deltas.length, needed));
      grown.set(deltas);
      deltas = grown;
    }
    if (firstPage !== currentPage) {
      currentPage = firstPage;
      out.numbers.push(firstPage);
      out.first.push(count);
    }
    deltas[2 * count] = start - firstPage * PAGE_SIZE;
    deltas[2 * count + 1] = infos[e]!;
    count++;
    for (let page = firstPage + 1; page <= lastPage; page++) {
      currentPage = page;
      out.numbers.push(page);
      out.first.push(count);
      deltas[2 * count] = 0;
      deltas[2 * count + 1] = tail;
      count++;
    }
  }
  out.deltas = deltas;
  out.count = count;
}

/**
 * The row of `file` in force at ELF address `vaddr`: the last one of its page at or before the address,
 * as the BPF unwinder's search (bpf/stack_deltas.bpf.h, search_unwind_info) finds it. Returns the row's
 * index, or -1 when the file has no rows for the page (or, in a corrupt table, none before the address).
 */
export function findDeltaRow(file: StackDeltaFile, vaddr: number): number {
  const page = Math.floor(vaddr / PAGE_SIZE);
  const pages = file.pages;
  let low = 0;
  let high = pages.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (pages[middle]! < page) low = middle + 1;
    else high = middle;
  }
  if (low >= pages.length || pages[low] !== page || file.pageCount[low] === 0) return -1;
  const target = vaddr - page * PAGE_SIZE;
  let row = file.pageFirst[low]!;
  let end = row + file.pageCount[low]!;
  while (row + 1 < end) {
    const middle = (row + end) >>> 1;
    if (file.deltas[2 * middle]! <= target) row = middle;
    else end = middle;
  }
  return file.deltas[2 * row]! <= target ? row : -1;
}

/**
 * A row's rule made ready for one address, as the BPF unwinder's struct resolved_rule: written in place
 * by the host's lookups so that unwinding a frame allocates nothing.
 */
export interface ResolvedRule {
  /** The row's unwind_info: a command (with DELTA_COMMAND_FLAG) or an index into the rule array. */
  unwindInfo: number;
  /** An UnwindOpcode (0 for a command). */
  cfaOpcode: number;
  cfaParam: number;
  /** An UnwindFpOpcode. */
  fpOpcode: number;
  fpParam: number;
}

/** A rule with nothing in it, to be filled by a lookup. */
export function emptyRule(): ResolvedRule {
  return { unwindInfo: 0, cfaOpcode: 0, cfaParam: 0, fpOpcode: 0, fpParam: 0 };
}

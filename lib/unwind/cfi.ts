/**
 * Call-frame information entries: the CIEs and FDEs of `.eh_frame` and `.debug_frame`. One walk over a
 * section's bytes indexes every FDE into columnar arrays (address range, where its CFA program lies, its
 * CIE); CIEs are parsed once each and cached by offset. The bytes are hostile: an entry that cannot be
 * parsed is skipped and counted, and nothing is allocated in proportion to a length or count the bytes
 * claim (only to the bytes actually present), so the work is linear in the section size.
 *
 * Choices where the formats or their producers disagree:
 * - A 64-bit entry (initial length 0xffffffff) has an 8-byte CIE id / CIE pointer in both sections (as
 *   binutils and gdb read them).
 * - A zero length word is skipped and the walk goes on, unless the section's end is only a guess (the
 *   `.eh_frame` found through `.eh_frame_hdr`), where it ends the walk like the runtime unwinder does.
 * - In `.debug_frame`, FDE addresses are absolute `address_size` values; an `R` augmentation is honoured
 *   only with an absolute encoding.
 *
 * @example
 * ```ts
 * import { ElfFile } from "../elf/elf_file.ts";
 * import { indexCfi, SkipCounter } from "./cfi.ts";
 * using elf = ElfFile.open("/bin/true");
 * const header = elf.section(".eh_frame")!;
 * const index = indexCfi(
 *   { kind: "eh_frame", bytes: elf.readSection(header), vaddr: header.addr },
 *   new SkipCounter(),
 * );
 * console.log(index.fdes.length, index.cies[0]?.augmentation);
 * ```
 *
 * @module
 */

import { DW_EH_PE, DwarfReader, type PointerBases } from "../elf/dwarf_reader.ts";

/** Which section an entry comes from; they differ in CIE ids, CIE pointers and FDE addresses. */
export type CfiKind = "eh_frame" | "debug_frame";

/** The bytes of one CFI section and where they are loaded. */
export interface CfiSection {
  kind: CfiKind;
  bytes: Uint8Array;
  /** The address `bytes[0]` is loaded at (`sh_addr`), the base of pc-relative pointers; 0 if unloaded. */
  vaddr: number;
  /** End the walk at the first zero length word (the section's size is only an upper bound). */
  stopAtTerminator?: boolean;
  /** Bases of `textrel`/`datarel` pointers, when known. */
  bases?: PointerBases;
}

/** A parsed Common Information Entry. */
export interface Cie {
  /** Offset of the entry (its length field) in the section. */
  offset: number;
  version: number;
  augmentation: string;
  codeAlignment: number;
  dataAlignment: number;
  returnAddressRegister: number;
  /** `DW_EH_PE_*` encoding of FDE addresses (and of `DW_CFA_set_loc` operands). */
  fdeEncoding: number;
  /** `DW_EH_PE_*` encoding of the LSDA pointer, or `DW_EH_PE.omit`. */
  lsdaEncoding: number;
  /** Whether FDEs carry augmentation data (a `z` augmentation). */
  hasAugmentationData: boolean;
  /** The `S` augmentation: FDEs of this CIE describe a signal trampoline. */
  signalFrame: boolean;
  addressSize: number;
  segmentSelectorSize: number;
  /** Offset of the initial instructions in the section. */
  instructionsStart: number;
  /** Offset one past the initial instructions (the entry's end). */
  instructionsEnd: number;
}

/** The FDEs of a section, one column per field, in section order. */
export interface FdeColumns {
  length: number;
  /** First address covered (the FDE's `initial_location`). */
  starts: Float64Array;
  /** One past the last address covered. */
  ends: Float64Array;
  /** Offset of the FDE's CFA program in the section. */
  instructionsStart: Uint32Array;
  /** Offset one past the FDE's CFA program. */
  instructionsEnd: Uint32Array;
  /** Index into {@linkcode CfiIndex.cies}. */
  cieIndex: Uint32Array;
  /** Offset of the FDE's entry in the section. */
  entryOffsets: Uint32Array;
}

/** The CIEs and FDEs of one section. */
export interface CfiIndex {
  section: CfiSection;
  /** The CIEs that parsed, in section order. */
  cies: Cie[];
  fdes: FdeColumns;
}

/**
 * Counts of entries (or rows) left out or degraded, by reason. Reasons are short fixed phrases; counting
 * is a map update, done only for bad or unusual input.
 */
export class SkipCounter {
  readonly #counts = new Map<string, number>();

  /** Adds `count` to `reason`. */
  add(reason: string, count = 1): void {
    this.#counts.set(reason, (this.#counts.get(reason) ?? 0) + count);
  }

  /** The count for `reason` (0 when never added). */
  get(reason: string): number {
    return this.#counts.get(reason) ?? 0;
  }

  /** The non-zero counts, sorted by reason. */
  list(): { reason: string; count: number }[] {
    return [...this.#counts].filter(([, count]) => count > 0).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0)
      .map(([reason, count]) => ({ reason, count }));
  }
}

/** Reasons counted by {@linkcode indexCfi}. */
export const CfiSkip = {
  reservedLength: "entry with a reserved length value (rest of the section)",
  lengthPastEnd: "entry longer than the section (rest of the section)",
  shortEntry: "entry too short for its id",
  badCie: "malformed CIE",
  noCie: "FDE whose CIE pointer does not point at a CIE",
  badCieOfFde: "FDE of a malformed CIE",
  badFde: "malformed FDE header",
  addressRange: "FDE address range not representable",
  emptyRange: "FDE with an empty address range",
} as const;

const UINT32_MAX = 0xffffffff;
/** Real augmentation strings are a few characters ("zPLR", "zRS"). */
const MAX_AUGMENTATION_LENGTH = 32;
/** Code alignment factors and data alignment factors are 1..16 in practice; far larger is nonsense. */
const MAX_ALIGNMENT_FACTOR = 2 ** 31;

/**
 * Walks every entry of `section`: parses its CIEs, then decodes each FDE's header with its CIE. Entries
 * that cannot be parsed are counted in `skips` and left out; an entry whose length runs past the section
 * ends the walk (nothing after it can be found).
 *
 * @throws {RangeError} only when `section.bytes` is larger than 4 GiB (offsets are kept in 32 bits).
 */
export function indexCfi(section: CfiSection, skips: SkipCounter): CfiIndex {
  const bytes = section.bytes;
  if (bytes.length > UINT32_MAX) {
    throw new RangeError(`Cannot index CFI: the section is ${bytes.length} bytes, over 4 GiB`);
  }
  const reader = new DwarfReader(bytes);
  const cies: Cie[] = [];
  /** CIE offset -> index in `cies`, or -1 for a CIE that did not parse. */
  const cieAt = new Map<number, number>();
  const pending = new GrowableFdes(Math.min(1 << 16, (bytes.length >>> 5) + 16));
  // Two loops, each in a function of its own: V8 compiles a long loop while it runs (on-stack
  // replacement), and the code after a loop compiled so has no type feedback yet, which deoptimized the
  // whole function when the second loop started (`--v8-flags=--trace-deopt`): every session then ran it
  // in the interpreter until it was compiled again.
  walkEntries(section, reader, cies, cieAt, pending, skips);
  const fdes = new GrowableFdes(pending.length);
  decodeFdes(section, reader, cies, cieAt, pending, fdes, skips);
  return { section, cies, fdes: fdes.columns() };
}

/**
 * The first loop of {@linkcode indexCfi}: parses every CIE (into `cies` and `cieAt`) and records where
 * each FDE's body is (into `pending`).
 */
function walkEntries(
  section: CfiSection,
  reader: DwarfReader,
  cies: Cie[],
  cieAt: Map<number, number>,
  pending: GrowableFdes,
  skips: SkipCounter,
): void {
  const end = section.bytes.length;
  let pos = 0;
  const entry = new EntryHeader();
  // Each iteration moves `pos` forward by at least 4 bytes (or ends the walk), so it ends.
  while (end - pos >= 4) {
    const entryOffset = pos;
    const kind = entry.read(reader, section, pos);
    if (kind === EntryKind.Terminator) {
      if (section.stopAtTerminator) break;
      pos += 4;
      continue;
    }
    if (kind === EntryKind.Unbounded) {
      skips.add(entry.skip);
      break;
    }
    pos = entry.entryEnd;
    if (kind === EntryKind.Short) {
      skips.add(CfiSkip.shortEntry);
      continue;
    }
    if (kind === EntryKind.Cie) {
      try {
        cies.push(parseCie(reader, section, entryOffset));
        cieAt.set(entryOffset, cies.length - 1);
      } catch (error) {
        if (!(error instanceof RangeError)) throw error;
        cieAt.set(entryOffset, -1);
        skips.add(CfiSkip.badCie);
      }
      continue;
    }
    pending.push(entryOffset, reader.pos, entry.entryEnd, entry.cieOffset);
  }
}

/** The second loop of {@linkcode indexCfi}: decodes each pending FDE's range with its CIE into `fdes`. */
function decodeFdes(
  section: CfiSection,
  reader: DwarfReader,
  cies: Cie[],
  cieAt: Map<number, number>,
  pending: GrowableFdes,
  fdes: GrowableFdes,
  skips: SkipCounter,
): void {
  const bytes = section.bytes;
  const range = { start: 0, end: 0 };
  for (let i = 0; i < pending.length; i++) {
    const cieIndex = cieAt.get(pending.cieOffset[i]!);
    if (cieIndex === undefined) {
      skips.add(CfiSkip.noCie);
      continue;
    }
    const cie = cies[cieIndex];
    if (cie === undefined) {
      skips.add(CfiSkip.badCieOfFde);
      continue;
    }
    reader.reset(bytes, pending.bodyStart[i]!, pending.entryEnd[i]!);
    if (!decodeFdeRange(reader, section, cie, skips, range)) continue;
    fdes.pushFde(range.start, range.end, reader.pos, pending.entryEnd[i]!, cieIndex, pending.entryOffset[i]!);
  }
}

/**
 * Indexes only the FDEs whose entries start at `offsets` of an `.eh_frame` section, in that order (as
 * `.eh_frame_hdr` lists them): a few FDEs of a large file without walking all of it. CIEs are parsed
 * once each, into `cies` (shared by every call with the same cache). Entries that are not well-formed
 * FDEs are skipped and counted.
 */
export function indexCfiAt(
  section: CfiSection,
  offsets: ArrayLike<number>,
  cies: CieCache,
  skips: SkipCounter,
): CfiIndex {
  const bytes = section.bytes;
  const reader = new DwarfReader(bytes);
  const entry = new EntryHeader();
  const fdes = new GrowableFdes(offsets.length);
  const range = { start: 0, end: 0 };
  for (let k = 0; k < offsets.length; k++) {
    const offset = offsets[k]!;
    if (!(offset >= 0 && bytes.length - offset >= 4)) {
      skips.add(CfiSkip.badFde);
      continue;
    }
    const kind = entry.read(reader, section, offset);
    if (kind !== EntryKind.Fde) {
      skips.add(kind === EntryKind.Unbounded ? entry.skip : CfiSkip.badFde);
      continue;
    }
    const bodyEnd = reader.pos;
    const cieIndex = cies.at(section, entry.cieOffset, reader, skips);
    if (cieIndex < 0) continue;
    reader.reset(bytes, bodyEnd, entry.entryEnd);
    if (!decodeFdeRange(reader, section, cies.list[cieIndex]!, skips, range)) continue;
    fdes.pushFde(range.start, range.end, reader.pos, entry.entryEnd, cieIndex, offset);
  }
  return { section, cies: cies.list, fdes: fdes.columns() };
}

/** CIEs parsed so far from one section, by offset, for {@linkcode indexCfiAt}. */
export class CieCache {
  /** The CIEs that parsed; FDE columns index into it. */
  readonly list: Cie[] = [];
  /** CIE offset -> index in `list`, or -1 for an entry that is not a well-formed CIE. */
  readonly #at = new Map<number, number>();

  /** The index of the CIE at `offset`, parsing it on first use; -1 (counted) when there is none. */
  at(section: CfiSection, offset: number, reader: DwarfReader, skips: SkipCounter): number {
    let index = this.#at.get(offset);
    if (index === undefined) {
      index = -1;
      const entry = new EntryHeader();
      if (
        offset >= 0 && section.bytes.length - offset >= 4 &&
        entry.read(reader, section, offset) === EntryKind.Cie
      ) {
        try {
          this.list.push(parseCie(reader, section, offset));
          index = this.list.length - 1;
        } catch (error) {
          if (!(error instanceof RangeError)) throw error;
        }
      }
      this.#at.set(offset, index);
    }
    if (index < 0) skips.add(CfiSkip.noCie);
    return index;
  }
}

/** What {@linkcode EntryHeader.read} found at an offset. */
const EntryKind = { Terminator: 0, Unbounded: 1, Short: 2, Cie: 3, Fde: 4 } as const;
type EntryKind = typeof EntryKind[keyof typeof EntryKind];

/** The length and id of one CIE or FDE entry; reused from entry to entry. */
class EntryHeader {
  /** Offset one past the entry (Short, Cie, Fde). */
  entryEnd = 0;
  /** Fde: the offset of its CIE in the section. */
  cieOffset = 0;
  /** Unbounded: why. */
  skip: string = CfiSkip.lengthPastEnd;

  /**
   * Reads the entry at `pos` (at least 4 bytes before the section's end). Leaves `reader` bounded by the
   * entry and just past its id (Cie, Fde).
   */
  read(reader: DwarfReader, section: CfiSection, pos: number): EntryKind {
    const bytes = section.bytes;
    reader.reset(bytes, pos, bytes.length);
    let length = reader.u32();
    if (length === 0) return EntryKind.Terminator;
    let is64 = false;
    if (length === UINT32_MAX) {
      if (reader.remaining < 8) return this.#unbounded(CfiSkip.lengthPastEnd);
      length = reader.u64();
      is64 = true;
    } else if (length >= 0xfffffff0) {
      return this.#unbounded(CfiSkip.reservedLength);
    }
    if (!(length <= reader.remaining)) return this.#unbounded(CfiSkip.lengthPastEnd);
    const bodyStart = reader.pos;
    this.entryEnd = bodyStart + length;
    if (length < (is64 ? 8 : 4)) return EntryKind.Short;
    reader.reset(bytes, bodyStart, this.entryEnd);
    const idLow = reader.u32();
    const idHigh = is64 ? reader.u32() : 0;
    const isEh = section.kind === "eh_frame";
    if (isEh ? idLow === 0 && idHigh === 0 : idLow === UINT32_MAX && (!is64 || idHigh === UINT32_MAX)) {
      return EntryKind.Cie;
    }
    // .eh_frame: distance back from the pointer field; .debug_frame: offset from the section start.
    const pointer = idHigh * 2 ** 32 + idLow;
    this.cieOffset = isEh ? bodyStart - pointer : pointer;
    return EntryKind.Fde;
  }

  #unbounded(reason: string): EntryKind {
    this.skip = reason;
    return EntryKind.Unbounded;
  }
}

/**
 * Decodes an FDE's address range with its CIE into `out`; `reader` is just past the CIE pointer and ends
 * at the entry's end, and is left at the CFA program. Returns false (counted) for a malformed or empty
 * range.
 */
function decodeFdeRange(
  reader: DwarfReader,
  section: CfiSection,
  cie: Cie,
  skips: SkipCounter,
  out: { start: number; end: number },
): boolean {
  let start: number;
  let range: number;
  try {
    if (section.kind === "eh_frame") {
      start = reader.encodedPointer(cie.fdeEncoding, section.vaddr, section.bases, cie.addressSize);
      range = reader.encodedValue(cie.fdeEncoding & 0x0f, cie.addressSize);
    } else {
      reader.skip(cie.segmentSelectorSize);
      const format = cie.fdeEncoding & 0x0f;
      start = reader.encodedValue(format, cie.addressSize);
      range = reader.encodedValue(format, cie.addressSize);
    }
    if (cie.hasAugmentationData) reader.skip(reader.uleb128());
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    skips.add(CfiSkip.badFde);
    return false;
  }
  if (!(start >= 0 && range >= 0 && start + range <= Number.MAX_SAFE_INTEGER)) {
    skips.add(CfiSkip.addressRange);
    return false;
  }
  if (range === 0) {
    skips.add(CfiSkip.emptyRange);
    return false;
  }
  out.start = start;
  out.end = start + range;
  return true;
}

/**
 * Parses the CIE whose id field `reader` has just read (the reader is bounded by the entry's end).
 *
 * @throws {RangeError} when the CIE is malformed or uses something this reader does not support.
 */
export function parseCie(reader: DwarfReader, section: CfiSection, entryOffset: number): Cie {
  const isEh = section.kind === "eh_frame";
  const version = reader.u8();
  if (isEh ? version !== 1 && version !== 3 : version !== 1 && version !== 3 && version !== 4) {
    throw new RangeError(`Cannot parse CIE: version ${version}`);
  }
  const augmentation = reader.cstring(MAX_AUGMENTATION_LENGTH);
  let addressSize = 8;
  let segmentSelectorSize = 0;
  // GCC before 3.0 wrote an "eh" augmentation followed by a pointer.
  if (augmentation.startsWith("eh")) reader.skip(8);
  if (version >= 4) {
    addressSize = reader.u8();
    segmentSelectorSize = reader.u8();
    if (addressSize !== 4 && addressSize !== 8) {
      throw new RangeError(`Cannot parse CIE: address size ${addressSize}`);
    }
    if (segmentSelectorSize > 8) {
      throw new RangeError(`Cannot parse CIE: segment selector size ${segmentSelectorSize}`);
    }
  }
  const codeAlignment = reader.uleb128();
  const dataAlignment = reader.sleb128();
  const returnAddressRegister = version === 1 ? reader.u8() : reader.uleb128();
  if (!(codeAlignment <= MAX_ALIGNMENT_FACTOR && Math.abs(dataAlignment) <= MAX_ALIGNMENT_FACTOR)) {
    throw new RangeError(`Cannot parse CIE: alignment factors ${codeAlignment}, ${dataAlignment}`);
  }
  let fdeEncoding: number = addressSize === 4 ? DW_EH_PE.udata4 : DW_EH_PE.absptr;
  let lsdaEncoding: number = DW_EH_PE.omit;
  let signalFrame = false;
  const hasAugmentationData = augmentation.startsWith("z");
  if (hasAugmentationData) {
    const length = reader.uleb128();
    const dataStart = reader.pos;
    reader.skip(length);
    const dataEnd = reader.pos;
    const data = new DwarfReader(reader.bytes, dataStart, dataEnd);
    // Unknown letters end the parse; the data length still says where the instructions start.
    letters: for (let i = 1; i < augmentation.length; i++) {
      switch (augmentation[i]) {
        case "R":
          fdeEncoding = data.u8();
          break;
        case "L":
          lsdaEncoding = data.u8();
          break;
        case "P":
          data.skipEncodedPointer(data.u8(), addressSize);
          break;
        case "S":
          signalFrame = true;
          break;
        case "B": // AArch64 BTI
        case "G": // AArch64 MTE
          break;
        default:
          break letters;
      }
    }
  } else if (!augmentation.startsWith("eh")) {
    // Without "z" only letters that carry no data can be understood (the assembler writes "S" into
    // .debug_frame for a signal frame).
    for (const letter of augmentation) {
      if (letter === "S") signalFrame = true;
      else if (letter !== "B" && letter !== "G") {
        throw new RangeError(`Cannot parse CIE: unknown augmentation "${augmentation}"`);
      }
    }
  }
  if (!isEh && (fdeEncoding & 0x70) !== DW_EH_PE.absptr) {
    throw new RangeError(
      `Cannot parse CIE: relative FDE encoding 0x${fdeEncoding.toString(16)} in .debug_frame`,
    );
  }
  return {
    offset: entryOffset,
    version,
    augmentation,
    codeAlignment,
    dataAlignment,
    returnAddressRegister,
    fdeEncoding,
    lsdaEncoding,
    hasAugmentationData,
    signalFrame,
    addressSize,
    segmentSelectorSize,
    instructionsStart: reader.pos,
    instructionsEnd: reader.end,
  };
}

/** Columns that double when full: FDE records during the walk. */
class GrowableFdes {
  length = 0;
  starts: Float64Array;
  ends: Float64Array;
  /** During the walk: the body after the CIE pointer; after decoding: the CFA program. */
  bodyStart: Uint32Array;
  entryEnd: Uint32Array;
  /** During the walk: the CIE's offset (may be any 32-bit value, kept exactly as a double). */
  cieOffset: Float64Array;
  entryOffset: Uint32Array;

  constructor(capacity: number) {
    const size = Math.max(capacity, 16);
    this.starts = new Float64Array(size);
    this.ends = new Float64Array(size);
    this.bodyStart = new Uint32Array(size);
    this.entryEnd = new Uint32Array(size);
    this.cieOffset = new Float64Array(size);
    this.entryOffset = new Uint32Array(size);
  }

  push(entryOffset: number, bodyStart: number, entryEnd: number, cieOffset: number): void {
    const i = this.#slot();
    this.entryOffset[i] = entryOffset;
    this.bodyStart[i] = bodyStart;
    this.entryEnd[i] = entryEnd;
    this.cieOffset[i] = cieOffset;
  }

  pushFde(start: number, end: number, program: number, programEnd: number, cie: number, entry: number): void {
    const i = this.#slot();
    this.starts[i] = start;
    this.ends[i] = end;
    this.bodyStart[i] = program;
    this.entryEnd[i] = programEnd;
    this.cieOffset[i] = cie;
    this.entryOffset[i] = entry;
  }

  columns(): FdeColumns {
    const n = this.length;
    const cieIndex = new Uint32Array(n);
    for (let i = 0; i < n; i++) cieIndex[i] = this.cieOffset[i]!;
    return {
      length: n,
      starts: this.starts.slice(0, n),
      ends: this.ends.slice(0, n),
      instructionsStart: this.bodyStart.slice(0, n),
      instructionsEnd: this.entryEnd.slice(0, n),
      cieIndex,
      entryOffsets: this.entryOffset.slice(0, n),
    };
  }

  #slot(): number {
    if (this.length === this.starts.length) {
      const size = this.length * 2;
      this.starts = grow(this.starts, new Float64Array(size));
      this.ends = grow(this.ends, new Float64Array(size));
      this.bodyStart = grow(this.bodyStart, new Uint32Array(size));
      this.entryEnd = grow(this.entryEnd, new Uint32Array(size));
      this.cieOffset = grow(this.cieOffset, new Float64Array(size));
      this.entryOffset = grow(this.entryOffset, new Uint32Array(size));
    }
    return this.length++;
  }
}

function grow<T extends Float64Array | Uint32Array>(old: T, bigger: T): T {
  bigger.set(old);
  return bigger;
}

/**
 * The binary search table of `.eh_frame_hdr` (the PT_GNU_EH_FRAME segment): one (initial location, FDE
 * address) pair per FDE of `.eh_frame`, sorted by location, which the linker writes so that a runtime
 * unwinder finds the FDE of an address without walking the section. The profiler uses it the same way,
 * to read only the FDEs of the pages a profile runs in.
 *
 * Only the table encoding that linkers write (`datarel | sdata4`: 32-bit offsets from the header) is
 * read; a file with another, or with a table that is not sorted or runs past its segment, has none here
 * (its whole `.eh_frame` is walked instead).
 *
 * @example
 * ```ts
 * import { ElfFile } from "../elf/elf_file.ts";
 * import { EhFrameHeader } from "./eh_frame_hdr.ts";
 * using elf = ElfFile.open("/bin/true");
 * const header = EhFrameHeader.read(elf);
 * if (header !== null) {
 *   const i = header.find(elf.entry);
 *   console.log(header.count, i >= 0 ? header.fdeAddress(i).toString(16) : "no FDE");
 * }
 * ```
 *
 * @module
 */
import { DW_EH_PE, DwarfReader } from "../elf/dwarf_reader.ts";
import type { ElfFile } from "../elf/elf_file.ts";

/** The program header of `.eh_frame_hdr`. */
export const PT_GNU_EH_FRAME = 0x6474e550;
const TABLE_ENCODING = DW_EH_PE.datarel | DW_EH_PE.sdata4;
const ENTRY_SIZE = 8;

/** The search table of one file's `.eh_frame_hdr`. */
export class EhFrameHeader {
  /** The address `.eh_frame` is loaded at, as the header says. */
  readonly ehFrameAddress: number;
  /** Entries in the table. */
  readonly count: number;
  readonly #view: DataView;
  /** Where the table starts in `#view`. */
  readonly #table: number;
  /** The header's address: table values are offsets from it. */
  readonly #base: number;

  private constructor(view: DataView, table: number, base: number, count: number, ehFrameAddress: number) {
    this.#view = view;
    this.#table = table;
    this.#base = base;
    this.count = count;
    this.ehFrameAddress = ehFrameAddress;
  }

  /** The search table of `elf`, or null when it has none that can be used (see the module doc). */
  static read(elf: ElfFile): EhFrameHeader | null {
    const segment = elf.programHeaders.find((p) => p.type === PT_GNU_EH_FRAME);
    if (segment === undefined || segment.filesz < 12) return null;
    const bytes = elf.read(segment.offset, segment.filesz);
    if (bytes[2] === DW_EH_PE.omit || bytes[3] !== TABLE_ENCODING) return null;
    const reader = new DwarfReader(bytes, 4);
    let ehFrameAddress: number | null;
    let count: number;
    try {
      ehFrameAddress = ehFramePointer(bytes, segment.vaddr, reader);
      if (ehFrameAddress === null) return null;
      count = reader.encodedPointer(bytes[2]!, segment.vaddr, { data: segment.vaddr });
    } catch (error) {
      if (error instanceof RangeError) return null;
      throw error;
    }
    const table = reader.pos;
    if (
      !(Number.isSafeInteger(ehFrameAddress) && count >= 0 && count <= (bytes.length - table) / ENTRY_SIZE)
    ) {
      return null;
    }
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    const header = new EhFrameHeader(view, table, segment.vaddr, count, ehFrameAddress);
    // A search needs the order; checking it costs one pass over 8 bytes per FDE.
    for (let i = 1; i < count; i++) {
      if (header.location(i) < header.location(i - 1)) return null;
    }
    return header;
  }

  /** The first address covered by the FDE of entry `i`. */
  location(i: number): number {
    return this.#base + this.#view.getInt32(this.#table + i * ENTRY_SIZE, true);
  }

  /** The address of entry `i`'s FDE (subtract {@linkcode ehFrameAddress} for its section offset). */
  fdeAddress(i: number): number {
    return this.#base + this.#view.getInt32(this.#table + i * ENTRY_SIZE + 4, true);
  }

  /** The last entry whose location is at or below `address`, or -1 when every one is above it. */
  find(address: number): number {
    let low = 0;
    let high = this.count;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (this.location(mid) <= address) low = mid + 1;
      else high = mid;
    }
    return low - 1;
  }
}

/**
 * Where `.eh_frame` starts, as the header `bytes` (loaded at `vaddr`) says, or null when the header
 * omits it. `reader` (over `bytes`, at byte 4) is left at the field after the pointer.
 *
 * @throws {RangeError} for a header of another version than 1, or a pointer that is not an address.
 */
export function ehFramePointer(
  bytes: Uint8Array,
  vaddr: number,
  reader = new DwarfReader(bytes, 4),
): number | null {
  if (bytes[0] !== 1) throw new RangeError(`.eh_frame_hdr version ${bytes[0]}`);
  if (bytes[1] === DW_EH_PE.omit) return null;
  const address = reader.encodedPointer(bytes[1]!, vaddr, { data: vaddr });
  if (Number.isNaN(address)) throw new RangeError(".eh_frame_hdr points outside the address space");
  return address;
}

/**
 * Where the function holding an address starts and ends, from the file's unwind entries (the FDEs of
 * `.eh_frame`, found through `.eh_frame_hdr`), for code that no symbol names: the static functions of a
 * stripped binary such as Debian's packaged interpreters. Every FDE covers one function, so the samples of
 * one unnamed function can be shown as one frame instead of one per address.
 *
 * @example
 * ```ts
 * import { ElfFile } from "../elf/elf_file.ts";
 * import { FunctionBounds } from "./function_bounds.ts";
 * using elf = ElfFile.open("/bin/true");
 * const bounds = FunctionBounds.read(elf);
 * console.log(bounds?.find(elf.entry)); // { start: ..., end: ... } or null
 * ```
 *
 * @module
 */
import type { ElfFile } from "../elf/elf_file.ts";
import { type CfiSection, CieCache, indexCfiAt, SkipCounter } from "../unwind/cfi.ts";
import { EhFrameHeader } from "../unwind/eh_frame_hdr.ts";
import { ehFrameSection } from "../unwind/unwind_table.ts";

/** The range of one function: [start, end) in ELF virtual addresses. */
export interface FunctionRange {
  start: number;
  end: number;
}

/** The FDEs of one file, looked up one at a time. */
export class FunctionBounds {
  readonly #header: EhFrameHeader;
  readonly #section: CfiSection;
  readonly #cies = new CieCache();
  readonly #skips = new SkipCounter();
  readonly #offsets = new Float64Array(1);

  private constructor(header: EhFrameHeader, section: CfiSection) {
    this.#header = header;
    this.#section = section;
  }

  /**
   * The FDEs of `elf`, or null when it has no `.eh_frame_hdr` search table for its `.eh_frame`.
   *
   * @throws {RangeError} when `.eh_frame` lies outside the file.
   */
  static read(elf: ElfFile): FunctionBounds | null {
    const header = EhFrameHeader.read(elf);
    if (header === null || header.count === 0) return null;
    const section = ehFrameSection(elf);
    if (section === null || section.vaddr !== header.ehFrameAddress) return null;
    return new FunctionBounds(header, section);
  }

  /** Bytes retained (the search table is a view of its segment, `.eh_frame` a copy). */
  get byteSize(): number {
    return this.#section.bytes.byteLength + this.#header.count * 8;
  }

  /** The function whose FDE covers `vaddr`, or null (code between functions, or no CFI there). */
  find(vaddr: number): FunctionRange | null {
    const i = this.#header.find(vaddr);
    if (i < 0) return null;
    this.#offsets[0] = this.#header.fdeAddress(i) - this.#header.ehFrameAddress;
    const { fdes } = indexCfiAt(this.#section, this.#offsets, this.#cies, this.#skips);
    if (fdes.length !== 1) return null;
    const start = fdes.starts[0]!;
    const end = fdes.ends[0]!;
    return start <= vaddr && vaddr < end ? { start, end } : null;
  }
}

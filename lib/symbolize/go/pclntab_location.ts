/**
 * Where a Go binary keeps its `.gopclntab`: the section of that name (`.data.rel.ro.gopclntab` in a
 * position-independent executable), or, in a binary without that section (section headers removed), the
 * place in its non-executable segments that starts with a pclntab header (magic, two zero bytes, a
 * quantum of 1, 2 or 4, 8-byte pointers) and parses as one. Segments are scanned only in a binary that
 * carries Go's build ID note, so the libraries of every process are not read whole for nothing.
 *
 * @example
 * ```ts
 * import { ElfFile } from "../../elf/elf_file.ts";
 * import { findPclntab } from "./pclntab_location.ts";
 * using elf = ElfFile.open("/bin/true");
 * console.log(findPclntab(elf)); // null: not a Go binary
 * ```
 *
 * @module
 */

import { type ElfFile, PF_X, PT_NOTE, SHT_NOBITS } from "../../elf/elf_file.ts";
import { parseNotes } from "../../elf/notes.ts";
import type { LoadedBytes } from "./inline_tree.ts";
import { Pclntab } from "./pclntab.ts";

/** The section names Go's linker gives the table. */
const SECTION_NAMES = [".gopclntab", ".data.rel.ro.gopclntab"];
/** Go's build ID note: owner "Go", type 4 (`ELF_NOTE_GOBUILDID_TAG` in cmd/link). */
const GO_BUILD_ID_NOTE = 4;
/** Note areas hold a few small notes. */
const MAX_NOTE_BYTES = 1 << 16;

/**
 * The `.gopclntab` of `elf` and the address it is loaded at, or null when the binary has none (not a
 * Go binary, or one whose table is not found).
 *
 * @throws {RangeError} when the table's section lies outside the file or exceeds the read budget.
 */
export function findPclntab(elf: ElfFile): LoadedBytes | null {
  for (const name of SECTION_NAMES) {
    const section = elf.section(name);
    if (section === undefined || section.type === SHT_NOBITS || section.size < 8) continue;
    return { vaddr: section.addr, bytes: elf.readSection(section) };
  }
  return hasGoBuildId(elf) ? scanSegments(elf) : null;
}

/** Whether a note segment of `elf` holds Go's build ID. */
export function hasGoBuildId(elf: ElfFile): boolean {
  for (const header of elf.programHeaders) {
    if (header.type !== PT_NOTE || header.filesz > MAX_NOTE_BYTES) continue;
    let bytes: Uint8Array;
    try {
      bytes = elf.read(header.offset, header.filesz);
    } catch (error) {
      if (error instanceof RangeError) continue;
      throw error;
    }
    for (const note of parseNotes(bytes, header.align)) {
      if (note.name === "Go" && note.type === GO_BUILD_ID_NOTE) return true;
    }
  }
  return false;
}

/** The first place in a non-executable segment that parses as a pclntab. */
function scanSegments(elf: ElfFile): LoadedBytes | null {
  for (const segment of elf.loadSegments) {
    if ((segment.flags & PF_X) !== 0 || segment.filesz < 8) continue;
    let bytes: Uint8Array;
    try {
      bytes = elf.read(segment.offset, segment.filesz);
    } catch (error) {
      // A segment outside the file or over the budget holds nothing this can read.
      if (error instanceof RangeError) continue;
      throw error;
    }
    // The table is pointer-aligned in memory; file offsets and addresses agree modulo the page size.
    const first = (8 - (segment.vaddr % 8)) % 8;
    for (let at = first; at + 8 <= bytes.length; at += 8) {
      if (bytes[at + 1] !== 0xff || bytes[at + 2] !== 0xff || bytes[at + 3] !== 0xff) continue;
      const candidate = bytes.subarray(at);
      if (Pclntab.versionOf(candidate) === null) continue;
      if (parses(candidate)) return { vaddr: segment.vaddr + at, bytes: candidate };
    }
  }
  return null;
}

/** Whether `bytes` hold a pclntab whose header and first function record agree. */
function parses(bytes: Uint8Array): boolean {
  try {
    const table = Pclntab.parse(bytes, null);
    if (table.functionCount === 0) return false;
    table.func(0);
    return true;
  } catch (error) {
    if (error instanceof RangeError) return false;
    throw error;
  }
}

/**
 * ELF note and `.gnu_debuglink` decoding: the GNU build ID that names a binary across machines, and the
 * link from a stripped binary to its separate debug file. The input is the raw bytes of a note segment or
 * section (hostile: every length is checked before use).
 *
 * @example
 * ```ts
 * import { findGnuBuildId } from "./notes.ts";
 * const notes = Deno.readFileSync("/sys/kernel/notes");
 * console.log(findGnuBuildId(notes, 4)); // "3c1f..." or ""
 * ```
 *
 * @module
 */

/** Note type of the GNU build ID (`NT_GNU_BUILD_ID`). */
export const NT_GNU_BUILD_ID = 3;

/** One ELF note. `name` excludes the terminating NUL; `desc` shares memory with the input. */
export interface ElfNote {
  name: string;
  type: number;
  desc: Uint8Array;
}

/** A `.gnu_debuglink` reference: the debug file's base name and the CRC-32 of its whole content. */
export interface DebugLink {
  fileName: string;
  crc32: number;
}

const latin1 = new TextDecoder("latin1");
const utf8 = new TextDecoder("utf-8", { fatal: false });

/**
 * Iterates the notes in `bytes` (a PT_NOTE segment or SHT_NOTE section). `align` is the segment's
 * alignment: 8 for `.note.gnu.property`-style notes, 4 otherwise. A truncated note ends the iteration: a
 * note area is advisory and a damaged tail must not hide the notes before it.
 */
export function* parseNotes(bytes: Uint8Array, align: number): Generator<ElfNote> {
  const a = align === 8 ? 8 : 4;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let pos = 0;
  // Each iteration advances by at least 12 bytes, so the loop ends.
  while (pos + 12 <= bytes.length) {
    const nameSize = view.getUint32(pos, true);
    const descSize = view.getUint32(pos + 4, true);
    const type = view.getUint32(pos + 8, true);
    const nameStart = pos + 12;
    // Padding aligns offsets within the (aligned) note area, not lengths: with 8-byte alignment the
    // 12-byte header plus a 4-byte name needs no padding.
    const descStart = roundUp(nameStart + nameSize, a);
    const descEnd = descStart + descSize;
    if (descStart > bytes.length || descEnd > bytes.length) return;
    // The name includes its NUL terminator in `nameSize`.
    let nameEnd = nameStart + nameSize;
    while (nameEnd > nameStart && bytes[nameEnd - 1] === 0) nameEnd--;
    yield {
      name: latin1.decode(bytes.subarray(nameStart, nameEnd)),
      type,
      desc: bytes.subarray(descStart, descEnd),
    };
    pos = roundUp(descEnd, a);
  }
}

/** Returns the GNU build ID in `bytes` (a note area) as lowercase hex, or "" when there is none. */
export function findGnuBuildId(bytes: Uint8Array, align: number): string {
  for (const note of parseNotes(bytes, align)) {
    if (note.type === NT_GNU_BUILD_ID && note.name === "GNU" && note.desc.length > 0) {
      return toHex(note.desc);
    }
  }
  return "";
}

/**
 * Decodes a `.gnu_debuglink` section: a NUL-terminated file name, padding to 4 bytes, a little-endian
 * CRC-32. Returns null when the section is malformed or the name is not a plain base name (a link is
 * looked up in fixed directories, so a name with `/` or `..` would let a binary point the profiler, which
 * runs as root, at an arbitrary file).
 */
export function parseDebugLink(bytes: Uint8Array): DebugLink | null {
  const nul = bytes.indexOf(0);
  if (nul <= 0) return null;
  const crcOffset = roundUp(nul + 1, 4);
  if (crcOffset + 4 > bytes.length) return null;
  const fileName = utf8.decode(bytes.subarray(0, nul));
  if (fileName.includes("/") || fileName === "." || fileName === ".." || fileName.includes("\uFFFD")) {
    return null;
  }
  const crc32 = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(crcOffset, true);
  return { fileName, crc32 };
}

/** Lowercase hex of `bytes`. */
export function toHex(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += (b < 16 ? "0" : "") + b.toString(16);
  return out;
}

function roundUp(value: number, align: number): number {
  return Math.ceil(value / align) * align;
}

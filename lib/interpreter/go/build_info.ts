/**
 * The Go version a binary was built with, from its `.go.buildinfo` section (kept by `-ldflags="-s -w"`,
 * which strips only the symbol table and DWARF). Go 1.18 and later write the version string inline after
 * the section's 32-byte header; earlier versions write pointers to a Go string header elsewhere in the
 * binary, followed here through the load segments.
 *
 * The binary is hostile input: anything malformed reads as null.
 *
 * @example
 * ```ts ignore
 * import { ElfFile } from "../../elf/elf_file.ts";
 * import { readGoBuildVersion } from "./build_info.ts";
 * using elf = ElfFile.open("./server");
 * console.log(readGoBuildVersion(elf)); // { major: 1, minor: 19, text: "go1.19.8" }
 * ```
 *
 * @module
 */
import { type ElfFile, SHT_NOBITS } from "../../elf/elf_file.ts";
import { readElfBytes } from "../elf_symbols.ts";

/** A Go release, as `runtime.Version()` names it. */
export interface GoVersion {
  readonly major: number;
  readonly minor: number;
  /** The whole version string, e.g. "go1.19.8" or "devel go1.24-abcdef". */
  readonly text: string;
}

const BUILD_INFO_SECTION = ".go.buildinfo";
/** "\xff Go buildinf:" */
const MAGIC = [0xff, 0x20, 0x47, 0x6f, 0x20, 0x62, 0x75, 0x69, 0x6c, 0x64, 0x69, 0x6e, 0x66, 0x3a];
const HEADER_BYTES = 32;
/** Header flag: the version and module strings follow the header (Go 1.18+). */
const FLAG_INLINE_STRINGS = 0x2;
const FLAG_BIG_ENDIAN = 0x1;
/** Longer than any version string Go writes; a bound on a hostile length. */
const MAX_VERSION_BYTES = 256;
const decoder = new TextDecoder();

/** Whether `elf` has a `.go.buildinfo` section (a cheap test of every mapped file). */
export function hasGoBuildInfo(elf: ElfFile): boolean {
  const section = elf.section(BUILD_INFO_SECTION);
  return section !== undefined && section.type !== SHT_NOBITS && section.size >= HEADER_BYTES;
}

/** The Go version of `elf`, or null when it has no readable `.go.buildinfo`. */
export function readGoBuildVersion(elf: ElfFile): GoVersion | null {
  if (!hasGoBuildInfo(elf)) return null;
  try {
    const section = elf.section(BUILD_INFO_SECTION)!;
    const bytes = elf.read(section.offset, Math.min(section.size, HEADER_BYTES + MAX_VERSION_BYTES + 10));
    const text = versionText(elf, bytes);
    return text === null ? null : parseGoVersion(text);
  } catch (error) {
    if (error instanceof RangeError) return null;
    throw error;
  }
}

/**
 * The release `text` names ("go1.19.8", "go1.24rc1", "devel go1.24-abcdef ..."), or null.
 */
export function parseGoVersion(text: string): GoVersion | null {
  const match = /(?:^|\s)go(\d+)\.(\d+)/.exec(text);
  if (match === null) return null;
  return { major: Number(match[1]), minor: Number(match[2]), text };
}

function versionText(elf: ElfFile, bytes: Uint8Array): string | null {
  if (bytes.length < HEADER_BYTES || MAGIC.some((byte, i) => bytes[i] !== byte)) return null;
  const pointerSize = bytes[14]!;
  const flags = bytes[15]!;
  if (flags & FLAG_INLINE_STRINGS) {
    const length = uvarint(bytes, HEADER_BYTES);
    if (length === null || length.value > MAX_VERSION_BYTES) return null;
    const start = HEADER_BYTES + length.bytes;
    if (start + length.value > bytes.length) return null;
    return decoder.decode(bytes.subarray(start, start + length.value));
  }
  // Before 1.18: at 16, a pointer to the version's string header {data, len}.
  if (pointerSize !== 8 || (flags & FLAG_BIG_ENDIAN)) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const header = readElfBytes(elf, Number(view.getBigUint64(16, true)), 16);
  const headerView = new DataView(header.buffer, header.byteOffset, header.byteLength);
  const data = Number(headerView.getBigUint64(0, true));
  const length = Number(headerView.getBigUint64(8, true));
  if (length > MAX_VERSION_BYTES) return null;
  return decoder.decode(readElfBytes(elf, data, length));
}

/** An unsigned LEB128 varint at `pos`, or null when it runs past `bytes` or 32 bits. */
function uvarint(bytes: Uint8Array, pos: number): { value: number; bytes: number } | null {
  let value = 0;
  for (let i = 0; i < 5 && pos + i < bytes.length; i++) {
    const byte = bytes[pos + i]!;
    value += (byte & 0x7f) * 2 ** (7 * i);
    if ((byte & 0x80) === 0) return { value, bytes: i + 1 };
  }
  return null;
}

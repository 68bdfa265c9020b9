/**
 * The CPython version an interpreter file was built as, read from the file itself, so that a renamed
 * interpreter or one linked into another program is read with the right layout table:
 *
 * 1. `Py_Version` (3.11+): the build's `PY_VERSION_HEX`, a constant in read-only data.
 * 2. `Py_GetVersion`'s own code (all versions): the function formats `"%.80s (%.80s) %.80s"` with the
 *    `PY_VERSION` string literal ("3.10.13") as an argument, loaded by a RIP-relative `lea` (position-
 *    independent code) or a `mov` of a 32-bit absolute address (Debian's non-PIE `python3.11`). Every such
 *    operand of the function's bytes that points at file-backed data reading as a version is taken; the
 *    answer stands when they all agree. No other literal of the function (the format, the build info's
 *    date) reads as `N.N.N`.
 * 3. The file name (`python3.10`, `libpython3.10.so.1.0`), which says only major.minor.
 *
 * @example
 * ```ts ignore
 * import { versionFromGetVersionCode, versionFromPyVersion } from "./build_version.ts";
 * const symbols = findElfSymbols(elf, ["Py_Version", "Py_GetVersion"]);
 * versionFromPyVersion(elf, symbols.get("Py_Version")!); // { major: 3, minor: 11, micro: 2 }
 * versionFromGetVersionCode(elf, symbols.get("Py_GetVersion")!); // the same, from the string literal
 * ```
 *
 * @module
 */
import type { ElfFile } from "../../elf/elf_file.ts";
import type { Address } from "../../types.ts";
import { type ElfSymbol, readElfBytes } from "../elf_symbols.ts";
import { type PythonVersion, versionFromHex } from "./offsets.ts";

const LIBPYTHON_NAME = /^(?:.*\/)?libpython(\d)\.(\d+)[^/]*$/;
const PYTHON_NAME = /^(?:.*\/)?python(\d)\.(\d+)(?:d|m|dm)?$/;
/** `PY_VERSION`: "3.10.13", "3.12.0a1", "3.13.0rc2", and "+" after a development build's. */
const PY_VERSION = /^(\d{1,2})\.(\d{1,3})\.(\d{1,3})(?:(?:a|b|rc)\d{1,3})?\+?\0/;
/** Longest `PY_VERSION` read, with its NUL. */
const PY_VERSION_BYTES = 16;
/** `Py_GetVersion` is a few dozen bytes; a symbol larger than this is not that function. */
const MAX_FUNCTION_BYTES = 4096;
const latin1 = new TextDecoder("latin1");

/** The major.minor version a file name announces (`python3.11`, `libpython3.12.so.1.0`), or null. */
export function pythonVersionFromName(path: string): PythonVersion | null {
  const match = LIBPYTHON_NAME.exec(path) ?? PYTHON_NAME.exec(path);
  if (match === null) return null;
  return { major: Number(match[1]), minor: Number(match[2]), micro: -1 };
}

/**
 * The version `Py_Version` holds, or null when the symbol is too small to hold one.
 *
 * @throws {RangeError} when the symbol is not file-backed data.
 */
export function versionFromPyVersion(elf: ElfFile, symbol: ElfSymbol): PythonVersion | null {
  if (symbol.size < 4) return null;
  const bytes = readElfBytes(elf, symbol.value, 4);
  return versionFromHex(new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true));
}

/**
 * The version in the `PY_VERSION` literal that `Py_GetVersion` (`symbol`) loads, or null when none of
 * its operands points at one, or they disagree.
 *
 * @throws {RangeError} when the function's code is not file-backed.
 */
export function versionFromGetVersionCode(elf: ElfFile, symbol: ElfSymbol): PythonVersion | null {
  if (symbol.size === 0 || symbol.size > MAX_FUNCTION_BYTES) return null;
  const code = readElfBytes(elf, symbol.value, symbol.size);
  const view = new DataView(code.buffer, code.byteOffset, code.byteLength);
  const found = new Map<string, PythonVersion>();
  for (let i = 0; i + 4 <= code.length; i++) {
    for (const target of operandTargets(code, view, i, symbol.value)) {
      const version = versionStringAt(elf, target);
      if (version !== null) found.set(`${version.major}.${version.minor}.${version.micro}`, version);
    }
  }
  return found.size === 1 ? [...found.values()][0]! : null;
}

/**
 * The addresses an instruction ending with a 32-bit operand at `code[i..i+4]` may load: a RIP-relative
 * `lea` (`REX.W 8d modrm` with mod 00, r/m 101) or a `mov` of an immediate into a 32-bit register
 * (`b8+r`, `41 b8+r`) or into a 64-bit one, sign-extended (`48/49 c7 c0+r`). Every byte offset is tried:
 * an operand found inside another instruction's bytes points at a version string by chance only.
 */
function operandTargets(code: Uint8Array, view: DataView, i: number, functionStart: number): number[] {
  const out: number[] = [];
  const at = (k: number) => code[i - k] ?? -1;
  const rexW = (byte: number) => byte === 0x48 || byte === 0x4c;
  if ((at(1) & 0xc7) === 0x05 && at(2) === 0x8d && rexW(at(3))) {
    // The displacement counts from the end of the instruction, which ends with it.
    out.push(functionStart + i + 4 + view.getInt32(i, true));
  }
  const imm = view.getUint32(i, true);
  if ((at(1) & 0xf8) === 0xb8) out.push(imm);
  if ((at(1) & 0xf8) === 0xc0 && at(2) === 0xc7 && (at(3) === 0x48 || at(3) === 0x49)) {
    out.push(view.getInt32(i, true));
  }
  return out;
}

/** The version spelled by the NUL-terminated string at `vaddr`, or null. */
function versionStringAt(elf: ElfFile, vaddr: number): PythonVersion | null {
  if (vaddr <= 0) return null;
  const offset = elf.vaddrToFileOffset(vaddr as Address);
  if (offset === null) return null;
  // The string may end near the end of its segment: read what the segment holds.
  const segment = elf.loadSegments.find((s) => vaddr >= s.vaddr && vaddr - s.vaddr < s.filesz);
  if (segment === undefined) return null;
  const length = Math.min(PY_VERSION_BYTES, segment.vaddr + segment.filesz - vaddr);
  const match = PY_VERSION.exec(latin1.decode(elf.read(offset, length)));
  if (match === null) return null;
  return { major: Number(match[1]), minor: Number(match[2]), micro: Number(match[3]) };
}

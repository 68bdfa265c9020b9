/**
 * The dynamic section of an ELF file: the libraries it needs (DT_NEEDED) and its search paths, enough
 * to find the shared libraries a program will map before it runs.
 *
 * @example
 * ```ts ignore
 * using elf = ElfFile.open("/usr/bin/ls");
 * neededLibraries(elf); // ["libm.so.6", "libz.so.1", ..., "libc.so.6"]
 * ```
 *
 * @module
 */
import type { ElfFile } from "./elf_file.ts";

const DT_NULL = 0;
const DT_NEEDED = 1;
const DT_RPATH = 15;
const DT_RUNPATH = 29;
const ENTRY_SIZE = 16;

/** The DT_NEEDED names and DT_RUNPATH/DT_RPATH folders of a dynamically linked file. */
export function dynamicInfo(elf: ElfFile): { needed: string[]; searchPaths: string[] } {
  const dynamic = elf.section(".dynamic");
  const strings = elf.section(".dynstr");
  if (!dynamic || !strings) return { needed: [], searchPaths: [] };
  const bytes = elf.readSection(dynamic);
  const table = elf.readSection(strings);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const decoder = new TextDecoder();
  const text = (offset: number): string => {
    if (offset >= table.length) throw new RangeError(`Cannot read .dynstr of ${elf.name}: offset ${offset}`);
    const end = table.indexOf(0, offset);
    return decoder.decode(table.subarray(offset, end < 0 ? table.length : end));
  };
  const needed: string[] = [];
  const searchPaths: string[] = [];
  for (let at = 0; at + ENTRY_SIZE <= bytes.length; at += ENTRY_SIZE) {
    const tag = view.getUint32(at, true) + view.getInt32(at + 4, true) * 0x100000000;
    if (tag === DT_NULL) break;
    const value = view.getUint32(at + 8, true);
    if (tag === DT_NEEDED) needed.push(text(value));
    else if (tag === DT_RUNPATH || tag === DT_RPATH) searchPaths.push(...text(value).split(":"));
  }
  return { needed, searchPaths };
}

/** The folders the dynamic loader searches by default on Debian (x86-64). */
export const DEFAULT_LIBRARY_DIRS = [
  "/lib/x86_64-linux-gnu",
  "/usr/lib/x86_64-linux-gnu",
  "/lib64",
  "/usr/lib64",
  "/lib",
  "/usr/lib",
];

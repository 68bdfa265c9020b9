/**
 * The module data of a Go binary (`runtime.firstmoduledata`, Go's `moduledata` in
 * `src/runtime/symtab.go`), for the two addresses the `.gopclntab` header does not give: `text`, the
 * start of the code that function entries count from (the header holds 0 from Go 1.26), and `gofunc`,
 * the base of the funcdata offsets from Go 1.18, where the inline trees are. Without a symbol table the
 * structure is found by what it holds: its first word is the address of the pclntab and its second the
 * address of the function name table inside it. It lies in `.go.module` (Go 1.26), else `.noptrdata`,
 * else, without section headers, in any non-executable segment.
 *
 * Field offsets (64-bit): `text` at 176 from Go 1.16 on; `gofunc` at 304 in Go 1.18-1.19 and at 320 from
 * Go 1.20 (which added `covctrs` and `ecovctrs` before it), after `rodata`.
 *
 * @example
 * ```ts ignore
 * import { findModuleData } from "./module_data.ts";
 * console.log(findModuleData(elf, pclntab, pclntabVaddr)); // { text, gofunc } or null
 * ```
 *
 * @module
 */

import { type ElfFile, PF_X, SHT_NOBITS } from "../../elf/elf_file.ts";
import type { Pclntab } from "./pclntab.ts";

/** What is read from the module data. */
export interface ModuleData {
  /** Start of the module's code. */
  text: number;
  /** Base address of funcdata offsets (Go 1.18+); null before Go 1.18 or when it does not check out. */
  gofunc: number | null;
}

const TEXT_OFFSET = 176;
const GOFUNC_OFFSETS = { "1.16": null, "1.18": 304, "1.20": 320 } as const;
const TWO_POW_32 = 4294967296;

/**
 * The module data of `elf`, whose pclntab `pclntab` is loaded at `pclntabVaddr`; null when it is not
 * found or its text address does not check out.
 */
export function findModuleData(elf: ElfFile, pclntab: Pclntab, pclntabVaddr: number): ModuleData | null {
  const gofuncAt = GOFUNC_OFFSETS[pclntab.version];
  const size = (gofuncAt ?? TEXT_OFFSET) + 8;
  const funcnametab = pclntabVaddr + pclntab.funcnameOffset;
  for (const bytes of areas(elf)) {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (let at = 0; at + size <= bytes.length; at += 8) {
      if (u64(view, at) !== pclntabVaddr || u64(view, at + 8) !== funcnametab) continue;
      const text = u64(view, at + TEXT_OFFSET);
      if (pclntab.textStart !== 0 && text !== pclntab.textStart) continue;
      if (!isLoaded(elf, text, true)) continue;
      let gofunc: number | null = null;
      if (gofuncAt !== null) {
        const candidate = u64(view, at + gofuncAt);
        const rodata = u64(view, at + gofuncAt - 8);
        if (rodata <= candidate && isLoaded(elf, candidate, false)) gofunc = candidate;
      }
      return { text, gofunc };
    }
  }
  return null;
}

/** Whether `vaddr` is inside a segment's file content, executable or not as asked. */
export function isLoaded(elf: ElfFile, vaddr: number, executable: boolean): boolean {
  return elf.loadSegments.some((s) =>
    ((s.flags & PF_X) !== 0) === executable && vaddr >= s.vaddr && vaddr - s.vaddr < s.filesz
  );
}

/** The bytes to search, most likely first; areas that cannot be read are left out. */
function* areas(elf: ElfFile): Generator<Uint8Array> {
  const named = [".go.module", ".noptrdata"].map((name) => elf.section(name))
    .filter((s) => s !== undefined && s.type !== SHT_NOBITS && s.size > 0);
  const ranges = named.length > 0
    ? named.map((s) => ({ offset: s!.offset, size: s!.size }))
    : elf.loadSegments.filter((s) => (s.flags & PF_X) === 0).map((s) => ({
      offset: s.offset,
      size: s.filesz,
    }));
  for (const range of ranges) {
    try {
      yield elf.read(range.offset, range.size);
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
    }
  }
}

function u64(view: DataView, at: number): number {
  return view.getUint32(at + 4, true) * TWO_POW_32 + view.getUint32(at, true);
}

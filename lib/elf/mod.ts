/**
 * ELF reading: headers, sections, segments, notes and symbol tables of hostile binaries.
 *
 * @example
 * ```ts
 * import { ElfFile } from "./mod.ts";
 * using elf = ElfFile.open("/bin/true");
 * console.log(elf.buildId());
 * ```
 *
 * @module
 */

export * from "./elf_file.ts";
export * from "./notes.ts";

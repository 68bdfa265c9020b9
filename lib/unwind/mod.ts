/**
 * Native unwinding data: call-frame information (`.eh_frame`, `.debug_frame`) read from hostile ELF
 * files and turned into an address-sorted table of x86-64 unwind rules for the BPF unwinder.
 *
 * @example
 * ```ts
 * import { ElfFile } from "../elf/elf_file.ts";
 * import { extractUnwindTable } from "./mod.ts";
 * using elf = ElfFile.open("/bin/true");
 * const table = extractUnwindTable(elf);
 * console.log(table.length, table.fdeCount, table.skipped);
 * ```
 *
 * @module
 */

export * from "./cfa_interpreter.ts";
export * from "./cfi.ts";
export * from "./eh_frame_hdr.ts";
export * from "./unwind_table.ts";

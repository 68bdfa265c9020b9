/**
 * Host-side symbolization: ELF symbol tables, separate debug files, native frames, kernel symbols (named
 * through BPF, or from /proc/kallsyms) and C++/Rust demangling.
 *
 * @example
 * ```ts
 * import { NativeSymbolizer } from "./mod.ts";
 * import type { Address } from "../types.ts";
 * using symbolizer = new NativeSymbolizer();
 * console.log(symbolizer.symbolize("/bin/true", 0x2a40 as Address));
 * ```
 *
 * @module
 */

export * from "./symbol_table.ts";
export * from "./debug_file.ts";
export * from "./native.ts";
export * from "./kallsyms.ts";
export * from "./bpf_kernel_names.ts";
export * from "./demangle.ts";

/**
 * Interpreter plug-ins: the interface every runtime implements (Loader -> Data per file -> Instance per
 * process), the host-side helpers they share (reading another process's memory, ELF data symbols, glibc
 * thread layout), and the runtimes themselves (`python/`).
 *
 * @example
 * ```ts ignore
 * import { LoaderInfo, MemoryEbpfHandler, pythonLoader } from "./mod.ts";
 * using info = new LoaderInfo({ fileId, fileName: mapping.path });
 * const data = pythonLoader(new MemoryEbpfHandler(), info);
 * ```
 *
 * @module
 */

export * from "./interpreter.ts";
export * from "./remote_memory.ts";
export * from "./elf_symbols.ts";
export * from "./glibc_threads.ts";
export * from "./process_libraries.ts";
export * from "./memory_ebpf_handler.ts";
export { pythonLoader } from "./python/loader.ts";

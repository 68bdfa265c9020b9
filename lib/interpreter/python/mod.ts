/**
 * The CPython plug-in: recognising interpreter files (3.8-3.13), per-version struct offsets, per-process
 * thread-state and frame reading, and symbolization of the frames the BPF unwinder records. README.md
 * beside this file is the contract for the BPF side.
 *
 * @example
 * ```ts ignore
 * import { pythonLoader } from "./mod.ts";
 * const data = pythonLoader(ebpf, info);
 * const instance = data?.attach(ebpf, pid, bias, memory);
 * ```
 *
 * @module
 */

export * from "./loader.ts";
export * from "./data.ts";
export * from "./instance.ts";
export * from "./offsets.ts";
export * from "./line_table.ts";
export * from "./symbolize.ts";
export * from "./proc_info.ts";

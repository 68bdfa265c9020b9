/**
 * BTF: parse the type information of BPF objects and of the kernel, query struct layouts and enum values,
 * and generate TypeScript layout constants from them.
 *
 * @example
 * ```ts
 * import { generateLayoutModule, parseBtf } from "./mod.ts";
 *
 * const btf = parseBtf(await Deno.readFile("omniprof.btf"));
 * console.log(generateLayoutModule(btf, { structs: ["trace_event"], enums: [] }, "omniprof.bpf.o"));
 * ```
 *
 * @module
 */

export * from "./btf.ts";
export * from "./layout.ts";
export * from "./codegen.ts";

/**
 * Where build.ts writes the program that `deno task record`, the `omniprof` task, the tests and the
 * benchmark run: main.ts bundled into .build/omniprof/, one chunk per command and per part that commands
 * share; the files it imports as bytes stay beside it, in .build/ and node_modules/.
 *
 * Deno loads a program from source file by file, about 0.1 ms of CPU and 20 KiB of memory for each
 * module before any of its code runs; `record` imports some 150. Bundled, a 1 s whole-system `record`
 * took 0.111 s of CPU against 0.127 s from source (median of 10 pairs). The chunks keep what main.ts
 * does from source: a command loads only its own code (tests/command_imports_test.ts); one file of
 * everything (`build.ts --bundle FILE`, for machines without the repository) costs more than source.
 *
 * Files imported as bytes (the BPF object, the demo workload, the Rust demangler's WebAssembly) stay
 * outside the chunks, read by Deno when their module loads: inlined, each would sit in the JS heap twice,
 * as base64 source text and decoded. That took 2 MB of heap and 5 MiB of peak memory (69.4 against
 * 74.7 MiB for a 3 s `record` at 999 Hz beside two busy processes, median of 10 pairs). The bundler keeps
 * such an import's path as written, relative to its source module, so every module with one sits two
 * folders deep like the chunks; build.ts refuses a bundle where one would not resolve.
 *
 * @example
 * ```ts
 * import { PROGRAM_ENTRY } from "./program_bundle.ts";
 * const args = ["run", "-A", PROGRAM_ENTRY, "check"]; // from the repository root
 * ```
 *
 * @module
 */

/** The folder of the bundle, from the repository root. */
export const PROGRAM_DIR = ".build/omniprof/";

/** The bundle's entry, main.ts's counterpart, from the repository root. */
export const PROGRAM_ENTRY = `${PROGRAM_DIR}main.js`;

/**
 * `deno bundle --external` patterns of the files imported as bytes, left to Deno at run time. A raw
 * import that none matches would be inlined; build.ts refuses that too.
 */
export const RAW_IMPORT_FILES: readonly string[] = ["*.bpf.o", "*.wasm", "*/omniprof-demo"];

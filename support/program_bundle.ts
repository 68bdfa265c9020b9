/**
 * Where build.ts writes the program that `deno task record`, the `omniprof` task, the tests and the
 * benchmark run: main.ts bundled into .build/omniprof/, one chunk per command and per part that commands
 * share, the BPF object and the demo workload inside.
 *
 * Deno loads a program from source file by file, about 0.1 ms of CPU and 20 KiB of memory for each
 * module before any of its code runs; `record` imports some 150. Bundled, a 1 s whole-system `record`
 * took 0.111 s of CPU against 0.127 s from source (median of 10 pairs). The chunks keep what main.ts
 * does from source: a command loads only its own code (tests/command_imports_test.ts); one file of
 * everything (`build.ts --bundle FILE`, for machines without the repository) costs more than source.
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

/**
 * The V8 flags omniprof runs with, in every way it is started: `deno task record`, the executable that
 * `build.ts --compile` makes, the tests and the benchmark. (deno.json and the README spell the same
 * string; tests/build_test.ts checks that they do.)
 *
 * `--max-opt=2` stops tier-up at Maglev. A profiling session is short and its hot loops (stack-delta
 * extraction, ring buffer decoding, symbolization) are hot for only a few hundred milliseconds, so
 * TurboFan's optimizing compiles, on V8's background threads, cost more CPU than they save: a 3 s whole
 * system `record` beside two busy processes took 0.64 s of CPU instead of 0.86 s (median of 5 pairs), and a
 * 20 s one 0.87 s instead of 0.95 s.
 *
 * @example
 * ```ts
 * import { V8_FLAGS } from "./v8_flags.ts";
 * const args = ["run", "-A", `--v8-flags=${V8_FLAGS}`, "main.ts", "check"];
 * ```
 *
 * @module
 */

/** Passed as `--v8-flags=` before the script. */
export const V8_FLAGS = "--max-opt=2";

/**
 * The runtime list: every runtime a session unwinds, one line each. The rest of the profiler is built from
 * it: the tail-call table and the counters of `record --stats` (lib/record/tracer.ts), the maps allocated
 * on demand (lib/record/map_allocation.ts), the per-process maps the BPF handler writes, the loaders
 * offered every mapped file (lib/process/file_registry.ts), the frame kinds of profiles and outputs
 * (lib/profile/frame_kinds.ts) and the checks of `omniprof check`. Adding a runtime adds a line here
 * (README.md in this folder has the checklist).
 *
 * @example
 * ```ts ignore
 * import { RUNTIMES, runtimeUnwinders } from "./runtimes.ts";
 * fillUnwindPrograms(object, unwindPrograms(runtimeUnwinders(RUNTIMES)));
 * ```
 *
 * @module
 */
import type { Unwinder } from "../bpf/unwind_programs.ts";
import type { BpfMapName } from "../../support/bpf_catalogue.ts";
import type { InterpreterType } from "./interpreter.ts";
import type { Runtime } from "./runtime.ts";
import { goRuntime } from "./go/runtime.ts";
import { hotspotRuntime } from "./hotspot/runtime.ts";
import { pythonRuntime } from "./python/runtime.ts";
import { v8Runtime } from "./v8/runtime.ts";

/** Every runtime, in the order their loaders are offered a file. */
export const RUNTIMES: readonly Runtime[] = [
  pythonRuntime,
  goRuntime,
  v8Runtime,
  hotspotRuntime,
];

/** The BPF unwinders of `runtimes`, for the tail-call table. */
export function runtimeUnwinders(runtimes: readonly Runtime[]): Unwinder[] {
  return runtimes.flatMap((runtime) => runtime.unwinder === null ? [] : [runtime.unwinder]);
}

/** The per-process maps of `runtimes`. */
export function runtimeProcessMaps(runtimes: readonly Runtime[]): BpfMapName[] {
  return runtimes.flatMap((runtime) => runtime.processMap === null ? [] : [runtime.processMap]);
}

/**
 * The per-process map of runtime `name`.
 *
 * @throws {RangeError} when no runtime of `runtimes` is named so, or it keeps no per-process records.
 */
export function processMapOf(runtimes: readonly Runtime[], name: InterpreterType): BpfMapName {
  const map = runtimes.find((runtime) => runtime.name === name)?.processMap ?? null;
  if (map === null) throw new RangeError(`Cannot keep ${name} processes: no runtime keeps them in BPF`);
  return map;
}

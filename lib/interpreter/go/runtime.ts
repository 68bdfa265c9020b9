/**
 * The Go runtime's descriptor: its frames are native (named from `.gopclntab`); what it adds is the pprof
 * labels of the sampled goroutine, read by `unwind_go_labels` (bpf/go_tracer.bpf.c).
 *
 * @example
 * ```ts ignore
 * import { goRuntime } from "./runtime.ts";
 * const RUNTIMES = [goRuntime];
 * ```
 *
 * @module
 */
import { GoMetricId, GoUnwindProgram } from "../../../support/types.ts";
import { type Runtime, runtimeMetricNames } from "../runtime.ts";
import { goLoader } from "./loader.ts";
import { MAX_GO_MINOR, MIN_GO_MINOR } from "./offsets.ts";

/** Go: labels of goroutines (pprof.Do), for go1.16 to the newest release whose offsets are known. */
export const goRuntime: Runtime = {
  name: "go",
  // Its frames are native: no kind of their own.
  frameKind: null,
  loader: goLoader,
  unwinder: { slot: GoUnwindProgram.Labels, program: "unwind_go_labels" },
  jitCode: false,
  processMap: "go_procs",
  bpfMetrics: runtimeMetricNames("Go", GoMetricId),
  check: {
    name: "Go labels",
    run: () => `pprof labels of goroutines, go1.${MIN_GO_MINOR}-go1.${MAX_GO_MINOR}`,
  },
};

/**
 * CPython as the profiler sees it: its loader, its BPF unwinder (bpf/python_tracer.bpf.c) in the
 * `Python` slot of the tail-call table, its per-process records in `python_procs`, and its check.
 *
 * @module
 */
import type { Runtime } from "../runtime.ts";
import { checkPython } from "./check.ts";
import { pythonLoader } from "./loader.ts";

/** The CPython runtime (3.8 to 3.13). */
export const pythonRuntime: Runtime = {
  name: "python",
  loader: pythonLoader,
  unwinder: { slot: "Python", program: "unwind_python" },
  processMap: "python_procs",
  check: { name: "Python frames", run: checkPython },
};

/**
 * CPython as the profiler sees it: its frames (marked as bpf/python_tracer.h says, named `python`), its
 * loader, its BPF unwinder (bpf/python_tracer.bpf.c) in its slot of the tail-call table, its per-process
 * records in `python_procs`, its BPF counters, and its check.
 *
 * @module
 */
import { PythonFrameMarker, PythonMetricId, PythonUnwindProgram } from "../../../support/types.ts";
import { type Runtime, runtimeMetricNames } from "../runtime.ts";
import { checkPython } from "./check.ts";
import { pythonLoader } from "./loader.ts";

/** The CPython runtime (3.8 to 3.13). */
export const pythonRuntime: Runtime = {
  name: "python",
  frameKind: {
    marker: PythonFrameMarker.Python,
    pprofMappingName: "[python]",
    otlpFrameType: "cpython",
    label: "Python",
    colour: { hue: 100, spread: 28, sat: 52, light: 56 },
  },
  loader: pythonLoader,
  unwinder: { slot: PythonUnwindProgram.Python, program: "unwind_python" },
  jitCode: false,
  processMap: "python_procs",
  bpfMetrics: runtimeMetricNames("Python", PythonMetricId),
  check: { name: "Python frames", run: checkPython },
};

/**
 * V8 (Node.js) as the profiler sees it: its JavaScript frames (marked as bpf/v8_tracer.h says, named
 * `v8`), its loader, its BPF unwinder (bpf/v8_tracer.bpf.c) in its slot of the tail-call table, which also
 * takes the process's JIT code, its per-process records in `v8_procs`, and its BPF counters.
 *
 * @module
 */
import { V8FrameMarker, V8MetricId, V8UnwindProgram } from "../../../support/types.ts";
import { type Runtime, runtimeMetricNames } from "../runtime.ts";
import { v8Loader } from "./loader.ts";

/** V8 from 10.2 (Node 18). */
export const v8Runtime: Runtime = {
  name: "v8",
  frameKind: {
    marker: V8FrameMarker.V8,
    pprofMappingName: "[v8]",
    otlpFrameType: "v8js",
    label: "JavaScript",
    colour: { hue: 48, spread: 14, sat: 80, light: 58 },
  },
  loader: v8Loader,
  unwinder: { slot: V8UnwindProgram.V8, program: "unwind_v8" },
  jitCode: true,
  processMap: "v8_procs",
  bpfMetrics: runtimeMetricNames("V8", V8MetricId),
  check: null,
};

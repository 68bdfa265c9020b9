/**
 * HotSpot (the JVM) as the profiler sees it: its Java frames (marked as bpf/hotspot_tracer.h says, named
 * `hotspot`), its loader, its BPF unwinder (bpf/hotspot_tracer.bpf.c) in its slot of the tail-call table,
 * which also takes the process's code cache, its per-process records in `hotspot_procs`, and its BPF
 * counters.
 *
 * @module
 */
import { HotspotFrameMarker, HotspotMetricId, HotspotUnwindProgram } from "../../../support/types.ts";
import { type Runtime, runtimeMetricNames } from "../runtime.ts";
import { hotspotLoader } from "./loader.ts";

/** HotSpot from JDK 17 (tested on 17 and 25). */
export const hotspotRuntime: Runtime = {
  name: "hotspot",
  frameKind: {
    marker: HotspotFrameMarker.Hotspot,
    pprofMappingName: "[jvm]",
    otlpFrameType: "jvm",
    label: "Java",
    colour: { hue: 18, spread: 14, sat: 75, light: 55 },
  },
  loader: hotspotLoader,
  unwinder: { slot: HotspotUnwindProgram.Hotspot, program: "unwind_hotspot" },
  jitCode: true,
  processMap: "hotspot_procs",
  bpfMetrics: runtimeMetricNames("Hotspot", HotspotMetricId),
  check: null,
};

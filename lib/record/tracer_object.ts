/**
 * The BPF object every session loads (bpf/*.bpf.c, built into the program), opened as it must be loaded:
 * without the probes' entry programs and the off-CPU one. Those are of the kprobe, tracepoint and raw
 * tracepoint types, and a program array takes programs of one type only, so they cannot share the
 * sampler's tail-call table in one load; a session that needs them loads them in objects of their own
 * (lib/record/unwinder_flavour.ts).
 *
 * @example
 * ```ts ignore
 * import { openTracerObject } from "./tracer_object.ts";
 * using object = openTracerObject();
 * object.load();
 * ```
 *
 * @module
 */
import { BpfObject } from "../bpf/object.ts";
import { bpfObjectBytes } from "../../support/embedded/bpf_object.ts";
import { PROBE_PROGRAMS } from "./probes.ts";
import type { BpfProgramName } from "../../support/bpf_catalogue.ts";

/** The entry programs each loaded with the unwinders as their own type, never in the tracer's load. */
const FLAVOURED_PROGRAMS: readonly BpfProgramName[] = [...PROBE_PROGRAMS, "off_cpu_switch"];

/** Opens the tracer's object, the programs of other types left out of its load. */
export function openTracerObject(): BpfObject {
  const object = BpfObject.open(bpfObjectBytes, "omniprof.bpf.o");
  try {
    for (const name of FLAVOURED_PROGRAMS) object.program(name).setAutoload(false);
  } catch (error) {
    object.close();
    throw error;
  }
  return object;
}

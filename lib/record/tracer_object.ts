/**
 * The BPF object every session loads (bpf/*.bpf.c, built into the program), opened as it must be loaded:
 * without the probes' entry programs. Those are of the kprobe and tracepoint types, and a program array
 * takes programs of one type only, so they cannot share the samplers' tail-call table in one load; a
 * session with probes loads them in objects of their own (lib/record/probes.ts).
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

/** Opens the tracer's object, the probes' programs left out of its load. */
export function openTracerObject(): BpfObject {
  const object = BpfObject.open(bpfObjectBytes, "omniprof.bpf.o");
  try {
    for (const name of PROBE_PROGRAMS) object.program(name).setAutoload(false);
  } catch (error) {
    object.close();
    throw error;
  }
  return object;
}

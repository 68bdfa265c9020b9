/**
 * Stacks at probes (`record -e`), the loader: the probes' entry programs (bpf/probe.bpf.c) are of the
 * kprobe type (uprobes, uretprobes, kprobes) or the tracepoint type, and a tail call only reaches a
 * program of the caller's own type. So for each type the session's probes need, the BPF object is opened
 * again on the tracer's maps, with a `progs` table of its own, and the unwinders are loaded into it as
 * that type: a trace begun at a probe goes through the same unwinders, maps and stop program as a sample.
 * Each probe gets its own entry program (`probe_kprobe_3` is probe 3), whose traces carry its index.
 *
 * @example
 * ```ts ignore
 * import { ProbeSet } from "./probes.ts";
 * const probes = ProbeSet.load(tracerObject, resolved, runtimeUnwinders(RUNTIMES), { lazy: true });
 * probes.attach(); // ... probes.detach(); probes.close();
 * ```
 *
 * @module
 */
import type { BpfObject } from "../bpf/object.ts";
import type { BpfLink } from "../bpf/program.ts";
import { BpfProgramType } from "../bpf/uapi.ts";
import { type Unwinder, UnwindProgramTable } from "../bpf/unwind_programs.ts";
import type { ResolvedProbe } from "../probe/probe_spec.ts";
import { BPF_PROGRAMS, type BpfProgramName } from "../../support/bpf_catalogue.ts";
import { Limits } from "../../support/types.ts";

/** The entry programs of probes, in the tracer's own object only to be left out of its load. */
export const PROBE_PROGRAMS: readonly BpfProgramName[] = (Object.keys(BPF_PROGRAMS) as BpfProgramName[])
  .filter((name) => name.startsWith("probe_"));

/** The two program types of probes, and the entry programs' prefix for each. */
const FLAVOURS = [
  { type: BpfProgramType.Kprobe, prefix: "probe_kprobe_", kinds: ["uprobe", "uretprobe", "kprobe"] },
  { type: BpfProgramType.Tracepoint, prefix: "probe_tracepoint_", kinds: ["tracepoint"] },
] as const;

interface Flavour {
  prefix: string;
  object: BpfObject;
  table: UnwindProgramTable;
}

/** The loaded probes of a session. */
export class ProbeSet {
  readonly probes: readonly ResolvedProbe[];
  #flavours: Flavour[];
  #links: BpfLink[] = [];

  private constructor(probes: readonly ResolvedProbe[], flavours: Flavour[]) {
    this.probes = probes;
    this.#flavours = flavours;
  }

  /**
   * Loads the entry programs of `probes` (probe i is the i-th), and the unwinders as their types, on the
   * maps of the loaded `tracer` object. Nothing is attached yet.
   *
   * @throws {RangeError} for more than Limits.MaxProbes probes.
   * @throws {LibbpfError} when the kernel refuses a program.
   */
  static load(
    tracer: BpfObject,
    probes: readonly ResolvedProbe[],
    runtimeUnwinders: readonly Unwinder[],
    options: { lazy: boolean },
  ): ProbeSet {
    if (probes.length > Limits.MaxProbes) {
      throw new RangeError(`Cannot record ${probes.length} events at once: at most ${Limits.MaxProbes}`);
    }
    const flavours: Flavour[] = [];
    try {
      for (const flavour of FLAVOURS) {
        const indices = probes.flatMap((probe, index) =>
          (flavour.kinds as readonly string[]).includes(probe.kind) ? [index] : []
        );
        if (indices.length === 0) continue;
        const object = tracer.openSharingMaps({ except: ["progs"] });
        try {
          for (const name of Object.keys(BPF_PROGRAMS) as BpfProgramName[]) {
            object.program(name).setAutoload(false);
          }
          const table = new UnwindProgramTable(object, runtimeUnwinders, {
            lazy: options.lazy,
            programType: flavour.type,
          });
          for (const index of indices) object.program(entryProgram(flavour.prefix, index)).setAutoload(true);
          object.load();
          table.fillLoaded();
          flavours.push({ prefix: flavour.prefix, object, table });
        } catch (error) {
          object.close();
          throw error;
        }
      }
    } catch (error) {
      for (const { table, object } of flavours) {
        table.close();
        object.close();
      }
      throw error;
    }
    return new ProbeSet(probes, flavours);
  }

  /** The unwinder tables of the probes' types: a runtime's program goes into each when first needed. */
  get tables(): readonly UnwindProgramTable[] {
    return this.#flavours.map((flavour) => flavour.table);
  }

  /**
   * Attaches every probe. On failure, detaches what was attached and throws.
   *
   * @throws {LibbpfError} when the kernel refuses an attach (a kernel function kprobes may not probe).
   */
  attach(): void {
    try {
      this.probes.forEach((probe, index) => {
        if (probe.kind === "tracepoint") {
          const program = this.#program("probe_tracepoint_", index);
          this.#links.push(program.attachTracepoint(probe.category, probe.tracepoint));
        } else if (probe.kind === "kprobe") {
          this.#links.push(this.#program("probe_kprobe_", index).attachKprobe(probe.function));
        } else {
          const program = this.#program("probe_kprobe_", index);
          this.#links.push(program.attachUprobe(probe.path, probe.fileOffset, probe.kind === "uretprobe"));
        }
      });
    } catch (error) {
      this.detach();
      throw error;
    }
  }

  /** Detaches every probe; the programs stay loaded. */
  detach(): void {
    for (const link of this.#links) link.close();
    this.#links = [];
  }

  /** Detaches and unloads. Safe to call twice. */
  close(): void {
    this.detach();
    for (const { table, object } of this.#flavours) {
      table.close();
      object.close();
    }
    this.#flavours = [];
  }

  #program(prefix: string, index: number) {
    const flavour = this.#flavours.find((candidate) => candidate.prefix === prefix);
    if (flavour === undefined) throw new Error(`Cannot attach probe ${index}: no ${prefix} programs loaded`);
    return flavour.object.program(entryProgram(prefix, index));
  }
}

function entryProgram(prefix: string, index: number): BpfProgramName {
  const name = `${prefix}${index}`;
  if (!Object.hasOwn(BPF_PROGRAMS, name)) throw new RangeError(`No BPF program ${name}`);
  return name as BpfProgramName;
}

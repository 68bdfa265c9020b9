/**
 * The unwinders loaded as another program type. A tail call only reaches a program of the caller's own
 * type, and the tracer's unwinders are perf event programs, reached from the CPU sampler. An entry program
 * of another type (a probe's kprobe or tracepoint program, the off-CPU raw tracepoint) needs its own copy
 * of them: the BPF object opened again on the tracer's maps, with a `progs` table of its own, the
 * unwinders loaded into it as that type (`bpf_program__set_type`) beside the entry programs. A trace begun
 * there goes through the same code, maps and stop program as a sample.
 *
 * @example
 * ```ts ignore
 * import { UnwinderFlavour } from "./unwinder_flavour.ts";
 * const flavour = UnwinderFlavour.load(tracerObject, BpfProgramType.RawTracepoint, ["off_cpu_switch"],
 *   runtimeUnwinders(RUNTIMES), { lazy: true });
 * const link = flavour.program("off_cpu_switch").attach();
 * flavour.close();
 * ```
 *
 * @module
 */
import type { BpfObject } from "../bpf/object.ts";
import type { BpfProgram } from "../bpf/program.ts";
import type { BpfProgramType } from "../bpf/uapi.ts";
import { type Unwinder, UnwindProgramTable } from "../bpf/unwind_programs.ts";
import { BPF_PROGRAMS, type BpfProgramName } from "../../support/bpf_catalogue.ts";

/** Entry programs of `type` on the tracer's maps, with the unwinders as `type` behind them. */
export class UnwinderFlavour {
  /** The unwinders' table: a runtime's program goes in when the session first meets the runtime. */
  readonly table: UnwindProgramTable;
  #object: BpfObject;

  private constructor(object: BpfObject, table: UnwindProgramTable) {
    this.#object = object;
    this.table = table;
  }

  /**
   * Opens the loaded `tracer` object again on its maps and loads `entries` and the unwinders (those of
   * `runtimeUnwinders` now, unless `lazy`) as programs of `type`. Nothing is attached.
   *
   * @throws {LibbpfError} when the kernel refuses a program.
   */
  static load(
    tracer: BpfObject,
    type: BpfProgramType,
    entries: readonly BpfProgramName[],
    runtimeUnwinders: readonly Unwinder[],
    options: { lazy: boolean },
  ): UnwinderFlavour {
    const object = tracer.openSharingMaps({ except: ["progs"] });
    let table: UnwindProgramTable | null = null;
    try {
      for (const name of Object.keys(BPF_PROGRAMS) as BpfProgramName[]) {
        object.program(name).setAutoload(false);
      }
      table = new UnwindProgramTable(object, runtimeUnwinders, { lazy: options.lazy, programType: type });
      for (const name of entries) object.program(name).setAutoload(true);
      object.load();
      table.fillLoaded();
      return new UnwinderFlavour(object, table);
    } catch (error) {
      table?.close();
      object.close();
      throw error;
    }
  }

  /** One of the entry programs it was loaded with. */
  program(name: BpfProgramName): BpfProgram {
    return this.#object.program(name);
  }

  /** Unloads; links to its programs must be closed first. */
  close(): void {
    this.table.close();
    this.#object.close();
  }
}

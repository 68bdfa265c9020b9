/**
 * The tail-call table `progs`: which program unwinds each kind of frame. BPF jumps through it by the slots
 * of `enum unwind_program` (bpf/types.h), which support/types.ts generates as `UnwindProgram`. The
 * profiler's own slots are listed here; each runtime brings its own (lib/interpreter/runtimes.ts), whose
 * number its header bpf/<name>_tracer.h declares, and the tracer fills the table from both lists alone.
 *
 * A session loads a runtime's program only when it first meets the runtime ({@linkcode UnwindProgramTable}):
 * verifying a program costs milliseconds of kernel time, and most sessions meet few of the runtimes. A
 * jump to a slot still empty falls through, and the native unwinder then counts it (TailCallFailed) and
 * unwinds the frame as native code; no trie entry names a runtime's program before its slot is filled.
 *
 * @example
 * ```ts ignore
 * import { UnwindProgramTable } from "./unwind_programs.ts";
 * const table = new UnwindProgramTable(object, runtimeUnwinders(RUNTIMES), { lazy: true });
 * object.load();
 * table.fillLoaded(); // the native slots
 * table.require(unwinder.slot); // when the first file of the unwinder's runtime is claimed
 * ```
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import { EAGAIN } from "../sys/errno.ts";
import { libc, SystemError } from "../sys/libc.ts";
import { LibbpfError } from "./libbpf.ts";
import { u32Key } from "./map.ts";
import type { BpfObject } from "./object.ts";
import { BPF_MAPS, BPF_PROGRAMS, type BpfProgramName } from "../../support/bpf_catalogue.ts";
import { UnwindProgram } from "../../support/types.ts";

const logger = getLogger(["omniprof", "bpf"]);

/** fcntl: a copy of the descriptor, closed on exec. */
const F_DUPFD_CLOEXEC = 1030;

/** Loads of a program the verifier began again after a signal interrupted it (EAGAIN). */
const LOAD_ATTEMPTS = 3;

/** A program and the slot it fills. */
export interface Unwinder {
  /** An index of the table: a value of `enum unwind_program`, or a runtime's slot from its header. */
  readonly slot: number;
  readonly program: BpfProgramName;
}

/** The slots every session fills: the native unwinder and the program that ends a trace. */
export const NATIVE_UNWINDERS: readonly Unwinder[] = [
  { slot: UnwindProgram.Stop, program: "unwind_stop" },
  { slot: UnwindProgram.Native, program: "unwind_native" },
];

// Slots and program descriptors are u32 in the table (u32Key): a change in bpf/ is a type error here.
BPF_MAPS.progs.keySize satisfies 4;
BPF_MAPS.progs.valueSize satisfies 4;

/** A filled slot of the table and its program. */
export type UnwindProgramEntry = Unwinder;

/**
 * The filled slots of the table: the native ones and `runtimeUnwinders`; a slot left out ends the trace
 * when jumped to.
 *
 * @throws {RangeError} when two programs claim one slot, or a slot lies outside the table.
 */
export function unwindPrograms(runtimeUnwinders: readonly Unwinder[]): UnwindProgramEntry[] {
  const entries: UnwindProgramEntry[] = [];
  for (const { slot, program } of [...NATIVE_UNWINDERS, ...runtimeUnwinders]) {
    const taken = entries.find((entry) => entry.slot === slot);
    if (taken !== undefined) {
      throw new RangeError(`Cannot put ${program} in slot ${slot}: ${taken.program} is there`);
    }
    if (!Number.isInteger(slot) || slot < 0 || slot >= UnwindProgram.Count) {
      throw new RangeError(
        `Cannot put ${program} in slot ${slot}: the table has ${UnwindProgram.Count} slots`,
      );
    }
    entries.push({ slot, program });
  }
  return entries;
}

/** Puts every program of `entries` in its slot of the loaded `object`'s table. */
export function fillUnwindPrograms(object: BpfObject, entries: readonly UnwindProgramEntry[]): void {
  const progs = object.map("progs");
  for (const { slot, program } of entries) {
    progs.update(u32Key(slot), u32Key(object.program(program).fd));
  }
}

/**
 * The table of one loaded object: the native slots filled once it loads, each runtime's at its first
 * {@linkcode require} (or with the native ones when not `lazy`).
 */
export class UnwindProgramTable {
  readonly #object: BpfObject;
  readonly #entries: readonly UnwindProgramEntry[];
  readonly #lazy: ReadonlySet<number>;
  /** The BPF_PROG_TYPE_* the programs are loaded as, when not their sections' (perf_event). */
  readonly #programType: number | null;
  readonly #filled = new Map<number, UnwindProgramEntry>();
  /** Slots whose program the kernel refused: not tried again (verifying it costs as much each time). */
  readonly #refused = new Map<number, Error>();
  /**
   * Descriptors of the programs loaded later, whose objects are closed: the table alone would keep them
   * loaded, but a program that no process holds is shown as nobody's (`bpftool prog show`).
   */
  #held: number[] = [];

  /**
   * Before `object` loads. When `lazy`, the runtimes' programs are left out of its load: each one is
   * verified and loaded when {@linkcode require} first asks for its slot. With `programType`, every
   * program of the table is loaded as that type, for entry programs of that type to tail-call (probes).
   *
   * @throws {RangeError} from {@linkcode unwindPrograms} when the slots clash.
   */
  constructor(
    object: BpfObject,
    runtimeUnwinders: readonly Unwinder[],
    options: { lazy: boolean; programType?: number },
  ) {
    this.#object = object;
    this.#entries = unwindPrograms(runtimeUnwinders);
    this.#lazy = new Set(options.lazy ? runtimeUnwinders.map(({ slot }) => slot) : []);
    this.#programType = options.programType ?? null;
    for (const { slot, program } of this.#entries) {
      const bpf = object.program(program);
      if (this.#lazy.has(slot)) bpf.setAutoload(false);
      else bpf.setAutoload(true);
      if (this.#programType !== null) bpf.setType(this.#programType);
    }
  }

  /** After the object loaded: puts the programs it loaded in their slots. */
  fillLoaded(): void {
    const loaded = this.#entries.filter(({ slot }) => !this.#lazy.has(slot));
    fillUnwindPrograms(this.#object, loaded);
    for (const entry of loaded) this.#filled.set(entry.slot, entry);
  }

  /**
   * Makes sure slot `slot` holds its program, verifying and loading it first if the session has not yet:
   * call it before anything that makes BPF jump there. A slot no program of the table fills (the native
   * one) needs nothing.
   *
   * @throws {LibbpfError} when the kernel refuses the program, with the verifier's log; at every later
   * call an Error that says so, without trying again.
   */
  require(slot: number): void {
    if (this.#filled.has(slot)) return;
    const entry = this.#entries.find((candidate) => candidate.slot === slot);
    if (entry === undefined) return;
    const refused = this.#refused.get(slot);
    if (refused !== undefined) {
      throw new Error(
        `Cannot load ${entry.program}: the kernel refused it (${refused.message.split("\n")[0]})`,
      );
    }
    const started = performance.now();
    try {
      this.#loadLater(entry);
    } catch (error) {
      if (error instanceof Error) this.#refused.set(slot, error);
      throw error;
    }
    logger.debug("Loaded {program} at its runtime's first file in {ms} ms", {
      program: entry.program,
      ms: (performance.now() - started).toFixed(1),
    });
  }

  /** The slots filled so far, by slot. */
  filled(): UnwindProgramEntry[] {
    return [...this.#filled.values()].sort((a, b) => a.slot - b.slot);
  }

  /** Verifies `entry`'s program in a second object on the same maps, and puts it in its slot. */
  #loadLater({ slot, program }: UnwindProgramEntry): void {
    for (let attempt = 1;; attempt++) {
      using sharing = this.#object.openSharingMaps();
      for (const name of Object.keys(BPF_PROGRAMS) as BpfProgramName[]) {
        sharing.program(name).setAutoload(name === program);
      }
      if (this.#programType !== null) sharing.program(program).setType(this.#programType);
      try {
        sharing.load();
      } catch (error) {
        if (error instanceof LibbpfError && error.errno === EAGAIN && attempt < LOAD_ATTEMPTS) continue;
        throw error;
      }
      const fd = libc().fn.fcntl(sharing.program(program).fd, F_DUPFD_CLOEXEC, 3n);
      if (fd < 0) throw new SystemError(`keep the descriptor of program ${program}`, libc().errno());
      this.#held.push(fd);
      this.#object.map("progs").update(u32Key(slot), u32Key(fd));
      this.#filled.set(slot, { slot, program });
      return;
    }
  }

  /** Lets go of the programs loaded later (the object's own close with it). Safe to call twice. */
  close(): void {
    for (const fd of this.#held) libc().fn.close(fd);
    this.#held = [];
  }
}

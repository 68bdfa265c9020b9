/**
 * What the profiler knows of one runtime, in one object that the runtime's folder exports (its
 * `runtime.ts`) and the runtime list (runtimes.ts) names: how its files are recognised, which BPF program
 * unwinds its frames, where BPF keeps its per-process records, and what `omniprof check` says of it.
 * Nothing outside the runtime's folder and BPF files names the runtime (README.md here lists the few
 * places that do); everything else reads these fields.
 *
 * @example
 * ```ts ignore
 * import type { Runtime } from "../runtime.ts";
 * export const rubyRuntime: Runtime = {
 *   name: "ruby",
 *   frameKind: {
 *     marker: RubyFrameMarker.Ruby,
 *     pprofMappingName: "[ruby]",
 *     otlpFrameType: "ruby",
 *     label: "Ruby",
 *     colour: { hue: 322, spread: 18, sat: 55, light: 64 },
 *   },
 *   loader: rubyLoader,
 *   unwinder: { slot: RubyUnwindProgram.Ruby, program: "unwind_ruby" },
 *   jitCode: false,
 *   processMap: "ruby_procs",
 *   bpfMetrics: runtimeMetricNames("Ruby", RubyMetricId),
 *   check: null,
 * };
 * ```
 *
 * @module
 */
import type { Unwinder } from "../bpf/unwind_programs.ts";
import type { BpfMapName } from "../../support/bpf_catalogue.ts";
import type { LoadSegment } from "../elf/elf_file.ts";
import type { Data, InterpreterType, Loader } from "./interpreter.ts";

/** A runtime's check for `omniprof check`. */
export interface RuntimeCheck {
  /** What the line names (`<runtime> frames`). */
  readonly name: string;
  /**
   * What this machine supports of the runtime, in a few words.
   *
   * @throws {Error} saying why its frames cannot be had here.
   */
  run(): string;
}

/** The colours of a frame kind in the HTML page: `hsl(hue + spread * x, sat%, light%)`, x per function. */
export interface KindColour {
  readonly hue: number;
  readonly spread: number;
  readonly sat: number;
  readonly light: number;
}

/** What a runtime's frames are, as BPF marks them and as outputs name them. */
export interface RuntimeFrameKind {
  /** The `enum frame_marker` value its BPF unwinder gives its frames (declared in bpf/<name>_tracer.h). */
  readonly marker: number;
  /** The pseudo mapping's file name that marks its frames in a pprof file, e.g. `[ruby]`. */
  readonly pprofMappingName: string;
  /** Its OTLP `profile.frame.type`: the semantic conventions' well-known value where one applies. */
  readonly otlpFrameType: string;
  /** What the HTML page calls it. */
  readonly label: string;
  /** Its colours in the HTML page. */
  readonly colour: KindColour;
}

/** One runtime, as the rest of the profiler sees it. */
export interface Runtime {
  /** Its frame kind, which names its per-process records too. */
  readonly name: InterpreterType;
  /**
   * What its frames are to BPF (their marker) and to the outputs (names, colours); null for a runtime
   * whose frames are native (Go, whose program reads its goroutines' labels).
   */
  readonly frameKind: RuntimeFrameKind | null;
  /** Recognises the runtime's files (executables, libraries) and reads what is true of each. */
  readonly loader: Loader;
  /** Its BPF unwinder and the tail-call slot it fills; null for a runtime whose frames are native. */
  readonly unwinder: Unwinder | null;
  /**
   * Whether it compiles code into anonymous executable memory (a JIT): such memory of a process that maps
   * one of its files is then installed with its unwinder, which tells its own frames there from others.
   */
  readonly jitCode: boolean;
  /**
   * The BPF hash map of its per-process records (pid -> record), or null. It fills as processes appear,
   * so it is allocated on demand where the kernel allows (lib/record/map_allocation.ts).
   */
  readonly processMap: BpfMapName | null;
  /**
   * Its BPF unwinder's counters in the `metrics` array (ids of the runtimes' range of `enum metric_id`,
   * declared in its header bpf/<name>_tracer.h), by the name `record --stats` reports each under.
   */
  readonly bpfMetrics: Readonly<Record<string, number>>;
  /** What `omniprof check` tests for it, if anything beyond the BPF programs loading. */
  readonly check: RuntimeCheck | null;
}

/**
 * The names `record --stats` gives a runtime's BPF counters: its generated metric enum's keys after the
 * runtime's prefix, so `{ Frames: 20 }` of "Ruby" reads `RubyFrames`.
 */
export function runtimeMetricNames(
  prefix: string,
  ids: Readonly<Record<string, number>>,
): Readonly<Record<string, number>> {
  return Object.fromEntries(Object.entries(ids).map(([name, id]) => [`${prefix}${name}`, id]));
}

/** A runtime's claim on one file: what its loader made of the file. */
export interface RuntimeClaim {
  readonly runtime: Runtime;
  /** The runtime's per-file data. */
  readonly data: Data;
  /** The file's program headers, for the bias of each process's mapping of it. */
  readonly segments: readonly LoadSegment[];
}

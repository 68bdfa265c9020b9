/**
 * The symbolized, aggregated profile that every output writer (pprof, folded, ...) consumes and that the
 * pprof reader produces. Plain data: tables of mappings and locations, samples that refer to them by index.
 *
 * @example
 * ```ts
 * import type { Profile } from "./profile.ts";
 * const profile: Profile = {
 *   startTimeNs: 0, durationNs: 1e9, periodNs: 10_101_010,
 *   mappings: [], locations: [{ kind: "native", mapping: -1, address: 0, functionName: "main", sourceFile: "", line: 0 }],
 *   samples: [{ locations: [0], count: 3, pid: 1, tid: 1, comm: "init" }],
 * };
 * ```
 *
 * @module
 */

/**
 * What produced a frame: the kernel, native machine code, a runtime (an interpreter or JIT: the runtime's
 * name, lib/interpreter/runtimes.ts; frame_kinds.ts describes each), or nothing the unwinders knew
 * (`unknown`) or a failed unwinding (`error`).
 */
export type FrameKind = "kernel" | "native" | "unknown" | "error" | RuntimeKind;

/** The name of a runtime's frame kind (a `Runtime.name`). */
export type RuntimeKind = string & Record<never, never>;

/** One executable, library or kernel image that locations point into. */
export interface ProfileMapping {
  /** Start of the mapping in the process (0 when only file-relative addresses are known). */
  start: number;
  /** End of the mapping (exclusive). */
  end: number;
  /** Offset in the file of `start`. */
  fileOffset: number;
  /** Path of the file as the process saw it, or a pseudo name such as `[kernel.kallsyms]`. */
  fileName: string;
  /** GNU build ID as lowercase hex, or "" when the file has none. */
  buildId: string;
  /** Whether at least one location of this mapping was resolved to a function name. */
  hasFunctions: boolean;
}

/** One symbolized frame. Samples share locations. */
export interface ProfileLocation {
  kind: FrameKind;
  /** Index into {@linkcode Profile.mappings}, or -1 when the frame belongs to no known mapping. */
  mapping: number;
  /** Address of the frame: an ELF virtual address of the mapping's file for native frames. */
  address: number;
  /** Demangled function name; unresolved native frames read `[binary+0xoffset]`. */
  functionName: string;
  /** Source file of the function, "" when unknown. */
  sourceFile: string;
  /** Source line, 0 when unknown. */
  line: number;
  /**
   * True for a call the compiler inlined into its caller, which is then the next location of every
   * sample that has this one, at the same address; pprof writes such a run as one location with a line
   * per call. Absent (false) for a frame of its own.
   */
  inlined?: boolean;
}

/** A stack with how often it was seen, and which thread it was seen on. */
export interface ProfileSample {
  /** Indices into {@linkcode Profile.locations}, leaf first (pprof order). */
  locations: number[];
  /** Number of CPU samples that had exactly this stack on this thread (0 for an off-CPU sample). */
  count: number;
  /**
   * Nanoseconds the thread spent switched out (blocked or waiting for a CPU) with exactly this stack, for
   * a profile recorded with off-CPU time (`record --off-cpu`); absent (0) for a CPU sample. A sample is
   * either a CPU sample (count > 0) or an off-CPU one (offCpuNs > 0), never both, so that writers can tell
   * on-CPU from off-CPU time.
   */
  offCpuNs?: number;
  /**
   * For a profile of probe events (`record -e`): the index in {@linkcode Profile.events} of the event
   * whose hits these are; `count` is then the number of hits. Absent in a profile of CPU samples.
   */
  event?: number;
  pid: number;
  tid: number;
  /** The thread's command name (`comm`) at the time of the samples. */
  comm: string;
  /**
   * Labels the runtime gave the sampled code (Go's pprof labels), in the order it keeps them; absent
   * when it gave none. Samples with different labels are different samples.
   */
  labels?: readonly SampleLabel[];
}

/** A key/value label of a sample, each cut to 64 bytes of UTF-8 by the profiler. */
export interface SampleLabel {
  readonly key: string;
  readonly value: string;
}

/** A whole profile: a sampling session, symbolized. */
export interface Profile {
  /** Wall-clock start of the session, ns since the Unix epoch. */
  startTimeNs: number;
  /** Length of the session in ns. */
  durationNs: number;
  /** CPU time one sample stands for, in ns (1e9 / sampling frequency). */
  periodNs: number;
  /**
   * Whether off-CPU time was recorded (`record --off-cpu`): writers then show wall time (on-CPU samples
   * weighted by the period, off-CPU samples by their time), even where no thread was switched out.
   */
  offCpu?: boolean;
  /**
   * The probe events recorded (`record -e`), as the user named them (`uprobe:/usr/bin/app:handle`,
   * `tracepoint:syscalls:sys_enter_write`): a profile of event counts rather than CPU samples, each
   * sample's `event` an index here. Absent in a profile of CPU samples; `periodNs` is then 0.
   */
  events?: readonly string[];
  mappings: ProfileMapping[];
  locations: ProfileLocation[];
  samples: ProfileSample[];
}

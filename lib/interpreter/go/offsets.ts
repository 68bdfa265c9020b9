/**
 * Where each Go release keeps what the BPF label reader follows (`struct go_proc_info`, bpf/types.h):
 * `g.m`, `m.curg`, `g.labels`, and what `g.labels` points at. The runtime's structs are internal, change
 * between releases and are not described in stripped binaries, so the offsets are per release (amd64), as
 * the OpenTelemetry eBPF profiler's table has them (read from each release's DWARF); the layout change of
 * 1.24 is `runtime/pprof/label.go`'s. offsets_test.ts checks the installed Go's entry against the DWARF of
 * a binary it builds (go1.19 here).
 *
 * @example
 * ```ts
 * import { goLabelOffsets } from "./offsets.ts";
 * console.log(goLabelOffsets({ major: 1, minor: 19, text: "go1.19.8" }));
 * // { gM: 48, mCurg: 192, gLabels: 360, layout: 0 }
 * ```
 *
 * @module
 */
import { GoLabelLayout } from "../../../support/types.ts";
import type { GoVersion } from "./build_info.ts";

/** The offsets of one release. */
export interface GoLabelOffsets {
  /** `g.m` (*m). */
  readonly gM: number;
  /** `m.curg` (*g). */
  readonly mCurg: number;
  /** `g.labels` (unsafe.Pointer). */
  readonly gLabels: number;
  /** What `g.labels` points at: a `map[string]string` before 1.24, a sorted `[]label` from 1.24. */
  readonly layout: GoLabelLayout;
}

/** The oldest and newest releases whose offsets are known. */
export const MIN_GO_MINOR = 16;
export const MAX_GO_MINOR = 24;

/** `g.labels` moves as the fields before it change; `g.m` and `m.curg` have not moved since 1.11. */
const LABELS_BY_MINOR: ReadonlyMap<number, number> = new Map([
  [16, 344],
  [17, 360],
  [18, 360],
  [19, 360],
  [20, 360],
  [21, 344],
  [22, 344],
  [23, 352],
  [24, 352],
]);

/** The offsets of `version`, or null for a release outside MIN_GO_MINOR..MAX_GO_MINOR. */
export function goLabelOffsets(version: GoVersion): GoLabelOffsets | null {
  if (version.major !== 1) return null;
  const gLabels = LABELS_BY_MINOR.get(version.minor);
  if (gLabels === undefined) return null;
  return {
    gM: 48,
    mCurg: 192,
    gLabels,
    layout: version.minor >= 24 ? GoLabelLayout.Slice : GoLabelLayout.Map,
  };
}

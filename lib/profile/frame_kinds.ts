/**
 * The frame kinds: the profiler's own (`kernel`, `native`, `unknown`, `error`) and one per runtime of the
 * runtime list, each described by its runtime (lib/interpreter/runtimes.ts): the BPF marker of its frames
 * and the names and colours outputs give it. Output code asks here instead of naming any runtime.
 *
 * @example
 * ```ts
 * import { frameKindOf, runtimeFrameKinds } from "./frame_kinds.ts";
 * import { FrameMarker } from "../../support/types.ts";
 * frameKindOf(FrameMarker.Kernel); // "kernel"
 * for (const kind of runtimeFrameKinds()) console.log(kind.name, kind.pprofMappingName);
 * ```
 *
 * @module
 */
import { FrameMarker } from "../../support/types.ts";
import type { KindColour, RuntimeFrameKind } from "../interpreter/runtime.ts";
import { RUNTIMES } from "../interpreter/runtimes.ts";
import type { FrameKind } from "./profile.ts";

export type { KindColour, RuntimeFrameKind };

/** A runtime's frame kind and its name (the runtime's name). */
export interface NamedRuntimeFrameKind extends RuntimeFrameKind {
  readonly name: FrameKind;
}

const OWN_KINDS = new Map<number, FrameKind>([
  [FrameMarker.Kernel, "kernel"],
  [FrameMarker.Native, "native"],
]);

/** The frame kind of every runtime of the runtime list, in its order. */
export function runtimeFrameKinds(): NamedRuntimeFrameKind[] {
  return RUNTIMES.flatMap((runtime) =>
    runtime.frameKind === null ? [] : [{ name: runtime.name, ...runtime.frameKind }]
  );
}

/** The kind of a frame the BPF unwinders marked with `marker` (a FrameMarker or a runtime's marker). */
export function frameKindOf(marker: number): FrameKind {
  const own = OWN_KINDS.get(marker);
  if (own !== undefined) return own;
  return RUNTIMES.find((runtime) => runtime.frameKind?.marker === marker)?.name ?? "unknown";
}

import assert from "node:assert/strict";
import { FrameMarker } from "../../support/types.ts";
import { RUNTIMES } from "../interpreter/runtimes.ts";
import { frameKindOf, runtimeFrameKinds } from "./frame_kinds.ts";

Deno.test("frameKindOf() names the profiler's own markers, each runtime's, and nothing else", () => {
  assert.equal(frameKindOf(FrameMarker.Kernel), "kernel");
  assert.equal(frameKindOf(FrameMarker.Native), "native");
  assert.equal(frameKindOf(FrameMarker.Unknown), "unknown");
  assert.equal(frameKindOf(FrameMarker.Abort), "unknown");
  assert.ok(RUNTIMES.length > 0);
  const withFrames = RUNTIMES.filter((runtime) => runtime.frameKind !== null);
  assert.ok(withFrames.length > 0);
  for (const runtime of withFrames) assert.equal(frameKindOf(runtime.frameKind!.marker), runtime.name);
  const claimed = new Set<number>([
    ...Object.values(FrameMarker),
    ...withFrames.map((r) => r.frameKind!.marker),
  ]);
  const free = [...Array(FrameMarker.ErrorBit).keys()].find((marker) => !claimed.has(marker))!;
  assert.equal(frameKindOf(free), "unknown", `marker ${free}`);
});

Deno.test("runtimeFrameKinds() gives the kind of every runtime that has frames, under its name, in order", () => {
  const withFrames = RUNTIMES.filter((runtime) => runtime.frameKind !== null);
  assert.deepEqual(runtimeFrameKinds().map(({ name }) => name), withFrames.map(({ name }) => name));
  for (const [i, kind] of runtimeFrameKinds().entries()) {
    assert.deepEqual({ ...kind, name: undefined }, { ...withFrames[i]!.frameKind, name: undefined });
  }
});

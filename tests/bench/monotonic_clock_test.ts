import assert from "node:assert/strict";
import { monotonicNs } from "./monotonic_clock.ts";
import { bootstrapped, requiring } from "../../lib/testing/requirements.ts";

Deno.test("monotonicNs() advances with performance.now()", async () => {
  // Each clock reading is bracketed by the other clock's, so preemption between reads cannot fail it.
  const perfBefore0 = performance.now();
  const clock0 = monotonicNs();
  const perfAfter0 = performance.now();
  await new Promise((resolve) => setTimeout(resolve, 50));
  const perfBefore1 = performance.now();
  const clock1 = monotonicNs();
  const perfAfter1 = performance.now();
  const clockMs = (clock1 - clock0) / 1e6;
  assert.ok(clockMs >= 49, `${clockMs} ms`);
  assert.ok(clockMs >= perfBefore1 - perfAfter0 - 0.1, `${clockMs} ms`);
  assert.ok(clockMs <= perfAfter1 - perfBefore0 + 0.1, `${clockMs} ms`);
});

// The kernel's own CLOCK_MONOTONIC reading ("now at N nsecs"); only root may read it.
let timerListUnreadable: string | null = null;
try {
  Deno.readTextFileSync("/proc/timer_list");
} catch (error) {
  timerListUnreadable = `cannot read /proc/timer_list (${error})`;
}

Deno.test(requiring([bootstrapped(timerListUnreadable)], {
  name: "monotonicNs() reads the clock the kernel calls monotonic",
  fn: () => {
    const before = monotonicNs();
    const text = Deno.readTextFileSync("/proc/timer_list");
    const after = monotonicNs();
    const match = /^now at (\d+) nsecs$/m.exec(text);
    assert.ok(match !== null, text.slice(0, 200));
    const kernel = Number(match[1]);
    assert.ok(before <= kernel && kernel <= after, `${before} <= ${kernel} <= ${after}`);
  },
}));

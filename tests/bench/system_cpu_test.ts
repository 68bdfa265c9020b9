import assert from "node:assert/strict";
import { parsePidStatCpu, parseProcStat, processCpuSeconds, systemCpu, USER_HZ } from "./system_cpu.ts";

Deno.test("parseProcStat() adds the busy fields of the cpu line and keeps steal apart", () => {
  const cpu = parseProcStat("cpu  107295 30 24827 193011 1452 0 721 1329 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n");
  assert.equal(cpu.busySeconds, (107295 + 30 + 24827 + 721) / USER_HZ);
  assert.equal(cpu.stealSeconds, 1329 / USER_HZ);
  assert.throws(() => parseProcStat("intr 1 2 3\n"), RangeError);
});

Deno.test("parsePidStatCpu() reads utime and stime after a command name with spaces and parentheses", () => {
  const stat = "28759 (a) b (c) R 28754 28754 14391 0 -1 4194304 101 0 0 0 250 50 0 0 20 0 1 0 164770";
  assert.equal(parsePidStatCpu(stat), 300 / USER_HZ);
  assert.throws(() => parsePidStatCpu("28759 (cat) R"), RangeError);
});

Deno.test("processCpuSeconds() and systemCpu() see CPU this process burns", () => {
  const ownBefore = processCpuSeconds(Deno.pid)!;
  const systemBefore = systemCpu();
  // Burn until the process's own counter shows 0.2 s (a busy machine may give it only part of a CPU).
  const giveUp = performance.now() + 30_000;
  let own = 0;
  let x = 0;
  while (own < 0.2 && performance.now() < giveUp) {
    const end = performance.now() + 10;
    while (performance.now() < end) x += Math.sqrt(x + 1);
    own = processCpuSeconds(Deno.pid)! - ownBefore;
  }
  assert.ok(x > 0);
  assert.ok(own >= 0.2, `own ${own} s`);
  const busy = systemCpu().busySeconds - systemBefore.busySeconds;
  assert.ok(busy >= own - 0.05, `busy ${busy} s, own ${own} s`);
  assert.equal(processCpuSeconds(2 ** 22 + 1), null);
});

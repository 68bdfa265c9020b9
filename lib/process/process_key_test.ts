import assert from "node:assert/strict";
import { readProcessKey, readProcessStatus, sameProcess, type StartTicks } from "./process_key.ts";
import type { Pid } from "../types.ts";

Deno.test("readProcessStatus() reads state and start time past a name with spaces and parentheses", () => {
  const dir = Deno.makeTempDirSync();
  try {
    Deno.mkdirSync(`${dir}/42`);
    const fields = Array.from({ length: 50 }, (_, i) => String(i + 3));
    fields[0] = "S";
    Deno.writeTextFileSync(`${dir}/42/stat`, `42 (we ird) (name) ${fields.join(" ")}\n`);
    assert.deepEqual(readProcessStatus(42 as Pid, dir), { key: { pid: 42, startTicks: 22 }, state: "S" });
    assert.equal(readProcessKey(43 as Pid, dir), null, "no such process");
    Deno.mkdirSync(`${dir}/44`);
    Deno.writeTextFileSync(`${dir}/44/stat`, "44 (cut) S 1 44");
    assert.equal(readProcessKey(44 as Pid, dir), null, "a stat line cut short has no start time");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("readProcessKey() gives this process its start time, the same on every read", () => {
  const own = Deno.readTextFileSync("/proc/self/stat");
  const start = Number(own.slice(own.lastIndexOf(")") + 2).split(" ")[19]);
  const key = readProcessKey(Deno.pid as Pid);
  assert.deepEqual(key, { pid: Deno.pid, startTicks: start });
  assert.ok(sameProcess(key!, readProcessKey(Deno.pid as Pid)));
});

Deno.test("sameProcess() tells a reused PID apart", () => {
  const a = { pid: 7 as Pid, startTicks: 100 as StartTicks };
  assert.equal(sameProcess(a, { pid: 7 as Pid, startTicks: 100 as StartTicks }), true);
  assert.equal(sameProcess(a, { pid: 7 as Pid, startTicks: 101 as StartTicks }), false);
  assert.equal(sameProcess(a, { pid: 8 as Pid, startTicks: 100 as StartTicks }), false);
  assert.equal(sameProcess(a, null), false);
});

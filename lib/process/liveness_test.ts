import assert from "node:assert/strict";
import { processRunning, runningProcess } from "./liveness.ts";
import type { Pid } from "../types.ts";
import type { StartTicks } from "./process_key.ts";
import { pidChoice, spawnWithPid } from "../testing/processes.ts";
import { requiring } from "../testing/requirements.ts";

Deno.test("processRunning(): this process runs; an exited child, reaped or not, does not", async () => {
  const self = runningProcess(Deno.pid as Pid);
  assert.ok(self !== null);
  assert.equal(processRunning(self), true);
  // A child that exits at once stays a zombie until its status is collected.
  const child = new Deno.Command("sleep", { args: ["0.05"] }).spawn();
  const key = runningProcess(child.pid as Pid);
  assert.ok(key !== null, "the child runs at first");
  for (let i = 0; i < 200 && processRunning(key); i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(processRunning(key), false, "the exited child (a zombie) is not running");
  assert.equal(runningProcess(child.pid as Pid), null, "nor is any process on its PID");
  await child.status;
  assert.equal(processRunning(key), false, "nor once reaped");
  assert.equal(runningProcess(0x3fff_ffff as Pid), null, "a PID no process has");
});

Deno.test("processRunning() is false for a PID that another process holds now (simulated)", () => {
  const dir = Deno.makeTempDirSync();
  try {
    Deno.mkdirSync(`${dir}/500`);
    const stat = (start: number) => {
      const fields = Array.from({ length: 50 }, (_, i) => String(i + 3));
      fields[0] = "S";
      fields[19] = String(start);
      return `500 (worker) ${fields.join(" ")}\n`;
    };
    Deno.writeTextFileSync(`${dir}/500/stat`, stat(1000));
    const first = runningProcess(500 as Pid, dir)!;
    assert.deepEqual(first, { pid: 500, startTicks: 1000 });
    assert.equal(processRunning(first, dir), true);
    // The process exits and a new one, started later, gets PID 500.
    Deno.writeTextFileSync(`${dir}/500/stat`, stat(1234));
    assert.equal(processRunning(first, dir), false);
    assert.equal(processRunning({ pid: 500 as Pid, startTicks: 1234 as StartTicks }, dir), true);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test(requiring([pidChoice()], {
  name: "processRunning() is false for a PID really reused by another process",
  fn: async () => {
    const first = new Deno.Command("sleep", { args: ["30"] }).spawn();
    const key = runningProcess(first.pid as Pid)!;
    first.kill("SIGKILL");
    await first.status;
    // Start times tick every 10 ms: the second process must not start in the first one's tick.
    await new Promise((r) => setTimeout(r, 30));
    const second = await spawnWithPid(first.pid, "sleep", ["30"]);
    assert.ok(second !== null, `PID ${first.pid} kept being taken by others`);
    try {
      assert.equal(second.pid, key.pid);
      assert.equal(processRunning(key), false, "the first process is gone, whoever holds its PID");
      assert.ok(processRunning(runningProcess(second.pid as Pid)!));
    } finally {
      second.kill("SIGKILL");
      await second.status;
    }
  },
}));

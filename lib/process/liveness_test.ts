import assert from "node:assert/strict";
import { processRunning } from "./liveness.ts";

Deno.test("processRunning(): this process runs; an exited child, reaped or not, does not", async () => {
  assert.equal(processRunning(Deno.pid), true);
  // A child that exits at once stays a zombie until its status is collected.
  const child = new Deno.Command("true").spawn();
  for (let i = 0; i < 200 && processRunning(child.pid); i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(processRunning(child.pid), false, "the exited child (a zombie) is not running");
  await child.status;
  assert.equal(processRunning(child.pid), false, "nor once reaped");
  assert.equal(processRunning(0x3fff_ffff), false, "a PID no process has");
});

import assert from "node:assert/strict";
import { CommandGroup, STOP_GRACE_MS } from "./command_group.ts";
import { delay } from "../sys/timer.ts";
import {
  killLeftovers,
  type SeenProcess,
  seeProcess,
  stillRunning,
  waitForPidFiles,
} from "../testing/processes.ts";

const STUBBORN = new URL("../../tests/workloads/stubborn_command.sh", import.meta.url).pathname;

Deno.test("CommandGroup.start() runs the command as the leader of a session of its own", async () => {
  const command = CommandGroup.start("sh", ["-c", "cat /proc/self/stat"], { stdout: "null" });
  const seen = seeProcess(command.leader.pid);
  assert.ok(seen !== null);
  const text = Deno.readTextFileSync(`/proc/${command.leader.pid}/stat`);
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  assert.equal(Number(fields[1]), Deno.pid, "omniprof's own child: the BPF filter follows it");
  assert.equal(Number(fields[2]), command.leader.pid, "its own process group");
  assert.equal(Number(fields[3]), command.leader.pid, "its own session");
  assert.equal(String(command.leader.startTicks), seen.start);
  assert.equal((await command.status).code, 0);
  await command.stop();
});

Deno.test("CommandGroup.stop() ends a command that ignores SIGTERM, its child and its daemon", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "omniprof-test-" });
  let processes: SeenProcess[] = [];
  try {
    const command = CommandGroup.start("sh", [STUBBORN, dir]);
    processes = await waitForPidFiles(dir, ["command", "child", "daemon"]);
    assert.equal(processes[0]!.pid, command.leader.pid);
    assert.ok(processes.every(stillRunning));
    const started = performance.now();
    await command.stop("SIGTERM");
    const seconds = (performance.now() - started) / 1000;
    console.log(`stopped in ${seconds.toFixed(2)} s (grace ${STOP_GRACE_MS / 1000} s)`);
    assert.deepEqual(processes.filter(stillRunning), [], "nothing of the command runs");
    assert.ok(seconds >= STOP_GRACE_MS / 1000 * 0.9, "SIGTERM was ignored: the grace period ran out");
    assert.ok(seconds < STOP_GRACE_MS / 1000 + 2, `${seconds} s`);
    const status = await command.status;
    assert.equal(status.signal, "SIGKILL");
    assert.equal(status.code, 128 + 9);
    assert.equal(command.running(), false);
  } finally {
    killLeftovers(processes);
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("CommandGroup.stop() does not wait out the grace period for a command that obeys", async () => {
  const command = CommandGroup.start("sleep", ["1000"]);
  const started = performance.now();
  await command.stop("SIGINT");
  const ms = performance.now() - started;
  console.log(`sleep stopped by SIGINT in ${ms.toFixed(0)} ms`);
  assert.ok(ms < STOP_GRACE_MS / 2, `${ms} ms`);
  assert.equal((await command.status).signal, "SIGINT");
});

Deno.test("CommandGroup.stop() continues a stopped command so that SIGTERM reaches it", async () => {
  const command = CommandGroup.start("sleep", ["1000"]);
  Deno.kill(command.leader.pid, "SIGSTOP");
  const state = () => Deno.readTextFileSync(`/proc/${command.leader.pid}/stat`).split(") ")[1]![0];
  for (let i = 0; i < 100 && state() !== "T"; i++) await delay(10);
  assert.equal(state(), "T");
  const started = performance.now();
  await command.stop("SIGTERM");
  assert.ok(performance.now() - started < STOP_GRACE_MS / 2, "ended by SIGTERM, not by SIGKILL later");
  assert.equal((await command.status).signal, "SIGTERM");
});

Deno.test("CommandGroup finds what a command that exited left running, and stops it", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "omniprof-test-" });
  let processes: SeenProcess[] = [];
  try {
    const command = CommandGroup.start("sh", [
      "-c",
      `sleep 1000 & echo $! > ${dir}/left.pid; exit 3`,
    ]);
    assert.equal((await command.status).code, 3);
    processes = await waitForPidFiles(dir, ["left"]);
    assert.ok(stillRunning(processes[0]!));
    assert.equal(command.running(), true);
    await command.stop();
    assert.equal(stillRunning(processes[0]!), false);
    assert.equal(command.running(), false);
  } finally {
    killLeftovers(processes);
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("CommandGroup.stop() kills at once when hurried", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "omniprof-test-" });
  let processes: SeenProcess[] = [];
  try {
    const command = CommandGroup.start("sh", [STUBBORN, dir]);
    processes = await waitForPidFiles(dir, ["command", "child", "daemon"]);
    const hurry = new AbortController();
    const started = performance.now();
    const stopping = command.stop("SIGTERM", { hurry: hurry.signal });
    await delay(200);
    hurry.abort();
    await stopping;
    const ms = performance.now() - started;
    assert.deepEqual(processes.filter(stillRunning), []);
    assert.ok(ms < STOP_GRACE_MS, `${ms} ms`);
  } finally {
    killLeftovers(processes);
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("CommandGroup reaps the processes omniprof adopted once they exit", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "omniprof-test-" });
  // Each inner shell starts a short sleep and exits at once: the sleep is orphaned, adopted, and exits.
  const command = CommandGroup.start("sh", [
    "-c",
    `for i in $(seq 40); do sh -c "sleep 0.05 &"; done; sleep 0.2; touch ${dir}/done; sleep 30`,
  ]);
  /** Exited sleeps of the command's session whose parent is this process: adopted, not reaped. */
  const adoptedZombies = () =>
    [...Deno.readDirSync("/proc")].filter((entry) => /^[0-9]+$/.test(entry.name)).filter((entry) => {
      try {
        const text = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
        const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
        return text.includes("(sleep)") && fields[0] === "Z" && Number(fields[1]) === Deno.pid &&
          Number(fields[3]) === command.leader.pid;
      } catch {
        return false;
      }
    }).length;
  try {
    while ([...Deno.readDirSync(dir)].length === 0) await delay(50);
    // Every sleep has exited by now; within a reaping period (1 s) and a margin, none is left a zombie.
    let left = adoptedZombies();
    for (let i = 0; i < 30 && left > 0; i++) {
      await delay(100);
      left = adoptedZombies();
    }
    assert.equal(left, 0, "exited orphans are not left as zombies");
  } finally {
    await command.stop();
    Deno.removeSync(dir, { recursive: true });
  }
});

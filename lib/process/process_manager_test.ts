import assert from "node:assert/strict";
import { ProcessManager, type ResolvedMapping } from "./process_manager.ts";
import type { Address, Pid } from "../types.ts";

/** One executable anonymous mapping (no file to open) starting at `start`. */
function mapsLine(start: number): string {
  return `${start.toString(16)}-${(start + 0x1000).toString(16)} r-xp 00000000 00:00 0 \n`;
}

/**
 * Runs `body` with a ProcessManager over a fake procfs holding one maps file per process (a process
 * without one has exited); `told` lists the pids whose mappings reached the listener, in order.
 */
function withProcesses(maps: Record<number, string>, body: (processes: ProcessManager, told: Pid[]) => void) {
  const root = Deno.makeTempDirSync();
  try {
    for (const [pid, text] of Object.entries(maps)) {
      Deno.mkdirSync(`${root}/${pid}`);
      Deno.writeTextFileSync(`${root}/${pid}/maps`, text);
    }
    const told: Pid[] = [];
    using processes = new ProcessManager({
      procRoot: root,
      listener: {
        onMappings(pid: Pid, _mappings: readonly ResolvedMapping[]) {
          told.push(pid);
        },
        onExit() {},
      },
    });
    body(processes, told);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
}

Deno.test("a forked child starts from its parent's mappings, handed over when it is first sampled", () => {
  withProcesses({ 100: mapsLine(0x10000) }, (processes, told) => {
    processes.onExec(100 as Pid);
    assert.deepEqual(told, [100]);
    processes.onFork(100 as Pid, 101 as Pid);
    // Nothing installed for the child yet: most children exec or exit before they are sampled.
    assert.deepEqual(told, [100]);
    assert.equal(processes.resolve(101 as Pid, 0x10010 as Address)?.fileOffset, 0x10);
    processes.onUnknown(101 as Pid);
    assert.deepEqual(told, [100, 101]);
    assert.equal(processes.stats.syncs, 1, "the child was never read: it has no maps file here");
  });
});

Deno.test("a parent not read yet is read once for all its children", () => {
  withProcesses({ 200: mapsLine(0x20000) }, (processes, told) => {
    for (let child = 201; child < 211; child++) processes.onFork(200 as Pid, child as Pid);
    assert.equal(processes.stats.syncs, 1);
    assert.deepEqual(told, [200]);
    assert.equal(processes.resolve(205 as Pid, 0x20004 as Address)?.fileOffset, 4);
  });
});

Deno.test("the child of a parent that is gone is read itself", () => {
  withProcesses({ 301: mapsLine(0x30000) }, (processes, told) => {
    processes.onFork(300 as Pid, 301 as Pid);
    assert.deepEqual(told, [301]);
    assert.equal(processes.resolve(301 as Pid, 0x30008 as Address)?.fileOffset, 8);
  });
});

/** A /proc/PID/stat line of a process started at `startTicks`. */
function statLine(pid: number, startTicks: number): string {
  const fields = Array.from({ length: 50 }, (_, i) => String(i + 3));
  fields[0] = "S";
  fields[19] = String(startTicks);
  return `${pid} (worker) ${fields.join(" ")}\n`;
}

Deno.test("a PID found held by another process has the old one's state dropped before the new is installed", () => {
  const root = Deno.makeTempDirSync();
  try {
    Deno.mkdirSync(`${root}/400`);
    Deno.writeTextFileSync(`${root}/400/stat`, statLine(400, 1000));
    Deno.writeTextFileSync(`${root}/400/maps`, mapsLine(0x40000));
    const events: string[] = [];
    using processes = new ProcessManager({
      procRoot: root,
      resyncIntervalMs: 0,
      listener: {
        onMappings: (pid, mappings) => events.push(`mappings ${pid} ${mappings[0]!.start.toString(16)}`),
        onExit: (pid) => events.push(`exit ${pid}`),
      },
    });
    processes.onExec(400 as Pid);
    assert.equal(processes.resolve(400 as Pid, 0x40010 as Address)?.fileOffset, 0x10);
    // Its exit event was lost; a process started later holds PID 400 and maps other code.
    Deno.writeTextFileSync(`${root}/400/stat`, statLine(400, 2000));
    Deno.writeTextFileSync(`${root}/400/maps`, mapsLine(0x90000));
    processes.onStale(400 as Pid);
    assert.deepEqual(events, ["mappings 400 40000", "exit 400", "mappings 400 90000"]);
    assert.equal(processes.stats.reusedPids, 1);
    assert.equal(processes.resolve(400 as Pid, 0x40010 as Address), null, "the old process's code is gone");
    assert.equal(processes.resolve(400 as Pid, 0x90010 as Address)?.fileOffset, 0x10);
    // Read again, the same process is the same: nothing is dropped.
    const seen = events.length;
    processes.onExec(400 as Pid);
    assert.deepEqual(events.slice(seen), ["mappings 400 90000"]);
    assert.equal(processes.stats.reusedPids, 1);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});

Deno.test("a fork to a PID still tracked drops the process that held it first", () => {
  withProcesses({ 500: mapsLine(0x50000), 600: mapsLine(0x60000) }, (processes) => {
    processes.onExec(500 as Pid);
    processes.onExec(600 as Pid);
    // 600's exit was never seen: 500 forks a child that the kernel gives PID 600.
    processes.onFork(500 as Pid, 600 as Pid);
    assert.equal(processes.stats.reusedPids, 1);
    assert.equal(processes.resolve(600 as Pid, 0x50004 as Address)?.fileOffset, 4, "the parent's mappings");
  });
});

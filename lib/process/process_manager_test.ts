import assert from "node:assert/strict";
import { FileRegistry } from "./file_registry.ts";
import { ProcessManager } from "./process_manager.ts";
import type { Address, Pid } from "../types.ts";
import { MemoryProcessBpf } from "../testing/memory_process_bpf.ts";

/** One executable anonymous mapping (no file to open) starting at `start`. */
function mapsLine(start: number): string {
  return `${start.toString(16)}-${(start + 0x1000).toString(16)} r-xp 00000000 00:00 0 \n`;
}

/** A fake procfs holding one maps file per process (a process without one has exited). */
function fakeProc(maps: Record<number, string>): string {
  const root = Deno.makeTempDirSync();
  for (const [pid, text] of Object.entries(maps)) {
    Deno.mkdirSync(`${root}/${pid}`);
    Deno.writeTextFileSync(`${root}/${pid}/maps`, text);
  }
  return root;
}

/**
 * Runs `body` with a ProcessManager over a fake procfs and its BPF state in memory: `bpf.pids()` are the
 * processes whose mappings are installed in the trie.
 */
function withProcesses(
  maps: Record<number, string>,
  body: (processes: ProcessManager, bpf: MemoryProcessBpf) => void,
): void {
  const root = fakeProc(maps);
  try {
    const bpf = new MemoryProcessBpf();
    using files = new FileRegistry({ procRoot: root });
    using processes = new ProcessManager({ files, bpf, procRoot: root });
    body(processes, bpf);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
}

Deno.test("a forked child starts from its parent's mappings, installed when it is first sampled", () => {
  withProcesses({ 100: mapsLine(0x10000) }, (processes, bpf) => {
    processes.onExec(100 as Pid);
    assert.deepEqual(bpf.pids(), [100]);
    processes.onFork(100 as Pid, 101 as Pid);
    // Nothing installed for the child yet: most children exec or exit before they are sampled.
    assert.deepEqual(bpf.pids(), [100]);
    assert.equal(processes.resolve(101 as Pid, 0x10010 as Address)?.fileOffset, 0x10);
    processes.onUnknown(101 as Pid);
    assert.deepEqual(bpf.pids(), [100, 101]);
    assert.deepEqual(
      bpf.entries().filter((entry) => entry.pid === 101).map(({ start, end }) => [start, end]),
      [[0x10000, 0x11000]],
    );
    assert.equal(processes.stats.syncs, 1, "the child was never read: it has no maps file here");
    assert.equal(bpf.knownPids.entries.size, 2, "BPF knows both");
  });
});

Deno.test("a parent not read yet is read once for all its children", () => {
  withProcesses({ 200: mapsLine(0x20000) }, (processes, bpf) => {
    for (let child = 201; child < 211; child++) processes.onFork(200 as Pid, child as Pid);
    assert.equal(processes.stats.syncs, 1);
    assert.deepEqual(bpf.pids(), [200]);
    assert.equal(processes.resolve(205 as Pid, 0x20004 as Address)?.fileOffset, 4);
  });
});

Deno.test("the child of a parent that is gone is read itself", () => {
  withProcesses({ 301: mapsLine(0x30000) }, (processes, bpf) => {
    processes.onFork(300 as Pid, 301 as Pid);
    assert.deepEqual(bpf.pids(), [301]);
    assert.equal(processes.resolve(301 as Pid, 0x30008 as Address)?.fileOffset, 8);
  });
});

Deno.test("an exit removes the process from the trie and from the pids BPF knows", () => {
  withProcesses({ 350: mapsLine(0x35000) }, (processes, bpf) => {
    processes.onExec(350 as Pid);
    assert.ok(bpf.trieMap.entries.size > 0);
    processes.onExit(350 as Pid);
    assert.equal(bpf.trieMap.entries.size, 0);
    assert.equal(bpf.knownPids.entries.size, 0);
    assert.equal(processes.processCount, 0);
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
    const bpf = new MemoryProcessBpf();
    using files = new FileRegistry({ procRoot: root });
    using processes = new ProcessManager({ files, bpf, procRoot: root, resyncIntervalMs: 0 });
    const installed = () => bpf.entries().map(({ pid, start }) => `${pid} ${start.toString(16)}`);
    processes.onExec(400 as Pid);
    assert.deepEqual(installed(), ["400 40000"]);
    assert.equal(processes.resolve(400 as Pid, 0x40010 as Address)?.fileOffset, 0x10);
    // Its exit event was lost; a process started later holds PID 400 and maps other code.
    Deno.writeTextFileSync(`${root}/400/stat`, statLine(400, 2000));
    Deno.writeTextFileSync(`${root}/400/maps`, mapsLine(0x90000));
    processes.onStale(400 as Pid);
    assert.deepEqual(installed(), ["400 90000"], "the old process's entries are gone");
    assert.equal(processes.stats.reusedPids, 1);
    assert.equal(processes.resolve(400 as Pid, 0x40010 as Address), null, "the old process's code is gone");
    assert.equal(processes.resolve(400 as Pid, 0x90010 as Address)?.fileOffset, 0x10);
    // Read again, the same process is the same: nothing is dropped or written.
    const writes = bpf.trieMap.writes;
    processes.onExec(400 as Pid);
    assert.deepEqual(installed(), ["400 90000"]);
    assert.equal(bpf.trieMap.writes, writes);
    assert.equal(processes.stats.reusedPids, 1);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});

Deno.test("a fork to a PID still tracked drops the process that held it first", () => {
  withProcesses({ 500: mapsLine(0x50000), 600: mapsLine(0x60000) }, (processes, bpf) => {
    processes.onExec(500 as Pid);
    processes.onExec(600 as Pid);
    assert.deepEqual(bpf.pids(), [500, 600]);
    // 600's exit was never seen: 500 forks a child that the kernel gives PID 600.
    processes.onFork(500 as Pid, 600 as Pid);
    assert.equal(processes.stats.reusedPids, 1);
    assert.deepEqual(bpf.pids(), [500], "the old 600's entries are gone, the child's not installed yet");
    assert.equal(processes.resolve(600 as Pid, 0x50004 as Address)?.fileOffset, 4, "the parent's mappings");
  });
});

Deno.test("a process just exec'd is read again at once when it maps new code, a few times only", () => {
  const root = fakeProc({ 700: mapsLine(0x70000) });
  try {
    const bpf = new MemoryProcessBpf();
    using files = new FileRegistry({ procRoot: root });
    // An interval no test run reaches: every re-read below is one of the quick ones after exec.
    using processes = new ProcessManager({ files, bpf, procRoot: root, resyncIntervalMs: 3_600_000 });
    processes.onExec(700 as Pid);
    // The dynamic loader maps a library after the exec was read; its code is sampled.
    Deno.writeTextFileSync(`${root}/700/maps`, mapsLine(0x70000) + mapsLine(0x80000));
    assert.equal(processes.resolve(700 as Pid, 0x80010 as Address)?.fileOffset, 0x10);
    assert.equal(processes.stats.resyncs, 1);
    for (let i = 0; i < 10; i++) processes.onStale(700 as Pid);
    assert.equal(processes.stats.resyncs, 4, "four quick re-reads after an exec, then the interval rules");
    assert.equal(processes.stats.syncs, 5);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});

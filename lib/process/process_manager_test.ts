import assert from "node:assert/strict";
import { ProcessManager, type ResolvedMapping } from "./process_manager.ts";
import type { Address, Pid } from "../types.ts";

/** A procfs with one maps file per process; a process without one has exited. */
function fakeProc(maps: Record<number, string>): string {
  const root = Deno.makeTempDirSync();
  for (const [pid, text] of Object.entries(maps)) {
    Deno.mkdirSync(`${root}/${pid}`);
    Deno.writeTextFileSync(`${root}/${pid}/maps`, text);
  }
  return root;
}

/** One executable anonymous mapping (no file to open) starting at `start`. */
function mapsLine(start: number): string {
  return `${start.toString(16)}-${(start + 0x1000).toString(16)} r-xp 00000000 00:00 0 \n`;
}

function manager(root: string) {
  const told: Pid[] = [];
  const processes = new ProcessManager({
    procRoot: root,
    listener: {
      onMappings(pid: Pid, _mappings: readonly ResolvedMapping[]) {
        told.push(pid);
      },
      onExit() {},
    },
  });
  return { processes, told };
}

Deno.test("a forked child starts from its parent's mappings, handed over when it is first sampled", () => {
  const root = fakeProc({ 100: mapsLine(0x10000) });
  try {
    const { processes, told } = manager(root);
    processes.onExec(100 as Pid);
    assert.deepEqual(told, [100]);
    processes.onFork(100 as Pid, 101 as Pid);
    // Nothing installed for the child yet: most children exec or exit before they are sampled.
    assert.deepEqual(told, [100]);
    assert.equal(processes.resolve(101 as Pid, 0x10010 as Address)?.fileOffset, 0x10);
    processes.onUnknown(101 as Pid);
    assert.deepEqual(told, [100, 101]);
    assert.equal(processes.stats.syncs, 1, "the child was never read: it has no maps file here");
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});

Deno.test("a parent not read yet is read once for all its children", () => {
  const root = fakeProc({ 200: mapsLine(0x20000) });
  try {
    const { processes, told } = manager(root);
    for (let child = 201; child < 211; child++) processes.onFork(200 as Pid, child as Pid);
    assert.equal(processes.stats.syncs, 1);
    assert.deepEqual(told, [200]);
    assert.equal(processes.resolve(205 as Pid, 0x20004 as Address)?.fileOffset, 4);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});

Deno.test("the child of a parent that is gone is read itself", () => {
  const root = fakeProc({ 301: mapsLine(0x30000) });
  try {
    const { processes, told } = manager(root);
    processes.onFork(300 as Pid, 301 as Pid);
    assert.deepEqual(told, [301]);
    assert.equal(processes.resolve(301 as Pid, 0x30008 as Address)?.fileOffset, 8);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});

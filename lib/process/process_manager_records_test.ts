// The process manager fed by the kernel's records (kernelRecords): mappings from exec, fork and mmap
// records, /proc read only to seed processes without records, files of exited processes opened on the host
// only when they are the very file the record names.
import { anonymousMapping } from "../testing/perf_records.ts";
import assert from "node:assert/strict";
import type { ExecutableMapping } from "../perf/perf_records.ts";
import { MemoryProcessBpf } from "../testing/memory_process_bpf.ts";
import type { Address, Pid } from "../types.ts";
import { FileRegistry } from "./file_registry.ts";
import { ProcessManager } from "./process_manager.ts";

/** One executable anonymous mapping as a maps line. */
function mapsLine(start: number): string {
  return `${start.toString(16)}-${(start + 0x1000).toString(16)} r-xp 00000000 00:00 0 \n`;
}

/**
 * Runs `body` with a ProcessManager following records over a fake procfs (a process without a maps file
 * there has exited; none has a root) and its BPF state in memory.
 */
function withRecords(
  maps: Record<number, string>,
  body: (processes: ProcessManager, bpf: MemoryProcessBpf, procRoot: string) => void,
): void {
  const root = Deno.makeTempDirSync();
  try {
    for (const [pid, text] of Object.entries(maps)) {
      Deno.mkdirSync(`${root}/${pid}`);
      Deno.writeTextFileSync(`${root}/${pid}/maps`, text);
    }
    const bpf = new MemoryProcessBpf();
    using files = new FileRegistry({ procRoot: root });
    using processes = new ProcessManager({ files, bpf, procRoot: root, kernelRecords: true });
    body(processes, bpf, root);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
}

Deno.test("a process that exited before its records were handled resolves from them, with no /proc read", () => {
  withRecords({}, (processes) => {
    processes.onForkRecord(11 as Pid, 10 as Pid, 100);
    processes.onExecRecord(11 as Pid, 200);
    processes.onMappingRecord(anonymousMapping(11, 0x40000, 300));
    processes.onMappingRecord(anonymousMapping(11, 0x10000, 310));
    assert.equal(processes.resolve(11 as Pid, 0x40008 as Address, 400)?.fileOffset, 8);
    assert.equal(processes.resolve(11 as Pid, 0x10010 as Address, 400)?.fileOffset, 0x10);
    assert.equal(processes.resolve(11 as Pid, 0x20000 as Address, 400), null);
    assert.equal(processes.stats.syncs, 0);
  });
});

Deno.test("a new mapping replaces the part of an older one it covers", () => {
  withRecords({}, (processes) => {
    processes.onExecRecord(12 as Pid, 100);
    processes.onMappingRecord({ ...anonymousMapping(12, 0x40000, 200), end: 0x43000 as Address });
    processes.onMappingRecord({ ...anonymousMapping(12, 0x41000, 300), fileOffset: 0x9000 });
    assert.deepEqual(
      processes.mappingsOf(12 as Pid).map((m) => [m.start, m.end, m.fileOffset]),
      [[0x40000, 0x41000, 0], [0x41000, 0x42000, 0x9000], [0x42000, 0x43000, 0x2000]],
    );
  });
});

Deno.test("a sample taken before an exec resolves against the program before it", () => {
  withRecords({}, (processes) => {
    processes.onExecRecord(20 as Pid, 100);
    processes.onMappingRecord(anonymousMapping(20, 0x10000, 110));
    processes.onExecRecord(20 as Pid, 500);
    processes.onMappingRecord(anonymousMapping(20, 0x70000, 510));
    // The kernel maps the vdso near the end of the exec call; the loader, started, maps a library.
    processes.onMappingRecord({ ...anonymousMapping(20, 0x90000, 520), path: "[vdso]" });
    processes.onMappingRecord(anonymousMapping(20, 0xa0000, 650));
    // Taken at 300 (old program), at 600 (new program), at 505 in the exec call (user registers still the
    // old program's: the exec call ends after the vdso is mapped, before the loader maps anything), and
    // at 50, before the old program itself: nothing left to resolve it against.
    assert.equal(processes.resolve(20 as Pid, 0x10004 as Address, 300)?.fileOffset, 4);
    assert.equal(processes.resolve(20 as Pid, 0x70004 as Address, 600)?.fileOffset, 4);
    assert.equal(processes.resolve(20 as Pid, 0x10008 as Address, 505)?.fileOffset, 8);
    assert.equal(processes.resolve(20 as Pid, 0x1000c as Address, 530)?.fileOffset, 0xc);
    assert.equal(processes.resolve(20 as Pid, 0x10004 as Address, 50), null);
    // After the exec call, an address of the old program is no longer one.
    assert.equal(processes.resolve(20 as Pid, 0x10004 as Address, 700), null);
    assert.equal(processes.stats.resolvedBeforeExec, 3);
    assert.equal(processes.stats.resolvedAcrossExec, 1);
  });
});

Deno.test("records install the trie for processes BPF met, and not for those whose exit is pending", () => {
  withRecords({}, (processes, bpf) => {
    // BPF saw 30 and 31 exec before their records were drained.
    processes.onExec(30 as Pid);
    processes.onExec(31 as Pid);
    assert.deepEqual(bpf.pids(), []);
    for (const pid of [30, 31, 32]) {
      processes.onForkRecord(pid as Pid, 1 as Pid, 100);
      processes.onExecRecord(pid as Pid, 110);
      processes.onMappingRecord(anonymousMapping(pid, 0x10000, 120));
    }
    processes.installChanged(new Set([31 as Pid]));
    assert.deepEqual(bpf.pids(), [30], "31 is exiting; 32 was never met by BPF");
    assert.equal(processes.stats.reusedPids, 0, "the state made for 30 before its fork record is its own");
    assert.equal(processes.stats.syncs, 0);
    // A library mapped later reaches the trie at the next installChanged.
    processes.onMappingRecord(anonymousMapping(30, 0x20000, 200));
    processes.installChanged(new Set());
    assert.deepEqual(
      bpf.entries().filter((entry) => entry.pid === 30).map((entry) => entry.start),
      [0x10000, 0x20000],
    );
    // BPF meets 32 sampled: installed from its records.
    processes.onUnknown(32 as Pid);
    assert.deepEqual(bpf.pids(), [30, 31, 32].filter((pid) => pid !== 31));
    processes.onExit(30 as Pid);
    assert.deepEqual(bpf.pids(), [32]);
  });
});

Deno.test("the exec call of a program that maps nothing after the vdso ends when the program is sampled", () => {
  withRecords({}, (processes) => {
    processes.onExecRecord(21 as Pid, 100);
    processes.onMappingRecord(anonymousMapping(21, 0x10000, 110));
    processes.onExecRecord(21 as Pid, 500);
    // A static program: its own code, then the vdso, and nothing more.
    processes.onMappingRecord(anonymousMapping(21, 0x70000, 510));
    processes.onMappingRecord({ ...anonymousMapping(21, 0x90000, 520), path: "[vdso]" });
    assert.equal(processes.resolve(21 as Pid, 0x10004 as Address, 600)?.fileOffset, 4, "still in exec");
    assert.equal(processes.resolve(21 as Pid, 0x70004 as Address, 700)?.fileOffset, 4);
    assert.equal(processes.resolve(21 as Pid, 0x10004 as Address, 800), null, "the program ran at 700");
  });
});

Deno.test("a forked child has its parent's mappings until it execs", () => {
  withRecords({}, (processes) => {
    processes.onExecRecord(40 as Pid, 100);
    processes.onMappingRecord(anonymousMapping(40, 0x10000, 110));
    processes.onForkRecord(41 as Pid, 40 as Pid, 200);
    assert.equal(processes.resolve(41 as Pid, 0x10004 as Address, 250)?.fileOffset, 4);
    processes.onExecRecord(41 as Pid, 300);
    processes.onMappingRecord(anonymousMapping(41, 0x50000, 310));
    processes.onMappingRecord({ ...anonymousMapping(41, 0x90000, 320), path: "[vdso]" });
    processes.onMappingRecord(anonymousMapping(41, 0xa0000, 330));
    assert.equal(processes.resolve(41 as Pid, 0x10004 as Address, 400), null);
    assert.equal(
      processes.resolve(40 as Pid, 0x10004 as Address, 400)?.fileOffset,
      4,
      "the parent keeps them",
    );
    assert.equal(processes.stats.syncs, 0);
  });
});

Deno.test("a process older than the session is read from /proc once; older records are in that read", () => {
  withRecords({ 50: mapsLine(0x10000) }, (processes) => {
    // Its child, forked before it was read: the child has no records of its own mappings.
    processes.onForkRecord(51 as Pid, 50 as Pid, 1);
    assert.equal(processes.resolve(50 as Pid, 0x10004 as Address)?.fileOffset, 4);
    assert.equal(processes.stats.seeded, 1);
    // A mapping recorded before the read (stamped 2, long before now) is already in it: not added.
    processes.onMappingRecord(anonymousMapping(50, 0x30000, 2));
    assert.equal(processes.resolve(50 as Pid, 0x30004 as Address), null);
    // One made after the read is.
    processes.onMappingRecord(anonymousMapping(50, 0x30000, Number.MAX_SAFE_INTEGER));
    assert.equal(processes.resolve(50 as Pid, 0x30004 as Address)?.fileOffset, 4);
    // The child, met, is read (it has no maps file here: it has exited).
    assert.equal(processes.resolve(51 as Pid, 0x10004 as Address), null);
    assert.equal(processes.stats.seeded, 2);
    assert.equal(processes.stats.syncFailures, 1);
    assert.equal(processes.stats.syncs, 2);
  });
});

Deno.test("after records were lost, each process is read from /proc once when next met", () => {
  withRecords({ 60: mapsLine(0x60000) }, (processes) => {
    processes.onExecRecord(60 as Pid, 100);
    processes.onMappingRecord(anonymousMapping(60, 0x10000, 110));
    assert.equal(processes.resolve(60 as Pid, 0x10004 as Address)?.fileOffset, 4);
    processes.recordsLost();
    // /proc says what it maps now (the mapping at 0x60000 was in the lost records).
    assert.equal(processes.resolve(60 as Pid, 0x60004 as Address)?.fileOffset, 4);
    assert.equal(processes.resolve(60 as Pid, 0x60008 as Address)?.fileOffset, 8);
    assert.equal(processes.stats.rereadsAfterLoss, 1);
    assert.equal(processes.stats.syncs, 1);
  });
});

/** The device of a `Deno.statSync` result as major and minor numbers (glibc's gnu_dev_major/minor). */
function deviceOf(info: Deno.FileInfo): { major: number; minor: number } {
  const dev = BigInt(info.dev);
  return {
    major: Number(((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn)),
    minor: Number((dev & 0xffn) | ((dev >> 12n) & ~0xffn)),
  };
}

Deno.test("the file of an exited process is opened by its path only when it is the file the record names", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const path = `${dir}/program`;
    Deno.copyFileSync("/bin/true", path);
    const info = Deno.statSync(path);
    const identity = { ...deviceOf(info), inode: info.ino! };
    withRecords({}, (processes) => {
      const record = (pid: number, inode: number): ExecutableMapping => ({
        ...anonymousMapping(pid, 0x10000, 100),
        path,
        anonymous: false,
        file: { ...identity, inode },
      });
      processes.onMappingRecord(record(70, identity.inode));
      const file = processes.mappingsOf(70 as Pid)[0]!.file;
      assert.equal(file.readable, true, `${file.refusal}`);
      assert.equal(file.path, path);
      // Another file had that name when process 71 mapped it (a container's, or one since replaced).
      processes.onMappingRecord(record(71, identity.inode + 1));
      const other = processes.mappingsOf(71 as Pid)[0]!.file;
      assert.equal(other.readable, false);
      assert.equal(other.refusal, "replaced");
    });
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

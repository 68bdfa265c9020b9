import assert from "node:assert/strict";
import { RegularFile } from "../sys/regular_file.ts";
import type { Pid } from "../types.ts";
import type { PerfMapOpening } from "./perf_map_file.ts";
import { PerfMaps } from "./perf_maps.ts";
import { concat, debugInfo, header, load } from "../testing/jitdump_writer.ts";

/** Maps by PID in a folder; what a test says of a PID is what looking for its map finds. */
class FakeProcesses {
  readonly dir = Deno.makeTempDirSync({ prefix: "omniprof_perf_maps_test_" });
  readonly refused = new Set<number>();
  readonly dumpsRefused = new Set<number>();
  looks = 0;

  open = (pid: Pid): PerfMapOpening => {
    this.looks++;
    if (this.refused.has(pid)) return { kind: "refused", reason: "owner", detail: "planted" };
    try {
      return { kind: "opened", file: RegularFile.open(this.path(pid)) };
    } catch {
      return { kind: "absent" };
    }
  };

  openJitDump = (pid: Pid): PerfMapOpening => {
    if (this.dumpsRefused.has(pid)) return { kind: "refused", reason: "not-regular", detail: "a link" };
    try {
      return { kind: "opened", file: RegularFile.open(this.dumpPath(pid)) };
    } catch {
      return { kind: "absent" };
    }
  };

  path(pid: number): string {
    return `${this.dir}/perf-${pid}.map`;
  }

  dumpPath(pid: number): string {
    return `${this.dir}/jit-${pid}.dump`;
  }

  [Symbol.dispose](): void {
    Deno.removeSync(this.dir, { recursive: true });
  }
}

const PID = 4242 as Pid;

/** A jitdump of `loads`, each with one line entry at its start when it has a `line`. */
function jitdump(
  loads: { address: number; size: number; name: string; line?: number }[],
  magic = 0x4a695444,
) {
  return concat(
    header(true, { magic }),
    ...loads.flatMap(({ address, size, name, line }, index) => [
      ...(line === undefined ? [] : [debugInfo(address, [{ address, line, file: "/app.js" }])]),
      load(address, size, name, index),
    ]),
  );
}

Deno.test("PerfMaps reads a process's map at its first JIT frame, and to its end when it exits", () => {
  using processes = new FakeProcesses();
  using perfMaps = new PerfMaps({ open: processes.open, openJitDump: processes.openJitDump });
  Deno.writeTextFileSync(processes.path(PID), "1000 10 first\n2000 10 unterminated");
  const map = perfMaps.of(PID);
  assert.equal(map.lookup(0x1000)?.functionName, "first");
  assert.equal(map.lookup(0x2000), null, "the writer may be in the middle of it");
  assert.equal(perfMaps.of(PID), map, "one map per process");
  perfMaps.onExit(PID);
  assert.equal(map.lookup(0x2000)?.functionName, "unterminated");
  assert.equal(map.frame(0x3000), null);
  const stats = perfMaps.stats;
  assert.equal(stats.mapsRead, 1);
  assert.equal(stats.entries, 2, "the counts of an exited process's map are kept");
  assert.notEqual(perfMaps.of(PID), map, "a later process with the PID has a map of its own");
});

Deno.test("PerfMaps looks again for a map that is not there yet, at most every refreshIntervalMs", async () => {
  using processes = new FakeProcesses();
  using perfMaps = new PerfMaps({
    open: processes.open,
    openJitDump: processes.openJitDump,
    refreshIntervalMs: 100,
  });
  const map = perfMaps.of(PID);
  perfMaps.of(PID);
  assert.equal(processes.looks, 1, "not again within the interval");
  Deno.writeTextFileSync(processes.path(PID), "1000 10 written later\n");
  await new Promise((resolve) => setTimeout(resolve, 150));
  perfMaps.of(PID);
  assert.equal(processes.looks, 2);
  assert.equal(map.lookup(0x1000)?.functionName, "written later");
  assert.equal(perfMaps.stats.mapsRead, 1);
});

Deno.test("PerfMaps counts a refused map once and does not look again while the process lives", async () => {
  using processes = new FakeProcesses();
  processes.refused.add(PID);
  using perfMaps = new PerfMaps({
    open: processes.open,
    openJitDump: processes.openJitDump,
    refreshIntervalMs: 0,
  });
  const map = perfMaps.of(PID);
  perfMaps.of(PID);
  await new Promise((resolve) => setTimeout(resolve, 5));
  assert.equal(map.frame(0x1000), null);
  assert.equal(processes.looks, 1);
  assert.deepEqual(perfMaps.stats.mapsRefused, { "not-regular": 0, owner: 1, denied: 0, failed: 0 });
  assert.equal(perfMaps.stats.mapsRead, 0);
});

Deno.test("PerfMaps holds at most maxOpenMaps files and counts the looks it skipped", () => {
  using processes = new FakeProcesses();
  using perfMaps = new PerfMaps({
    open: processes.open,
    openJitDump: processes.openJitDump,
    maxOpenMaps: 1,
    refreshIntervalMs: 0,
  });
  for (const pid of [1, 2]) Deno.writeTextFileSync(processes.path(pid), `${pid}000 10 p${pid}\n`);
  assert.equal(perfMaps.of(1 as Pid).lookup(0x1000)?.functionName, "p1");
  const second = perfMaps.of(2 as Pid);
  assert.equal(second.lookup(0x2000), null);
  // Skipped: the jitdump of 1, the map and the jitdump of 2.
  assert.equal(perfMaps.stats.mapsOverLimit, 3);
  perfMaps.onExit(1 as Pid);
  assert.equal(second.frame(0x2000)?.functionName, "p2", "opened once another map was let go");
});

Deno.test("PerfMaps counts JIT frames named and not, and truncated maps", () => {
  using processes = new FakeProcesses();
  using perfMaps = new PerfMaps({ open: processes.open, openJitDump: processes.openJitDump, maxEntries: 1 });
  Deno.writeTextFileSync(processes.path(PID), "1000 10 a\n2000 10 b\n");
  perfMaps.of(PID);
  perfMaps.countFrames("perf-map", 5);
  perfMaps.countFrames("jitdump", 3);
  perfMaps.countFrames(null, 2);
  const stats = perfMaps.stats;
  assert.deepEqual(
    [
      stats.framesNamed,
      stats.framesNamedFromJitdumps,
      stats.framesUnnamed,
      stats.mapsTruncated,
      stats.entries,
    ],
    [8, 3, 2, 1, 1],
  );
});

Deno.test("PerfMaps asks a process's jitdump first (names and lines), then its perf map", () => {
  using processes = new FakeProcesses();
  using perfMaps = new PerfMaps({ open: processes.open, openJitDump: processes.openJitDump });
  Deno.writeTextFileSync(processes.path(PID), "1000 10 from the map\n2000 10 only in the map\n");
  Deno.writeFileSync(
    processes.dumpPath(PID),
    jitdump([{ address: 0x1000, size: 16, name: "from the dump", line: 7 }]),
  );
  const names = perfMaps.of(PID);
  assert.deepEqual(names.lookup(0x1004), {
    functionName: "from the dump",
    sourceFile: "/app.js",
    line: 7,
    source: "jitdump",
  });
  assert.deepEqual(names.lookup(0x2004), {
    functionName: "only in the map",
    sourceFile: "",
    line: 0,
    source: "perf-map",
  });
  perfMaps.onExit(PID);
  const stats = perfMaps.stats;
  assert.equal(stats.mapsRead, 1);
  assert.deepEqual(stats.jitdumps, {
    read: 1,
    truncated: 0,
    rejected: 0,
    refused: { "not-regular": 0, owner: 0, denied: 0, failed: 0 },
    loads: 1,
    moves: 0,
    lineEntries: 1,
    malformedRecords: 0,
  });
});

Deno.test("PerfMaps counts jitdumps refused and rejected, and names from the perf map then", () => {
  using processes = new FakeProcesses();
  using perfMaps = new PerfMaps({ open: processes.open, openJitDump: processes.openJitDump });
  Deno.writeTextFileSync(processes.path(1), "1000 10 mapped\n");
  Deno.writeFileSync(processes.dumpPath(1), jitdump([{ address: 0x1000, size: 16, name: "x" }], 0x464c457f));
  processes.dumpsRefused.add(2);
  assert.equal(perfMaps.of(1 as Pid).lookup(0x1000)?.source, "perf-map");
  assert.equal(perfMaps.of(2 as Pid).lookup(0x1000), null);
  const stats = perfMaps.stats.jitdumps;
  assert.equal(stats.read, 1);
  assert.equal(stats.rejected, 1);
  assert.deepEqual(stats.refused, { "not-regular": 1, owner: 0, denied: 0, failed: 0 });
});

import assert from "node:assert/strict";
import { RegularFile } from "../sys/regular_file.ts";
import type { Pid } from "../types.ts";
import type { PerfMapOpening } from "./perf_map_file.ts";
import { PerfMaps } from "./perf_maps.ts";

/** Maps by PID in a folder; what a test says of a PID is what looking for its map finds. */
class FakeProcesses {
  readonly dir = Deno.makeTempDirSync({ prefix: "omniprof_perf_maps_test_" });
  readonly refused = new Set<number>();
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

  path(pid: number): string {
    return `${this.dir}/perf-${pid}.map`;
  }

  [Symbol.dispose](): void {
    Deno.removeSync(this.dir, { recursive: true });
  }
}

const PID = 4242 as Pid;

Deno.test("PerfMaps reads a process's map at its first JIT frame, and to its end when it exits", () => {
  using processes = new FakeProcesses();
  using perfMaps = new PerfMaps({ open: processes.open });
  Deno.writeTextFileSync(processes.path(PID), "1000 10 first\n2000 10 unterminated");
  const map = perfMaps.of(PID);
  assert.equal(map.lookup(0x1000), "first");
  assert.equal(map.lookup(0x2000), null, "the writer may be in the middle of it");
  assert.equal(perfMaps.of(PID), map, "one map per process");
  perfMaps.onExit(PID);
  assert.equal(map.lookup(0x2000), "unterminated");
  assert.equal(map.name(0x3000), null);
  const stats = perfMaps.stats;
  assert.equal(stats.mapsRead, 1);
  assert.equal(stats.entries, 2, "the counts of an exited process's map are kept");
  assert.notEqual(perfMaps.of(PID), map, "a later process with the PID has a map of its own");
});

Deno.test("PerfMaps looks again for a map that is not there yet, at most every refreshIntervalMs", async () => {
  using processes = new FakeProcesses();
  using perfMaps = new PerfMaps({ open: processes.open, refreshIntervalMs: 100 });
  const map = perfMaps.of(PID);
  perfMaps.of(PID);
  assert.equal(processes.looks, 1, "not again within the interval");
  Deno.writeTextFileSync(processes.path(PID), "1000 10 written later\n");
  await new Promise((resolve) => setTimeout(resolve, 150));
  perfMaps.of(PID);
  assert.equal(processes.looks, 2);
  assert.equal(map.lookup(0x1000), "written later");
  assert.equal(perfMaps.stats.mapsRead, 1);
});

Deno.test("PerfMaps counts a refused map once and does not look again while the process lives", async () => {
  using processes = new FakeProcesses();
  processes.refused.add(PID);
  using perfMaps = new PerfMaps({ open: processes.open, refreshIntervalMs: 0 });
  const map = perfMaps.of(PID);
  perfMaps.of(PID);
  await new Promise((resolve) => setTimeout(resolve, 5));
  assert.equal(map.name(0x1000), null);
  assert.equal(processes.looks, 1);
  assert.deepEqual(perfMaps.stats.mapsRefused, { "not-regular": 0, owner: 1, denied: 0, failed: 0 });
  assert.equal(perfMaps.stats.mapsRead, 0);
});

Deno.test("PerfMaps holds at most maxOpenMaps files and counts the looks it skipped", () => {
  using processes = new FakeProcesses();
  using perfMaps = new PerfMaps({ open: processes.open, maxOpenMaps: 1, refreshIntervalMs: 0 });
  for (const pid of [1, 2]) Deno.writeTextFileSync(processes.path(pid), `${pid}000 10 p${pid}\n`);
  assert.equal(perfMaps.of(1 as Pid).lookup(0x1000), "p1");
  const second = perfMaps.of(2 as Pid);
  assert.equal(second.lookup(0x2000), null);
  assert.equal(perfMaps.stats.mapsOverLimit, 1);
  perfMaps.onExit(1 as Pid);
  assert.equal(second.name(0x2000), "p2", "opened once another map was let go");
});

Deno.test("PerfMaps counts JIT frames named and not, and truncated maps", () => {
  using processes = new FakeProcesses();
  using perfMaps = new PerfMaps({ open: processes.open, maxEntries: 1 });
  Deno.writeTextFileSync(processes.path(PID), "1000 10 a\n2000 10 b\n");
  perfMaps.of(PID);
  perfMaps.countFrames(true, 5);
  perfMaps.countFrames(false, 2);
  const stats = perfMaps.stats;
  assert.deepEqual([stats.framesNamed, stats.framesUnnamed, stats.mapsTruncated, stats.entries], [
    5,
    2,
    1,
    1,
  ]);
});

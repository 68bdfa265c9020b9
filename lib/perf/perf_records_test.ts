import assert from "node:assert/strict";
import { garbage, mutate, registerFuzzTest } from "../testing/fuzz.ts";
import {
  checkDelivered,
  CollectingSink,
  commRecord,
  concatRecords,
  lostRecord,
  mmap2Record,
  otherRecord,
  randomRecords,
  taskRecord,
} from "../testing/perf_records.ts";
import { newRecordCounts, parseRecords, type RecordCounts } from "./perf_records.ts";

const BUILD_ID = Uint8Array.from({ length: 20 }, (_, i) => 0xa0 + i);

function parse(bytes: Uint8Array): { sink: CollectingSink; counts: RecordCounts; delivered: number } {
  const sink = new CollectingSink();
  const counts = newRecordCounts();
  const delivered = parseRecords(bytes, sink, counts);
  return { sink, counts, delivered };
}

Deno.test("parseRecords() delivers a process's fork, exec, mappings and exit with the fields written", () => {
  const bytes = concatRecords(
    taskRecord("fork", { pid: 101, tid: 101, ppid: 100, ptid: 100 }, 1000),
    commRecord(101, 101, "true", 2000),
    mmap2Record({
      pid: 101,
      start: 0x5555_0000_2000,
      length: 0x4000,
      fileOffset: 0x2000,
      path: "/usr/bin/true",
      buildId: BUILD_ID,
      time: 3000,
    }),
    mmap2Record({
      pid: 101,
      tid: 102,
      start: 0x7f00_0000_1000,
      length: 0x26000,
      fileOffset: 0x1000,
      path: "/usr/lib/ld.so",
      major: 254,
      minor: 1,
      inode: 2 ** 40 + 7,
      time: 4000,
    }),
    lostRecord(17, 4500),
    taskRecord("exit", { pid: 101, tid: 101, ppid: 100, ptid: 100 }, 5000),
  );
  const { sink, counts, delivered } = parse(bytes);
  assert.equal(delivered, 5);
  assert.deepEqual(counts, { records: 6, bytes: bytes.length, lost: 17, malformed: 0 });
  assert.deepEqual(sink.events.map((e) => [e.kind, e.pid, e.timeNs]), [
    ["fork", 101, 1000],
    ["exec", 101, 2000],
    ["mmap", 101, 3000],
    ["mmap", 101, 4000],
    ["exit", 101, 5000],
  ]);
  const [fork, exec, withBuildId, withInode] = sink.events;
  assert.equal(fork?.kind === "fork" && fork.parentPid, 100);
  assert.equal(exec?.kind === "exec" && exec.comm, "true");
  assert.deepEqual(withBuildId?.kind === "mmap" && withBuildId.mapping, {
    pid: 101,
    tid: 101,
    timeNs: 3000,
    start: 0x5555_0000_2000,
    end: 0x5555_0000_6000,
    fileOffset: 0x2000,
    path: "/usr/bin/true",
    deleted: false,
    anonymous: false,
    buildId: "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3",
    file: null,
    prot: 5,
  });
  assert.ok(withInode?.kind === "mmap");
  assert.equal(withInode.mapping.tid, 102);
  assert.equal(withInode.mapping.buildId, null);
  assert.deepEqual(withInode.mapping.file, { major: 254, minor: 1, inode: 2 ** 40 + 7 });
});

Deno.test("parseRecords() names anonymous and deleted mappings as the kernel does", () => {
  const mapping = (path: string, inode = 0) =>
    mmap2Record({ pid: 7, start: 0x1000_0000, length: 0x1000, path, inode, time: 1 });
  const { sink, counts } = parse(concatRecords(
    mapping("//anon"),
    mapping("[vdso]"),
    mapping("/dev/zero (deleted)", 5),
    mapping("/memfd:jit (deleted)", 9),
    mapping("/tmp/x.so (deleted)", 11),
  ));
  assert.equal(counts.malformed, 0);
  assert.deepEqual(
    sink.events.map((e) =>
      e.kind === "mmap" &&
      [e.mapping.path, e.mapping.deleted, e.mapping.anonymous, e.mapping.file?.inode ?? null]
    ),
    [
      ["//anon", false, true, null],
      ["[vdso]", false, true, null],
      ["/dev/zero", true, true, 5],
      ["/memfd:jit", true, false, 9],
      ["/tmp/x.so", true, false, 11],
    ],
  );
});

Deno.test("parseRecords() drops threads, renames, data mappings, hidden tasks and other types without counting them malformed", () => {
  const bytes = concatRecords(
    taskRecord("fork", { pid: 101, tid: 105, ppid: 101, ptid: 101 }, 1),
    taskRecord("exit", { pid: 101, tid: 105, ppid: 101, ptid: 101 }, 2),
    commRecord(101, 105, "worker", 3, false),
    commRecord(101, 101, "renamed", 4, false),
    mmap2Record({ pid: 101, start: 0x1000, length: 0x1000, path: "/data", prot: 3, time: 5 }),
    // A task outside the reader's PID namespace has number 0 there.
    taskRecord("fork", { pid: 0, tid: 0, ppid: 0, ptid: 0 }, 6),
    taskRecord("fork", { pid: 9, tid: 9, ppid: 0, ptid: 0 }, 6),
    commRecord(0, 0, "hidden", 7),
    mmap2Record({ pid: 0, tid: 0, start: 0x1000, length: 0x1000, path: "/hidden", time: 8 }),
    otherRecord(9),
  );
  const { sink, counts, delivered } = parse(bytes);
  assert.equal(delivered, 0);
  assert.deepEqual(sink.events, []);
  assert.deepEqual(counts, { records: 10, bytes: bytes.length, lost: 0, malformed: 0 });
});

/** A valid record, then `damage` applied to a copy of it (offsets are in the record). */
function damaged(record: Uint8Array, damage: (view: DataView, bytes: Uint8Array) => void): Uint8Array {
  const copy = record.slice();
  damage(new DataView(copy.buffer), copy);
  return copy;
}

Deno.test("parseRecords() counts and skips each kind of malformed record, and reads on", () => {
  const exec = commRecord(50, 50, "ok", 1);
  const mapping = mmap2Record({ pid: 50, start: 0x1000, length: 0x1000, path: "/x", time: 2 });
  const withId = mmap2Record({
    pid: 50,
    start: 0x1000,
    length: 0x1000,
    path: "/x",
    buildId: BUILD_ID,
    time: 3,
  });
  const fork = taskRecord("fork", { pid: 51, tid: 51, ppid: 50, ptid: 50 }, 4);
  const bad = [
    // The name fills its area without a NUL.
    damaged(mapping, (_, b) => b.fill(0x41, 72, mapping.length - 16)),
    damaged(mapping, (_, b) => b.fill(0, 72, mapping.length - 16)), // empty name
    damaged(mapping, (v) => v.setBigUint64(24, 0n, true)), // zero length
    damaged(mapping, (v) => v.setBigUint64(16, 2n ** 47n - 0x800n, true)), // ends past user space
    damaged(mapping, (v) => v.setBigUint64(32, 2n ** 60n, true)), // file offset past 2^53
    damaged(mapping, (v) => v.setUint32(8, 2 ** 22, true)), // pid past PID_MAX_LIMIT
    damaged(withId, (v) => v.setUint8(40, 0)), // build ID of 0 bytes
    damaged(withId, (v) => v.setUint8(40, 21)), // build ID past 20 bytes
    damaged(exec, (_, b) => b.fill(0x41, 16, exec.length - 16)), // comm without NUL
    damaged(fork, (v) => v.setUint32(16, 2 ** 31, true)), // tid past PID_MAX_LIMIT
    // Too short for their type: a FORK with a word missing, an MMAP2 cut to its fixed part.
    damaged(fork.subarray(0, 40), (v) => v.setUint16(6, 40, true)),
    damaged(mapping.subarray(0, 88), (v) => v.setUint16(6, 88, true)),
    damaged(concatRecords(lostRecord(1, 5), new Uint8Array(8)), (v) => v.setUint16(6, 48, true)),
    damaged(lostRecord(1, 5), (v) => v.setUint32(20, 2 ** 22, true)), // lost count past 2^53
  ];
  // Each between two good records: it is skipped, and the records after it are still read.
  for (const [index, record] of bad.entries()) {
    const { sink, counts } = parse(concatRecords(exec, record, fork));
    assert.equal(counts.malformed, 1, `case ${index}`);
    assert.deepEqual(sink.events.map((e) => e.kind), ["exec", "fork"], `case ${index}`);
  }
});

Deno.test("parseRecords() stops at a size that cannot be right, keeping the records before it", () => {
  const exec = commRecord(50, 50, "ok", 1);
  const fork = taskRecord("fork", { pid: 51, tid: 51, ppid: 50, ptid: 50 }, 4);
  const sizes = [0, 8, 20, 44, fork.length + 48];
  for (const size of sizes) {
    const broken = damaged(fork, (v) => v.setUint16(6, size, true));
    const { sink, counts } = parse(concatRecords(exec, broken, exec));
    assert.equal(counts.malformed, 1, `size ${size}`);
    assert.deepEqual(sink.events.map((e) => e.kind), ["exec"], `size ${size}`);
  }
  // A header cut short at the end.
  const { sink, counts } = parse(concatRecords(exec, fork.subarray(0, 5)));
  assert.equal(counts.malformed, 1);
  assert.deepEqual(sink.events.map((e) => e.kind), ["exec"]);
});

registerFuzzTest(import.meta.url, {
  name: "parseRecords() on damaged and random records never throws and delivers only sound events",
  cases: 4000,
  seed: 0x9e7f,
  expectRefusals: false,
  makeCase(random) {
    const valid = randomRecords(random);
    const { bytes, how } = random() < 0.15
      ? { bytes: garbage(random, 400), how: "garbage" }
      : random() < 0.1
      ? { bytes: valid, how: "valid" }
      : mutate(random, valid);
    return {
      kind: how,
      run() {
        const { sink, counts, delivered } = parse(bytes);
        checkDelivered(sink, counts, delivered);
        if (how === "valid") assert.equal(counts.malformed, 0);
      },
    };
  },
  isOwnError: () => false,
});

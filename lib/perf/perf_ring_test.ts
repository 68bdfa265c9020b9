import assert from "node:assert/strict";
import { below, garbage, mutate, registerFuzzTest } from "../testing/fuzz.ts";
import {
  checkDelivered,
  CollectingSink,
  commRecord,
  mmap2Record,
  randomRecords,
  taskRecord,
} from "../testing/perf_records.ts";
import { newRecordCounts, type RecordCounts } from "./perf_records.ts";
import { PerfRing } from "./perf_ring.ts";

const PAGE = 4096;

/**
 * Ring memory as the kernel sets it up: a metadata page (data_head at 1024, data_tail at 1032,
 * data_offset and data_size at 1040 and 1048), then `dataSize` bytes of data. The reader starts at
 * `position` (a running byte count, as data_tail is).
 */
class SyntheticRing {
  readonly memory: ArrayBuffer;
  readonly meta: DataView;
  readonly data: Uint8Array;
  head: number;

  constructor(readonly dataSize: number, position: number, fillOffsetAndSize = true) {
    this.memory = new ArrayBuffer(PAGE + dataSize);
    this.meta = new DataView(this.memory, 0, PAGE);
    this.data = new Uint8Array(this.memory, PAGE);
    if (fillOffsetAndSize) {
      this.meta.setBigUint64(1040, BigInt(PAGE), true);
      this.meta.setBigUint64(1048, BigInt(dataSize), true);
    }
    this.meta.setBigUint64(1032, BigInt(position), true);
    this.head = position;
    this.publish();
  }

  /** Writes `bytes` at the head, wrapping around the end of the data area, without publishing them. */
  write(bytes: Uint8Array): void {
    for (let i = 0; i < bytes.length; i++) this.data[(this.head + i) % this.dataSize] = bytes[i]!;
    this.head += bytes.length;
  }

  /** Stores data_head, as the kernel does once records are complete. */
  publish(head = this.head): void {
    this.meta.setBigUint64(1024, BigInt(head), true);
  }

  get tail(): number {
    return Number(this.meta.getBigUint64(1032, true));
  }
}

function readAll(ring: PerfRing, sink: CollectingSink, counts: RecordCounts): number {
  let delivered = 0;
  ring.load(counts);
  while (ring.peek(counts) > 0) if (ring.read(sink, counts)) delivered++;
  ring.commit();
  return delivered;
}

const exec = (pid: number, time: number) => commRecord(pid, pid, `p${pid}`, time);
const fork = (pid: number, time: number) => taskRecord("fork", { pid, tid: pid, ppid: 1, ptid: 1 }, time);

Deno.test("PerfRing reads records that wrap around the end of its data area, and hands their space back", () => {
  const path = "/usr/lib/x86_64-linux-gnu/a-library-with-a-long-name.so.1";
  // Starts 24 bytes before the end of the third pass over the area: the first record wraps.
  const synthetic = new SyntheticRing(PAGE, 3 * PAGE - 24);
  const records = [
    mmap2Record({ pid: 42, start: 0x7f00_0000_0000, length: 0x3000, path, time: 10 }),
    fork(43, 11),
    exec(43, 12),
  ];
  for (const record of records) synthetic.write(record);
  synthetic.publish();
  const ring = new PerfRing(synthetic.memory, PAGE);
  const sink = new CollectingSink();
  const counts = newRecordCounts();
  assert.equal(readAll(ring, sink, counts), 3);
  assert.deepEqual(sink.events.map((e) => [e.kind, e.pid, e.timeNs]), [["mmap", 42, 10], ["fork", 43, 11], [
    "exec",
    43,
    12,
  ]]);
  const mapping = sink.events[0];
  assert.ok(mapping?.kind === "mmap");
  assert.equal(mapping.mapping.path, path);
  assert.equal(mapping.mapping.end, 0x7f00_0000_3000);
  assert.equal(counts.malformed, 0);
  assert.equal(synthetic.tail, synthetic.head, "data_tail moved to data_head");

  // Around the end once more, from where the reader stopped.
  for (let i = 0; i < 40; i++) synthetic.write(exec(100 + i, 20 + i));
  synthetic.publish();
  assert.equal(readAll(ring, sink, counts), 40);
  assert.equal(synthetic.tail, synthetic.head);
  assert.equal(counts.malformed, 0);
});

Deno.test("PerfRing reads only what data_head covered when it was loaded", () => {
  const synthetic = new SyntheticRing(PAGE, 0);
  synthetic.write(exec(1, 1));
  synthetic.publish();
  synthetic.write(exec(2, 2)); // being written: not yet published
  const ring = new PerfRing(synthetic.memory, PAGE);
  const sink = new CollectingSink();
  const counts = newRecordCounts();
  assert.equal(readAll(ring, sink, counts), 1);
  assert.deepEqual(sink.events.map((e) => e.pid), [1]);
  synthetic.publish();
  assert.equal(readAll(ring, sink, counts), 1);
  assert.deepEqual(sink.events.map((e) => e.pid), [1, 2]);
});

Deno.test("PerfRing peeks the size and time of the next record without consuming it", () => {
  const synthetic = new SyntheticRing(PAGE, PAGE - 8);
  const first = fork(5, 0x1_2345_6789);
  synthetic.write(first);
  synthetic.write(exec(5, 0x1_2345_6790));
  synthetic.publish();
  const ring = new PerfRing(synthetic.memory, PAGE);
  const counts = newRecordCounts();
  ring.load(counts);
  assert.equal(ring.peek(counts), first.length);
  assert.equal(ring.time, 0x1_2345_6789);
  assert.equal(ring.peek(counts), first.length, "peeking again reads the same record");
  ring.skip();
  assert.equal(ring.time, 0x1_2345_6789, "time is the peeked record's until the next peek");
  assert.ok(ring.peek(counts) > 0);
  assert.equal(ring.time, 0x1_2345_6790);
  ring.skip();
  assert.equal(ring.peek(counts), 0);
  ring.commit();
  assert.equal(synthetic.tail, synthetic.head);
});

Deno.test("PerfRing consumes a record whose sink throws, so that it does not come back", () => {
  const synthetic = new SyntheticRing(PAGE, 0);
  synthetic.write(exec(1, 1));
  synthetic.write(exec(2, 2));
  synthetic.publish();
  const ring = new PerfRing(synthetic.memory, PAGE);
  const counts = newRecordCounts();
  const throwing = new CollectingSink();
  throwing.onExec = () => {
    throw new Error("sink failed");
  };
  ring.load(counts);
  ring.peek(counts);
  assert.throws(() => ring.read(throwing, counts), /sink failed/);
  const sink = new CollectingSink();
  while (ring.peek(counts) > 0) ring.read(sink, counts);
  assert.deepEqual(sink.events.map((e) => e.pid), [2]);
});

Deno.test("PerfRing skips, and counts as malformed, heads and sizes that cannot come from the kernel", () => {
  // Each damages the ring after records 4 and 5 were written; the pids read in the end.
  const cases: [string, (ring: SyntheticRing) => void, number[]][] = [
    // Nothing is read until the head is sound again; then nothing was lost.
    ["head behind the reader", (ring) => ring.publish(ring.head - 88), [1, 2, 3, 4, 5, 6]],
    ["head more than the ring ahead", (ring) => {
      ring.head += 2 * PAGE;
      ring.publish();
    }, [1, 2, 3, 6]],
    ["record size 0", (ring) => {
      ring.data[(ring.head - 80 + 6) % PAGE] = 0;
      ring.data[(ring.head - 80 + 7) % PAGE] = 0;
    }, [1, 2, 3, 6]],
    ["record size past the head", (ring) => {
      ring.data[(ring.head - 80 + 7) % PAGE] = 1;
    }, [1, 2, 3, 6]],
    ["record size not whole words", (ring) => {
      ring.data[(ring.head - 80 + 6) % PAGE] = 36;
    }, [1, 2, 3, 6]],
  ];
  for (const [name, damage, expected] of cases) {
    const synthetic = new SyntheticRing(PAGE, 5 * PAGE - 40);
    synthetic.write(exec(1, 1));
    synthetic.write(exec(2, 2));
    synthetic.write(fork(3, 3));
    synthetic.publish();
    const ring = new PerfRing(synthetic.memory, PAGE);
    const sink = new CollectingSink();
    const counts = newRecordCounts();
    readAll(ring, sink, counts);
    synthetic.write(exec(4, 4));
    synthetic.write(exec(5, 5));
    synthetic.publish();
    damage(synthetic);
    readAll(ring, sink, counts);
    assert.equal(counts.malformed, 1, name);
    synthetic.write(exec(6, 6));
    synthetic.publish();
    readAll(ring, sink, counts);
    assert.deepEqual(sink.events.map((e) => e.pid), expected, name);
    assert.equal(counts.malformed, 1, name);
    assert.equal(synthetic.tail, synthetic.head, name);
  }
});

Deno.test("PerfRing places the data area after the page when the kernel leaves data_offset and data_size 0", () => {
  const synthetic = new SyntheticRing(2 * PAGE, 2 * PAGE - 16, false);
  synthetic.write(exec(9, 9));
  synthetic.publish();
  const ring = new PerfRing(synthetic.memory, PAGE);
  assert.equal(ring.dataSize, 2 * PAGE);
  const sink = new CollectingSink();
  assert.equal(readAll(ring, sink, newRecordCounts()), 1);
  assert.deepEqual(sink.events.map((e) => e.kind === "exec" && e.comm), ["p9"]);
});

Deno.test("new PerfRing() refuses a data area outside its memory or not a power of two in size", () => {
  const areas: [number, number][] = [[PAGE, 3 * PAGE], [PAGE, 4 * PAGE], [8, PAGE], [PAGE, 4]];
  for (const [offset, size] of areas) {
    const memory = new ArrayBuffer(4 * PAGE);
    const meta = new DataView(memory);
    meta.setBigUint64(1040, BigInt(offset), true);
    meta.setBigUint64(1048, BigInt(size), true);
    assert.throws(() => new PerfRing(memory, PAGE), /^RangeError: Cannot read a perf ring buffer/);
  }
});

registerFuzzTest(import.meta.url, {
  name: "PerfRing on damaged records, heads and tails never throws or reads outside its memory",
  cases: 2000,
  seed: 0x41f6,
  expectRefusals: false,
  makeCase(random) {
    const dataSize = PAGE << below(random, 2);
    const start = below(random, 2 ** 20) * 8;
    const valid = randomRecords(random);
    const { bytes, how } = random() < 0.2
      ? { bytes: garbage(random, 600), how: "garbage" }
      : mutate(random, valid);
    return {
      kind: how,
      run() {
        const synthetic = new SyntheticRing(dataSize, start);
        synthetic.write(bytes.subarray(0, dataSize));
        // Now and then a head that is not where the writing stopped.
        synthetic.publish(random() < 0.8 ? synthetic.head : start + below(random, 3 * dataSize) - dataSize);
        const ring = new PerfRing(synthetic.memory, PAGE);
        const sink = new CollectingSink();
        const counts = newRecordCounts();
        const delivered = readAll(ring, sink, counts);
        checkDelivered(sink, counts, delivered);
      },
    };
  },
  isOwnError: () => false,
});

/**
 * Builds perf records as the kernel lays them out (include/uapi/linux/perf_event.h), each ending with the
 * sample_id of `sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME`, for tests of the record and ring
 * readers. Written field by field from the header's layout, independently of the reader. Test-only.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { ExecutableMapping, MappingEventSink, RecordCounts } from "../perf/perf_records.ts";
import { below, garbage, pick } from "./fuzz.ts";
import type { Address, Pid, Tid } from "../types.ts";

/** What an MMAP2 record says. */
export interface Mmap2Fields {
  pid: number;
  tid?: number;
  start: number;
  length: number;
  fileOffset?: number;
  /** PROT_* bits; default PROT_READ | PROT_EXEC. */
  prot?: number;
  path: string;
  /** When given, the record carries it (and the build-ID misc bit) instead of device and inode. */
  buildId?: Uint8Array;
  major?: number;
  minor?: number;
  inode?: number;
  time: number;
}

const encoder = new TextEncoder();

/** `text` NUL-terminated and padded with NULs to whole 8-byte words. */
function paddedString(text: string): Uint8Array {
  const bytes = encoder.encode(text);
  const out = new Uint8Array(Math.ceil((bytes.length + 1) / 8) * 8);
  out.set(bytes);
  return out;
}

function setU64(view: DataView, offset: number, value: number): void {
  view.setBigUint64(offset, BigInt(value), true);
}

/** A record of `type` whose body (after the header, before the sample_id) is `body`. */
function record(
  type: number,
  misc: number,
  body: Uint8Array,
  pid: number,
  tid: number,
  time: number,
): Uint8Array {
  const size = 8 + body.length + 16;
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  view.setUint32(0, type, true);
  view.setUint16(4, misc, true);
  view.setUint16(6, size, true);
  out.set(body, 8);
  view.setUint32(size - 16, pid, true);
  view.setUint32(size - 12, tid, true);
  setU64(view, size - 8, time);
  return out;
}

/** A PERF_RECORD_MMAP2 (type 10). */
export function mmap2Record(fields: Mmap2Fields): Uint8Array {
  const name = paddedString(fields.path);
  const body = new Uint8Array(64 + name.length);
  const view = new DataView(body.buffer);
  const tid = fields.tid ?? fields.pid;
  view.setUint32(0, fields.pid, true);
  view.setUint32(4, tid, true);
  setU64(view, 8, fields.start);
  setU64(view, 16, fields.length);
  setU64(view, 24, fields.fileOffset ?? 0);
  let misc = 2; // PERF_RECORD_MISC_USER
  if (fields.buildId !== undefined) {
    misc |= 1 << 14;
    view.setUint8(32, fields.buildId.length);
    body.set(fields.buildId.subarray(0, 20), 36);
  } else {
    view.setUint32(32, fields.major ?? 0, true);
    view.setUint32(36, fields.minor ?? 0, true);
    setU64(view, 40, fields.inode ?? 0);
  }
  view.setUint32(56, fields.prot ?? 5, true);
  view.setUint32(60, 2, true); // MAP_PRIVATE
  body.set(name, 64);
  return record(10, misc, body, fields.pid, tid, fields.time);
}

/** A PERF_RECORD_COMM (type 3), marked as written by exec unless `exec` is false. */
export function commRecord(pid: number, tid: number, comm: string, time: number, exec = true): Uint8Array {
  const name = paddedString(comm);
  const body = new Uint8Array(8 + name.length);
  const view = new DataView(body.buffer);
  view.setUint32(0, pid, true);
  view.setUint32(4, tid, true);
  body.set(name, 8);
  return record(3, exec ? 1 << 13 : 0, body, pid, tid, time);
}

/** A PERF_RECORD_FORK (type 7) or PERF_RECORD_EXIT (type 4). */
export function taskRecord(
  kind: "fork" | "exit",
  task: { pid: number; tid: number; ppid: number; ptid: number },
  time: number,
): Uint8Array {
  const body = new Uint8Array(24);
  const view = new DataView(body.buffer);
  view.setUint32(0, task.pid, true);
  view.setUint32(4, task.ppid, true);
  view.setUint32(8, task.tid, true);
  view.setUint32(12, task.ptid, true);
  setU64(view, 16, time);
  return record(kind === "fork" ? 7 : 4, 0, body, task.pid, task.tid, time);
}

/** A PERF_RECORD_LOST (type 2) of `lost` records. */
export function lostRecord(lost: number, time: number): Uint8Array {
  const body = new Uint8Array(16);
  const view = new DataView(body.buffer);
  setU64(view, 0, 1);
  setU64(view, 8, lost);
  return record(2, 0, body, 0, 0, time);
}

/** A record of a type the readers skip (PERF_RECORD_THROTTLE, 5), `words` 8-byte words of body long. */
export function otherRecord(time: number, words = 3): Uint8Array {
  return record(5, 0, new Uint8Array(8 * words), 0, 0, time);
}

/** The records laid end to end. */
export function concatRecords(...records: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(records.reduce((sum, r) => sum + r.length, 0));
  let offset = 0;
  for (const r of records) {
    out.set(r, offset);
    offset += r.length;
  }
  return out;
}

/** One event as a sink received it. */
export type SeenEvent =
  | { kind: "mmap"; pid: Pid; timeNs: number; mapping: ExecutableMapping }
  | { kind: "exec"; pid: Pid; timeNs: number; comm: string }
  | { kind: "fork"; pid: Pid; timeNs: number; parentPid: Pid }
  | { kind: "exit"; pid: Pid; timeNs: number };

/** A sink that keeps every event it receives, in order. */
export class CollectingSink implements MappingEventSink {
  readonly events: SeenEvent[] = [];
  onMmap(mapping: ExecutableMapping): void {
    this.events.push({ kind: "mmap", pid: mapping.pid, timeNs: mapping.timeNs, mapping });
  }
  onExec(pid: Pid, comm: string, timeNs: number): void {
    this.events.push({ kind: "exec", pid, timeNs, comm });
  }
  onFork(pid: Pid, parentPid: Pid, timeNs: number): void {
    this.events.push({ kind: "fork", pid, timeNs, parentPid });
  }
  onExit(pid: Pid, timeNs: number): void {
    this.events.push({ kind: "exit", pid, timeNs });
  }
  /** The events of process `pid`. */
  of(pid: number): SeenEvent[] {
    return this.events.filter((event) => event.pid === pid);
  }
}

/** A stream of valid records of every kind, random fields. */
export function randomRecords(random: () => number): Uint8Array {
  const records: Uint8Array[] = [];
  const pid = () => below(random, 2 ** 22);
  for (let n = below(random, 12); n > 0; n--) {
    const time = below(random, 2 ** 40);
    const p = pid();
    switch (below(random, 6)) {
      case 0:
        records.push(
          taskRecord(pick(random, ["fork", "exit"] as const), { pid: p, tid: p, ppid: pid(), ptid: 1 }, time),
        );
        break;
      case 1:
        records.push(commRecord(p, p, new TextDecoder().decode(garbage(random, 15)), time, random() < 0.8));
        break;
      case 2:
        records.push(lostRecord(below(random, 1000), time));
        break;
      case 3:
        records.push(otherRecord(time, below(random, 4)));
        break;
      default:
        records.push(mmap2Record({
          pid: p,
          start: below(random, 2 ** 46),
          length: 1 + below(random, 2 ** 30),
          fileOffset: below(random, 2 ** 40),
          prot: below(random, 8),
          path: pick(random, [
            "/usr/bin/true",
            "//anon",
            "[vdso]",
            "/x (deleted)",
            "/a/b/c/d/e/f/g/h/libx.so.6",
          ]),
          buildId: random() < 0.5
            ? Uint8Array.from({ length: 1 + below(random, 20) }, () => below(random, 256))
            : undefined,
          inode: below(random, 2 ** 50),
          time,
        }));
    }
  }
  return concatRecords(...records);
}

/** Checks what a reader delivered from bytes that may be anything: every event is one a kernel could send. */
export function checkDelivered(sink: CollectingSink, counts: RecordCounts, delivered: number): void {
  assert.equal(sink.events.length, delivered);
  assert.ok(counts.records >= delivered);
  for (const event of sink.events) {
    assert.ok(Number.isInteger(event.pid) && event.pid > 0 && event.pid < 2 ** 22);
    assert.ok(Number.isInteger(event.timeNs) && event.timeNs >= 0);
    if (event.kind === "fork") assert.ok(event.parentPid > 0 && event.parentPid < 2 ** 22);
    if (event.kind === "exec") assert.equal(typeof event.comm, "string");
    if (event.kind === "mmap") {
      const m = event.mapping;
      assert.ok(m.start < m.end && m.end <= 2 ** 47, `${m.start}-${m.end}`);
      assert.ok(m.prot & 4);
      assert.ok(m.path.length > 0 && !m.path.includes("\0"));
      assert.ok(m.buildId === null || /^([0-9a-f]{2}){1,20}$/.test(m.buildId));
      assert.ok(Number.isSafeInteger(m.fileOffset));
    }
  }
}

/** An executable anonymous mapping of a page at `start` of process `pid`, as recorded at `timeNs`. */
export function anonymousMapping(pid: number, start: number, timeNs: number): ExecutableMapping {
  return {
    pid: pid as Pid,
    tid: pid as Tid,
    timeNs,
    start: start as Address,
    end: (start + 0x1000) as Address,
    fileOffset: 0,
    path: "//anon",
    deleted: false,
    anonymous: true,
    buildId: null,
    file: null,
    prot: 5,
  };
}

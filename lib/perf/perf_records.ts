/**
 * Decodes the records a perf event writes about processes and their executable mappings (`struct
 * perf_event_header` and what follows it, include/uapi/linux/perf_event.h): MMAP2, COMM (at exec), FORK,
 * EXIT and LOST, from an event opened with `sample_id_all` and `sample_type = PERF_SAMPLE_TID |
 * PERF_SAMPLE_TIME`, so that every record ends with the 16 bytes pid, tid (u32 each) and time (u64). Other
 * record types are skipped.
 *
 * The bytes come from a ring buffer the kernel shares with every process that can open the event, and a
 * bug anywhere would otherwise surface as a wrong mapping: every size, bound and terminator is checked
 * here, and a record that fails a check is counted as malformed and skipped. Nothing here throws on bad
 * input, and nothing is allocated for a record that is dropped (a thread's fork or exit, a rename, a
 * mapping that is not executable): those outnumber the events a consumer wants.
 *
 * @example
 * ```ts
 * import { type MappingEventSink, newRecordCounts, parseRecords } from "./perf_records.ts";
 * import assert from "node:assert/strict";
 * // A PERF_RECORD_EXIT of process 42 at 1000 ns: header, pid, ppid, tid, ptid, time, then the sample_id.
 * const record = new DataView(new ArrayBuffer(48));
 * record.setUint32(0, 4, true);
 * record.setUint16(6, 48, true);
 * for (const offset of [8, 16, 32, 36]) record.setUint32(offset, 42, true);
 * record.setUint32(24, 1000, true);
 * record.setUint32(40, 1000, true);
 * const exits: number[] = [];
 * const sink: MappingEventSink = {
 *   onMmap() {},
 *   onExec() {},
 *   onFork() {},
 *   onExit(pid) {
 *     exits.push(pid);
 *   },
 * };
 * const counts = newRecordCounts();
 * parseRecords(new Uint8Array(record.buffer), sink, counts);
 * assert.deepEqual(exits, [42]);
 * assert.equal(counts.malformed, 0);
 * ```
 *
 * @module
 */
import { toHex } from "../elf/notes.ts";
import type { FileIdentity } from "../sys/regular_file.ts";
import type { Address, Pid, Tid } from "../types.ts";

/** `header.type` of a record that says how many records the kernel dropped for want of space. */
export const PERF_RECORD_LOST = 2;
/** `header.type` of a task's new name (at exec, or a thread renaming itself). */
export const PERF_RECORD_COMM = 3;
/** `header.type` of a task's exit. */
export const PERF_RECORD_EXIT = 4;
/** `header.type` of a new task (a process or a thread). */
export const PERF_RECORD_FORK = 7;
/** `header.type` of a new mapping, with its file's identity. */
export const PERF_RECORD_MMAP2 = 10;
/** `header.misc` bit of a COMM record written by exec. */
export const PERF_RECORD_MISC_COMM_EXEC = 1 << 13;
/** `header.misc` bit of an MMAP2 record that holds a build ID instead of device and inode. */
export const PERF_RECORD_MISC_MMAP_BUILD_ID = 1 << 14;
/** The size of `struct perf_event_header`: u32 type, u16 misc, u16 size. */
export const RECORD_HEADER_SIZE = 8;
/** The size of the sample_id that ends every record: pid, tid (u32 each), time (u64). */
export const SAMPLE_ID_SIZE = 16;

const PROT_EXEC = 4;
// Offsets in an MMAP2 record (after the header: pid, tid, addr, len, pgoff, then a 24-byte union of
// (maj, min, ino, ino_generation) and (build_id_size, 3 reserved bytes, build_id[20]), prot, flags).
const MMAP2_ADDR = 16;
const MMAP2_LEN = 24;
const MMAP2_PGOFF = 32;
const MMAP2_MAJOR = 40;
const MMAP2_MINOR = 44;
const MMAP2_INODE = 48;
const MMAP2_BUILD_ID_SIZE = 40;
const MMAP2_BUILD_ID = 44;
const BUILD_ID_SIZE_MAX = 20;
const MMAP2_PROT = 64;
const MMAP2_FILENAME = 72;
/** The shortest MMAP2 record: its fixed part, one 8-byte block of name, the sample_id. */
const MMAP2_MIN_SIZE = MMAP2_FILENAME + 8 + SAMPLE_ID_SIZE;
/** The shortest COMM record: header, pid, tid, one 8-byte block of name, the sample_id. */
const COMM_MIN_SIZE = 16 + 8 + SAMPLE_ID_SIZE;
/** FORK and EXIT: header, pid, ppid, tid, ptid, time, the sample_id. */
const TASK_SIZE = 32 + SAMPLE_ID_SIZE;
/** LOST: header, id, lost, the sample_id. */
const LOST_SIZE = 24 + SAMPLE_ID_SIZE;
/**
 * The end of x86-64 user space with 4-level page tables: the project keeps user addresses in numbers
 * ({@linkcode Address}), so a mapping that ends above it is not one this profiler can use.
 */
const USER_SPACE_END = 2 ** 47;
const TWO_POW_32 = 2 ** 32;
/** Names the kernel gives memory that is not a file a profiler could read (perf's is_anon_memory()). */
const ANONYMOUS_FILES = new Set(["/dev/zero", "/anon_hugepage"]);
const DELETED = " (deleted)";

const utf8 = new TextDecoder("utf-8", { fatal: false });

/**
 * Strings decoded from record bytes, found again by content: the same few paths (the loader, the C
 * library, the executable started again) and build IDs fill most records, and hashing and comparing the
 * bytes costs less than decoding them anew. Bounded: emptied when full.
 */
class DecodedStrings {
  #entries = new Map<number, { bytes: Uint8Array; text: string }>();
  #decode: (bytes: Uint8Array) => string;

  constructor(decode: (bytes: Uint8Array) => string) {
    this.#decode = decode;
  }

  /** The string of `bytes[start, end)`. */
  get(bytes: Uint8Array, start: number, end: number): string {
    // FNV-1a.
    let hash = 0x811c9dc5;
    for (let i = start; i < end; i++) hash = Math.imul(hash ^ bytes[i]!, 0x01000193);
    const entry = this.#entries.get(hash);
    if (entry !== undefined && sameBytes(entry.bytes, bytes, start, end)) return entry.text;
    const copy = bytes.slice(start, end);
    const text = this.#decode(copy);
    if (this.#entries.size >= DECODED_STRINGS_KEPT) this.#entries.clear();
    this.#entries.set(hash, { bytes: copy, text });
    return text;
  }
}

const DECODED_STRINGS_KEPT = 4096;

function sameBytes(kept: Uint8Array, bytes: Uint8Array, start: number, end: number): boolean {
  if (kept.length !== end - start) return false;
  for (let i = 0; i < kept.length; i++) if (kept[i] !== bytes[start + i]) return false;
  return true;
}

const paths = new DecodedStrings((bytes) => utf8.decode(bytes));
const buildIds = new DecodedStrings(toHex);

/** A new executable mapping of a process, as the kernel reported it when it was made. */
export interface ExecutableMapping {
  /** The process (the kernel's tgid) that owns the mapping. */
  pid: Pid;
  /** The thread that made it. */
  tid: Tid;
  /** CLOCK_MONOTONIC time of the mapping, in ns. */
  timeNs: number;
  start: Address;
  /** Exclusive end. */
  end: Address;
  /** Offset in the file of `start` (for anonymous memory: whatever the kernel keeps there). */
  fileOffset: number;
  /**
   * The kernel's name for what is mapped: the file's path as the mapping process saw it (without the
   * " (deleted)" the kernel appends to a removed file), or a pseudo name such as `//anon` (anonymous
   * memory, e.g. JIT code), `[vdso]`, `[uprobes]`.
   */
  path: string;
  /** The file was removed (or replaced) before it was mapped, or while the kernel wrote the record. */
  deleted: boolean;
  /** No file behind it (`//anon`, `[vdso]`, `/dev/zero`, ...): nothing to open for symbols or unwinding. */
  anonymous: boolean;
  /** The GNU build ID of the file, lowercase hex, when the kernel sent it (5.12+, if it could read it). */
  buildId: string | null;
  /** The file's device and inode when the kernel sent them instead of a build ID; null for no file. */
  file: FileIdentity | null;
  /** PROT_* bits: always PROT_EXEC; PROT_WRITE too for memory a JIT writes in place. */
  prot: number;
}

/**
 * Receives the events in the order they happened. Only process-level ones: a thread's creation or exit
 * and a thread renaming itself are not delivered.
 */
export interface MappingEventSink {
  /** A process mapped something executable (its executable, the dynamic loader, a library, JIT code). */
  onMmap(event: ExecutableMapping): void;
  /**
   * Process `pid` ran exec: its old mappings are gone, and `comm` is its new name (the kernel's task name:
   * the executable's base name, cut to 15 bytes). Its new mappings follow.
   */
  onExec(pid: Pid, comm: string, timeNs: number): void;
  /** Process `pid` was forked from `parentPid`: until it execs, it has its parent's mappings. */
  onFork(pid: Pid, parentPid: Pid, timeNs: number): void;
  /**
   * The main thread of process `pid` exited (other threads may still be exiting). When another thread
   * of a process execs, the old main thread's exit comes just before the exec of the same `pid`.
   */
  onExit(pid: Pid, timeNs: number): void;
}

/** Running totals kept by the readers. */
export interface RecordCounts {
  /** Records read (whether delivered or not), malformed ones included. */
  records: number;
  /** Bytes of those records: what the rings carried. */
  bytes: number;
  /** Records the kernel dropped because the ring was full, as its LOST records count them. */
  lost: number;
  /** Records that failed a check and were skipped, and stretches of a ring skipped as unreadable. */
  malformed: number;
}

/** Zeroed {@linkcode RecordCounts}. */
export function newRecordCounts(): RecordCounts {
  return { records: 0, bytes: 0, lost: 0, malformed: 0 };
}

/** The little-endian u64 at `offset` as a number (exact below 2^53, which the callers check or accept). */
export function readU64(view: DataView, offset: number): number {
  return view.getUint32(offset + 4, true) * TWO_POW_32 + view.getUint32(offset, true);
}

/** The time in the sample_id of the record of `size` bytes at `offset`. */
export function recordTime(view: DataView, offset: number, size: number): number {
  return readU64(view, offset + size - 8);
}

/**
 * The first NUL in `bytes[start, end)`, or -1. A name is short (a path is at most PATH_MAX, a comm 16
 * bytes), and the search stops at `end` however large the buffer is.
 */
function nulIn(bytes: Uint8Array, start: number, end: number): number {
  for (let i = start; i < end; i++) if (bytes[i] === 0) return i;
  return -1;
}

/**
 * Reads the record of `size` bytes at `offset` (`view` and `bytes` cover the same memory; the caller has
 * checked that the record lies inside it and that `size` is a multiple of 8 and at least a header) and
 * hands the event it carries to `sink`. Updates `counts`. Returns whether an event was delivered.
 */
export function readRecord(
  bytes: Uint8Array,
  view: DataView,
  offset: number,
  size: number,
  sink: MappingEventSink,
  counts: RecordCounts,
): boolean {
  counts.records++;
  counts.bytes += size;
  const type = view.getUint32(offset, true);
  const misc = view.getUint16(offset + 4, true);
  switch (type) {
    case PERF_RECORD_MMAP2:
      return readMmap2(bytes, view, offset, size, misc, sink, counts);
    case PERF_RECORD_COMM: {
      if (size < COMM_MIN_SIZE) return malformed(counts);
      // A thread renaming itself (prctl, pthread_setname_np) is not a new program.
      if (!(misc & PERF_RECORD_MISC_COMM_EXEC)) return false;
      const pid = view.getUint32(offset + 8, true);
      const end = nulIn(bytes, offset + 16, offset + size - SAMPLE_ID_SIZE);
      if (end < 0 || !validTask(pid)) return malformed(counts);
      if (pid === 0) return false;
      const comm = utf8.decode(bytes.subarray(offset + 16, end));
      sink.onExec(pid as Pid, comm, recordTime(view, offset, size));
      return true;
    }
    case PERF_RECORD_FORK:
    case PERF_RECORD_EXIT: {
      if (size !== TASK_SIZE) return malformed(counts);
      const pid = view.getUint32(offset + 8, true);
      const parent = view.getUint32(offset + 12, true);
      const tid = view.getUint32(offset + 16, true);
      if (!validTask(pid) || !validTask(parent) || !validTask(tid)) return malformed(counts);
      // A thread's creation or exit (tid is not the process's id); or a task outside the PID namespace of
      // the profiler, which the kernel reports as 0 since it has no number here.
      if (pid !== tid || pid === 0) return false;
      const timeNs = recordTime(view, offset, size);
      if (type === PERF_RECORD_EXIT) sink.onExit(pid as Pid, timeNs);
      else if (parent !== 0) sink.onFork(pid as Pid, parent as Pid, timeNs);
      else return false;
      return true;
    }
    case PERF_RECORD_LOST: {
      if (size !== LOST_SIZE) return malformed(counts);
      const lost = readU64(view, offset + 16);
      if (lost > Number.MAX_SAFE_INTEGER) return malformed(counts);
      counts.lost += lost;
      return false;
    }
    default:
      return false;
  }
}

function readMmap2(
  bytes: Uint8Array,
  view: DataView,
  offset: number,
  size: number,
  misc: number,
  sink: MappingEventSink,
  counts: RecordCounts,
): boolean {
  if (size < MMAP2_MIN_SIZE) return malformed(counts);
  const prot = view.getUint32(offset + MMAP2_PROT, true);
  if (!(prot & PROT_EXEC)) return false;
  const pid = view.getUint32(offset + 8, true);
  const tid = view.getUint32(offset + 12, true);
  if (!validTask(pid) || !validTask(tid)) return malformed(counts);
  // A process outside the profiler's PID namespace: nothing could name it.
  if (pid === 0) return false;
  const start = readU64(view, offset + MMAP2_ADDR);
  const length = readU64(view, offset + MMAP2_LEN);
  const fileOffset = readU64(view, offset + MMAP2_PGOFF);
  if (length === 0 || start + length > USER_SPACE_END || fileOffset > Number.MAX_SAFE_INTEGER) {
    return malformed(counts);
  }
  const nameStart = offset + MMAP2_FILENAME;
  const nameEnd = nulIn(bytes, nameStart, offset + size - SAMPLE_ID_SIZE);
  if (nameEnd <= nameStart) return malformed(counts);
  let buildId: string | null = null;
  let file: FileIdentity | null = null;
  if (misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
    const idSize = view.getUint8(offset + MMAP2_BUILD_ID_SIZE);
    if (idSize === 0 || idSize > BUILD_ID_SIZE_MAX) return malformed(counts);
    buildId = buildIds.get(bytes, offset + MMAP2_BUILD_ID, offset + MMAP2_BUILD_ID + idSize);
  } else {
    const inode = readU64(view, offset + MMAP2_INODE);
    if (inode !== 0) {
      file = {
        major: view.getUint32(offset + MMAP2_MAJOR, true),
        minor: view.getUint32(offset + MMAP2_MINOR, true),
        inode,
      };
    }
  }
  let path = paths.get(bytes, nameStart, nameEnd);
  const deleted = path.endsWith(DELETED);
  if (deleted) path = path.slice(0, -DELETED.length);
  sink.onMmap({
    pid: pid as Pid,
    tid: tid as Tid,
    timeNs: recordTime(view, offset, size),
    start: start as Address,
    end: (start + length) as Address,
    fileOffset,
    path,
    deleted,
    anonymous: !path.startsWith("/") || path.startsWith("//") || ANONYMOUS_FILES.has(path),
    buildId,
    file,
    prot,
  });
  return true;
}

/** A task id as the kernel reports it: 0 (not visible from here) or a PID below PID_MAX_LIMIT (2^22). */
function validTask(id: number): boolean {
  return id < 2 ** 22;
}

function malformed(counts: RecordCounts): false {
  counts.malformed++;
  return false;
}

/**
 * Reads the records laid end to end in `bytes` and hands their events to `sink`; returns how many it
 * delivered. A record whose size cannot be right (below a header, not a multiple of 8, past the end)
 * leaves no way to find the next one: it and the rest are counted as one malformed stretch.
 */
export function parseRecords(bytes: Uint8Array, sink: MappingEventSink, counts: RecordCounts): number {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let delivered = 0;
  let offset = 0;
  while (offset < bytes.length) {
    const size = offset + RECORD_HEADER_SIZE <= bytes.length ? view.getUint16(offset + 6, true) : 0;
    if (!validRecordSize(size, bytes.length - offset)) {
      counts.malformed++;
      break;
    }
    if (readRecord(bytes, view, offset, size, sink, counts)) delivered++;
    offset += size;
  }
  return delivered;
}

/**
 * Whether `size`, from a record header, can be a record's size when `available` bytes are left: every
 * record is a whole number of 8-byte words, holds at least its header and sample_id, and fits.
 */
export function validRecordSize(size: number, available: number): boolean {
  return size >= RECORD_HEADER_SIZE + SAMPLE_ID_SIZE && size % 8 === 0 && size <= available;
}

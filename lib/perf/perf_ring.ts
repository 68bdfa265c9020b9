/**
 * The reading side of a perf event's ring buffer: one metadata page (`struct perf_event_mmap_page`) and
 * a data area of 2^n pages that the kernel fills with records. The kernel advances `data_head` (offset
 * 1024) after writing a record and never writes past `data_tail` (offset 1032), which the reader advances
 * after reading; with the mapping writable the kernel drops records when the ring is full instead of
 * overwriting them, and says how many in a LOST record. Unlike a BPF ring buffer, the data area is mapped
 * once, so a record can wrap around its end: such a record is copied whole into a scratch buffer before it
 * is decoded. Records are whole 8-byte words in an area of 2^n bytes, so a header, or any 4- or 8-byte
 * field, never straddles the end.
 *
 * The reader takes one record at a time ({@linkcode PerfRing.peek} its size and time, then read or skip
 * it), so that several rings can be merged in time order.
 *
 * @example
 * ```ts ignore
 * import { PerfRing } from "./perf_ring.ts";
 * using ring = PerfRing.map(fd, 64 * 4096);
 * ring.load(counts);
 * while (ring.peek(counts) > 0) ring.read(sink, counts);
 * ring.commit();
 * ```
 *
 * @module
 */
import { isMapFailed, libc, MAP_SHARED, PROT_READ, PROT_WRITE, SystemError } from "../sys/libc.ts";
import {
  type MappingEventSink,
  readRecord,
  readU64,
  RECORD_HEADER_SIZE,
  type RecordCounts,
  validRecordSize,
} from "./perf_records.ts";

const DATA_HEAD = 1024;
const DATA_TAIL = 1032;
const DATA_OFFSET = 1040;
const DATA_SIZE = 1048;
/** The largest record: its size is a u16, and a whole number of 8-byte words. */
const MAX_RECORD_SIZE = 65528;

// One scratch buffer for every ring: a wrapped record is copied and decoded at once, never kept.
const scratch = new Uint8Array(MAX_RECORD_SIZE);
const scratchView = new DataView(scratch.buffer);

/** A perf event's ring buffer, read in place. */
export class PerfRing implements Disposable {
  /** Bytes in the data area (a power of two). */
  readonly dataSize: number;
  #head: BigInt64Array;
  #tail: BigInt64Array;
  #bytes: Uint8Array;
  #view: DataView;
  #mask: number;
  /** Where the next record starts, as a count of bytes since the ring was made (like data_head). */
  #position: number;
  /** `data_head` as last loaded: the records before it are complete. */
  #limit: number;
  /** Size of the record at `#position` once peeked, 0 when there is none, -1 before peeking. */
  #size = -1;
  #time = 0;
  #mapping: { pointer: Deno.PointerValue; length: number } | null = null;

  /**
   * Reads the ring in `memory`: the metadata page, then the data area where `data_offset` and
   * `data_size` say (kernels since 4.1 fill them), else right after the page, to the end of `memory`.
   *
   * @throws {RangeError} when the metadata places the data area outside `memory` or gives it a size
   * that is not a power of two.
   */
  constructor(memory: ArrayBuffer, pageSize: number) {
    const meta = new DataView(memory, 0, pageSize);
    const offset = readU64(meta, DATA_OFFSET) || pageSize;
    const size = readU64(meta, DATA_SIZE) || memory.byteLength - pageSize;
    if (
      offset < DATA_SIZE + 8 || size < 8 || (size & (size - 1)) !== 0 || offset + size > memory.byteLength
    ) {
      throw new RangeError(
        `Cannot read a perf ring buffer: data area of ${size} bytes at ${offset} in ${memory.byteLength}`,
      );
    }
    this.dataSize = size;
    this.#mask = size - 1;
    this.#head = new BigInt64Array(memory, DATA_HEAD, 1);
    this.#tail = new BigInt64Array(memory, DATA_TAIL, 1);
    this.#bytes = new Uint8Array(memory, offset, size);
    this.#view = new DataView(memory, offset, size);
    this.#position = Number(Atomics.load(this.#tail, 0));
    this.#limit = this.#position;
  }

  /**
   * Maps the ring of the perf event `fd`: `dataSize` bytes of data (a power-of-two number of pages) after
   * the metadata page, writable so that the kernel honours `data_tail`. The ring owns the mapping (not
   * the descriptor): closing it unmaps.
   *
   * @throws {SystemError} when mmap fails (EPERM: the ring is over the locked-memory allowance).
   */
  static map(fd: number, dataSize: number): PerfRing {
    const { fn, pageSize, errno } = libc();
    const length = pageSize + dataSize;
    const pointer = fn.mmap(null, BigInt(length), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0n);
    if (isMapFailed(pointer)) {
      throw new SystemError(`map a perf ring buffer of ${dataSize >> 10} KiB`, errno());
    }
    try {
      const ring = new PerfRing(Deno.UnsafePointerView.getArrayBuffer(pointer!, length), pageSize);
      ring.#mapping = { pointer, length };
      return ring;
    } catch (error) {
      fn.munmap(pointer, BigInt(length));
      throw error;
    }
  }

  /**
   * Loads `data_head`: the records written by now are read until the next load. A head that is behind
   * the reader, or more than the ring ahead of it, cannot come from the kernel and is counted as
   * malformed: behind, nothing is read until it is sound again; ahead, what it covers is skipped.
   */
  load(counts: RecordCounts): void {
    // Atomics.load is at least an acquire: the records before the head are read after it.
    const head = Number(Atomics.load(this.#head, 0));
    if (head < this.#position) {
      counts.malformed++;
      this.#limit = this.#position;
    } else {
      if (head - this.#position > this.dataSize) {
        counts.malformed++;
        this.#position = head;
      }
      this.#limit = head;
    }
    this.#size = -1;
  }

  /**
   * The size of the next complete record, or 0 when there is none before the loaded head. A size that
   * cannot be right leaves no way to find the next record: the rest up to the head is skipped and
   * counted as one malformed stretch.
   */
  peek(counts: RecordCounts): number {
    if (this.#size >= 0) return this.#size;
    const available = this.#limit - this.#position;
    if (available === 0) return this.#size = 0;
    const offset = this.#position & this.#mask;
    const size = available >= RECORD_HEADER_SIZE ? this.#view.getUint16(offset + 6, true) : 0;
    if (!validRecordSize(size, available)) {
      counts.malformed++;
      this.#position = this.#limit;
      return this.#size = 0;
    }
    this.#time = readU64(this.#view, (this.#position + size - 8) & this.#mask);
    return this.#size = size;
  }

  /** The sample time of the peeked record. */
  get time(): number {
    return this.#time;
  }

  /**
   * Decodes the peeked record and hands its event to `sink`; returns whether one was delivered. The
   * record is consumed even when `sink` throws, so that it does not come back in every later read.
   */
  read(sink: MappingEventSink, counts: RecordCounts): boolean {
    const size = this.peek(counts);
    if (size === 0) return false;
    const offset = this.#position & this.#mask;
    this.skip();
    if (offset + size <= this.dataSize) {
      return readRecord(this.#bytes, this.#view, offset, size, sink, counts);
    }
    const first = this.dataSize - offset;
    scratch.set(this.#bytes.subarray(offset), 0);
    scratch.set(this.#bytes.subarray(0, size - first), first);
    return readRecord(scratch, scratchView, 0, size, sink, counts);
  }

  /** Consumes the peeked record without decoding it. */
  skip(): void {
    if (this.#size > 0) this.#position += this.#size;
    this.#size = -1;
  }

  /** Hands the space of the records consumed so far back to the kernel. */
  commit(): void {
    // A store with release semantics: the reads of those records are done before the kernel reuses them.
    if (Number(Atomics.load(this.#tail, 0)) !== this.#position) {
      Atomics.store(this.#tail, 0, BigInt(this.#position));
    }
  }

  /** Unmaps the ring when {@linkcode PerfRing.map} mapped it. Safe to call twice. */
  close(): void {
    if (this.#mapping === null) return;
    libc().fn.munmap(this.#mapping.pointer, BigInt(this.#mapping.length));
    this.#mapping = null;
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

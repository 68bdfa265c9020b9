/**
 * Reads a BPF_MAP_TYPE_RINGBUF straight from its memory mapping, without a libbpf callback per record:
 * the caller drains it from a timer. Layout (kernel/bpf/ringbuf.c): page 0 holds the consumer position
 * (read-write), page 1 the producer position, then the data area mapped twice in a row so that a record
 * that wraps around the end is still contiguous. Each record has an 8-byte header: u32 length with bit 31
 * BUSY (being written) and bit 30 DISCARD, then the data, padded to 8 bytes.
 *
 * @example
 * ```ts ignore
 * import { RingBufferReader } from "./ring_buffer.ts";
 * using reader = new RingBufferReader(object.map("events").fd, 4 << 20);
 * reader.drain({ onRecord(view, offset, length) { console.log(view.getUint32(offset, true)); } });
 * ```
 *
 * @module
 */
import { isMapFailed, libc, MAP_SHARED, PROT_READ, PROT_WRITE, SystemError } from "../sys/libc.ts";

const BUSY_BIT = 0x80000000;
const DISCARD_BIT = 0x40000000;
const HEADER_SIZE = 8;

/** Receives each record; `offset` indexes `view`, `bytes` and `words` (always 8-byte aligned). */
export interface RecordSink {
  onRecord(view: DataView, offset: number, length: number): void;
}

/** Views over the data area, for sinks that want typed access without allocating. */
export interface RingBufferViews {
  readonly view: DataView;
  readonly bytes: Uint8Array;
  readonly words: Uint32Array;
}

/** A memory-mapped BPF ring buffer. */
export class RingBufferReader {
  readonly size: number;
  readonly views: RingBufferViews;
  #consumerPage: Deno.PointerValue;
  #producerArea: Deno.PointerValue;
  #producerLength: number;
  #consumerPos: BigInt64Array;
  #producerPos: BigInt64Array;
  #mask: number;

  /** Maps the ring buffer behind `mapFd`; `size` is the map's max_entries (a power of two). */
  constructor(mapFd: number, size: number) {
    const { fn, pageSize, errno } = libc();
    this.size = size;
    this.#mask = size - 1;
    this.#consumerPage = fn.mmap(null, BigInt(pageSize), PROT_READ | PROT_WRITE, MAP_SHARED, mapFd, 0n);
    if (isMapFailed(this.#consumerPage)) {
      throw new SystemError("map the ring buffer's consumer page", errno());
    }
    this.#producerLength = pageSize + 2 * size;
    this.#producerArea = fn.mmap(
      null,
      BigInt(this.#producerLength),
      PROT_READ,
      MAP_SHARED,
      mapFd,
      BigInt(pageSize),
    );
    if (isMapFailed(this.#producerArea)) {
      const error = errno();
      fn.munmap(this.#consumerPage, BigInt(pageSize));
      throw new SystemError("map the ring buffer's data", error);
    }
    this.#consumerPos = new BigInt64Array(Deno.UnsafePointerView.getArrayBuffer(this.#consumerPage!, 8));
    const producer = Deno.UnsafePointerView.getArrayBuffer(this.#producerArea!, this.#producerLength);
    this.#producerPos = new BigInt64Array(producer, 0, 1);
    this.views = {
      view: new DataView(producer, pageSize, 2 * size),
      bytes: new Uint8Array(producer, pageSize, 2 * size),
      words: new Uint32Array(producer, pageSize, (2 * size) / 4),
    };
  }

  /** Bytes written by BPF and not yet consumed. */
  pending(): number {
    return Number(Atomics.load(this.#producerPos, 0) - Atomics.load(this.#consumerPos, 0));
  }

  /**
   * Hands every complete record to `sink`, then releases their space to the kernel. Stops at a record
   * still being written, or after `maxBytes`. Returns the number of records delivered. When `sink` throws,
   * the records before and the one it threw on are released (a record that cannot be handled must not
   * come back in every later drain), and the error is rethrown; the rest wait for the next drain.
   */
  drain(sink: RecordSink, maxBytes = Infinity): number {
    // Positions are u64 but stay far below 2^53 (that is petabytes of traffic), so numbers are exact.
    // BigInt is used once per drain, not per record.
    const start = Number(Atomics.load(this.#consumerPos, 0));
    const producer = Number(Atomics.load(this.#producerPos, 0));
    const { view } = this.views;
    const mask = this.#mask;
    let position = start;
    let records = 0;
    try {
      while (position < producer && position - start < maxBytes) {
        const offset = position & mask;
        const header = view.getUint32(offset, true);
        if (header & BUSY_BIT) break;
        const length = header & ~(BUSY_BIT | DISCARD_BIT);
        position += (length + HEADER_SIZE + 7) & ~7;
        if (!(header & DISCARD_BIT)) {
          records++;
          sink.onRecord(view, offset + HEADER_SIZE, length);
        }
      }
    } finally {
      if (position !== start) Atomics.store(this.#consumerPos, 0, BigInt(position));
    }
    return records;
  }

  /** Unmaps the buffer. Safe to call twice. */
  close(): void {
    const { fn, pageSize } = libc();
    if (this.#producerArea !== null) fn.munmap(this.#producerArea, BigInt(this.#producerLength));
    if (this.#consumerPage !== null) fn.munmap(this.#consumerPage, BigInt(pageSize));
    this.#producerArea = null;
    this.#consumerPage = null;
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

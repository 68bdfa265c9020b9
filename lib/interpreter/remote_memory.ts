/**
 * Bounded reads of another process's memory through `/proc/PID/mem`, for interpreter plug-ins that read a
 * runtime's introspection data (thread states, frames, code objects) from the host. The other process is
 * hostile and mortal: addresses come from its memory, it may unmap a page or exit between two reads, so
 * every read is bounded (a single read, a string, a byte budget) and every failure is one typed error,
 * {@linkcode RemoteMemoryError}, never an exception of another kind and never a hang.
 *
 * Reads go through a small cache of whole pages: a code object, its name and its line table usually share
 * a few pages, so symbolizing one costs one or two system calls. Live data (thread states, frames) changes
 * under the reader; call {@linkcode RemoteMemory.clearCache} before reading a new snapshot of it.
 *
 * @example
 * ```ts ignore
 * import { RemoteMemory } from "./remote_memory.ts";
 * using memory = RemoteMemory.open(asPid(1234));
 * const value = memory.u64(0x7f0012345678 as Address);
 * const name = memory.cString(0x7f0012340000 as Address, 256);
 * ```
 *
 * @module
 */
import type { Address, Pid } from "../types.ts";

/** Why a remote read failed. */
export type RemoteMemoryFailure =
  /** The process exited (or never existed): its memory is gone. */
  | "gone"
  /** The address range is not mapped in the process (or not readable through procfs). */
  | "unmapped"
  /** The caller's request cannot be honoured: beyond a bound, a value not representable, a bad address. */
  | "invalid"
  /** The profiler may not read this process's memory. */
  | "denied";

/** The only error {@linkcode RemoteMemory} throws. */
export class RemoteMemoryError extends Error {
  readonly pid: Pid;
  readonly address: number;
  readonly length: number;
  readonly failure: RemoteMemoryFailure;

  constructor(pid: Pid, address: number, length: number, failure: RemoteMemoryFailure, detail: string) {
    super(`Cannot read ${length} bytes at 0x${address.toString(16)} of process ${pid}: ${detail}`);
    this.name = "RemoteMemoryError";
    this.pid = pid;
    this.address = address;
    this.length = length;
    this.failure = failure;
  }
}

/** Options of {@linkcode RemoteMemory.open}. */
export interface RemoteMemoryOptions {
  /** Pages kept in the cache (least recently used first out). Default 32; 0 disables the cache. */
  cachePages?: number;
  /** The largest single read in bytes. Default 1 MiB: no introspection datum is larger. */
  maxReadBytes?: number;
  /** Where procfs is mounted. */
  procRoot?: string;
}

const PAGE_SIZE = 4096;
/** x86-64 user space ends below 2^47. */
const USER_SPACE_END = 0x800000000000;
const TWO_POW_32 = 4294967296;
const DEFAULT_CACHE_PAGES = 32;
const DEFAULT_MAX_READ_BYTES = 1 << 20;
const utf8 = new TextDecoder("utf-8", { fatal: false });

/** Reader of one process's memory. Not safe to share across processes; close it when done. */
export class RemoteMemory implements Disposable {
  readonly pid: Pid;
  #file: Deno.FsFile | null;
  #procRoot: string;
  #cachePages: number;
  #maxReadBytes: number;
  /** Page number -> page bytes, in least-recently-used-first order. */
  #cache = new Map<number, Uint8Array>();
  #scratch = new Uint8Array(8);
  #scratchView = new DataView(this.#scratch.buffer);
  /** Counters: reads served, system calls made, pages served from the cache. */
  readonly stats = { reads: 0, syscalls: 0, cacheHits: 0 };

  private constructor(pid: Pid, file: Deno.FsFile, procRoot: string, options: RemoteMemoryOptions) {
    this.pid = pid;
    this.#file = file;
    this.#procRoot = procRoot;
    this.#cachePages = Math.max(0, Math.floor(options.cachePages ?? DEFAULT_CACHE_PAGES));
    this.#maxReadBytes = Math.max(8, Math.floor(options.maxReadBytes ?? DEFAULT_MAX_READ_BYTES));
  }

  /**
   * Opens the memory of `pid`.
   *
   * @throws {RemoteMemoryError} "gone" when the process does not exist, "denied" when it may not be read.
   */
  static open(pid: Pid, options: RemoteMemoryOptions = {}): RemoteMemory {
    const procRoot = options.procRoot ?? "/proc";
    try {
      return new RemoteMemory(
        pid,
        Deno.openSync(`${procRoot}/${pid}/mem`, { read: true }),
        procRoot,
        options,
      );
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) {
        throw new RemoteMemoryError(pid, 0, 0, "gone", "the process does not exist");
      }
      if (error instanceof Deno.errors.PermissionDenied) {
        throw new RemoteMemoryError(pid, 0, 0, "denied", "permission denied");
      }
      throw new RemoteMemoryError(pid, 0, 0, "gone", `cannot open its memory (${(error as Error).message})`);
    }
  }

  /** Whether the process is still there (its procfs directory exists). */
  get alive(): boolean {
    try {
      Deno.statSync(`${this.#procRoot}/${this.pid}/stat`);
      return true;
    } catch {
      return false;
    }
  }

  /** Forgets the cached pages: the next reads see the process's memory as it is now. */
  clearCache(): void {
    this.#cache.clear();
  }

  /**
   * Copies `length` bytes at `address` into a new array.
   *
   * @throws {RemoteMemoryError} when the range is not fully readable or the process is gone.
   */
  read(address: Address | number, length: number): Uint8Array {
    const out = new Uint8Array(this.#checkRange(address, length));
    this.#readInto(address, out);
    return out;
  }

  /** Fills `target` with the bytes at `address`. */
  readInto(address: Address | number, target: Uint8Array): void {
    this.#checkRange(address, target.length);
    this.#readInto(address, target);
  }

  u8(address: Address | number): number {
    this.#readScratch(address, 1);
    return this.#scratch[0] as number;
  }

  u16(address: Address | number): number {
    this.#readScratch(address, 2);
    return this.#scratchView.getUint16(0, true);
  }

  u32(address: Address | number): number {
    this.#readScratch(address, 4);
    return this.#scratchView.getUint32(0, true);
  }

  i32(address: Address | number): number {
    this.#readScratch(address, 4);
    return this.#scratchView.getInt32(0, true);
  }

  /**
   * An unsigned 64-bit value as a number.
   *
   * @throws {RemoteMemoryError} "invalid" when the value is 2^53 or above (use {@linkcode u64Halves}).
   */
  u64(address: Address | number): number {
    this.#readScratch(address, 8);
    const high = this.#scratchView.getUint32(4, true);
    if (high >= 0x200000) {
      throw new RemoteMemoryError(this.pid, address, 8, "invalid", "the value is not below 2^53");
    }
    return high * TWO_POW_32 + this.#scratchView.getUint32(0, true);
  }

  /** An unsigned 64-bit value as its [high, low] 32-bit halves. */
  u64Halves(address: Address | number): [number, number] {
    this.#readScratch(address, 8);
    return [this.#scratchView.getUint32(4, true), this.#scratchView.getUint32(0, true)];
  }

  /** A signed 64-bit value as a number (exact between -2^53 and 2^53). */
  i64(address: Address | number): number {
    this.#readScratch(address, 8);
    return this.#scratchView.getInt32(4, true) * TWO_POW_32 + this.#scratchView.getUint32(0, true);
  }

  /**
   * A pointer: 0 (NULL) or a user-space address.
   *
   * @throws {RemoteMemoryError} "invalid" when the value is not a user-space address (kernel or garbage).
   */
  pointer(address: Address | number): Address {
    this.#readScratch(address, 8);
    const high = this.#scratchView.getUint32(4, true);
    if (high >= USER_SPACE_END / TWO_POW_32) {
      throw new RemoteMemoryError(
        this.pid,
        address,
        8,
        "invalid",
        `0x${high.toString(16)}${this.#scratchView.getUint32(0, true).toString(16).padStart(8, "0")} ` +
          "is not a user-space pointer",
      );
    }
    return (high * TWO_POW_32 + this.#scratchView.getUint32(0, true)) as Address;
  }

  /**
   * A NUL-terminated string of at most `maxLength` bytes, decoded as UTF-8 (invalid bytes become U+FFFD).
   * A string without NUL within `maxLength` is cut there. Reads page by page, so a short string at the
   * end of a mapping does not fail for the unmapped bytes after it.
   */
  cString(address: Address | number, maxLength: number): string {
    const limit = this.#checkRange(address, maxLength);
    const bytes = new Uint8Array(limit);
    let filled = 0;
    while (filled < limit) {
      const at = address + filled;
      const chunk = Math.min(limit - filled, PAGE_SIZE - (at % PAGE_SIZE));
      const part = bytes.subarray(filled, filled + chunk);
      this.#readInto(at, part);
      const nul = part.indexOf(0);
      if (nul >= 0) return utf8.decode(bytes.subarray(0, filled + nul));
      filled += chunk;
    }
    return utf8.decode(bytes);
  }

  /** Closes `/proc/PID/mem`. Idempotent; reads after it throw a "gone" error. */
  close(): void {
    const file = this.#file;
    this.#file = null;
    this.#cache.clear();
    file?.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  #checkRange(address: number, length: number): number {
    if (!Number.isInteger(length) || length < 0 || length > this.#maxReadBytes) {
      throw new RemoteMemoryError(
        this.pid,
        address,
        length,
        "invalid",
        `the length is not an integer in [0, ${this.#maxReadBytes}]`,
      );
    }
    if (!Number.isInteger(address) || address <= 0 || address + length > USER_SPACE_END) {
      throw new RemoteMemoryError(this.pid, address, length, "invalid", "not a user-space range");
    }
    return length;
  }

  #readScratch(address: number, length: number): void {
    this.#checkRange(address, length);
    this.#readInto(address, this.#scratch.subarray(0, length));
  }

  #readInto(address: number, target: Uint8Array): void {
    this.stats.reads++;
    if (target.length === 0) return;
    if (this.#cachePages === 0) {
      this.#pread(address, target, address, target.length);
      return;
    }
    let filled = 0;
    while (filled < target.length) {
      const at = address + filled;
      const page = Math.floor(at / PAGE_SIZE);
      const inPage = at - page * PAGE_SIZE;
      const count = Math.min(target.length - filled, PAGE_SIZE - inPage);
      const bytes = this.#page(page, address, target.length);
      target.set(bytes.subarray(inPage, inPage + count), filled);
      filled += count;
    }
  }

  #page(page: number, requestAddress: number, requestLength: number): Uint8Array {
    const cached = this.#cache.get(page);
    if (cached !== undefined) {
      this.stats.cacheHits++;
      // Re-insert: Map iteration order is insertion order, so the first key is the least recently used.
      this.#cache.delete(page);
      this.#cache.set(page, cached);
      return cached;
    }
    const bytes = new Uint8Array(PAGE_SIZE);
    this.#pread(page * PAGE_SIZE, bytes, requestAddress, requestLength);
    if (this.#cache.size >= this.#cachePages) {
      const oldest = this.#cache.keys().next();
      if (!oldest.done) this.#cache.delete(oldest.value);
    }
    this.#cache.set(page, bytes);
    return bytes;
  }

  /** Reads exactly `target.length` bytes at `address`; errors name the caller's request. */
  #pread(address: number, target: Uint8Array, requestAddress: number, requestLength: number): void {
    const file = this.#file;
    if (file === null) {
      throw new RemoteMemoryError(this.pid, requestAddress, requestLength, "gone", "the reader is closed");
    }
    let filled = 0;
    // Each iteration reads at least one byte or throws, so the loop ends.
    while (filled < target.length) {
      let count: number | null;
      try {
        this.stats.syscalls++;
        file.seekSync(address + filled, Deno.SeekMode.Start);
        count = file.readSync(target.subarray(filled));
      } catch (error) {
        // EIO: no mapping there. Also what a dying process's pages give: tell the two apart.
        if (!this.alive) {
          throw new RemoteMemoryError(this.pid, requestAddress, requestLength, "gone", "the process exited");
        }
        throw new RemoteMemoryError(
          this.pid,
          requestAddress,
          requestLength,
          "unmapped",
          `not mapped (${(error as Error).message})`,
        );
      }
      if (count === null || count === 0) {
        // End of file: the process's address space is gone (it exited, or is a zombie).
        throw new RemoteMemoryError(this.pid, requestAddress, requestLength, "gone", "the process exited");
      }
      filled += count;
    }
  }
}

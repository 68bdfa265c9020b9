/**
 * An array map (created with BPF_F_MMAPABLE, kernel 5.5+) mapped into the host's memory: reads and writes
 * reach the kernel's values with no system call, and see what BPF programs write at once.
 *
 * @example
 * ```ts ignore
 * using totals = new MappedArray(object.map("off_cpu_totals").fd, 16 * 32768);
 * const ns = totals.view.getUint32(0, true);
 * ```
 *
 * @module
 */
import { libc, MAP_SHARED, PROT_READ, PROT_WRITE, SystemError } from "../sys/libc.ts";

/** A shared mapping of an mmapable array map, `bytes` long (rounded up to whole pages). */
export class MappedArray implements Disposable {
  /** The map's values, in the layout of the C type, element after element. */
  readonly bytes: Uint8Array<ArrayBuffer>;
  readonly view: DataView<ArrayBuffer>;
  #pointer: Deno.PointerObject | null;
  #length: number;

  constructor(fd: number, bytes: number) {
    const { fn, pageSize, errno } = libc();
    this.#length = Math.max(1, Math.ceil(bytes / pageSize)) * pageSize;
    const pointer = fn.mmap(null, BigInt(this.#length), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0n);
    if (pointer === null || Deno.UnsafePointer.value(pointer) === 0xffffffffffffffffn) {
      throw new SystemError("map an array map into memory", errno());
    }
    this.#pointer = pointer;
    const buffer = Deno.UnsafePointerView.getArrayBuffer(pointer, this.#length);
    this.bytes = new Uint8Array(buffer, 0, bytes);
    this.view = new DataView(buffer, 0, bytes);
  }

  /**
   * The u64 at `offset`, which BPF programs may be adding to meanwhile: read as two halves until the high
   * half is the same before and after the low one, so that a carry between them is never half seen.
   * Exact below 2^53.
   */
  readU64(offset: number): number {
    for (;;) {
      const high = this.view.getUint32(offset + 4, true);
      const low = this.view.getUint32(offset, true);
      if (this.view.getUint32(offset + 4, true) === high) return high * 0x100000000 + low;
    }
  }

  /** Unmaps; the views must not be used after. Safe to call twice. */
  close(): void {
    if (this.#pointer === null) return;
    libc().fn.munmap(this.#pointer, BigInt(this.#length));
    this.#pointer = null;
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

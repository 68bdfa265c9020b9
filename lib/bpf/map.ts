/**
 * A map of a BPF object: sized and pre-filled before load, read and written by file descriptor after.
 * Keys and values are raw bytes in the layout of the C types (see support/types.ts).
 *
 * @module
 */
import { E2BIG, ENOENT, ENOSPC } from "../sys/errno.ts";
import { cString, libc } from "../sys/libc.ts";
import { MappedArray } from "./mapped_array.ts";
import { libbpf, LibbpfError } from "./libbpf.ts";
import type { BpfMapType } from "./uapi.ts";

/** Flags of bpf_map_update_elem. */
export const BPF_ANY = 0;
export const BPF_NOEXIST = 1;
export const BPF_EXIST = 2;

/** A map creation flag: hash map elements are allocated when written, not all at creation. */
export const BPF_F_NO_PREALLOC = 1;

/** Whether `error` is a map refusing an update because it holds `max_entries` already. */
export function isMapFull(error: unknown): boolean {
  // A full hash map answers E2BIG, a full LPM trie ENOSPC.
  return error instanceof LibbpfError && (error.errno === E2BIG || error.errno === ENOSPC);
}

/** What writers of a map's entries need of it (tests give them a map held in memory). */
export type MapWriter = Pick<BpfMap, "update" | "delete">;

/** One map of a {@linkcode BpfObject}; owned by the object, which closes it. */
export class BpfMap {
  readonly name: string;
  #pointer: Deno.PointerObject;
  #isLoaded: () => boolean;

  /** @internal Created by BpfObject.map(). */
  constructor(pointer: Deno.PointerObject, name: string, isLoaded: () => boolean) {
    this.#pointer = pointer;
    this.name = name;
    this.#isLoaded = isLoaded;
  }

  /** The map's file descriptor (valid after load). */
  get fd(): number {
    const fd = libbpf().fn.bpf_map__fd(this.#pointer);
    if (fd < 0) throw new LibbpfError(`get the descriptor of map ${this.name}`, -fd);
    return fd;
  }

  get maxEntries(): number {
    return libbpf().fn.bpf_map__max_entries(this.#pointer);
  }

  /** The map's type (BPF_MAP_TYPE_*, see {@linkcode BpfMapType}). */
  get type(): number {
    return libbpf().fn.bpf_map__type(this.#pointer);
  }

  /** Bytes of a key. */
  get keySize(): number {
    return libbpf().fn.bpf_map__key_size(this.#pointer);
  }

  /** Bytes of a value (of one CPU's value, for a per-CPU map). */
  get valueSize(): number {
    return libbpf().fn.bpf_map__value_size(this.#pointer);
  }

  /** The template of a map of maps' inner maps, as libbpf read it from the object; null for other maps. */
  innerMap(): BpfMap | null {
    const pointer = libbpf().fn.bpf_map__inner_map(this.#pointer);
    return pointer === null ? null : new BpfMap(pointer, `${this.name}.inner`, this.#isLoaded);
  }

  /** Resizes the map; only before load. */
  setMaxEntries(entries: number): void {
    const result = libbpf().fn.bpf_map__set_max_entries(this.#pointer, entries);
    if (result < 0) throw new LibbpfError(`resize map ${this.name} to ${entries} entries`, -result);
  }

  /** The map's creation flags (BPF_F_*). */
  get flags(): number {
    return libbpf().fn.bpf_map__map_flags(this.#pointer);
  }

  /** Sets the map's creation flags; only before load. */
  setFlags(flags: number): void {
    const result = libbpf().fn.bpf_map__set_map_flags(this.#pointer, flags);
    if (result < 0) throw new LibbpfError(`set the flags of map ${this.name} to ${flags}`, -result);
  }

  /**
   * The initial contents of a global-data map (.rodata, .data, .bss) as a writable view of libbpf's
   * copy; write settings into it before load.
   */
  initialValue(): Uint8Array {
    if (this.#isLoaded()) throw new Error(`Cannot change map ${this.name}: the object is loaded`);
    const size = new BigUint64Array(1);
    const pointer = libbpf().fn.bpf_map__initial_value(this.#pointer, new Uint8Array(size.buffer));
    if (pointer === null) throw new Error(`Cannot get the initial value of map ${this.name}: not a data map`);
    return new Uint8Array(Deno.UnsafePointerView.getArrayBuffer(pointer, Number(size[0])));
  }

  /** Writes `value` under `key`. */
  update(key: Uint8Array, value: Uint8Array, flags = BPF_ANY): void {
    if (libbpf().fn.bpf_map_update_elem(this.fd, key, value, BigInt(flags)) !== 0) {
      throw new LibbpfError(`update map ${this.name}`, libc().errno());
    }
  }

  /**
   * {@linkcode update} on a worker thread: for a map of maps, whose every write waits out an RCU grace
   * period (7-16 ms here) after the change is already visible to BPF. `key` and `value` must not change
   * until the promise settles.
   *
   * @example
   * ```ts ignore
   * await outer.updateOffThread(u64Key(7), innerFdValue); // BPF saw the inner map before this resolved
   * ```
   */
  async updateOffThread(key: Uint8Array, value: Uint8Array, flags = BPF_ANY): Promise<void> {
    // libbpf 1.x returns -errno: errno itself belongs to the worker thread.
    const result = await libbpf().fn.bpf_map_update_elem_off_thread(this.fd, key, value, BigInt(flags));
    if (result !== 0) throw new LibbpfError(`update map ${this.name}`, -result);
  }

  /** {@linkcode delete} on a worker thread, as {@linkcode updateOffThread} is. */
  async deleteOffThread(key: Uint8Array): Promise<boolean> {
    const result = await libbpf().fn.bpf_map_delete_elem_off_thread(this.fd, key);
    if (result === 0) return true;
    if (result === -ENOENT) return false;
    throw new LibbpfError(`delete from map ${this.name}`, -result);
  }

  /** Reads the value under `key` into `value`; false when the key is absent. */
  lookup(key: Uint8Array, value: Uint8Array): boolean {
    if (libbpf().fn.bpf_map_lookup_elem(this.fd, key, value) === 0) return true;
    const errno = libc().errno();
    if (errno === ENOENT) return false;
    throw new LibbpfError(`look up map ${this.name}`, errno);
  }

  /**
   * The keys of a hash map, each `keySize` bytes. Entries that BPF adds or removes meanwhile may or may
   * not be among them.
   */
  keys(keySize: number): Uint8Array<ArrayBuffer>[] {
    const keys: Uint8Array<ArrayBuffer>[] = [];
    // A key of no entry (an empty buffer of another size would do) asks for the first key.
    let key: Uint8Array<ArrayBuffer> | null = null;
    for (;;) {
      const next = new Uint8Array(keySize);
      if (libbpf().fn.bpf_map_get_next_key(this.fd, key, next) !== 0) {
        const errno = libc().errno();
        if (errno === ENOENT) return keys;
        throw new LibbpfError(`list the keys of map ${this.name}`, errno);
      }
      keys.push(next);
      key = next;
    }
  }

  /** Removes `key`; false when it was absent. */
  delete(key: Uint8Array): boolean {
    if (libbpf().fn.bpf_map_delete_elem(this.fd, key) === 0) return true;
    const errno = libc().errno();
    if (errno === ENOENT) return false;
    throw new LibbpfError(`delete from map ${this.name}`, errno);
  }
}

/**
 * A map created at run time (not declared in the object), e.g. the inner arrays of a hash-of-maps. The
 * caller owns the descriptor: close it once the map is referenced elsewhere (an outer map holds its own
 * reference).
 */
export function createMap(
  type: BpfMapType,
  name: string,
  keySize: number,
  valueSize: number,
  maxEntries: number,
  flags = 0,
): number {
  // struct bpf_map_create_opts: sz at 0, map_flags at 28; 48 bytes in libbpf 1.x (zeros are ignored).
  const opts = new Uint8Array(48);
  const view = new DataView(opts.buffer);
  view.setBigUint64(0, 48n, true);
  view.setUint32(28, flags, true);
  const fd = libbpf().fn.bpf_map_create(
    type,
    cString(name.slice(0, 15)),
    keySize,
    valueSize,
    maxEntries,
    Deno.UnsafePointer.of(opts),
  );
  if (fd < 0) throw new LibbpfError(`create map ${name} (${maxEntries} entries)`, -fd);
  return fd;
}

/** BPF_F_MMAPABLE: an array map user space can mmap (kernel 5.5+). */
export const BPF_F_MMAPABLE = 1024;
/** BPF_F_INNER_MAP: an inner map whose size may differ from its map-in-map template (kernel 5.10+). */
export const BPF_F_INNER_MAP = 4096;

/**
 * Copies `values` into an mmapable array map, `offset` bytes in (a multiple of the element size): one
 * memcpy instead of a system call per element.
 */
export function writeMmapableArray(fd: number, values: Uint8Array, mapBytes: number, offset = 0): void {
  using mapped = new MappedArray(fd, mapBytes);
  mapped.bytes.set(values, offset);
}

/**
 * Writes a u64 (a file id, an address: below 2^53, so exact as a number) little-endian at `offset`,
 * without BigInt.
 */
export function writeU64(view: DataView, offset: number, value: number): void {
  view.setUint32(offset, value % 0x100000000, true);
  view.setUint32(offset + 4, Math.floor(value / 0x100000000), true);
}

/** Encodes a u64 key (maps keyed by file id). */
export function u64Key(value: number): Uint8Array<ArrayBuffer> {
  const key = new Uint8Array(8);
  writeU64(new DataView(key.buffer), 0, value);
  return key;
}

/** Encodes a u32 key (most of omniprof's maps are keyed by a u32). */
export function u32Key(value: number): Uint8Array<ArrayBuffer> {
  const key = new Uint8Array(4);
  new DataView(key.buffer).setUint32(0, value, true);
  return key;
}

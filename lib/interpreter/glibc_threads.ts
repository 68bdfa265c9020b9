/**
 * Where glibc keeps a thread's identity, thread-specific data (`pthread_getspecific`) and static TLS
 * blocks, learned from glibc itself rather than from hard-coded offsets: libc exports, for debuggers'
 * libthread_db, descriptors of its private structures (`_thread_db_pthread_tid`,
 * `_thread_db_pthread_specific`, `_thread_db_link_map_l_tls_offset`, ...), each three u32 values
 * {bit size of the field or element, element count, byte offset}. Interpreter plug-ins need them to find a
 * thread's interpreter state from its thread pointer, which is what BPF sees (x86-64: the fs base, equal
 * to glibc's `pthread_self()`).
 *
 * musl and other C libraries publish no such descriptors; {@linkcode readGlibcThreadLayout} returns null
 * for them.
 *
 * @example
 * ```ts ignore
 * import { ElfFile } from "../elf/elf_file.ts";
 * import { readGlibcThreadLayout, readThreadSpecific } from "./glibc_threads.ts";
 * using libc = ElfFile.open(libcPath);
 * const layout = readGlibcThreadLayout(libc)!;
 * const value = readThreadSpecific(memory, layout, threadPointer, key);
 * ```
 *
 * @module
 */
import type { ElfFile } from "../elf/elf_file.ts";
import type { Address } from "../types.ts";
import { findElfSymbols, readElfBytes } from "./elf_symbols.ts";
import type { TsdInfo } from "./interpreter.ts";
import type { RemoteMemory } from "./remote_memory.ts";

/** Offsets of glibc's thread and loader structures (x86-64, from the libc file's descriptors). */
export interface GlibcThreadLayout {
  /** `offsetof(struct pthread, tid)`: the kernel thread id of a thread, from its thread pointer. */
  readonly tidOffset: number;
  /** `offsetof(struct pthread, specific)`: the first-level array of pointers to key data blocks. */
  readonly specificOffset: number;
  /** Entries per second-level block (`PTHREAD_KEY_2NDLEVEL_SIZE`, 32). */
  readonly keysPerBlock: number;
  /** `sizeof(struct pthread_key_data)` (16: a sequence number and the value). */
  readonly keyDataSize: number;
  /** `offsetof(struct pthread_key_data, data)`. */
  readonly keyDataValueOffset: number;
  /** `offsetof(struct link_map, l_tls_offset)`: a module's static TLS block is at tp - l_tls_offset. */
  readonly linkMapTlsOffset: number;
  /** `offsetof(struct link_map, l_tls_modid)`. */
  readonly linkMapTlsModid: number;
  /**
   * The thread-specific data layout for keys below {@linkcode keysPerBlock}, which live in the block
   * embedded in `struct pthread` just before `specific` (`specific_1stblock`; `specific[0]` points to
   * it). Verify it against a live thread with {@linkcode verifyFirstBlock}.
   */
  readonly tsd: TsdInfo;
}

const DESCRIPTORS = [
  "_thread_db_pthread_tid",
  "_thread_db_pthread_specific",
  "_thread_db_pthread_key_data_data",
  "_thread_db_sizeof_pthread_key_data",
  "_thread_db_pthread_key_data_level2_data",
  "_thread_db_link_map_l_tls_offset",
  "_thread_db_link_map_l_tls_modid",
] as const;

/** No glibc structure is near this size; larger values mean the descriptor is not what we think. */
const MAX_STRUCT_OFFSET = 1 << 16;
const POINTER_BITS = 64;

/**
 * Reads glibc's thread layout from the libc file, or returns null when the file has no libthread_db
 * descriptors (not glibc, or a glibc built without them).
 *
 * @throws {RangeError} when the descriptors exist but are malformed.
 */
export function readGlibcThreadLayout(libc: ElfFile): GlibcThreadLayout | null {
  const symbols = findElfSymbols(libc, DESCRIPTORS);
  if (DESCRIPTORS.some((name) => !symbols.has(name))) return null;
  const read = (name: (typeof DESCRIPTORS)[number]): [number, number, number] => {
    const symbol = symbols.get(name)!;
    const size = Math.min(symbol.size, 12);
    if (size !== 4 && size !== 12) {
      throw new RangeError(`Cannot read ${name} of ${libc.name}: ${symbol.size} bytes is not a descriptor`);
    }
    const bytes = readElfBytes(libc, symbol.value, size);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const values: [number, number, number] = size === 4
      ? [view.getUint32(0, true), 0, 0]
      : [view.getUint32(0, true), view.getUint32(4, true), view.getUint32(8, true)];
    if (values[2] > MAX_STRUCT_OFFSET) {
      throw new RangeError(`Cannot read ${name} of ${libc.name}: offset ${values[2]} is implausible`);
    }
    return values;
  };
  const [tidBits, , tidOffset] = read("_thread_db_pthread_tid");
  const [specificBits, , specificOffset] = read("_thread_db_pthread_specific");
  const [, , keyDataValueOffset] = read("_thread_db_pthread_key_data_data");
  const [keyDataSize] = read("_thread_db_sizeof_pthread_key_data");
  const [elementBits, keysPerBlock] = read("_thread_db_pthread_key_data_level2_data");
  const [tlsOffsetBits, , linkMapTlsOffset] = read("_thread_db_link_map_l_tls_offset");
  const [, , linkMapTlsModid] = read("_thread_db_link_map_l_tls_modid");
  if (
    tidBits !== 32 || tlsOffsetBits !== POINTER_BITS || keyDataSize === 0 ||
    elementBits !== keyDataSize * 8 || keysPerBlock === 0 || keysPerBlock > 1024 ||
    specificBits % POINTER_BITS !== 0 || keyDataValueOffset + 8 > keyDataSize
  ) {
    throw new RangeError(`Cannot read the thread layout of ${libc.name}: descriptors are inconsistent`);
  }
  const firstBlock = specificOffset - keysPerBlock * keyDataSize;
  if (firstBlock < 0) {
    throw new RangeError(`Cannot read the thread layout of ${libc.name}: no room for the first key block`);
  }
  return {
    tidOffset,
    specificOffset,
    keysPerBlock,
    keyDataSize,
    keyDataValueOffset,
    linkMapTlsOffset,
    linkMapTlsModid,
    tsd: { offset: firstBlock + keyDataValueOffset, multiplier: keyDataSize, indirect: false },
  };
}

/**
 * Whether the first key block of the thread at `threadPointer` is where {@linkcode GlibcThreadLayout.tsd}
 * assumes (glibc sets `specific[0]` to it when it creates a thread).
 *
 * @throws {RemoteMemoryError} when the thread's memory cannot be read.
 */
export function verifyFirstBlock(
  memory: RemoteMemory,
  layout: GlibcThreadLayout,
  threadPointer: Address,
): boolean {
  const firstBlock = memory.pointer(threadPointer + layout.specificOffset);
  return firstBlock === threadPointer + layout.tsd.offset - layout.keyDataValueOffset;
}

/**
 * The value of pthread key `key` in the thread at `threadPointer` (what `pthread_getspecific` returns
 * there), 0 when unset. Follows glibc's two-level table, so any key works.
 *
 * @throws {RemoteMemoryError} when the thread's memory cannot be read.
 */
export function readThreadSpecific(
  memory: RemoteMemory,
  layout: GlibcThreadLayout,
  threadPointer: Address,
  key: number,
): Address {
  const blockIndex = Math.floor(key / layout.keysPerBlock);
  const inBlock = key % layout.keysPerBlock;
  const block = memory.pointer(threadPointer + layout.specificOffset + blockIndex * 8);
  if (block === 0) return 0 as Address;
  return memory.pointer(block + inBlock * layout.keyDataSize + layout.keyDataValueOffset);
}

/** The kernel thread id of the thread at `threadPointer`. */
export function readThreadId(
  memory: RemoteMemory,
  layout: GlibcThreadLayout,
  threadPointer: Address,
): number {
  return memory.i32(threadPointer + layout.tidOffset);
}

/** A loaded module as the dynamic loader lists it (`struct link_map`). */
export interface LinkMapEntry {
  /** The link map's own address. */
  readonly address: Address;
  /** `l_addr`: the load bias. */
  readonly bias: number;
  /** `l_ld`: the address of the module's dynamic section. */
  readonly dynamic: Address;
  /** `l_name`: its path ("" for the main program). */
  readonly name: string;
}

const MAX_LINK_MAPS = 4096;
const MAX_PATH = 4096;

/**
 * The loader's list of modules, from `_r_debug` (at `rDebug` in the process: the `_r_debug` symbol of
 * the dynamic loader plus its bias). Bounded: a corrupt or cyclic list stops after 4096 entries.
 *
 * @throws {RemoteMemoryError} when the list cannot be read.
 */
export function readLinkMaps(memory: RemoteMemory, rDebug: Address): LinkMapEntry[] {
  const out: LinkMapEntry[] = [];
  // struct r_debug { int r_version; struct link_map *r_map; ... }
  let entry = memory.pointer(rDebug + 8);
  while (entry !== 0 && out.length < MAX_LINK_MAPS) {
    // struct link_map { ElfW(Addr) l_addr; char *l_name; ElfW(Dyn) *l_ld; struct link_map *l_next, *l_prev; }
    const namePointer = memory.pointer(entry + 8);
    out.push({
      address: entry,
      bias: memory.u64(entry),
      dynamic: memory.pointer(entry + 16),
      name: namePointer === 0 ? "" : memory.cString(namePointer, MAX_PATH),
    });
    entry = memory.pointer(entry + 24);
  }
  return out;
}

/**
 * The offset of a module's static TLS block below the thread pointer (`l_tls_offset`, x86-64 TLS
 * variant II: the block starts at tp - offset in every thread), or null when the module has no static
 * TLS block (no TLS, or loaded with dlopen into dynamic TLS).
 *
 * @throws {RemoteMemoryError} when the link map cannot be read.
 */
export function staticTlsOffset(
  memory: RemoteMemory,
  layout: GlibcThreadLayout,
  linkMap: Address,
): number | null {
  const [high, low] = memory.u64Halves(linkMap + layout.linkMapTlsOffset);
  // 0: NO_TLS_OFFSET; all ones: FORCED_DYNAMIC_TLS_OFFSET; anything huge is not a static block.
  if (high !== 0 || low === 0) return null;
  return low;
}

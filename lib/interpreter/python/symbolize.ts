/**
 * Naming Python frames on the host: a frame recorded by the BPF unwinder carries the address of its code
 * object in the process and the byte offset of its current instruction; this reads the code object from
 * the process's memory (qualified name where the version has one, file name, first line, line table),
 * keeps it in an LRU cache of {@linkcode LRU_FUNCTION_CACHE_SIZE} code objects, and computes the line.
 *
 * Code objects can be freed and their memory reused by another code object, so a frame also carries the
 * code object's `co_firstlineno` as a stamp: a cached entry whose first line differs is read again.
 *
 * Frame encoding (what the BPF program writes into `struct frame`):
 * - `file_id`: the code object's address in the process;
 * - `addr_or_line`: `co_firstlineno & FIRST_LINE_STAMP_MASK` (21 bits) in the high 32 bits, the
 *   instruction's byte offset into the bytecode (two's complement, -2 for a frame that has not started)
 *   in the low 32 bits.
 *
 * @example
 * ```ts ignore
 * import { PythonSymbolizer } from "./symbolize.ts";
 * const symbolizer = new PythonSymbolizer(memory, offsets);
 * const { functionName, sourceFile, line } = symbolizer.symbolize(codeAddress, byteOffset);
 * ```
 *
 * @module
 */
import type { Address } from "../../types.ts";
import { LRU_FUNCTION_CACHE_SIZE, TOP_LEVEL_FUNCTION_NAME, UNKNOWN_SOURCE_FILE } from "../interpreter.ts";
import { type RemoteMemory, RemoteMemoryError } from "../remote_memory.ts";
import { lineForOffset } from "./line_table.ts";
import type { PythonOffsets } from "./offsets.ts";

/** What a code object says about its function. */
export interface PythonCodeInfo {
  /** `co_name`. */
  readonly name: string;
  /** `co_qualname` (3.11+), else `co_name`. */
  readonly qualifiedName: string;
  /** `co_filename`. */
  readonly fileName: string;
  /** `co_firstlineno`. */
  readonly firstLine: number;
  /** `co_lnotab` / `co_linetable` bytes. */
  readonly lineTable: Uint8Array;
}

/** A named Python frame. */
export interface PythonSymbol {
  /** The qualified name (or name before 3.11); `<unknown>` when the code object could not be read. */
  readonly functionName: string;
  /** The file name, or `<unknown>`. */
  readonly sourceFile: string;
  /** The line, 0 when unknown. */
  readonly line: number;
}

/** Options of {@linkcode PythonSymbolizer}. */
export interface PythonSymbolizerOptions {
  /** Code objects kept. Default {@linkcode LRU_FUNCTION_CACHE_SIZE}. */
  cacheSize?: number;
}

/** Longest name read (characters); qualified names of nested closures stay well below it. */
const MAX_NAME_CHARS = 1024;
/** Longest file name read (characters). */
const MAX_PATH_CHARS = 4096;
/** Largest line table read; a 64 KiB function body is already absurd. */
const MAX_LINE_TABLE_BYTES = 1 << 20;
const MAX_TYPE_NAME = 64;
const TWO_POW_32 = 4294967296;
/**
 * The first-line stamp keeps 21 bits of `co_firstlineno`, so that `addr_or_line` stays below 2^53 and
 * reads as an exact number.
 */
export const FIRST_LINE_STAMP_MASK = 0x1fffff;
const UNKNOWN: PythonSymbol = { functionName: UNKNOWN_SOURCE_FILE, sourceFile: UNKNOWN_SOURCE_FILE, line: 0 };

/** The `addr_or_line` of a Python frame, see the module documentation. */
export function encodePythonAddrOrLine(firstLine: number, byteOffset: number): number {
  return (firstLine & FIRST_LINE_STAMP_MASK) * TWO_POW_32 + (byteOffset >>> 0);
}

/** Splits a Python frame's `addr_or_line` into the first-line stamp and the (signed) byte offset. */
export function decodePythonAddrOrLine(addrOrLine: number): { firstLine: number; byteOffset: number } {
  const high = Math.floor(addrOrLine / TWO_POW_32);
  return { firstLine: high, byteOffset: (addrOrLine - high * TWO_POW_32) | 0 };
}

/**
 * Reads a `str` object: compact ASCII, compact UCS1/UCS2/UCS4, or a legacy string with a data pointer.
 * Strings longer than `maxChars` are cut.
 *
 * @throws {RemoteMemoryError} when the object cannot be read or is not a ready string.
 */
export function readPyUnicode(
  memory: RemoteMemory,
  offsets: PythonOffsets,
  address: Address,
  maxChars: number,
): string {
  const length = memory.u64(address + offsets.unicodeLength);
  const state = memory.u32(address + offsets.unicodeState);
  const kind = (state >>> 2) & 7;
  const compact = (state >>> 5) & 1;
  const ascii = (state >>> 6) & 1;
  const count = Math.min(length, maxChars);
  let data: number;
  if (compact === 1) {
    data = address + (ascii === 1 ? offsets.unicodeAsciiSize : offsets.unicodeCompactSize);
  } else {
    // PyUnicodeObject: the character data pointer follows the PyCompactUnicodeObject header.
    data = memory.pointer(address + offsets.unicodeCompactSize);
  }
  if (data === 0 || (kind !== 1 && kind !== 2 && kind !== 4)) {
    throw new RemoteMemoryError(
      memory.pid,
      address,
      0,
      "invalid",
      `not a ready str (state 0x${state.toString(16)})`,
    );
  }
  if (count === 0) return "";
  const bytes = memory.read(data, count * kind);
  if (kind === 1) {
    let out = "";
    for (let i = 0; i < bytes.length; i += 4096) {
      out += String.fromCharCode(...bytes.subarray(i, Math.min(bytes.length, i + 4096)));
    }
    return out;
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let out = "";
  for (let i = 0; i < count; i++) {
    const code = kind === 2 ? view.getUint16(i * 2, true) : view.getUint32(i * 4, true);
    out += code <= 0x10ffff ? String.fromCodePoint(code) : "\ufffd";
  }
  return out;
}

/**
 * Reads a `bytes` object's content (at most `maxBytes`).
 *
 * @throws {RemoteMemoryError} when it cannot be read or its size is beyond `maxBytes`.
 */
export function readPyBytes(
  memory: RemoteMemory,
  offsets: PythonOffsets,
  address: Address,
  maxBytes: number,
): Uint8Array {
  const size = memory.u64(address + offsets.bytesSize);
  if (size > maxBytes) {
    throw new RemoteMemoryError(memory.pid, address, size, "invalid", `a bytes object of ${size} bytes`);
  }
  return memory.read(address + offsets.bytesData, size);
}

interface CacheEntry {
  info: PythonCodeInfo;
}

/** Reads and caches the code objects of one process. */
export class PythonSymbolizer {
  readonly #memory: RemoteMemory;
  readonly #offsets: PythonOffsets;
  readonly #cacheSize: number;
  readonly #cache = new Map<number, CacheEntry>();
  /** The address of the `code` type object, once one code object proved it. */
  #codeType = 0;
  /** Counters since the last {@linkcode PythonSymbolizer.resetStats}. */
  readonly stats = { hits: 0, misses: 0, stale: 0, failures: 0 };

  constructor(memory: RemoteMemory, offsets: PythonOffsets, options: PythonSymbolizerOptions = {}) {
    this.#memory = memory;
    this.#offsets = offsets;
    this.#cacheSize = Math.max(1, Math.floor(options.cacheSize ?? LRU_FUNCTION_CACHE_SIZE));
  }

  /** Code objects currently cached. */
  get cachedCount(): number {
    return this.#cache.size;
  }

  /**
   * The code object at `address`, from the cache when its first line matches the stamp `firstLine`
   * (compared under {@linkcode FIRST_LINE_STAMP_MASK}; pass -1 to accept any cached entry).
   *
   * @throws {RemoteMemoryError} when it cannot be read or is not a code object.
   */
  codeInfo(address: Address, firstLine = -1): PythonCodeInfo {
    const cached = this.#cache.get(address);
    if (cached !== undefined) {
      if (
        firstLine < 0 ||
        (cached.info.firstLine & FIRST_LINE_STAMP_MASK) === (firstLine & FIRST_LINE_STAMP_MASK)
      ) {
        this.stats.hits++;
        this.#cache.delete(address);
        this.#cache.set(address, cached);
        return cached.info;
      }
      this.stats.stale++;
      this.#cache.delete(address);
    }
    this.stats.misses++;
    const info = this.#read(address);
    if (this.#cache.size >= this.#cacheSize) {
      const oldest = this.#cache.keys().next();
      if (!oldest.done) this.#cache.delete(oldest.value);
    }
    this.#cache.set(address, { info });
    return info;
  }

  /**
   * Names the frame of code object `address` at instruction `byteOffset`. Never throws: a code object
   * that cannot be read gives `<unknown>` (and counts as a failure).
   */
  symbolize(address: Address, byteOffset: number, firstLine = -1): PythonSymbol {
    let info: PythonCodeInfo;
    try {
      info = this.codeInfo(address, firstLine);
    } catch (error) {
      if (!(error instanceof RemoteMemoryError)) throw error;
      this.stats.failures++;
      return UNKNOWN;
    }
    return {
      functionName: info.qualifiedName === "" ? TOP_LEVEL_FUNCTION_NAME : info.qualifiedName,
      sourceFile: info.fileName === "" ? UNKNOWN_SOURCE_FILE : info.fileName,
      line: lineForOffset(this.#offsets.lineTableFormat, info.lineTable, info.firstLine, byteOffset),
    };
  }

  /** Forgets every cached code object (e.g. the process exec'd). */
  clear(): void {
    this.#cache.clear();
    this.#codeType = 0;
  }

  /** Zeroes the counters. */
  resetStats(): void {
    this.stats.hits = 0;
    this.stats.misses = 0;
    this.stats.stale = 0;
    this.stats.failures = 0;
  }

  #read(address: Address): PythonCodeInfo {
    const memory = this.#memory;
    const o = this.#offsets;
    // Code objects are immutable once built, so cached pages are fine here.
    this.#checkIsCode(address);
    const namePointer = memory.pointer(address + o.codeName);
    const name = namePointer === 0 ? "" : readPyUnicode(memory, o, namePointer, MAX_NAME_CHARS);
    let qualifiedName = name;
    if (o.codeQualname !== null) {
      const pointer = memory.pointer(address + o.codeQualname);
      if (pointer !== 0) qualifiedName = readPyUnicode(memory, o, pointer, MAX_NAME_CHARS);
    }
    const filePointer = memory.pointer(address + o.codeFilename);
    const fileName = filePointer === 0 ? "" : readPyUnicode(memory, o, filePointer, MAX_PATH_CHARS);
    const tablePointer = memory.pointer(address + o.codeLineTable);
    const lineTable = tablePointer === 0
      ? new Uint8Array(0)
      : readPyBytes(memory, o, tablePointer, MAX_LINE_TABLE_BYTES);
    return { name, qualifiedName, fileName, firstLine: memory.i32(address + o.codeFirstLineNo), lineTable };
  }

  #checkIsCode(address: Address): void {
    const type = this.#memory.pointer(address + this.#offsets.objectType);
    if (type !== 0 && type === this.#codeType) return;
    const namePointer = type === 0 ? 0 : this.#memory.pointer(type + this.#offsets.typeName);
    const typeName = namePointer === 0 ? "" : this.#memory.cString(namePointer, MAX_TYPE_NAME);
    if (typeName !== "code") {
      throw new RemoteMemoryError(
        this.#memory.pid,
        address,
        0,
        "invalid",
        `not a code object (type "${typeName}")`,
      );
    }
    this.#codeType = type;
  }
}

/**
 * A jitdump: the binary file (`jit-PID.dump`) in which a JIT runtime describes the code it generates, as
 * perf's jitdump specification (tools/perf/Documentation/jitdump-specification.txt) defines it. V8 writes
 * one with `--perf-prof` (in its working directory), the JVM through an agent, .NET with
 * `DOTNET_PerfMapEnabled=1`: unlike a perf map it also gives the source file and line of each piece of
 * code's instructions, so it names frames in anonymous executable memory down to the line.
 *
 * The file is a 40-byte header (magic "JiTD" in the writer's byte order, version 1, the header's size,
 * the ELF machine, the PID, a timestamp, flags) followed by records, each a 16-byte prefix (type, total
 * size, timestamp) and a body:
 * - CODE_LOAD (0): pid, tid, vma, code_addr, code_size, code_index, the name (NUL-terminated), the code;
 * - CODE_MOVE (1): pid, tid, vma, old_code_addr, new_code_addr, code_size, code_index;
 * - DEBUG_INFO (2): code_addr, nr_entry, then entries (address, line, discriminator, file name
 *   NUL-terminated, or "\xff\0" for the previous entry's file), written before the CODE_LOAD it describes;
 * - CODE_CLOSE (3): the writer is done;
 * - UNWINDING_INFO (4) and types added later: skipped by their size.
 *
 * Code is generated again at addresses that held other code, so a later load wins where loads overlap
 * (records are appended in the order the runtime made them); a move makes the old range name nothing and
 * the new one name what the old did, lines included.
 *
 * V8 writes the addresses of its line entries 0x40 bytes (the size of an ELF header, where perf's first
 * jitdump reader put the code) past the instruction they belong to: a dump whose first load carries one
 * of V8's tags (`Builtin:`, `JS:`, ...) has that taken off. V8 (Node 20's, at least) also writes some
 * file names from a buffer it has already freed, the first 16 bytes overwritten (NULs included): a NUL
 * ends a file name only where the next entry can start, and a damaged name is replaced by the path in the
 * code's name (`JS:*work /app/main.js:3:15`) when what is left of its base name agrees, else left unknown
 * ("") with its lines kept.
 *
 * The file is written while the process runs: it is read from where the last read stopped, complete
 * records only (the writer may be in the middle of one), when a lookup misses and at most every
 * `refreshIntervalMs`, and to its end by {@linkcode JitDump.finish}. The code in CODE_LOAD records is
 * not kept. What is read is bounded: at most `maxBytes` of the file, `maxEntries` loads and moves and
 * `maxLineEntries` line entries (then {@linkcode JitDumpStats.truncated} is set and nothing more is read);
 * a name or file name of more than 64 KiB, or a DEBUG_INFO record of more than 16 MiB, is malformed. A
 * header that is not a jitdump's, or a record whose size cannot be right, stops the reading
 * ({@linkcode JitDumpStats.rejected} says why).
 *
 * @example
 * ```ts ignore
 * import { JitDump } from "./jitdump.ts";
 * const dump = new JitDump();
 * dump.follow(() => openedSource); // a JitDumpSource, e.g. jitDumpSourceOf(RegularFile.open(path))
 * console.log(dump.frame(0x7f0000001010)); // { functionName: "JS:*work /app/main.js:3:15", ... }
 * ```
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import type { RegularFile } from "../sys/regular_file.ts";
import { LatestRanges } from "./latest_ranges.ts";

/** What a jitdump says of an address: the function's name, and its source file and line when known. */
export interface JitCodeFrame {
  readonly functionName: string;
  /** "" when the dump has no line information for the code. */
  readonly sourceFile: string;
  /** 0 when unknown. */
  readonly line: number;
}

/** The bytes of a jitdump, read by position; it may grow between reads. */
export interface JitDumpSource {
  /** The file's name, for messages. */
  readonly name: string;
  /** Its size now. */
  size(): number;
  /** Reads at `offset` into `buffer`; returns the count, 0 at the end. */
  readInto(offset: number, buffer: Uint8Array): number;
  close(): void;
}

/** Opens the dump while its process lives: null when there is none (yet). */
export type JitDumpOpener = () => JitDumpSource | null;

/** Bounds of a {@linkcode JitDump}. */
export interface JitDumpOptions {
  /** Most bytes read from the file (records include the code). Default 256 MiB. */
  maxBytes?: number;
  /** Most loads and moves kept. Default 2^20. */
  maxEntries?: number;
  /** Most line entries kept. Default 2^22. */
  maxLineEntries?: number;
  /** Least time between two looks for new records caused by lookups that miss, in ms. Default 1000. */
  refreshIntervalMs?: number;
}

/** What reading a jitdump found. */
export interface JitDumpStats {
  /** CODE_LOAD records kept. */
  loads: number;
  /** CODE_MOVE records applied. */
  moves: number;
  /** Line entries kept (from DEBUG_INFO records). */
  lineEntries: number;
  /** Records skipped because their content cannot be right (a name without its end, no code). */
  malformedRecords: number;
  /** Bytes of the file parsed. */
  bytesRead: number;
  /** Whether a bound stopped the reading: the rest of the file is not used. */
  truncated: boolean;
  /** Why the reading stopped on content that is not a jitdump's, or null. */
  rejected: string | null;
}

/** What a header that cannot be a version-1 jitdump's is refused with. */
export class JitDumpFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "JitDumpFormatError";
  }
}

/** The fields of a jitdump's header. */
export interface JitDumpHeader {
  /** Whether the writer's byte order is little-endian (the magic reads "JiTD" as a little-endian u32). */
  readonly littleEndian: boolean;
  readonly version: number;
  /** Where the first record starts. */
  readonly size: number;
  readonly elfMachine: number;
  readonly pid: number;
  readonly timestamp: bigint;
  readonly flags: bigint;
}

/** "JiTD" read as a u32 in the writer's byte order. */
export const JITDUMP_MAGIC = 0x4a695444;
/** The version of the specification read. */
export const JITDUMP_VERSION = 1;
/** Bytes of the header's fixed fields. */
export const JITDUMP_HEADER_SIZE = 40;
/** Record types. */
export const JitRecord = {
  CodeLoad: 0,
  CodeMove: 1,
  DebugInfo: 2,
  CodeClose: 3,
  UnwindingInfo: 4,
} as const;

const MAGIC_SWAPPED = 0x4454694a;
const PREFIX_SIZE = 16;
/** The prefix and the fixed fields of CODE_LOAD, before the name. */
const LOAD_FIXED = PREFIX_SIZE + 40;
const MOVE_SIZE = PREFIX_SIZE + 48;
const DEBUG_FIXED = PREFIX_SIZE + 16;
/** Address, line and discriminator of a line entry, before its file name. */
const LINE_ENTRY_FIXED = 16;
const MAX_NAME_BYTES = 64 * 1024;
const MAX_DEBUG_RECORD_BYTES = 16 * 1024 * 1024;
const READ_CHUNK_BYTES = 1024 * 1024;
const DEFAULT_MAX_BYTES = 256 * 1024 * 1024;
const DEFAULT_MAX_ENTRIES = 1 << 20;
const DEFAULT_MAX_LINE_ENTRIES = 1 << 22;
const DEFAULT_REFRESH_INTERVAL_MS = 1000;
/** Addresses are kept as doubles: exact below 2^53 (user space ends at 2^47, or 2^56 with 5-level paging). */
const MAX_ADDRESS = 2 ** 53;
/** Where V8 says its line entries are, past the instruction they belong to (an ELF64 header's size). */
const V8_LINE_BIAS = 0x40;
/** The tags V8 gives its code's names; the first code it loads is always a builtin. */
const V8_TAG = /^(?:Builtin|BytecodeHandler|Stub|Handler|JS|LazyCompile|Function|Script|Eval|RegExp):/;
/** The name index of a range that names nothing (code moved away). */
const NOTHING = 0xffffffff;
/** The file name byte that means "the previous entry's file". */
const SAME_FILE = 0xff;
/** Line entries waiting for their CODE_LOAD: most kept (a writer puts them right before it). */
const MAX_PENDING_DEBUG = 256;
const decoder = new TextDecoder();
const NO_BYTES = new Uint8Array(0);
const logger = getLogger(["omniprof", "symbolize"]);

/** A source over an open regular file (which it closes with itself). */
export function jitDumpSourceOf(file: RegularFile): JitDumpSource {
  return {
    name: file.name,
    size: () => file.status().size,
    readInto: (offset, buffer) => file.readInto(offset, buffer),
    close: () => file.close(),
  };
}

/**
 * Parses the header at the start of `bytes` (at least {@linkcode JITDUMP_HEADER_SIZE} of them).
 *
 * @throws {JitDumpFormatError} when the magic, the version or the header's size is not a version-1
 * jitdump's.
 */
export function parseJitDumpHeader(bytes: Uint8Array): JitDumpHeader {
  if (bytes.length < JITDUMP_HEADER_SIZE) {
    throw new JitDumpFormatError(`a jitdump header has ${JITDUMP_HEADER_SIZE} bytes, not ${bytes.length}`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const magic = view.getUint32(0, true);
  if (magic !== JITDUMP_MAGIC && magic !== MAGIC_SWAPPED) {
    throw new JitDumpFormatError(
      `not a jitdump: the magic is 0x${magic.toString(16).padStart(8, "0")}, not "JiTD"`,
    );
  }
  const littleEndian = magic === JITDUMP_MAGIC;
  const version = view.getUint32(4, littleEndian);
  if (version !== JITDUMP_VERSION) {
    throw new JitDumpFormatError(`jitdump version ${version} is not supported (only ${JITDUMP_VERSION})`);
  }
  const size = view.getUint32(8, littleEndian);
  if (size < JITDUMP_HEADER_SIZE) {
    throw new JitDumpFormatError(
      `the jitdump header says it has ${size} bytes, fewer than ${JITDUMP_HEADER_SIZE}`,
    );
  }
  return {
    littleEndian,
    version,
    size,
    elfMachine: view.getUint32(12, littleEndian),
    pid: view.getUint32(20, littleEndian),
    timestamp: view.getBigUint64(24, littleEndian),
    flags: view.getBigUint64(32, littleEndian),
  };
}

/** Line entries of one DEBUG_INFO record, until its CODE_LOAD comes. */
interface PendingLines {
  readonly addresses: number[];
  readonly lines: number[];
  /** A file name's index, or for a damaged name what is left of its base name (see #load). */
  readonly files: (number | string)[];
}

/** The names and lines of a process's JIT code, read from its jitdump. */
export class JitDump implements Disposable {
  readonly #maxBytes: number;
  readonly #maxEntries: number;
  readonly #maxLineEntries: number;
  readonly #refreshIntervalMs: number;
  readonly #ranges: LatestRanges;
  /** Per entry: its name's index (or NOTHING), and its line entries (first index, count). */
  #nameOf = new Uint32Array(64);
  #linesFirst = new Uint32Array(64);
  #linesCount = new Uint32Array(64);
  #names: string[] = [];
  #nameIndex = new Map<string, number>();
  /** Line entries, those of one entry together, sorted by offset from the start of its code. */
  #lineOffsets = new Float64Array(256);
  #lineNumbers = new Uint32Array(256);
  #lineFiles = new Uint32Array(256);
  #lineCount = 0;
  #files: string[] = [];
  #fileIndex = new Map<string, number>();
  #pending = new Map<number, PendingLines>();
  #header: JitDumpHeader | null = null;
  /** Taken off line entries' addresses (V8's 0x40); known at the first load. */
  #lineBias: number | null = null;
  #loads = 0;
  #moves = 0;
  #malformed = 0;
  #truncated = false;
  #rejected: string | null = null;
  /** The writer wrote CODE_CLOSE: nothing follows. */
  #closed = false;
  #source: JitDumpSource | null = null;
  #opener: JitDumpOpener | null = null;
  /** The file offset up to which records are parsed. */
  #offset = 0;
  // The bytes last read: [#windowStart, #windowStart + #windowLength) of the file.
  #window = NO_BYTES;
  #windowStart = 0;
  #windowLength = 0;
  #checkedAt = -Infinity;
  #finished = false;

  constructor(options: JitDumpOptions = {}) {
    this.#maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
    this.#maxEntries = options.maxEntries ?? DEFAULT_MAX_ENTRIES;
    this.#maxLineEntries = options.maxLineEntries ?? DEFAULT_MAX_LINE_ENTRIES;
    this.#refreshIntervalMs = options.refreshIntervalMs ?? DEFAULT_REFRESH_INTERVAL_MS;
    this.#ranges = new LatestRanges(this.#maxEntries);
  }

  /** A snapshot of what was read. */
  get stats(): JitDumpStats {
    return {
      loads: this.#loads,
      moves: this.#moves,
      lineEntries: this.#lineCount,
      malformedRecords: this.#malformed,
      bytesRead: this.#offset,
      truncated: this.#truncated,
      rejected: this.#rejected,
    };
  }

  /**
   * Reads the dump `open` gives (now, and later when a lookup misses and the file may have grown), or,
   * while it gives none, asks it again at most every `refreshIntervalMs`. Ignored after
   * {@linkcode finish}.
   */
  follow(open: JitDumpOpener): void {
    if (this.#finished) return;
    this.#opener = open;
    this.refresh();
  }

  /** Reads the complete records written since the last read (opening the file first if not found yet). */
  refresh(): void {
    this.#checkedAt = performance.now();
    if (this.#finished) return;
    try {
      if (this.#source === null && this.#opener !== null) this.#source = this.#opener();
      if (this.#source !== null) this.#read(this.#source);
    } catch (error) {
      // A file that cannot be read on (an I/O error): what was read so far stays.
      logger.debug("Cannot read on in {path}: {error}", { path: this.#source?.name, error: String(error) });
      this.close();
    } finally {
      // The window is needed while reading only: many processes may each have a dump open.
      this.#window = NO_BYTES;
      this.#windowLength = 0;
    }
    if (this.#rejected !== null || this.#truncated || this.#closed) this.close();
  }

  /** {@linkcode refresh} if `refreshIntervalMs` has passed since the last look. */
  refreshIfDue(): void {
    if (this.#finished) return;
    if (performance.now() - this.#checkedAt >= this.#refreshIntervalMs) this.refresh();
  }

  /** The process is gone: reads what is left and lets the file go. What was read stays. Idempotent. */
  finish(): void {
    if (this.#finished) return;
    this.#opener = null;
    if (this.#source !== null) this.refresh();
    this.close();
  }

  /** Lets the file go without reading it again; what was read stays. Idempotent. */
  close(): void {
    this.#finished = true;
    this.#opener = null;
    this.#source?.close();
    this.#source = null;
  }

  [Symbol.dispose](): void {
    this.close();
  }

  /**
   * What the code at `address` is; when nothing covers it, first reads what was added to the file (at most
   * every `refreshIntervalMs`). Null when nothing read names the address.
   */
  frame(address: number): JitCodeFrame | null {
    const found = this.lookup(address);
    if (found !== null || this.#finished) return found;
    if (performance.now() - this.#checkedAt < this.#refreshIntervalMs) return null;
    this.refresh();
    return this.lookup(address);
  }

  /** What the code at `address` is among the records read so far, or null. Never reads the file. */
  lookup(address: number): JitCodeFrame | null {
    const entry = this.#ranges.lookup(address);
    if (entry < 0) return null;
    const nameId = this.#nameOf[entry]!;
    if (nameId === NOTHING) return null;
    const functionName = this.#names[nameId]!;
    const count = this.#linesCount[entry]!;
    if (count === 0) return { functionName, sourceFile: "", line: 0 };
    const first = this.#linesFirst[entry]!;
    const offset = address - this.#ranges.startOf(entry);
    // The last line entry at or before the offset; before the first one, the first (the function's start).
    let low = first;
    let high = first + count;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.#lineOffsets[middle]! <= offset) low = middle + 1;
      else high = middle;
    }
    const at = low > first ? low - 1 : first;
    return { functionName, sourceFile: this.#files[this.#lineFiles[at]!]!, line: this.#lineNumbers[at]! };
  }

  /** Parses the records from the offset reached up to the file's present end, within the bounds. */
  #read(source: JitDumpSource): void {
    const size = source.size();
    const limit = Math.min(size, this.#maxBytes);
    if (this.#header === null) {
      if (limit < JITDUMP_HEADER_SIZE) return;
      try {
        this.#header = parseJitDumpHeader(this.#bytes(source, 0, JITDUMP_HEADER_SIZE, limit));
      } catch (error) {
        if (!(error instanceof JitDumpFormatError)) throw error;
        this.#reject(source, error.message);
        return;
      }
      this.#offset = this.#header.size;
    }
    const little = this.#header.littleEndian;
    while (!this.#truncated && !this.#closed && this.#offset + PREFIX_SIZE <= limit) {
      const prefix = this.#view(source, this.#offset, PREFIX_SIZE, limit);
      const type = prefix.getUint32(0, little);
      const total = prefix.getUint32(4, little);
      if (total < PREFIX_SIZE) {
        this.#reject(source, `the record at offset ${this.#offset} says it has ${total} bytes`);
        return;
      }
      if (this.#offset + total > limit) break; // not all written yet, or past the bound
      this.#record(source, type, total, limit);
      this.#offset += total;
    }
    // Past the bound, the record that did not fit is cut by it, not waiting for its writer.
    if (size > this.#maxBytes && !this.#closed) this.#truncated = true;
  }

  #record(source: JitDumpSource, type: number, total: number, limit: number): void {
    const little = this.#header!.littleEndian;
    switch (type) {
      case JitRecord.CodeLoad: {
        if (total < LOAD_FIXED + 1) {
          this.#malformed++;
          return;
        }
        const length = Math.min(total, LOAD_FIXED + MAX_NAME_BYTES + 1);
        const view = this.#view(source, this.#offset, length, limit);
        const codeAddress = readU64(view, 32, little);
        const codeSize = readU64(view, 40, little);
        const bytes = new Uint8Array(view.buffer, view.byteOffset + LOAD_FIXED, length - LOAD_FIXED);
        const end = bytes.indexOf(0);
        if (end <= 0 || codeSize <= 0 || codeAddress + codeSize > MAX_ADDRESS) {
          this.#malformed++;
          return;
        }
        this.#load(codeAddress, codeSize, decoder.decode(bytes.subarray(0, end)));
        return;
      }
      case JitRecord.CodeMove: {
        if (total < MOVE_SIZE) {
          this.#malformed++;
          return;
        }
        const view = this.#view(source, this.#offset, MOVE_SIZE, limit);
        this.#move(readU64(view, 32, little), readU64(view, 40, little), readU64(view, 48, little));
        return;
      }
      case JitRecord.DebugInfo: {
        if (total < DEBUG_FIXED || total > MAX_DEBUG_RECORD_BYTES) {
          this.#malformed++;
          return;
        }
        this.#debugInfo(this.#view(source, this.#offset, total, limit), little);
        return;
      }
      case JitRecord.CodeClose:
        this.#closed = true;
        return;
      default:
        // UNWINDING_INFO, or a type added after version 1: its size says where the next one starts.
        return;
    }
  }

  #load(address: number, size: number, name: string): void {
    this.#lineBias ??= V8_TAG.test(name) ? V8_LINE_BIAS : 0;
    const pending = this.#pending.get(address);
    this.#pending.delete(address);
    let nameId = this.#nameIndex.get(name);
    if (nameId === undefined) {
      nameId = this.#names.length;
      this.#names.push(name);
      this.#nameIndex.set(name, nameId);
    }
    let first = 0;
    let count = 0;
    if (pending !== undefined) {
      if (this.#lineCount + pending.lines.length > this.#maxLineEntries) {
        this.#truncated = true;
        return;
      }
      first = this.#lineCount;
      count = pending.lines.length;
      this.#addLines(pending, address + this.#lineBias, this.#repairedFile(pending, name));
    }
    if (!this.#entry(address, address + size, nameId, first, count)) return;
    this.#loads++;
  }

  #move(from: number, to: number, size: number): void {
    const old = this.#ranges.lookup(from);
    if (old < 0 || this.#ranges.startOf(old) !== from || size <= 0 || to + size > MAX_ADDRESS) return;
    const nameId = this.#nameOf[old]!;
    // Code moved away already: nothing is there to move.
    if (nameId === NOTHING) return;
    const first = this.#linesFirst[old]!;
    const count = this.#linesCount[old]!;
    if (!this.#entry(from, from + size, NOTHING, 0, 0)) return;
    if (!this.#entry(to, to + size, nameId, first, count)) return;
    this.#moves++;
  }

  /** Adds a range and what it names; false (and truncated) when the bound is reached. */
  #entry(start: number, end: number, nameId: number, first: number, count: number): boolean {
    const entry = this.#ranges.add(start, end);
    if (entry < 0) {
      this.#truncated = true;
      return false;
    }
    if (entry === this.#nameOf.length) {
      const capacity = Math.min(2 * entry, Math.max(this.#maxEntries, 1));
      this.#nameOf = grown(this.#nameOf, capacity);
      this.#linesFirst = grown(this.#linesFirst, capacity);
      this.#linesCount = grown(this.#linesCount, capacity);
    }
    this.#nameOf[entry] = nameId;
    this.#linesFirst[entry] = first;
    this.#linesCount[entry] = count;
    return true;
  }

  /**
   * The file of the damaged names among `pending`'s, from the load's `name`: V8 names its code
   * `TAG:NAME PATH:LINE:COLUMN`, and when the base name left of a damaged file name is PATH's, the file
   * is PATH. Else the file is unknown (""): the lines stay.
   */
  #repairedFile(pending: PendingLines, name: string): number {
    if (!pending.files.some((file) => typeof file === "string")) return -1;
    const path = /^\S+ (\/.*):\d+:\d+$/.exec(name)?.[1] ?? "";
    const base = path.slice(path.lastIndexOf("/") + 1);
    const repaired = pending.files.every((file) =>
      typeof file === "number" || (file !== "" && file === base)
    );
    return this.#fileId(repaired ? path : "");
  }

  /** Keeps the line entries of one load, as offsets from `start`, sorted; `repaired` is damaged names'. */
  #addLines(pending: PendingLines, start: number, repaired: number): void {
    const count = pending.lines.length;
    const order = Array.from({ length: count }, (_, i) => i);
    order.sort((a, b) => pending.addresses[a]! - pending.addresses[b]! || a - b);
    while (this.#lineCount + count > this.#lineOffsets.length) {
      const capacity = Math.min(2 * this.#lineOffsets.length, Math.max(this.#maxLineEntries, 1));
      const offsets = new Float64Array(capacity);
      offsets.set(this.#lineOffsets);
      this.#lineOffsets = offsets;
      this.#lineNumbers = grown(this.#lineNumbers, capacity);
      this.#lineFiles = grown(this.#lineFiles, capacity);
    }
    for (const i of order) {
      this.#lineOffsets[this.#lineCount] = pending.addresses[i]! - start;
      this.#lineNumbers[this.#lineCount] = pending.lines[i]!;
      const file = pending.files[i]!;
      this.#lineFiles[this.#lineCount] = typeof file === "number" ? file : repaired;
      this.#lineCount++;
    }
  }

  /** Parses a DEBUG_INFO record (all of it in `view`) and keeps its entries for their load. */
  #debugInfo(view: DataView, little: boolean): void {
    const codeAddress = readU64(view, 16, little);
    const declared = readU64(view, 24, little);
    const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
    const pending: PendingLines = { addresses: [], lines: [], files: [] };
    let at = DEBUG_FIXED;
    let file: number | string = -1;
    for (let i = 0; i < declared; i++) {
      if (at + LINE_ENTRY_FIXED + 1 > bytes.length) {
        this.#malformed++;
        return;
      }
      const address = readU64(view, at, little);
      const line = view.getUint32(at + 8, little);
      const nameStart = at + LINE_ENTRY_FIXED;
      const nameEnd = nameEndOf(view, nameStart, i === declared - 1, codeAddress, little);
      if (nameEnd < 0 || nameEnd - nameStart > MAX_NAME_BYTES) {
        this.#malformed++;
        return;
      }
      if (!(nameEnd === nameStart + 1 && bytes[nameStart] === SAME_FILE && file !== -1)) {
        const name = bytes.subarray(nameStart, nameEnd);
        const text = soundName(name);
        file = text === null ? damagedBaseName(name) : this.#fileId(text);
      }
      pending.addresses.push(address);
      pending.lines.push(line);
      pending.files.push(file);
      at = nameEnd + 1;
    }
    if (pending.lines.length === 0) return;
    if (this.#pending.size >= MAX_PENDING_DEBUG) this.#pending.delete(this.#pending.keys().next().value!);
    this.#pending.set(codeAddress, pending);
  }

  #fileId(name: string): number {
    let id = this.#fileIndex.get(name);
    if (id === undefined) {
      id = this.#files.length;
      this.#files.push(name);
      this.#fileIndex.set(name, id);
    }
    return id;
  }

  #reject(source: JitDumpSource, reason: string): void {
    this.#rejected = reason;
    logger.debug("Not reading on in {path}: {reason}", { path: source.name, reason });
  }

  /** A view of the `length` bytes at `offset` (below `limit`, the readable end). */
  #view(source: JitDumpSource, offset: number, length: number, limit: number): DataView {
    const bytes = this.#bytes(source, offset, length, limit);
    return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /**
   * The `length` bytes at `offset`, from the window of bytes last read, or read again from `offset`
   * on (a chunk, so that the records that follow come with them).
   */
  #bytes(source: JitDumpSource, offset: number, length: number, limit: number): Uint8Array {
    const start = offset - this.#windowStart;
    if (start >= 0 && start + length <= this.#windowLength) {
      return this.#window.subarray(start, start + length);
    }
    if (this.#window.length < length) this.#window = new Uint8Array(Math.max(length, READ_CHUNK_BYTES));
    else if (this.#window.length < READ_CHUNK_BYTES) this.#window = new Uint8Array(READ_CHUNK_BYTES);
    const wanted = Math.min(this.#window.length, limit - offset);
    let filled = 0;
    while (filled < wanted) {
      const count = source.readInto(offset + filled, this.#window.subarray(filled, wanted));
      if (count === 0) break;
      filled += count;
    }
    this.#windowStart = offset;
    this.#windowLength = filled;
    if (filled < length) throw new RangeError(`${source.name} ended at ${offset + filled} (it shrank?)`);
    return this.#window.subarray(0, length);
  }
}

/**
 * Where the file name of a line entry starting at `start` ends (its NUL), or -1. The specification says
 * at the first NUL, but V8 (Node 20's, at least) writes some names from a buffer it has freed
 * already, whose first 16 bytes the allocator overwrote, NULs included. So a NUL ends the name only when
 * an entry can follow it: the next entry's address lies in the 4 GiB from the code's, or for the last
 * entry, nothing but padding (NULs) follows. Without such a NUL, the first one.
 */
function nameEndOf(view: DataView, start: number, last: boolean, code: number, little: boolean): number {
  const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
  const first = bytes.indexOf(0, start);
  for (let end = first; end >= 0; end = bytes.indexOf(0, end + 1)) {
    if (last) {
      let rest = end + 1;
      while (rest < bytes.length && bytes[rest] === 0) rest++;
      if (rest === bytes.length) return end;
    } else if (end + 1 + LINE_ENTRY_FIXED <= bytes.length) {
      const next = readU64(view, end + 1, little);
      if (next >= code && next - code < 2 ** 32) return end;
    }
  }
  return first;
}

const strictDecoder = new TextDecoder("utf-8", { fatal: true });

/** A file name as text, or null when it is damaged: not UTF-8, or holding control characters. */
function soundName(bytes: Uint8Array): string | null {
  if (bytes.some((byte) => byte < 0x20 || byte === 0x7f)) return null;
  try {
    return strictDecoder.decode(bytes);
  } catch {
    return null;
  }
}

/** What follows the last "/" of a damaged name, when that part is sound; else "". */
function damagedBaseName(bytes: Uint8Array): string {
  const slash = bytes.lastIndexOf(0x2f);
  if (slash < 0) return "";
  return soundName(bytes.subarray(slash + 1)) ?? "";
}

/** A u64 field as a number (exact below 2^53; larger values are beyond every bound here). */
function readU64(view: DataView, at: number, little: boolean): number {
  const low = view.getUint32(little ? at : at + 4, little);
  const high = view.getUint32(little ? at + 4 : at, little);
  return high * 0x100000000 + low;
}

function grown(array: Uint32Array, capacity: number): Uint32Array<ArrayBuffer> {
  const out = new Uint32Array(capacity);
  out.set(array);
  return out;
}

/**
 * A perf map: the text file (`/tmp/perf-PID.map`) in which a JIT runtime names the code it generates,
 * one `START SIZE NAME` line per piece of code, START and SIZE in hex, as perf reads it. V8 writes one
 * with `--perf-basic-prof`, .NET with `DOTNET_PerfMapEnabled=1`, the JVM with `jcmd PID Compiler.perfmap`
 * or an agent, LuaJIT, interpreters' perf trampolines: code in anonymous memory, which no file names, is
 * named through it.
 *
 * Lines are read as writers write them: a `0x` before either number is accepted, the name is the rest of
 * the line (spaces included, trailing white space and `\r` dropped), blank lines are skipped; a line that
 * does not parse this way, has no name or covers nothing (size 0) is counted in
 * {@linkcode PerfMapStats.malformedLines} and skipped. Code is generated again at addresses that held
 * other code (a function re-optimized, a code space reused), so where entries overlap the later one wins.
 *
 * The map is written while the process runs: it is read from where the last read stopped, complete lines
 * only (the writer may be in the middle of one), when a lookup misses and at most every
 * `refreshIntervalMs`; the file is held open, so that {@linkcode PerfMap.finish} still reads the last
 * lines (the unterminated one too) after the process has exited. What is read is bounded: at most
 * `maxBytes` of the file and `maxEntries` entries (then {@linkcode PerfMapStats.truncated} is set and
 * nothing more is read), lines of at most 64 KiB.
 *
 * Entries are kept in a {@linkcode LatestRanges}: a lookup allocates nothing.
 *
 * @example
 * ```ts
 * import { PerfMap } from "./perf_map.ts";
 * const map = new PerfMap();
 * map.append(new TextEncoder().encode("7f0000001000 40 JS:*work /app/main.js:3:15\n"));
 * console.log(map.lookup(0x7f0000001010)); // "JS:*work /app/main.js:3:15"
 * ```
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import type { RegularFile } from "../sys/regular_file.ts";
import { LatestRanges } from "./latest_ranges.ts";

/** Bounds of a {@linkcode PerfMap}. */
export interface PerfMapOptions {
  /** Most bytes read from the file. Default 64 MiB. */
  maxBytes?: number;
  /** Most entries kept. Default 2^20. */
  maxEntries?: number;
  /** Least time between two looks for new lines caused by lookups that miss, in ms. Default 1000. */
  refreshIntervalMs?: number;
}

/** What reading a perf map found. */
export interface PerfMapStats {
  /** Entries kept. */
  entries: number;
  /** Lines skipped because they do not parse, have no name, cover nothing or are too long. */
  malformedLines: number;
  /** Bytes of the file parsed. */
  bytesRead: number;
  /** Whether a bound stopped the reading: the rest of the file is not used. */
  truncated: boolean;
}

/** Opens the map's file while its process lives: null when there is none (yet). */
export type PerfMapOpener = () => RegularFile | null;

/** Longest line accepted; a longer one is malformed (no runtime writes such names). */
export const MAX_LINE_BYTES = 64 * 1024;
const READ_CHUNK_BYTES = 1024 * 1024;
const DEFAULT_MAX_BYTES = 64 * 1024 * 1024;
const DEFAULT_MAX_ENTRIES = 1 << 20;
const DEFAULT_REFRESH_INTERVAL_MS = 1000;
/** Addresses are kept as doubles: exact below 2^53 (user space ends at 2^47, or 2^56 with 5-level paging). */
const MAX_ADDRESS = 2 ** 53;
const NEWLINE = 0x0a;
const decoder = new TextDecoder();
const logger = getLogger(["omniprof", "symbolize"]);

/** The names of a process's JIT code, read from its perf map. */
export class PerfMap implements Disposable {
  readonly #maxBytes: number;
  readonly #maxEntries: number;
  readonly #refreshIntervalMs: number;
  /** The entries' ranges, in the order read (later wins where they overlap). */
  readonly #ranges: LatestRanges;
  /** The name of each entry. */
  #nameOf = new Uint32Array(64);
  #names: string[] = [];
  #nameIndex = new Map<string, number>();
  /** Inside a line too long to keep: what follows up to the next newline is dropped. */
  #skipping = false;
  #malformed = 0;
  #bytesRead = 0;
  #truncated = false;
  #file: RegularFile | null = null;
  #opener: PerfMapOpener | null = null;
  /** The file offset up to which lines are parsed. */
  #offset = 0;
  #checkedAt = -Infinity;
  #finished = false;

  constructor(options: PerfMapOptions = {}) {
    this.#maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
    this.#maxEntries = options.maxEntries ?? DEFAULT_MAX_ENTRIES;
    this.#ranges = new LatestRanges(this.#maxEntries);
    this.#refreshIntervalMs = options.refreshIntervalMs ?? DEFAULT_REFRESH_INTERVAL_MS;
  }

  /** A snapshot of what was read. */
  get stats(): PerfMapStats {
    return {
      entries: this.#ranges.count,
      malformedLines: this.#malformed,
      bytesRead: this.#bytesRead,
      truncated: this.#truncated,
    };
  }

  /**
   * Reads the file `open` gives (now, and later when a lookup misses and the file may have grown), or, while
   * it gives none, asks it again at most every `refreshIntervalMs`. Ignored after {@linkcode finish}.
   */
  follow(open: PerfMapOpener): void {
    if (this.#finished) return;
    this.#opener = open;
    this.refresh();
  }

  /**
   * Reads the complete lines written since the last read (opening the file first if it was not found yet).
   */
  refresh(): void {
    this.#checkedAt = performance.now();
    try {
      if (this.#file === null && this.#opener !== null) this.#file = this.#opener();
      if (this.#file !== null) this.#read(this.#file, false);
    } catch (error) {
      // A file that cannot be read on (an I/O error): the names read so far stay.
      logger.debug("Cannot read on in {path}: {error}", { path: this.#file?.name, error: String(error) });
      this.close();
    }
  }

  /** {@linkcode refresh} if `refreshIntervalMs` has passed since the last look. */
  refreshIfDue(): void {
    if (this.#finished || this.#truncated) return;
    if (performance.now() - this.#checkedAt >= this.#refreshIntervalMs) this.refresh();
  }

  /**
   * The process is gone: reads what is left, the last line too even without its newline, and lets the
   * file go. The names read stay. Idempotent.
   */
  finish(): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#opener = null;
    const file = this.#file;
    this.#file = null;
    if (file === null) return;
    try {
      this.#read(file, true);
    } catch (error) {
      logger.debug("Cannot read the rest of {path}: {error}", { path: file.name, error: String(error) });
    } finally {
      file.close();
    }
  }

  /** Lets the file go without reading it again; the names read stay. Idempotent. */
  close(): void {
    this.#finished = true;
    this.#opener = null;
    this.#file?.close();
    this.#file = null;
  }

  [Symbol.dispose](): void {
    this.close();
  }

  /**
   * The name of the code at `address`; when none covers it, first reads what was added to the file (at most
   * every `refreshIntervalMs`). Null when no entry covers the address.
   */
  name(address: number): string | null {
    const found = this.lookup(address);
    if (found !== null || this.#finished || this.#truncated) return found;
    if (this.#opener === null && this.#file === null) return null;
    if (performance.now() - this.#checkedAt < this.#refreshIntervalMs) return null;
    this.refresh();
    return this.lookup(address);
  }

  /** The name of the code at `address` among the entries read so far, or null. Never reads the file. */
  lookup(address: number): string | null {
    const entry = this.#ranges.lookup(address);
    return entry < 0 ? null : this.#names[this.#nameOf[entry]!]!;
  }

  /**
   * Parses `bytes`, the next bytes of the map: every complete line, and with `final` the unterminated one at
   * the end too. Returns how many bytes were used: the caller passes the rest again with what follows.
   * Entries past the bounds are not kept ({@linkcode PerfMapStats.truncated}).
   */
  append(bytes: Uint8Array, final = false): number {
    const used = this.#parseLines(bytes, final);
    this.#bytesRead += used;
    return used;
  }

  #parseLines(bytes: Uint8Array, final: boolean): number {
    let used = 0;
    if (this.#skipping) {
      const newline = bytes.indexOf(NEWLINE);
      if (newline < 0) return bytes.length;
      this.#skipping = false;
      used = newline + 1;
    }
    const end = final ? bytes.length : bytes.lastIndexOf(NEWLINE) + 1;
    if (end > used) {
      for (const line of decoder.decode(bytes.subarray(used, end)).split("\n")) {
        if (line.length > MAX_LINE_BYTES) this.#malformed++;
        else this.#parseLine(line);
        if (this.#truncated) break;
      }
      used = end;
    }
    if (!final && bytes.length - used >= MAX_LINE_BYTES) {
      // A line this long is no runtime's: drop it up to its newline.
      this.#malformed++;
      this.#skipping = true;
      used = bytes.length;
    }
    return used;
  }

  /**
   * Reads and parses the file from the offset reached up to its present end, within the bounds; with
   * `final`, the unterminated last line too.
   */
  #read(file: RegularFile, final: boolean): void {
    if (this.#truncated) return;
    const size = file.status().size;
    const limit = Math.min(size, this.#maxBytes);
    if (limit > this.#offset) {
      const buffer = new Uint8Array(Math.min(READ_CHUNK_BYTES, limit - this.#offset));
      while (this.#offset < limit && !this.#truncated) {
        const wanted = Math.min(buffer.length, limit - this.#offset);
        const count = file.readInto(this.#offset, buffer.subarray(0, wanted));
        // Fewer bytes than asked for: the file ended (shrank) before `size`.
        const last = count < wanted || this.#offset + count >= limit;
        const used = this.append(buffer.subarray(0, count), final && last && limit === size);
        this.#offset += used;
        if (last || used === 0) break;
      }
    }
    if (size > this.#maxBytes) this.#truncated = true;
  }

  #parseLine(line: string): void {
    const length = line.length;
    let at = skipBlanks(line, 0);
    if (at === length || (at === length - 1 && line.charCodeAt(at) === 0x0d)) return; // blank
    const start = readHex(line, at);
    at = start.end;
    const afterStart = skipBlanks(line, at);
    const size = readHex(line, afterStart);
    const nameStart = skipBlanks(line, size.end);
    let nameEnd = length;
    while (nameEnd > nameStart && isBlankOrReturn(line.charCodeAt(nameEnd - 1))) nameEnd--;
    if (
      start.value < 0 || afterStart === at || size.value <= 0 || nameStart === size.end ||
      nameEnd === nameStart || start.value + size.value > MAX_ADDRESS
    ) {
      this.#malformed++;
      return;
    }
    if (this.#ranges.full) {
      this.#truncated = true;
      return;
    }
    const name = line.slice(nameStart, nameEnd);
    let nameId = this.#nameIndex.get(name);
    if (nameId === undefined) {
      nameId = this.#names.length;
      this.#names.push(name);
      this.#nameIndex.set(name, nameId);
    }
    const entry = this.#ranges.add(start.value, start.value + size.value);
    if (entry === this.#nameOf.length) {
      const nameOf = new Uint32Array(Math.min(2 * entry, Math.max(this.#maxEntries, 1)));
      nameOf.set(this.#nameOf);
      this.#nameOf = nameOf;
    }
    this.#nameOf[entry] = nameId;
  }
}

function isBlank(code: number): boolean {
  return code === 0x20 || code === 0x09;
}

function isBlankOrReturn(code: number): boolean {
  return code === 0x20 || code === 0x09 || code === 0x0d;
}

function skipBlanks(line: string, at: number): number {
  while (at < line.length && isBlank(line.charCodeAt(at))) at++;
  return at;
}

/** A hex number at `at` (with an optional `0x`), its value (-1 when there is none) and where it ends. */
function readHex(line: string, at: number): { value: number; end: number } {
  let digits = at;
  if (line.charCodeAt(at) === 0x30 && (line.charCodeAt(at + 1) | 0x20) === 0x78) digits += 2;
  let end = digits;
  while (end < line.length && isHexDigit(line.charCodeAt(end))) end++;
  // More digits than any address has (leading zeros aside) would not be exact as a double.
  if (end === digits || end - digits > 16) return { value: -1, end };
  const value = parseInt(line.slice(digits, end), 16);
  return { value: value > MAX_ADDRESS ? -1 : value, end };
}

function isHexDigit(code: number): boolean {
  return (code >= 0x30 && code <= 0x39) || ((code | 0x20) >= 0x61 && (code | 0x20) <= 0x66);
}

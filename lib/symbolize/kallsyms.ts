/**
 * Kernel text symbols from `/proc/kallsyms`: the kernel image, loaded modules (`name\t[module]`) and JITed
 * BPF programs (`bpf_prog_<tag>_<name>\t[bpf]`). Kernel text lies in the top 2 GiB of the address space,
 * so addresses are kept as their low 32 bits ({@linkcode KernelAddress}) in a sorted `Uint32Array`; names
 * are kept as ranges of the original text and sliced out only for lookup results. kallsyms has no sizes:
 * each symbol extends to the next one.
 *
 * @example
 * ```ts
 * import { KernelSymbols } from "./kallsyms.ts";
 * import type { KernelAddress } from "../types.ts";
 * const kernel = KernelSymbols.load();
 * if (kernel.addressesHidden) console.log("kallsyms addresses are zeroed (kptr_restrict)");
 * console.log(kernel.lookup(0x81000010 as KernelAddress)); // { name: "_stext", module: null, offset: 16 }
 * ```
 *
 * @module
 */

import type { KernelAddress } from "../types.ts";

/** The result of {@linkcode KernelSymbols.lookup}. */
export interface KernelSymbol {
  name: string;
  /** The module (`"bpf"` for BPF programs), or null for the kernel image. */
  module: string | null;
  offset: number;
}

/** What names kernel frames: {@linkcode KernelSymbols}, or the kernel itself (bpf_kernel_names.ts). */
export interface KernelSymbolLookup {
  lookup(address: KernelAddress): KernelSymbol | null;
}

const HIGH_HALF = "ffffffff";
const NEWLINE = 10;
const TAB = 9;
const SPACE = 32;
const OPEN_BRACKET = 91;
const CLOSE_BRACKET = 93;
/** Beyond every real kallsyms (a few hundred thousand lines); bounds the arrays for any input. */
const MAX_SYMBOLS = 1 << 23;
/** The index packs below 2^21 so that `address * 2^21 + index` stays an exact double. */
const INDEX_BITS = 2 ** 21;

/** Kernel text symbols sorted by address. */
export class KernelSymbols {
  /**
   * True when the input had symbol lines but every address was zero: `kptr_restrict` hides addresses from
   * this reader (not root, or kptr_restrict=2). Lookups then find nothing.
   */
  readonly addressesHidden: boolean;
  readonly #addresses: Uint32Array;
  readonly #nameStarts: Uint32Array;
  readonly #nameEnds: Uint32Array;
  readonly #modules: Uint16Array;
  readonly #moduleNames: readonly (string | null)[];
  readonly #text: string;
  /** A partial table: where each symbol is known to end, and the addresses it was made for. */
  readonly #partial: { ends: Float64Array; wanted: Uint32Array } | null;

  private constructor(
    text: string,
    addresses: Uint32Array,
    nameStarts: Uint32Array,
    nameEnds: Uint32Array,
    modules: Uint16Array,
    moduleNames: readonly (string | null)[],
    addressesHidden: boolean,
    partial: { ends: Float64Array; wanted: Uint32Array } | null = null,
  ) {
    this.#partial = partial;
    this.#text = text;
    this.#addresses = addresses;
    this.#nameStarts = nameStarts;
    this.#nameEnds = nameEnds;
    this.#modules = modules;
    this.#moduleNames = moduleNames;
    this.addressesHidden = addressesHidden;
  }

  /**
   * Whether `/proc/kallsyms` (or another path in the same format) lists `name` as a function (a text
   * symbol) of the kernel or a module. Reads the file but keeps nothing of it.
   */
  static hasFunction(name: string, path = "/proc/kallsyms"): boolean {
    const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    return new RegExp(`^[0-9a-f]+ [tT] ${escaped}(\\s|$)`, "m").test(Deno.readTextFileSync(path));
  }

  /** Reads and parses `/proc/kallsyms` (or another path in the same format). */
  static load(path = "/proc/kallsyms"): KernelSymbols {
    return KernelSymbols.parse(Deno.readTextFileSync(path));
  }

  /**
   * Reads `/proc/kallsyms` (or another path) keeping only the symbols of `addresses`: much cheaper than
   * {@linkcode load} when a profile holds a few hundred kernel addresses among 100k+ symbols, since the
   * file is parsed as it is read, in small chunks, and only the kept names are decoded.
   * See {@linkcode parseFor}.
   */
  static loadFor(addresses: Iterable<KernelAddress>, path = "/proc/kallsyms"): KernelSymbols {
    const scanner = new WantedSymbolScanner(addresses);
    using file = Deno.openSync(path);
    // A line longer than this (never seen: names are at most 512 bytes) is skipped as malformed.
    const buffer = new Uint8Array(READ_CHUNK + MAX_LINE);
    let filled = 0;
    let total = 0;
    for (;;) {
      const count = file.readSync(buffer.subarray(filled, filled + READ_CHUNK));
      if (count === null || count === 0) break;
      total += count;
      if (total >= 2 ** 32) throw new RangeError("Cannot parse kallsyms: the input is over 4 GiB");
      filled += count;
      let consumed = scanner.scan(buffer, filled, false);
      // Reading less of /proc/kallsyms is less for the kernel to generate.
      if (scanner.done) return scanner.result();
      if (consumed === 0 && filled > MAX_LINE) consumed = filled;
      buffer.copyWithin(0, consumed, filled);
      filled -= consumed;
    }
    scanner.scan(buffer, filled, true);
    return scanner.result();
  }

  /**
   * Parses kallsyms bytes for the given addresses only: `lookup()` answers as {@linkcode parse} would for
   * them and for any address within the same symbols, and null for any other address ({@linkcode covers}
   * tells which). One pass, no allocation per line, names decoded only for the symbols kept.
   *
   * @throws {RangeError} when the input is over 4 GiB.
   */
  static parseFor(bytes: Uint8Array, addresses: Iterable<KernelAddress>): KernelSymbols {
    if (bytes.length >= 2 ** 32) throw new RangeError("Cannot parse kallsyms: the input is over 4 GiB");
    const scanner = new WantedSymbolScanner(addresses);
    scanner.scan(bytes, bytes.length, true);
    return scanner.result();
  }

  /** A partial table (see {@linkcode parseFor}); for WantedSymbolScanner only. */
  static partial(
    text: string,
    addresses: Uint32Array,
    nameStarts: Uint32Array,
    nameEnds: Uint32Array,
    modules: Uint16Array,
    moduleNames: readonly (string | null)[],
    addressesHidden: boolean,
    partial: { ends: Float64Array; wanted: Uint32Array },
  ): KernelSymbols {
    return new KernelSymbols(
      text,
      addresses,
      nameStarts,
      nameEnds,
      modules,
      moduleNames,
      addressesHidden,
      partial,
    );
  }

  /**
   * Parses kallsyms text. Keeps text symbols (types t, T, w, W) whose address has the high half
   * 0xffffffff; malformed lines are skipped. When several symbols share an address, the one with the
   * fewest leading underscores wins (`srso_alias_untrain_ret` over `_stext`), then the first listed.
   *
   * @throws {RangeError} when the text is too large to index (over 4 GiB or 8M symbols).
   */
  static parse(text: string): KernelSymbols {
    if (text.length >= 2 ** 32) throw new RangeError("Cannot parse kallsyms: the text is over 4 GiB");
    let capacity = 0;
    for (let p = text.indexOf("\n"); p >= 0; p = text.indexOf("\n", p + 1)) capacity++;
    capacity = Math.min(capacity + 1, MAX_SYMBOLS);

    const addresses = new Uint32Array(capacity);
    const nameStarts = new Uint32Array(capacity);
    const nameEnds = new Uint32Array(capacity);
    const modules = new Uint16Array(capacity);
    const moduleNames: (string | null)[] = [null];
    const moduleIds = new Map<string, number>();
    let lastModuleStart = -1;
    let lastModuleEnd = -1;
    let lastModuleId = 0;
    let count = 0;
    let symbolLines = 0;
    let zeroLines = 0;

    const length = text.length;
    let lineStart = 0;
    while (lineStart < length) {
      let lineEnd = text.indexOf("\n", lineStart);
      if (lineEnd < 0) lineEnd = length;
      const line = lineStart;
      lineStart = lineEnd + 1;
      // "<16 hex digits> <type> <name>[\t[<module>]]"
      if (
        lineEnd - line < 20 || text.charCodeAt(line + 16) !== SPACE || text.charCodeAt(line + 18) !== SPACE
      ) {
        continue;
      }
      symbolLines++;
      const type = text.charCodeAt(line + 17);
      // t, T, w, W
      if (type !== 0x74 && type !== 0x54 && type !== 0x77 && type !== 0x57) {
        if (isZeroHex(text, line)) zeroLines++;
        continue;
      }
      if (!text.startsWith(HIGH_HALF, line)) {
        if (isZeroHex(text, line)) zeroLines++;
        continue;
      }
      const low = parseHex8(text, line + 8);
      if (low < 0) continue;
      if (count >= capacity) throw new RangeError(`Cannot parse kallsyms: over ${MAX_SYMBOLS} symbols`);

      const nameStart = line + 19;
      let nameEnd = nameStart;
      while (nameEnd < lineEnd) {
        const c = text.charCodeAt(nameEnd);
        if (c === TAB || c === SPACE || c === NEWLINE) break;
        nameEnd++;
      }
      if (nameEnd === nameStart) continue;

      let moduleId = 0;
      const bracket = nameEnd + 1;
      if (nameEnd < lineEnd && text.charCodeAt(bracket) === OPEN_BRACKET) {
        let close = bracket + 1;
        while (close < lineEnd && text.charCodeAt(close) !== CLOSE_BRACKET) close++;
        if (close < lineEnd) {
          // Consecutive lines almost always name the same module: compare in place before allocating.
          const moduleLength = close - bracket - 1;
          if (
            lastModuleStart >= 0 && moduleLength === lastModuleEnd - lastModuleStart &&
            sameChars(text, lastModuleStart, bracket + 1, moduleLength)
          ) {
            moduleId = lastModuleId;
          } else {
            const name = text.slice(bracket + 1, close);
            let id = moduleIds.get(name);
            if (id === undefined) {
              id = moduleNames.length;
              if (id > 0xffff) continue;
              moduleNames.push(name);
              moduleIds.set(name, id);
            }
            moduleId = id;
          }
          lastModuleStart = bracket + 1;
          lastModuleEnd = close;
          lastModuleId = moduleId;
        }
      }

      addresses[count] = low;
      nameStarts[count] = nameStart;
      nameEnds[count] = nameEnd;
      modules[count] = moduleId;
      count++;
    }

    const addressesHidden = symbolLines > 0 && count === 0 && zeroLines === symbolLines;
    return KernelSymbols.#sorted(
      text,
      addresses,
      nameStarts,
      nameEnds,
      modules,
      count,
      moduleNames,
      addressesHidden,
    );
  }

  static #sorted(
    text: string,
    addresses: Uint32Array,
    nameStarts: Uint32Array,
    nameEnds: Uint32Array,
    modules: Uint16Array,
    count: number,
    moduleNames: readonly (string | null)[],
    addressesHidden: boolean,
  ): KernelSymbols {
    // Sort (address, index) pairs packed in one double so the native numeric sort does the work.
    let sorted = true;
    for (let i = 1; i < count && sorted; i++) {
      sorted = (addresses[i - 1] as number) <= (addresses[i] as number);
    }
    let order: Uint32Array;
    if (sorted) {
      order = new Uint32Array(count);
      for (let i = 0; i < count; i++) order[i] = i;
    } else if (count <= INDEX_BITS) {
      const keys = new Float64Array(count);
      for (let i = 0; i < count; i++) keys[i] = (addresses[i] as number) * INDEX_BITS + i;
      keys.sort();
      order = new Uint32Array(count);
      for (let i = 0; i < count; i++) order[i] = (keys[i] as number) % INDEX_BITS;
    } else {
      order = new Uint32Array(count);
      for (let i = 0; i < count; i++) order[i] = i;
      order.sort((a, b) => (addresses[a] as number) - (addresses[b] as number) || a - b);
    }

    const underscores = (i: number): number => {
      let n = 0;
      const start = nameStarts[i] as number;
      const end = nameEnds[i] as number;
      while (start + n < end && text.charCodeAt(start + n) === 0x5f) n++;
      return n;
    };

    const outAddresses = new Uint32Array(count);
    const outStarts = new Uint32Array(count);
    const outEnds = new Uint32Array(count);
    const outModules = new Uint16Array(count);
    let kept = 0;
    for (let i = 0; i < count;) {
      let best = order[i] as number;
      const address = addresses[best] as number;
      let j = i + 1;
      for (; j < count && addresses[order[j] as number] === address; j++) {
        const candidate = order[j] as number;
        if (underscores(candidate) < underscores(best)) best = candidate;
      }
      outAddresses[kept] = address;
      outStarts[kept] = nameStarts[best] as number;
      outEnds[kept] = nameEnds[best] as number;
      outModules[kept] = modules[best] as number;
      kept++;
      i = j;
    }
    return new KernelSymbols(
      text,
      outAddresses.subarray(0, kept),
      outStarts.subarray(0, kept),
      outEnds.subarray(0, kept),
      outModules.subarray(0, kept),
      moduleNames,
      addressesHidden,
    );
  }

  /** The number of distinct symbol addresses. */
  get size(): number {
    return this.#addresses.length;
  }

  /**
   * Whether {@linkcode lookup} knows the answer for `addr`: always for a full table; for one from
   * {@linkcode parseFor}, for the addresses it was made for and those within the symbols it kept.
   */
  covers(addr: KernelAddress): boolean {
    if (this.#partial === null) return true;
    const wanted = this.#partial.wanted;
    let lo = 0;
    let hi = wanted.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((wanted[mid] as number) < addr) lo = mid + 1;
      else hi = mid;
    }
    return wanted[lo] === addr || this.lookup(addr) !== null;
  }

  /**
   * The symbol at or before `addr` (each symbol extends to the next), or null below the first symbol.
   * The last symbol extends to the end of the address space.
   */
  lookup(addr: KernelAddress): KernelSymbol | null {
    const addresses = this.#addresses;
    let lo = 0;
    let hi = addresses.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((addresses[mid] as number) <= addr) lo = mid + 1;
      else hi = mid;
    }
    if (lo === 0) return null;
    const i = lo - 1;
    if (this.#partial !== null && addr >= (this.#partial.ends[i] as number)) return null;
    return {
      name: this.#text.slice(this.#nameStarts[i], this.#nameEnds[i]),
      module: this.#moduleNames[this.#modules[i] as number] ?? null,
      offset: addr - (addresses[i] as number),
    };
  }
}

const READ_CHUNK = 64 << 10;
/** The longest line kept: a name (at most 512 bytes in the kernel), a tab and a bracketed module name. */
const MAX_LINE = 1024;

/**
 * The one pass of {@linkcode KernelSymbols.parseFor}: per wanted address j, over the symbols s with
 * wanted[j - 1] < s <= wanted[j], the best one (highest, then fewest leading underscores, then first
 * listed), its name and module copied aside; and over the symbols above wanted[j], the lowest (where the
 * kept symbol ends). Fed whole lines, in chunks.
 */
class WantedSymbolScanner {
  readonly #wanted: Uint32Array;
  readonly #best: Float64Array;
  readonly #bestUnderscores: Uint32Array;
  readonly #next: Float64Array;
  /** Per wanted address, the best line from its name to its end. */
  readonly #lines: Uint8Array;
  readonly #lineLengths: Uint16Array;
  #index = 0;
  /** Every wanted address has its symbol and where it ends: the rest of the input can be skipped. */
  #done = false;
  #symbolLines = 0;
  #zeroLines = 0;
  #kept = 0;

  constructor(addresses: Iterable<KernelAddress>) {
    this.#wanted = Uint32Array.from(new Set(addresses)).sort();
    const m = this.#wanted.length;
    this.#best = new Float64Array(m).fill(-1);
    this.#bestUnderscores = new Uint32Array(m);
    this.#next = new Float64Array(m).fill(2 ** 32);
    this.#lines = new Uint8Array(m * MAX_LINE);
    this.#lineLengths = new Uint16Array(m);
  }

  /**
   * Scans the complete lines of `bytes[0, end)` (and with `last`, a final line without a newline);
   * returns where the unscanned rest starts.
   */
  scan(bytes: Uint8Array, end: number, last: boolean): number {
    // Hot loop: counters and the index in locals; the best line of the current slot is copied aside only
    // when the scan moves on (in sorted input nearly every line beats the one before it).
    const wanted = this.#wanted;
    const best = this.#best;
    const next = this.#next;
    const bestUnderscores = this.#bestUnderscores;
    const m = wanted.length;
    let symbolLines = 0;
    let zeroLines = 0;
    let kept = 0;
    let j = this.#index;
    let low = 0;
    let pendingSlot = -1;
    let pendingStart = 0;
    let pendingEnd = 0;
    let lineStart = 0;
    let rest = end;
    while (lineStart < end) {
      // A loop, not indexOf(): a builtin call per line costs more than scanning its few dozen bytes.
      let lineEnd = lineStart;
      while (lineEnd < end && bytes[lineEnd] !== NEWLINE) lineEnd++;
      if (lineEnd === end && !last) {
        rest = lineStart;
        break;
      }
      const line = lineStart;
      lineStart = lineEnd + 1;
      // "<16 hex digits> <type> <name>[\t[<module>]]"
      if (lineEnd - line < 20 || bytes[line + 16] !== SPACE || bytes[line + 18] !== SPACE) continue;
      symbolLines++;
      const type = bytes[line + 17];
      // t, T, w, W
      if (
        (type !== 0x74 && type !== 0x54 && type !== 0x77 && type !== 0x57) || !isHighHalfBytes(bytes, line)
      ) {
        if (isZeroHexBytes(bytes, line)) zeroLines++;
        continue;
      }
      low = parseHex8Bytes(bytes, line + 8);
      if (low < 0) continue;
      const first = bytes[line + 19];
      if (first === TAB || first === SPACE) continue;
      kept++;
      // The kernel image's symbols come sorted: the previous index is usually still right.
      if (!((j === 0 || (wanted[j - 1] as number) < low) && (j === m || low <= (wanted[j] as number)))) {
        let lo = 0;
        let hi = m;
        while (lo < hi) {
          const mid = (lo + hi) >>> 1;
          if ((wanted[mid] as number) < low) lo = mid + 1;
          else hi = mid;
        }
        j = lo;
      }
      if (j > 0 && low < (next[j - 1] as number)) next[j - 1] = low;
      if (j === m) {
        // The kernel image's own symbols come first and sorted, and modules and BPF programs sit above
        // all of them: past every wanted address in that part, nothing later can be a better symbol.
        if (!hasTab(bytes, line + 19, lineEnd)) {
          this.#done = true;
          rest = end;
          break;
        }
        continue;
      }
      const current = best[j] as number;
      if (low < current) continue;
      const underscores = underscoresBytes(bytes, line + 19, lineEnd);
      if (low === current && underscores >= (bestUnderscores[j] as number)) continue;
      best[j] = low;
      bestUnderscores[j] = underscores;
      if (pendingSlot !== j && pendingSlot >= 0) this.#keepLine(pendingSlot, bytes, pendingStart, pendingEnd);
      pendingSlot = j;
      pendingStart = line + 19;
      pendingEnd = lineEnd;
    }
    if (pendingSlot >= 0) this.#keepLine(pendingSlot, bytes, pendingStart, pendingEnd);
    this.#index = j;
    this.#symbolLines += symbolLines;
    this.#zeroLines += zeroLines;
    this.#kept += kept;
    return rest;
  }

  get done(): boolean {
    return this.#done;
  }

  #keepLine(slot: number, bytes: Uint8Array, start: number, end: number): void {
    const length = Math.min(end - start, MAX_LINE);
    this.#lines.set(bytes.subarray(start, start + length), slot * MAX_LINE);
    this.#lineLengths[slot] = length;
  }

  result(): KernelSymbols {
    const m = this.#wanted.length;
    const best = this.#best;
    const next = this.#next;
    const lineOf = new Int32Array(m).fill(-1);
    // A symbol below wanted[j - 1] is also the best for wanted[j] when none lies between them; the lowest
    // symbol above wanted[j + 1] is also above wanted[j].
    for (let j = 0; j < m; j++) {
      if ((best[j] as number) >= 0) lineOf[j] = j;
      else if (j > 0) {
        best[j] = best[j - 1] as number;
        lineOf[j] = lineOf[j - 1] as number;
      }
    }
    for (let j = m - 2; j >= 0; j--) {
      if ((next[j + 1] as number) < (next[j] as number)) next[j] = next[j + 1] as number;
    }

    const decoder = new TextDecoder();
    const starts: number[] = [];
    const ends: number[] = [];
    const names: string[] = [];
    const nameStarts: number[] = [];
    const nameEnds: number[] = [];
    const modules: number[] = [];
    const moduleNames: (string | null)[] = [null];
    const moduleIds = new Map<string, number>();
    let textLength = 0;
    for (let j = 0; j < m; j++) {
      const address = best[j] as number;
      const slot = lineOf[j] as number;
      if (slot < 0 || address === starts[starts.length - 1]) continue;
      const line = this.#lines.subarray(
        slot * MAX_LINE,
        slot * MAX_LINE + (this.#lineLengths[slot] as number),
      );
      let nameEnd = 0;
      while (nameEnd < line.length && line[nameEnd] !== TAB && line[nameEnd] !== SPACE) nameEnd++;
      const name = decoder.decode(line.subarray(0, nameEnd));
      let moduleId = 0;
      if (line[nameEnd + 1] === OPEN_BRACKET) {
        const close = line.indexOf(CLOSE_BRACKET, nameEnd + 2);
        if (close >= 0) {
          const module = decoder.decode(line.subarray(nameEnd + 2, close));
          let id = moduleIds.get(module);
          if (id === undefined) {
            id = moduleNames.length;
            moduleNames.push(module);
            moduleIds.set(module, id);
          }
          moduleId = id;
        }
      }
      starts.push(address);
      ends.push(next[j] as number);
      nameStarts.push(textLength);
      names.push(name);
      textLength += name.length;
      nameEnds.push(textLength);
      modules.push(moduleId);
    }
    const addressesHidden = this.#symbolLines > 0 && this.#kept === 0 &&
      this.#zeroLines === this.#symbolLines;
    return KernelSymbols.partial(
      names.join(""),
      Uint32Array.from(starts),
      Uint32Array.from(nameStarts),
      Uint32Array.from(nameEnds),
      Uint16Array.from(modules),
      moduleNames,
      addressesHidden,
      // Float64: 2^32 stands for "no symbol above", to the end of the address space.
      { ends: Float64Array.from(ends), wanted: this.#wanted },
    );
  }
}

/** The value of the hex digit with character code `c`, or -1. */
function hexDigit(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}

/** Parses 8 hex digits at `at`; -1 when any is not a hex digit. */
function parseHex8(text: string, at: number): number {
  let value = 0;
  for (let i = 0; i < 8; i++) {
    const digit = hexDigit(text.charCodeAt(at + i));
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

/** Whether the line at `at` starts with "ffffffff". */
function isHighHalfBytes(bytes: Uint8Array, at: number): boolean {
  for (let i = 0; i < 8; i++) if (bytes[at + i] !== 0x66) return false;
  return true;
}

/** {@linkcode parseHex8} over bytes. */
function parseHex8Bytes(bytes: Uint8Array, at: number): number {
  let value = 0;
  for (let i = 0; i < 8; i++) {
    const digit = hexDigit(bytes[at + i] ?? 0);
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

/** Whether bytes[start, end) hold a tab (a module symbol's "\t[module]"). */
function hasTab(bytes: Uint8Array, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (bytes[i] === TAB) return true;
  return false;
}

function isZeroHexBytes(bytes: Uint8Array, at: number): boolean {
  for (let i = 0; i < 16; i++) if (bytes[at + i] !== 48) return false;
  return true;
}

function underscoresBytes(bytes: Uint8Array, start: number, end: number): number {
  let n = 0;
  while (start + n < end && bytes[start + n] === 0x5f) n++;
  return n;
}

function sameChars(text: string, a: number, b: number, length: number): boolean {
  for (let i = 0; i < length; i++) if (text.charCodeAt(a + i) !== text.charCodeAt(b + i)) return false;
  return true;
}

function isZeroHex(text: string, at: number): boolean {
  for (let i = 0; i < 16; i++) if (text.charCodeAt(at + i) !== 48) return false;
  return true;
}

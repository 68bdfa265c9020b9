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

  private constructor(
    text: string,
    addresses: Uint32Array,
    nameStarts: Uint32Array,
    nameEnds: Uint32Array,
    modules: Uint16Array,
    moduleNames: readonly (string | null)[],
    addressesHidden: boolean,
  ) {
    this.#text = text;
    this.#addresses = addresses;
    this.#nameStarts = nameStarts;
    this.#nameEnds = nameEnds;
    this.#modules = modules;
    this.#moduleNames = moduleNames;
    this.addressesHidden = addressesHidden;
  }

  /** Reads and parses `/proc/kallsyms` (or another path in the same format). */
  static load(path = "/proc/kallsyms"): KernelSymbols {
    return KernelSymbols.parse(Deno.readTextFileSync(path));
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
    return {
      name: this.#text.slice(this.#nameStarts[i], this.#nameEnds[i]),
      module: this.#moduleNames[this.#modules[i] as number] ?? null,
      offset: addr - (addresses[i] as number),
    };
  }
}

/** Parses 8 hex digits at `at`; -1 when any is not a hex digit. */
function parseHex8(text: string, at: number): number {
  let value = 0;
  for (let i = 0; i < 8; i++) {
    const c = text.charCodeAt(at + i);
    let digit: number;
    if (c >= 48 && c <= 57) digit = c - 48;
    else if (c >= 97 && c <= 102) digit = c - 87;
    else if (c >= 65 && c <= 70) digit = c - 55;
    else return -1;
    value = value * 16 + digit;
  }
  return value;
}

function sameChars(text: string, a: number, b: number, length: number): boolean {
  for (let i = 0; i < length; i++) if (text.charCodeAt(a + i) !== text.charCodeAt(b + i)) return false;
  return true;
}

function isZeroHex(text: string, at: number): boolean {
  for (let i = 0; i < 16; i++) if (text.charCodeAt(at + i) !== 48) return false;
  return true;
}

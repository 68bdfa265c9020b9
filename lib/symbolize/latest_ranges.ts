/**
 * Address ranges added one after another, where a later range wins over the earlier ones it overlaps: how
 * JIT runtimes describe their code (a perf map's lines, a jitdump's records), since code is generated
 * again at addresses that held other code. Each range added gets the next entry number (0, 1, 2, ...);
 * {@linkcode LatestRanges.lookup} gives the number of the latest range covering an address.
 *
 * Ranges live in typed arrays; a lookup is a binary search in a table of disjoint pieces built from them
 * (again after new ranges, at the next lookup), so it allocates nothing.
 *
 * @example
 * ```ts
 * import { LatestRanges } from "./latest_ranges.ts";
 * const ranges = new LatestRanges(1 << 20);
 * ranges.add(0x1000, 0x1100); // entry 0
 * ranges.add(0x1080, 0x1090); // entry 1, over part of entry 0
 * console.log(ranges.lookup(0x1084), ranges.lookup(0x10a0), ranges.lookup(0x2000)); // 1 0 -1
 * ```
 *
 * @module
 */

/** The latest of overlapping ranges, by entry number. */
export class LatestRanges {
  readonly #maxEntries: number;
  #starts = new Float64Array(64);
  #ends = new Float64Array(64);
  #count = 0;
  /** Entry numbers sorted by start (then by number), up to #sortedCount entries. */
  #order = new Uint32Array(0);
  #sortedCount = 0;
  // Disjoint pieces, sorted, each with the entry that covers it; rebuilt after new entries.
  #pieceStarts = new Float64Array(0);
  #pieceEnds = new Float64Array(0);
  #pieceEntries = new Uint32Array(0);
  #pieceCount = 0;
  #stale = false;

  /** `maxEntries` bounds what {@linkcode add} accepts (the arrays grow up to it). */
  constructor(maxEntries: number) {
    this.#maxEntries = maxEntries;
  }

  /** Ranges added. */
  get count(): number {
    return this.#count;
  }

  /** Whether {@linkcode add} accepts no more. */
  get full(): boolean {
    return this.#count >= this.#maxEntries;
  }

  /** Where entry `entry` starts. */
  startOf(entry: number): number {
    return this.#starts[entry]!;
  }

  /**
   * Adds [start, end), which wins over every range added before where they overlap; returns its entry
   * number, or -1 when `maxEntries` are held already (nothing is added).
   */
  add(start: number, end: number): number {
    if (this.full) return -1;
    if (this.#count === this.#starts.length) this.#grow();
    this.#starts[this.#count] = start;
    this.#ends[this.#count] = end;
    this.#stale = true;
    return this.#count++;
  }

  /** The number of the latest entry covering `address`, or -1. */
  lookup(address: number): number {
    if (this.#stale) this.#index();
    const starts = this.#pieceStarts;
    let low = 0;
    let high = this.#pieceCount;
    // The last piece starting at or before the address.
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (starts[middle]! <= address) low = middle + 1;
      else high = middle;
    }
    if (low === 0 || address >= this.#pieceEnds[low - 1]!) return -1;
    return this.#pieceEntries[low - 1]!;
  }

  #grow(): void {
    const capacity = Math.min(this.#starts.length * 2, Math.max(this.#maxEntries, 1));
    const starts = new Float64Array(capacity);
    starts.set(this.#starts);
    const ends = new Float64Array(capacity);
    ends.set(this.#ends);
    this.#starts = starts;
    this.#ends = ends;
  }

  /**
   * Rebuilds the disjoint pieces: entries sorted by start (the new ones sorted, then merged into the order
   * kept from the last build), then swept with the entries that cover the current address in a heap by
   * number, so that each piece is covered by the latest entry there.
   */
  #index(): void {
    const starts = this.#starts;
    const ends = this.#ends;
    const count = this.#count;
    const fresh = Uint32Array.from({ length: count - this.#sortedCount }, (_, i) => this.#sortedCount + i);
    fresh.sort((a, b) => starts[a]! - starts[b]! || a - b);
    const order = new Uint32Array(count);
    let i = 0;
    let j = 0;
    let k = 0;
    const old = this.#order;
    while (i < this.#sortedCount && j < fresh.length) {
      // Equal starts: the older entry first (fresh ones have larger numbers).
      order[k++] = starts[old[i]!]! <= starts[fresh[j]!]! ? old[i++]! : fresh[j++]!;
    }
    while (i < this.#sortedCount) order[k++] = old[i++]!;
    while (j < fresh.length) order[k++] = fresh[j++]!;
    this.#order = order;
    this.#sortedCount = count;

    const pieceStarts = new Float64Array(2 * count);
    const pieceEnds = new Float64Array(2 * count);
    const pieceEntries = new Uint32Array(2 * count);
    let pieces = 0;
    const heap = new EntryHeap(count);
    let next = 0;
    let position = 0;
    for (;;) {
      while (next < count && starts[order[next]!]! <= position) heap.push(order[next++]!);
      while (heap.size > 0 && ends[heap.top]! <= position) heap.pop();
      if (heap.size === 0) {
        if (next >= count) break;
        position = starts[order[next]!]!;
        continue;
      }
      const entry = heap.top;
      const nextStart = next < count ? starts[order[next]!]! : Infinity;
      const end = Math.min(ends[entry]!, nextStart);
      if (pieces > 0 && pieceEntries[pieces - 1] === entry && pieceEnds[pieces - 1] === position) {
        pieceEnds[pieces - 1] = end;
      } else {
        pieceStarts[pieces] = position;
        pieceEnds[pieces] = end;
        pieceEntries[pieces] = entry;
        pieces++;
      }
      position = end;
    }
    this.#pieceStarts = pieceStarts;
    this.#pieceEnds = pieceEnds;
    this.#pieceEntries = pieceEntries;
    this.#pieceCount = pieces;
    this.#stale = false;
  }
}

/** A max-heap of entry numbers: the top is the latest entry. */
class EntryHeap {
  readonly #items: Uint32Array;
  size = 0;

  constructor(capacity: number) {
    this.#items = new Uint32Array(Math.max(1, capacity));
  }

  get top(): number {
    return this.#items[0]!;
  }

  push(entry: number): void {
    const items = this.#items;
    let at = this.size++;
    while (at > 0) {
      const parent = (at - 1) >>> 1;
      if (items[parent]! >= entry) break;
      items[at] = items[parent]!;
      at = parent;
    }
    items[at] = entry;
  }

  pop(): void {
    const items = this.#items;
    const last = items[--this.size]!;
    let at = 0;
    for (;;) {
      let child = 2 * at + 1;
      if (child >= this.size) break;
      if (child + 1 < this.size && items[child + 1]! > items[child]!) child++;
      if (items[child]! <= last) break;
      items[at] = items[child]!;
      at = child;
    }
    items[at] = last;
  }
}

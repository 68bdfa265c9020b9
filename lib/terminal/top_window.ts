/**
 * The data behind a live "top functions" view: per function (name and frame kind), its self and total
 * samples over an exponentially decaying window, so the view follows what the system does now while
 * staying steady from one refresh to the next. Each interval's samples enter with weight 1; older ones
 * lose half their weight every `halfLifeSeconds`. Functions whose weight has decayed to almost nothing are
 * forgotten, so memory follows what is hot rather than everything ever seen.
 *
 * Besides self and total, each function keeps the command (`comm`) it was seen in most, which tells in a
 * whole-system view which program a hot function belongs to.
 *
 * @example
 * ```ts ignore
 * import { TopWindow } from "./top_window.ts";
 * const window = new TopWindow({ halfLifeSeconds: 3 });
 * window.add(recorder.takeProfile({ reset: true }), 1.0);
 * for (const row of window.rows(20)) console.log(row.selfPercent.toFixed(1), row.name);
 * ```
 *
 * @module
 */
import type { FrameKind, Profile } from "../profile/profile.ts";

/** One function of the window. */
export interface TopWindowRow {
  name: string;
  kind: FrameKind;
  /** Decayed samples with this function as the leaf. */
  self: number;
  /** Decayed samples with this function anywhere on the stack (once per sample). */
  total: number;
  selfPercent: number;
  totalPercent: number;
  /** The command this function was seen in most (by decayed total samples). */
  command: string;
}

interface FunctionStats {
  name: string;
  kind: FrameKind;
  self: number;
  total: number;
  /** Decayed total samples per command. */
  commands: Map<string, number>;
}

/** Weight below which a function is forgotten. */
const FORGET_BELOW = 0.01;

/** Options of {@linkcode TopWindow}. */
export interface TopWindowOptions {
  /** Time in which a sample loses half its weight (default 3 s). */
  halfLifeSeconds?: number;
}

/** A decaying window of top functions. */
export class TopWindow {
  readonly halfLifeSeconds: number;
  #functions = new Map<string, FunctionStats>();
  #samples = 0;

  constructor(options: TopWindowOptions = {}) {
    this.halfLifeSeconds = options.halfLifeSeconds ?? 3;
    if (!(this.halfLifeSeconds > 0)) {
      throw new RangeError(`Cannot decay with a half-life of ${this.halfLifeSeconds} s: must be positive`);
    }
  }

  /** Decayed number of samples in the window. */
  get samples(): number {
    return this.#samples;
  }

  /** Number of functions remembered. */
  get size(): number {
    return this.#functions.size;
  }

  /** Ages the window by `elapsedSeconds`, then adds `profile`'s samples with full weight. */
  add(profile: Profile, elapsedSeconds: number): void {
    this.#decay(0.5 ** (Math.max(0, elapsedSeconds) / this.halfLifeSeconds));
    const { locations, samples } = profile;
    // Per location, its function's stats (locations of one function share them).
    const statsOf = new Array<FunctionStats>(locations.length);
    for (let i = 0; i < locations.length; i++) {
      const { kind, functionName } = locations[i]!;
      const key = kind + "\0" + functionName;
      let stats = this.#functions.get(key);
      if (stats === undefined) {
        stats = { name: functionName, kind, self: 0, total: 0, commands: new Map() };
        this.#functions.set(key, stats);
      }
      statsOf[i] = stats;
    }
    const seen = new Set<FunctionStats>();
    for (let s = 0; s < samples.length; s++) {
      const { locations: stack, count, comm } = samples[s]!;
      this.#samples += count;
      if (stack.length === 0) continue;
      seen.clear();
      for (const index of stack) {
        const stats = statsOf[index];
        if (stats === undefined) {
          throw new RangeError(`Cannot add to the top window: sample ${s} refers to location ${index}`);
        }
        if (seen.has(stats)) continue; // recursion counts once per sample
        seen.add(stats);
        stats.total += count;
        stats.commands.set(comm, (stats.commands.get(comm) ?? 0) + count);
      }
      statsOf[stack[0]!]!.self += count;
    }
    // Functions of locations that had no samples this time were created for nothing.
    for (const [key, stats] of this.#functions) if (stats.total === 0) this.#functions.delete(key);
  }

  /** The `limit` hottest functions, by self then total weight, most first. */
  rows(limit: number): TopWindowRow[] {
    const all = [...this.#functions.values()];
    all.sort((a, b) =>
      b.self - a.self || b.total - a.total || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
    );
    const whole = this.#samples;
    return all.slice(0, Math.max(0, limit)).map((stats) => {
      let command = "";
      let best = -1;
      for (const [comm, weight] of stats.commands) {
        if (weight > best) {
          best = weight;
          command = comm;
        }
      }
      return {
        name: stats.name,
        kind: stats.kind,
        self: stats.self,
        total: stats.total,
        selfPercent: whole > 0 ? (stats.self * 100) / whole : 0,
        totalPercent: whole > 0 ? (stats.total * 100) / whole : 0,
        command,
      };
    });
  }

  #decay(factor: number): void {
    if (factor >= 1) return;
    this.#samples *= factor;
    for (const [key, stats] of this.#functions) {
      stats.total *= factor;
      stats.self *= factor;
      if (stats.total < FORGET_BELOW) {
        this.#functions.delete(key);
        continue;
      }
      for (const [comm, weight] of stats.commands) {
        const decayed = weight * factor;
        if (decayed < FORGET_BELOW) stats.commands.delete(comm);
        else stats.commands.set(comm, decayed);
      }
    }
  }
}

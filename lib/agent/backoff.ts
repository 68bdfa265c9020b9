/**
 * Exponential backoff with jitter, for retrying an export while the endpoint is down: the n-th retry
 * waits about `initial * multiplier^n`, capped at `max`, spread by ±`jitter` so that a fleet of agents
 * that lost the same collector does not come back in lock step. A delay the server asks for
 * (`Retry-After`) is honoured as a minimum.
 *
 * @example
 * ```ts
 * import { Backoff } from "./backoff.ts";
 * const backoff = new Backoff({ initialMs: 500, maxMs: 30_000 });
 * backoff.next(); // ~500 ms (250..750)
 * backoff.next(); // ~1000 ms
 * backoff.reset(); // after a success
 * ```
 *
 * @module
 */

/** Options of {@linkcode Backoff}. */
export interface BackoffOptions {
  /** Delay before the first retry, ms. */
  initialMs: number;
  /** Longest delay, ms. */
  maxMs: number;
  /** Growth per retry (default 2). */
  multiplier?: number;
  /** Spread: each delay is drawn from [d * (1 - jitter), d * (1 + jitter)] (default 0.5). */
  jitter?: number;
  /** A uniform random number in [0, 1) (default Math.random; tests inject their own). */
  random?: () => number;
}

/** The delays between retries of one item. */
export class Backoff {
  readonly initialMs: number;
  readonly maxMs: number;
  readonly multiplier: number;
  readonly jitter: number;
  #random: () => number;
  #attempt = 0;

  constructor(options: BackoffOptions) {
    if (!(options.initialMs > 0) || !(options.maxMs >= options.initialMs)) {
      throw new RangeError(
        `Cannot back off from ${options.initialMs} ms to at most ${options.maxMs} ms: need 0 < initial <= max`,
      );
    }
    this.initialMs = options.initialMs;
    this.maxMs = options.maxMs;
    this.multiplier = options.multiplier ?? 2;
    this.jitter = Math.min(1, Math.max(0, options.jitter ?? 0.5));
    this.#random = options.random ?? Math.random;
  }

  /** Retries so far since the last reset. */
  get attempts(): number {
    return this.#attempt;
  }

  /** The delay before the next retry, ms; at least `minimumMs` (a server's Retry-After). */
  next(minimumMs = 0): number {
    const base = Math.min(this.maxMs, this.initialMs * this.multiplier ** this.#attempt);
    this.#attempt++;
    const spread = base * this.jitter * (2 * this.#random() - 1);
    const delay = Math.min(this.maxMs, Math.max(0, base + spread));
    return Math.max(Math.round(delay), Math.round(minimumMs));
  }

  /** Starts over (after a success). */
  reset(): void {
    this.#attempt = 0;
  }
}

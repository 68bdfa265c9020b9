/**
 * The agent's outbox: profiles waiting to be exported, sent one at a time, oldest first, retried with
 * backoff while the endpoint is down. Memory stays bounded: at most `limit` profiles are held (one more
 * while the attempt of a dropped one ends), and when a new one arrives at a full queue the oldest is dropped
 * (and counted), so what is lost in a long outage is the oldest data, never the most recent `limit`
 * intervals.
 *
 * A send that fails for good (the endpoint rejects the data: HTTP 4xx, gRPC INVALID_ARGUMENT, ...) is not
 * retried: the same bytes would be rejected again. Time comes from a {@linkcode Clock}, so tests can run
 * hours of outage in milliseconds.
 *
 * @example
 * ```ts ignore
 * import { ExportQueue } from "./export_queue.ts";
 * const queue = new ExportQueue({ limit: 30, send: (item, signal) => exporter.send(item.body, signal), backoff });
 * queue.push({ body, label: "interval 1" });
 * await queue.drain(10_000); // at shutdown
 * ```
 *
 * @module
 */
import type { Backoff } from "./backoff.ts";
import { delay } from "../sys/timer.ts";

/** Time as the queue sees it. */
export interface Clock {
  /** ms, monotonic. */
  now(): number;
  /** Resolves after `ms`, or at once when `signal` aborts. */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

/** The real clock. */
export const systemClock: Clock = {
  now: () => performance.now(),
  sleep: delay,
};

/** The outcome of one attempt to send. */
export type SendResult =
  | {
    ok: true; /** Items the endpoint accepted but reported as rejected (partial success). */
    rejected?: number;
    message?: string;
  }
  | {
    ok: false;
    retryable: boolean;
    reason: string; /** The server's Retry-After, ms. */
    retryAfterMs?: number;
  };

/** What the queue holds. */
export interface QueueItem {
  /** How the item is named in logs, e.g. "interval 3 (12:00:01)". */
  label: string;
  /** Bytes held, for the memory figure. */
  bytes: number;
}

/** Counters of the queue. */
export interface QueueStats {
  /** Items pushed. */
  queued: number;
  /** Items the endpoint accepted. */
  sent: number;
  /** Items dropped because the queue was full. */
  dropped: number;
  /** Items the endpoint refused for good. */
  rejected: number;
  /** Failed attempts that were retried. */
  retries: number;
}

/** Events of the queue, for logging. */
export interface QueueEvents<T extends QueueItem> {
  onSent?(item: T, result: Extract<SendResult, { ok: true }>): void;
  onDropped?(item: T, stats: QueueStats): void;
  onRejected?(item: T, reason: string): void;
  /** An attempt failed and will be retried after `delayMs`. */
  onRetry?(item: T, reason: string, delayMs: number, attempt: number): void;
}

/** Options of {@linkcode ExportQueue}. */
export interface ExportQueueOptions<T extends QueueItem> extends QueueEvents<T> {
  /** Most items held (at least 1). */
  limit: number;
  /** Sends one item; must not throw (failures are results). */
  send(item: T, signal: AbortSignal): Promise<SendResult>;
  backoff: Backoff;
  clock?: Clock;
}

/** A bounded FIFO with one sender. */
export class ExportQueue<T extends QueueItem> {
  readonly limit: number;
  readonly stats: QueueStats = { queued: 0, sent: 0, dropped: 0, rejected: 0, retries: 0 };
  /** Whether the last attempt failed (the endpoint is considered down until a send succeeds). */
  failing = false;
  #options: ExportQueueOptions<T>;
  #clock: Clock;
  #items: T[] = [];
  /** Aborts the attempt in flight. */
  #sending: AbortController | null = null;
  #inFlight: T | null = null;
  /** The item in flight left the queue (it was the oldest of a full queue). */
  #inFlightDropped = false;
  /** Cuts the backoff wait short. */
  #waiting: AbortController | null = null;
  #running: Promise<void> | null = null;
  #closed = false;
  #idle: Array<() => void> = [];

  constructor(options: ExportQueueOptions<T>) {
    if (!Number.isInteger(options.limit) || options.limit < 1) {
      throw new RangeError(
        `Cannot hold at most ${options.limit} profiles: need a whole number of at least 1`,
      );
    }
    this.limit = options.limit;
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
  }

  /** Items held (including the one being sent). */
  get length(): number {
    return this.#items.length;
  }

  /** Bytes held. */
  get bytes(): number {
    let total = 0;
    for (const item of this.#items) total += item.bytes;
    return total;
  }

  /** Adds an item; when the queue is full, drops the oldest first. */
  push(item: T): void {
    if (this.#closed) throw new Error("Cannot queue a profile: the queue is closed");
    this.stats.queued++;
    this.#items.push(item);
    while (this.#items.length > this.limit) {
      const oldest = this.#items.shift()!;
      if (oldest === this.#inFlight) {
        // In flight: the attempt runs to its end (the exporter's own timeout bounds it), and the item counts
        // as dropped only if it fails. Aborting it here could not tell whether the endpoint had already
        // taken the request: a profile would be reported dropped that was in fact delivered.
        this.#inFlightDropped = true;
        continue;
      }
      this.stats.dropped++;
      this.#options.onDropped?.(oldest, this.stats);
    }
    this.#running ??= this.#run();
  }

  /**
   * Sends what is held until the queue is empty or `timeoutMs` has passed; resolves with the number of
   * items left unsent. The queue stays usable.
   */
  async drain(timeoutMs: number): Promise<number> {
    if (this.#items.length === 0) return 0;
    // Try again now rather than at the end of a backoff wait that may outlast the deadline.
    this.#waiting?.abort();
    const deadline = new AbortController();
    const idle = new Promise<void>((resolve) => this.#idle.push(resolve));
    await Promise.race([idle, this.#clock.sleep(timeoutMs, deadline.signal)]);
    deadline.abort();
    return this.#items.length;
  }

  /** Stops sending; what is held is discarded. Safe to call twice. */
  close(): void {
    this.#closed = true;
    this.#sending?.abort();
    this.#waiting?.abort();
    this.#items = [];
    this.#wakeIdle();
  }

  #wakeIdle(): void {
    const waiting = this.#idle;
    this.#idle = [];
    for (const resolve of waiting) resolve();
  }

  async #run(): Promise<void> {
    try {
      while (!this.#closed && this.#items.length > 0) {
        const item = this.#items[0]!;
        this.#sending = new AbortController();
        this.#inFlight = item;
        this.#inFlightDropped = false;
        const result = await this.#options.send(item, this.#sending.signal);
        this.#sending = null;
        this.#inFlight = null;
        if (this.#closed) return;
        const stillHead = !this.#inFlightDropped;
        if (this.#inFlightDropped && !result.ok) {
          this.stats.dropped++;
          this.#options.onDropped?.(item, this.stats);
          continue;
        }
        if (result.ok) {
          // Sent, even if it left the queue meanwhile (then it was not counted as dropped).
          if (stillHead) this.#items.shift();
          this.stats.sent++;
          this.failing = false;
          this.#options.backoff.reset();
          this.#options.onSent?.(item, result);
          continue;
        }
        if (!stillHead) continue; // dropped while it was being sent
        if (!result.retryable) {
          this.#items.shift();
          this.stats.rejected++;
          this.#options.onRejected?.(item, result.reason);
          continue;
        }
        this.failing = true;
        this.stats.retries++;
        const delay = this.#options.backoff.next(result.retryAfterMs ?? 0);
        this.#options.onRetry?.(item, result.reason, delay, this.#options.backoff.attempts);
        this.#waiting = new AbortController();
        await this.#clock.sleep(delay, this.#waiting.signal);
        this.#waiting = null;
      }
    } finally {
      this.#sending = null;
      this.#inFlight = null;
      this.#waiting = null;
      this.#running = null;
      if (this.#items.length === 0 || this.#closed) this.#wakeIdle();
    }
  }
}

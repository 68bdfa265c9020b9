import assert from "node:assert/strict";
import { Backoff } from "./backoff.ts";
import { type Clock, ExportQueue, type QueueItem, type SendResult } from "./export_queue.ts";

/** A clock that moves only when told to; timers fire in order as it moves. */
class FakeClock implements Clock {
  time = 0;
  #timers: Array<{ at: number; resolve: () => void }> = [];

  now(): number {
    return this.time;
  }

  sleep(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const timer = { at: this.time + ms, resolve };
      this.#timers.push(timer);
      signal.addEventListener("abort", () => {
        this.#timers = this.#timers.filter((t) => t !== timer);
        resolve();
      });
    });
  }

  /** Moves time forward by `ms`, firing timers (and letting their continuations run) on the way. */
  async advance(ms: number): Promise<void> {
    const end = this.time + ms;
    for (;;) {
      await settle();
      this.#timers.sort((a, b) => a.at - b.at);
      const next = this.#timers[0];
      if (next === undefined || next.at > end) break;
      this.#timers.shift();
      this.time = next.at;
      next.resolve();
    }
    this.time = end;
    await settle();
  }
}

/** Lets pending promise continuations run. */
function settle(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

interface Item extends QueueItem {
  n: number;
}

const item = (n: number): Item => ({ n, label: `interval ${n}`, bytes: 100 });

/** An endpoint that can be up or down, and records what it received and when. */
class FakeEndpoint {
  up = true;
  received: number[] = [];
  attempts: Array<{ n: number; at: number }> = [];
  constructor(readonly clock: FakeClock) {}

  send = (sent: Item): Promise<SendResult> => {
    this.attempts.push({ n: sent.n, at: this.clock.now() });
    if (!this.up) return Promise.resolve({ ok: false, retryable: true, reason: "connection refused" });
    this.received.push(sent.n);
    return Promise.resolve({ ok: true });
  };
}

function setup(limit: number, random = () => 0.5) {
  const clock = new FakeClock();
  const endpoint = new FakeEndpoint(clock);
  const dropped: number[] = [];
  const queue = new ExportQueue<Item>({
    limit,
    send: endpoint.send,
    backoff: new Backoff({ initialMs: 500, maxMs: 4000, random }),
    clock,
    onDropped: (oldest) => dropped.push(oldest.n),
  });
  return { clock, endpoint, queue, dropped };
}

Deno.test("Backoff grows exponentially up to its cap, spread by the jitter, and starts over on reset", () => {
  const noSpread = new Backoff({ initialMs: 500, maxMs: 4000, random: () => 0.5 });
  assert.deepEqual([1, 2, 3, 4, 5, 6].map(() => noSpread.next()), [500, 1000, 2000, 4000, 4000, 4000]);
  assert.equal(noSpread.attempts, 6);
  noSpread.reset();
  assert.equal(noSpread.next(), 500);
  assert.equal(noSpread.next(3000), 3000, "a server's Retry-After is a minimum");

  const low = new Backoff({ initialMs: 1000, maxMs: 8000, jitter: 0.5, random: () => 0 });
  const high = new Backoff({ initialMs: 1000, maxMs: 8000, jitter: 0.5, random: () => 0.999999 });
  assert.deepEqual([low.next(), low.next(), low.next()], [500, 1000, 2000]);
  assert.deepEqual([high.next(), high.next(), high.next(), high.next()], [1500, 3000, 6000, 8000]);
  assert.throws(() => new Backoff({ initialMs: 0, maxMs: 10 }), /Cannot back off from 0 ms/);
  assert.throws(() => new Backoff({ initialMs: 10, maxMs: 5 }), /need 0 < initial <= max/);
});

Deno.test("ExportQueue sends items one at a time, oldest first", async () => {
  const { clock, endpoint, queue } = setup(10);
  for (let n = 1; n <= 4; n++) queue.push(item(n));
  await clock.advance(0);
  assert.deepEqual(endpoint.received, [1, 2, 3, 4]);
  assert.equal(queue.length, 0);
  assert.deepEqual(queue.stats, { queued: 4, sent: 4, dropped: 0, rejected: 0, retries: 0 });
});

Deno.test("ExportQueue retries with exponential backoff while the endpoint is down, then sends in order", async () => {
  const { clock, endpoint, queue } = setup(10);
  endpoint.up = false;
  queue.push(item(1));
  queue.push(item(2));
  await clock.advance(7000);
  // Attempts at 0, then after 500, 1000, 2000 and 4000 (capped) ms.
  assert.deepEqual(endpoint.attempts.map((a) => a.at), [0, 500, 1500, 3500]);
  assert.ok(queue.failing);
  endpoint.up = true;
  await clock.advance(1000);
  assert.deepEqual(endpoint.attempts.map((a) => a.at), [0, 500, 1500, 3500, 7500, 7500]);
  assert.deepEqual(endpoint.received, [1, 2]);
  assert.equal(queue.failing, false);
  assert.equal(queue.stats.retries, 4);
  // The backoff started over after the success.
  endpoint.up = false;
  queue.push(item(3));
  await clock.advance(600);
  assert.deepEqual(endpoint.attempts.slice(6).map((a) => a.at), [8000, 8500]);
});

Deno.test("ExportQueue holds at most its limit while the endpoint is down, dropping the oldest and counting", async () => {
  const { clock, endpoint, queue, dropped } = setup(3);
  endpoint.up = false;
  for (let n = 1; n <= 10; n++) {
    queue.push(item(n));
    assert.ok(queue.length <= 3);
    await clock.advance(1000);
  }
  assert.equal(queue.length, 3);
  assert.equal(queue.bytes, 300);
  assert.deepEqual(dropped, [1, 2, 3, 4, 5, 6, 7]);
  assert.equal(queue.stats.dropped, 7);
  endpoint.up = true;
  await clock.advance(5000);
  assert.deepEqual(endpoint.received, [8, 9, 10], "the youngest `limit` items survive the outage");
  assert.deepEqual({ ...queue.stats, retries: 0 }, {
    queued: 10,
    sent: 3,
    dropped: 7,
    rejected: 0,
    retries: 0,
  });
});

Deno.test("ExportQueue does not retry an item the endpoint rejects for good", async () => {
  const clock = new FakeClock();
  const attempts: number[] = [];
  const rejected: string[] = [];
  const queue = new ExportQueue<Item>({
    limit: 5,
    backoff: new Backoff({ initialMs: 500, maxMs: 4000 }),
    clock,
    send: (sent) => {
      attempts.push(sent.n);
      return Promise.resolve(
        sent.n === 1 ? { ok: false, retryable: false, reason: "HTTP 400 Bad Request" } : { ok: true },
      );
    },
    onRejected: (sent, reason) => rejected.push(`${sent.label}: ${reason}`),
  });
  queue.push(item(1));
  queue.push(item(2));
  await clock.advance(0);
  assert.deepEqual(attempts, [1, 2]);
  assert.deepEqual(rejected, ["interval 1: HTTP 400 Bad Request"]);
  assert.equal(queue.stats.rejected, 1);
  assert.equal(queue.stats.sent, 1);
});

Deno.test("ExportQueue.drain() retries at once and reports what is left when the deadline passes", async () => {
  const { clock, endpoint, queue } = setup(5, () => 0.5);
  endpoint.up = false;
  queue.push(item(1));
  queue.push(item(2));
  await clock.advance(1600); // attempts at 0, 500, 1500; the next wait is 2000 ms
  const left = queue.drain(3000);
  await clock.advance(0);
  assert.equal(endpoint.attempts.at(-1)!.at, 1600, "drain cuts the backoff wait short");
  await clock.advance(3000);
  assert.equal(await left, 2);

  endpoint.up = false;
  const second = queue.drain(5000);
  await clock.advance(100);
  endpoint.up = true;
  await clock.advance(4000);
  assert.equal(await second, 0);
  assert.deepEqual(endpoint.received, [1, 2]);
  assert.equal(await queue.drain(1000), 0, "an empty queue drains at once");
});

Deno.test("ExportQueue lets an attempt in flight end when its item is dropped, and counts what it did", async () => {
  const clock = new FakeClock();
  const sent: number[] = [];
  const outcomes = new Map<number, (result: SendResult) => void>();
  const queue = new ExportQueue<Item>({
    limit: 1,
    backoff: new Backoff({ initialMs: 500, maxMs: 4000 }),
    clock,
    send: (next, signal) => {
      assert.equal(signal.aborted, false);
      if (next.n <= 2) return new Promise((resolve) => outcomes.set(next.n, resolve));
      sent.push(next.n);
      return Promise.resolve({ ok: true });
    },
  });
  queue.push(item(1)); // in flight
  await clock.advance(100);
  queue.push(item(2)); // drops 1 from the queue; its attempt goes on
  await clock.advance(0);
  assert.equal(queue.length, 1);
  outcomes.get(1)!({ ok: true }); // it reached the endpoint after all: sent, not dropped
  await clock.advance(0);
  assert.deepEqual(queue.stats, { queued: 2, sent: 1, dropped: 0, rejected: 0, retries: 0 });
  queue.push(item(3)); // drops 2, in flight now
  await clock.advance(0);
  outcomes.get(2)!({ ok: false, retryable: true, reason: "refused" }); // failed: dropped, not retried
  await clock.advance(0);
  assert.deepEqual(sent, [3]);
  assert.deepEqual(queue.stats, { queued: 3, sent: 2, dropped: 1, rejected: 0, retries: 0 });
  queue.close();
  queue.close();
  assert.throws(() => queue.push(item(3)), /the queue is closed/);
  assert.throws(
    () =>
      new ExportQueue<Item>({
        limit: 0,
        send: () => Promise.resolve({ ok: true }),
        backoff: new Backoff({ initialMs: 1, maxMs: 1 }),
      }),
    /Cannot hold at most 0 profiles/,
  );
});

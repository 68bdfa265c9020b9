import assert from "node:assert/strict";
import { libc } from "../sys/libc.ts";
import { RingBufferWaiter } from "./ring_buffer_waiter.ts";

// Any pollable descriptor behaves like a ring buffer here: an eventfd stands in for one, and a write to
// it for BPF's wake-up.
function eventFd(): number {
  const fd = libc().fn.eventfd(0, 0);
  assert.ok(fd >= 0, "eventfd");
  return fd;
}

function signal(fd: number): void {
  libc().fn.write(fd, new Uint8Array(new BigUint64Array([1n]).buffer), 8n);
}

Deno.test("wait() resolves true on a wake-up and false on a timeout", async () => {
  const fd = eventFd();
  try {
    using waiter = new RingBufferWaiter(fd);
    assert.equal(await waiter.wait(20), false);
    const waiting = waiter.wait(10_000);
    signal(fd);
    assert.equal(await waiting, true);
  } finally {
    libc().fn.close(fd);
  }
});

Deno.test("wait() is edge-triggered: data left unread does not wake it again", async () => {
  const fd = eventFd();
  try {
    using waiter = new RingBufferWaiter(fd);
    signal(fd);
    assert.equal(await waiter.wait(1000), true);
    // The eventfd is still readable (nobody read it), like records left for the next timed drain.
    const started = performance.now();
    assert.equal(await waiter.wait(50), false);
    assert.ok(performance.now() - started >= 40, "returned before the timeout");
  } finally {
    libc().fn.close(fd);
  }
});

Deno.test("interrupt() and close() end a pending wait at once", async () => {
  const fd = eventFd();
  try {
    const waiter = new RingBufferWaiter(fd);
    let started = performance.now();
    let waiting = waiter.wait(10_000);
    waiter.interrupt();
    assert.equal(await waiting, false);
    assert.ok(performance.now() - started < 1000);
    started = performance.now();
    waiting = waiter.wait(10_000);
    waiter.close();
    waiter.close();
    assert.equal(await waiting, false);
    assert.ok(performance.now() - started < 1000);
    assert.equal(await waiter.wait(10_000), false, "a closed waiter does not wait");
  } finally {
    libc().fn.close(fd);
  }
});

Deno.test("wait() refuses a second wait while one is pending", async () => {
  const fd = eventFd();
  try {
    using waiter = new RingBufferWaiter(fd);
    const first = waiter.wait(10_000);
    await assert.rejects(() => waiter.wait(0), /a wait is pending/);
    waiter.interrupt();
    assert.equal(await first, false);
  } finally {
    libc().fn.close(fd);
  }
});

Deno.test("a watched descriptor wakes the waiter too", async () => {
  const ring = eventFd();
  const other = eventFd();
  try {
    using waiter = new RingBufferWaiter(ring);
    waiter.watch(other);
    assert.equal(await waiter.wait(20), false);
    const waiting = waiter.wait(10_000);
    signal(other);
    assert.equal(await waiting, true);
  } finally {
    libc().fn.close(ring);
    libc().fn.close(other);
  }
});

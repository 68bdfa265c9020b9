/**
 * Waits, without blocking the event loop, until BPF asks for a BPF_MAP_TYPE_RINGBUF to be read: records
 * submitted with BPF_RB_FORCE_WAKEUP wake the waiter, records submitted with BPF_RB_NO_WAKEUP do not. The
 * ring buffer's file descriptor sits in an edge-triggered epoll set, so records that are merely waiting
 * (traces between two timed drains) do not wake it, only a wake-up does. `epoll_wait` runs as a
 * nonblocking FFI call on a worker thread; an eventfd in the same set lets `interrupt()` and `close()`
 * end a pending wait at once, so shutting down never waits for a timeout.
 *
 * @example
 * ```ts ignore
 * import { RingBufferWaiter } from "./ring_buffer_waiter.ts";
 * using waiter = new RingBufferWaiter(object.map("events").fd);
 * while (running) {
 *   await waiter.wait(200); // a wake-up or 200 ms, whichever comes first
 *   reader.drain(sink);
 * }
 * ```
 *
 * @module
 */
import { libc, SystemError } from "../sys/libc.ts";
import { O_CLOEXEC, O_NONBLOCK } from "../sys/open_flags.ts";

const EPOLL_CTL_ADD = 1;
const EPOLLIN = 0x1;
const EPOLLET = 0x80000000;
/** `struct epoll_event` is packed on x86-64: u32 events, u64 data. */
const EPOLL_EVENT_SIZE = 12;
const RING_TAG = 1;
const INTERRUPT_TAG = 2;
/** Ready descriptors taken per wait: the ring buffer, the eventfd and a perf event per CPU. */
const MAX_EVENTS = 16;

/** Waits for wake-ups of one ring buffer. */
export class RingBufferWaiter {
  #epollFd: number;
  #interruptFd: number;
  // Written by the worker thread: one buffer per waiter, used by one wait at a time.
  #events = new Uint8Array(EPOLL_EVENT_SIZE * MAX_EVENTS);
  #pending: Promise<number> | null = null;
  #closed = false;

  /** Watches the ring buffer map behind `mapFd` (the fd stays the caller's). */
  constructor(mapFd: number) {
    const { fn, errno } = libc();
    // EPOLL_CLOEXEC, EFD_CLOEXEC and EFD_NONBLOCK are the kernel's O_CLOEXEC and O_NONBLOCK.
    this.#epollFd = fn.epoll_create1(O_CLOEXEC);
    if (this.#epollFd < 0) throw new SystemError("create an epoll instance", errno());
    this.#interruptFd = fn.eventfd(0, O_CLOEXEC | O_NONBLOCK);
    if (this.#interruptFd < 0) {
      const error = errno();
      fn.close(this.#epollFd);
      throw new SystemError("create an eventfd", error);
    }
    try {
      this.#add(mapFd, EPOLLIN | EPOLLET, RING_TAG, "watch the ring buffer");
      // Level-triggered: once interrupted, every later wait returns at once too.
      this.#add(this.#interruptFd, EPOLLIN, INTERRUPT_TAG, "watch the eventfd");
    } catch (error) {
      fn.close(this.#interruptFd);
      fn.close(this.#epollFd);
      throw error;
    }
  }

  /**
   * Also wakes the waiter when `fd` becomes readable (edge-triggered, like the ring buffer): a perf
   * event's descriptor, readable once its ring holds its wake-up watermark of records. The fd stays the
   * caller's, open for as long as the waiter is.
   */
  watch(fd: number): void {
    this.#add(fd, EPOLLIN | EPOLLET, RING_TAG, "watch a perf event");
  }

  /**
   * Resolves after BPF woke the ring buffer (true), or after `timeoutMs`, an interruption or a signal
   * (false). One wait at a time.
   */
  async wait(timeoutMs: number): Promise<boolean> {
    if (this.#closed) return false;
    if (this.#pending !== null) throw new Error("Cannot wait for the ring buffer: a wait is pending");
    const pending = libc().fn.epoll_wait(
      this.#epollFd,
      this.#events,
      MAX_EVENTS,
      Math.max(0, Math.ceil(timeoutMs)),
    );
    this.#pending = pending;
    let count: number;
    try {
      count = await pending;
    } finally {
      this.#pending = null;
      if (this.#closed) this.#release();
    }
    // -1 is EINTR in practice (errno is unreadable here: it was set on the worker thread).
    const view = new DataView(this.#events.buffer);
    let woken = false;
    for (let i = 0; i < count; i++) {
      const tag = view.getUint32(i * EPOLL_EVENT_SIZE + 4, true);
      if (tag === INTERRUPT_TAG) return false;
      if (tag === RING_TAG) woken = true;
    }
    return woken;
  }

  /** Ends the pending wait, if any, and makes every later one return at once. */
  interrupt(): void {
    if (this.#interruptFd < 0) return;
    const one = new BigUint64Array([1n]);
    libc().fn.write(this.#interruptFd, new Uint8Array(one.buffer), 8n);
  }

  /** Ends any pending wait and releases the descriptors (once that wait has returned). Safe to call twice. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.interrupt();
    // A pending epoll_wait still uses the epoll fd: closing it now could let the number be reused.
    if (this.#pending === null) this.#release();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  #release(): void {
    const { fn } = libc();
    if (this.#interruptFd >= 0) fn.close(this.#interruptFd);
    if (this.#epollFd >= 0) fn.close(this.#epollFd);
    this.#interruptFd = -1;
    this.#epollFd = -1;
  }

  #add(fd: number, events: number, tag: number, action: string): void {
    const event = new Uint8Array(EPOLL_EVENT_SIZE);
    const view = new DataView(event.buffer);
    view.setUint32(0, events >>> 0, true);
    view.setUint32(4, tag, true);
    const { fn, errno } = libc();
    if (fn.epoll_ctl(this.#epollFd, EPOLL_CTL_ADD, fd, event) !== 0) throw new SystemError(action, errno());
  }
}

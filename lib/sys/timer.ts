/**
 * Timers that leave Deno's Node layer unloaded. Deno implements `globalThis.setTimeout` with `node:timers`,
 * and the first touch of it loads some twenty modules of its Node compatibility layer (errors, inspection,
 * async hooks): about 10 ms of CPU in every run of a short command such as `record`. `AbortSignal.timeout`
 * runs on Deno's own timers. Its timer keeps the process alive while a listener waits on it, and no longer
 * once the listener is removed, as `setTimeout` and `clearTimeout` do.
 *
 * @example
 * ```ts
 * import { after, delay } from "./timer.ts";
 * await delay(10);
 * using timer = after(1000, () => console.log("never: disposed first"));
 * ```
 *
 * @module
 */

/**
 * The longest a timer can wait: 2^31 - 1 ms (about 24.8 days). Timers keep their delay in a signed 32-bit
 * integer, and a longer one fires at once instead of late.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Calls `callback` once after `ms` milliseconds, unless the returned handle is disposed first.
 *
 * @throws {RangeError} when `ms` is above {@linkcode MAX_TIMER_MS} (or not a number): such a timer would
 *   fire at once; command-line durations are refused before they get here.
 */
export function after(ms: number, callback: () => void): Disposable {
  if (!(ms <= MAX_TIMER_MS)) {
    throw new RangeError(`Cannot wait ${ms} ms: a timer waits ${MAX_TIMER_MS} ms at most`);
  }
  const signal = AbortSignal.timeout(Math.max(0, ms));
  signal.addEventListener("abort", callback, { once: true });
  return { [Symbol.dispose]: () => signal.removeEventListener("abort", callback) };
}

/** Calls `callback` every `ms` milliseconds until the returned handle is disposed. */
export function every(ms: number, callback: () => void): Disposable {
  let current = after(ms, tick);
  function tick() {
    current = after(ms, tick);
    callback();
  }
  return { [Symbol.dispose]: () => current[Symbol.dispose]() };
}

/** Resolves after `ms` milliseconds, or at once when `signal` aborts. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      timer[Symbol.dispose]();
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = after(ms, done);
    signal?.addEventListener("abort", done);
  });
}

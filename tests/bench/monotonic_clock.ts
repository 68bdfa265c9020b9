/**
 * CLOCK_MONOTONIC in nanoseconds, the clock BPF programs read with bpf_ktime_get_ns() and `perf record -k
 * CLOCK_MONOTONIC` stamps samples with, so a start time taken here compares with their sample times.
 * (`performance.now()` counts from the process's own time origin, which no other tool knows.)
 *
 * @example
 * ```ts
 * import { monotonicNs } from "./monotonic_clock.ts";
 * const start = monotonicNs();
 * ```
 *
 * @module
 */

const CLOCK_MONOTONIC = 1;

let clockGettime: ((clock: number, timespec: BigInt64Array<ArrayBuffer>) => number) | undefined;
const timespec = new BigInt64Array(2);

/** The current CLOCK_MONOTONIC time in nanoseconds (exact below 2^53 ns, about 104 days of uptime). */
export function monotonicNs(): number {
  if (clockGettime === undefined) {
    const lib = Deno.dlopen(
      "libc.so.6",
      {
        clock_gettime: { parameters: ["i32", "buffer"], result: "i32" },
      } as const,
    );
    clockGettime = lib.symbols.clock_gettime;
  }
  if (clockGettime(CLOCK_MONOTONIC, timespec) !== 0) {
    throw new RangeError("Cannot read CLOCK_MONOTONIC: clock_gettime failed");
  }
  return Number(timespec[0]!) * 1e9 + Number(timespec[1]!);
}

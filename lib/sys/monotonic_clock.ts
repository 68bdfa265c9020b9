/**
 * CLOCK_MONOTONIC in nanoseconds, the clock BPF programs read with bpf_ktime_get_ns(), perf events opened
 * with `use_clockid` stamp their records with, and `perf record -k CLOCK_MONOTONIC` stamps samples with, so
 * a time taken here compares with theirs. (`performance.now()` counts from the process's own time origin,
 * which no other tool knows.)
 *
 * @example
 * ```ts
 * import { monotonicNs } from "./monotonic_clock.ts";
 * const start = monotonicNs();
 * ```
 *
 * @module
 */
import { libc } from "./libc.ts";

/** The clock id of CLOCK_MONOTONIC. */
export const CLOCK_MONOTONIC = 1;

const timespec = new BigInt64Array(2);

/** The current CLOCK_MONOTONIC time in nanoseconds (exact below 2^53 ns, about 104 days of uptime). */
export function monotonicNs(): number {
  if (libc().fn.clock_gettime(CLOCK_MONOTONIC, timespec) !== 0) {
    throw new RangeError("Cannot read CLOCK_MONOTONIC: clock_gettime failed");
  }
  return Number(timespec[0]!) * 1e9 + Number(timespec[1]!);
}

/**
 * The benchmark's clock: CLOCK_MONOTONIC in nanoseconds, as BPF programs and `perf record -k
 * CLOCK_MONOTONIC` stamp their samples (see lib/sys/monotonic_clock.ts).
 *
 * @module
 */
export { monotonicNs } from "../../lib/sys/monotonic_clock.ts";

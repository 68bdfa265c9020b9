/**
 * How many samples a recording must hold of a workload, from the CPU time the workload used: the tests'
 * expectations follow the work that was done, so a busy machine (which only stretches that work over more
 * wall time) cannot fail them, and a recorder that loses samples cannot pass them.
 *
 * Why these bounds: omniprof samples with one cpu-clock event per CPU that fires every 1/hz s of that
 * CPU's time and samples whatever runs there. A process that runs for T s of CPU gets T·hz samples on
 * average. The firings that fall in each stretch it runs are less than one away from that stretch's share,
 * and stretches start at times unrelated to the timer, so each firing is an independent trial: the
 * count's standard deviation is at most √(T·hz), whatever the load. The bounds lie four such deviations
 * either side, plus one sample at each end of the window (a correct recorder falls outside them less than
 * once in 10,000 runs). At 2,000 expected samples the lower one is 9% below: a recorder that loses a tenth
 * of them fails.
 *
 * The timer runs on wall time, so time the hypervisor steals while the process is on a CPU still brings
 * samples, but the kernel does not count it as the process's CPU time: the upper bound grows by the share
 * of the machine's time stolen meanwhile ({@linkcode StealMeter}).
 *
 * @example
 * ```ts ignore
 * const steal = new StealMeter();
 * const result = await runCli(["record", "-F", "999", "-o", out, "--", chain, "2"]);
 * assertSampleCount(samples, reportedCpuSeconds(result.stdout), 999, steal.fraction(), "chain");
 * ```
 *
 * @module
 */
import assert from "node:assert/strict";
import { systemCpu } from "./bench/system_cpu.ts";
import { onlineCpus } from "../lib/sys/cpus.ts";

/** CPU seconds a workload used while it was sampled, known to lie between `low` and `high`. */
export interface CpuSpan {
  low: number;
  high: number;
}

/** The sample counts a workload's CPU time allows. */
export interface SampleBounds {
  /** Samples of the CPU time itself (the middle of the span, without steal). */
  expected: number;
  low: number;
  high: number;
}

/** Standard deviations of the count allowed either side. */
const DEVIATIONS = 4;
/** One firing at each end of the window may fall either side of it. */
const EDGE_SAMPLES = 2;

/** The bounds for `cpu` seconds (exact, or a span) sampled at `hz`, with `steal` of the machine stolen. */
export function sampleBounds(cpu: number | CpuSpan, hz: number, steal = 0): SampleBounds {
  const span = typeof cpu === "number" ? { low: cpu, high: cpu } : cpu;
  if (!(span.low >= 0 && span.high >= span.low) || !(hz > 0) || !(steal >= 0 && steal < 1)) {
    throw new RangeError(`Cannot bound samples: CPU ${span.low}..${span.high} s at ${hz} Hz, steal ${steal}`);
  }
  const least = span.low * hz;
  const most = (span.high * hz) / (1 - steal);
  return {
    expected: ((span.low + span.high) / 2) * hz,
    low: Math.max(0, least - DEVIATIONS * Math.sqrt(least) - EDGE_SAMPLES),
    high: most + DEVIATIONS * Math.sqrt(most) + EDGE_SAMPLES,
  };
}

/**
 * Asserts that `samples` lies within {@linkcode sampleBounds}; prints the comparison either way. A
 * recording that reports `lost` samples (its ring buffer was full: of any process, so perhaps of this
 * one) may fall short of the bounds by as many, never more.
 */
export function assertSampleCount(
  samples: number,
  cpu: number | CpuSpan,
  hz: number,
  steal: number,
  label: string,
  lost = 0,
): void {
  const bounds = sampleBounds(cpu, hz, steal);
  const span = typeof cpu === "number" ? cpu.toFixed(3) : `${cpu.low.toFixed(3)}..${cpu.high.toFixed(3)}`;
  const stolen = `${(steal * 100).toFixed(1)}% stolen${lost > 0 ? `, ${lost} samples lost in all` : ""}`;
  const text = `${label}: ${samples} samples for ${span} CPU s at ${hz} Hz (${bounds.expected.toFixed(0)} ` +
    `expected, ${bounds.low.toFixed(0)}..${bounds.high.toFixed(0)} allowed, ${stolen})`;
  console.log(text);
  assert.ok(samples + lost >= bounds.low && samples <= bounds.high, text);
}

/**
 * The samples `omniprof record` said it lost: the ring buffer's ("0 lost" or "N samples LOST" on the
 * line that names the output) and the records it could not handle and skipped.
 */
export function reportedLost(stderr: string): number {
  const match = /, (?:(0) lost|(\d+) samples LOST)/.exec(stderr);
  if (match === null) throw new Error(`the recording reported no count of lost samples:\n${stderr}`);
  const skipped = /(\d+) records could not be handled and were skipped/.exec(stderr)?.[1] ?? "0";
  return Number(match[1] ?? match[2]) + Number(skipped);
}

/** The `cpu_seconds=S` a workload of tests/workloads printed (clock.h); throws when it printed none. */
export function reportedCpuSeconds(stdout: string): number {
  const match = /^cpu_seconds=([\d.]+)$/m.exec(stdout);
  if (match === null) throw new Error(`the workload reported no cpu_seconds in ${JSON.stringify(stdout)}`);
  return Number(match[1]);
}

/** The share of the machine's CPU time the hypervisor stole since it was created (/proc/stat). */
export class StealMeter {
  readonly #steal = systemCpu().stealSeconds;
  readonly #started = performance.now();
  readonly #cpus = onlineCpus().length;

  /** Stolen CPU seconds over the CPU seconds the machine had, since the start. */
  fraction(): number {
    const seconds = (performance.now() - this.#started) / 1000;
    // /proc/stat counts in 10 ms ticks: one tick per CPU of slack keeps a short window honest.
    const stolen = systemCpu().stealSeconds - this.#steal + 0.01 * this.#cpus;
    return stolen / Math.max(seconds * this.#cpus, 0.01);
  }
}

/**
 * A process's CPU time read every few ms with the wall-clock time of each reading, so that a test can
 * tell how much CPU time the process used in any window it learns of afterwards: the intervals an agent
 * exported, say, which start and end at times the agent chose. The span it gives is bracketed by the
 * readings on either side of each end of the window (sample_bounds.ts turns it into sample counts).
 *
 * @example
 * ```ts ignore
 * using timeline = new CpuTimeline(workload.pid);
 * // ... the agent exports intervals ...
 * const cpu = timeline.between(interval.startMs, interval.startMs + interval.durationMs);
 * ```
 *
 * @module
 */
import { parsePidStatCpu, USER_HZ } from "./bench/system_cpu.ts";
import type { CpuSpan } from "./sample_bounds.ts";

const POLL_MS = 20;
/** utime and stime are each truncated to a tick: a reading may be up to two ticks short. */
const READING_SLACK = 2 / USER_HZ;

/** One reading: the process's CPU seconds, taken between two wall-clock times (ms since the epoch). */
interface Reading {
  afterMs: number;
  cpu: number;
  beforeMs: number;
}

/** Reads a process's CPU time until disposed. */
export class CpuTimeline implements Disposable {
  readonly pid: number;
  readonly #readings: Reading[] = [];
  readonly #timer: ReturnType<typeof setInterval>;

  constructor(pid: number) {
    this.pid = pid;
    this.#read();
    this.#timer = setInterval(() => this.#read(), POLL_MS);
  }

  #read(): void {
    const afterMs = Date.now();
    let text: string;
    try {
      text = Deno.readTextFileSync(`/proc/${this.pid}/stat`);
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return; // exited: its CPU time no longer changes
      throw error;
    }
    this.#readings.push({ afterMs, cpu: parsePidStatCpu(text), beforeMs: Date.now() });
  }

  /**
   * The CPU seconds the process used between two wall-clock times (ms since the epoch).
   *
   * @throws {RangeError} when the readings do not cover both ends of the window.
   */
  between(startMs: number, endMs: number): CpuSpan {
    this.#read();
    // A reading taken wholly before a time is at most the CPU time then; one taken wholly after, at least
    // that (less the reading's truncation).
    const atMost = (ms: number) => this.#readings.findLast((reading) => reading.beforeMs <= ms);
    const atLeast = (ms: number) => this.#readings.find((reading) => reading.afterMs >= ms);
    const startBelow = atMost(startMs);
    const startAbove = atLeast(startMs);
    const endBelow = atMost(endMs);
    const endAbove = atLeast(endMs);
    if (!startBelow || !startAbove || !endBelow || !endAbove) {
      throw new RangeError(
        `Cannot tell the CPU time of ${this.pid} from ${startMs} to ${endMs} ms: not read then`,
      );
    }
    return {
      low: Math.max(0, endBelow.cpu - (startAbove.cpu + READING_SLACK)),
      high: endAbove.cpu + READING_SLACK - startBelow.cpu,
    };
  }

  [Symbol.dispose](): void {
    clearInterval(this.#timer);
  }
}

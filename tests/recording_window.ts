/**
 * `omniprof record` run as a user runs it (as runCli() does), while this process watches when it samples
 * and reads the CPU time of chosen processes or threads meanwhile: a test of `record -p` or of a
 * whole-system recording, whose window the workload does not share, then knows how much CPU time its
 * samples must account for (sample_bounds.ts).
 *
 * The recorder samples from when it holds a perf event per online CPU (the tracer opens one per CPU and
 * attaches the sampling program at once) until it holds none. Every few ms its descriptors are counted
 * between two readings of each target's CPU time: a reading taken before a look that found no perf event
 * is a lower bound of the target's CPU time when sampling began, and one taken after a look that found
 * them all an upper bound; likewise at the end. A busy machine that delays the looks only widens the span.
 *
 * @example
 * ```ts ignore
 * const watched = await recordWatchingCpu(["record", "-d", "4", "-o", out], [{ pid: workload.pid }]);
 * const cpu = cpuBetween(watched.start[0]!, watched.end[0]!);
 * ```
 *
 * @module
 */
import { parsePidStatCpu, USER_HZ } from "./bench/system_cpu.ts";
import { statFields } from "../lib/process/proc_stat.ts";
import { type CliResult, DENO_RUN_ENV, omniprofArgs, REPO_ROOT } from "./helpers.ts";
import type { CpuSpan } from "./sample_bounds.ts";
import { StealMeter } from "./sample_bounds.ts";
import { onlineCpus } from "../lib/sys/cpus.ts";

/** A process (all its threads), or one thread of it. */
export interface CpuTarget {
  pid: number;
  tid?: number;
}

/** A recording and what its targets' CPU clocks read at its start and end. */
export interface WatchedRecording {
  result: CliResult;
  /** Each target's CPU seconds when sampling began. */
  start: CpuSpan[];
  /** Each target's CPU seconds when sampling ended; null for one that was gone by then. */
  end: (CpuSpan | null)[];
  /** Share of the machine's CPU time stolen by the hypervisor during the recording. */
  steal: number;
  /**
   * CPU seconds of the recorder's children that it waited for (the command or demo it started), read
   * until it exited. A child starts once sampling is on, so all of it was sampled, but for what it ran
   * after a `-d` duration ended sampling.
   */
  childrenCpu: CpuSpan;
}

const POLL_MS = 5;
/** A recorder that takes longer than this to end after SIGINT is reported. */
const SLOW_EXIT_MS = 5000;
/** utime and stime are each truncated to a tick: a reading may be up to two ticks short. */
const READING_SLACK = 2 / USER_HZ;

/** The target's CPU seconds, or null once it is gone. */
function cpuSeconds(target: CpuTarget): number | null {
  const path = target.tid === undefined
    ? `/proc/${target.pid}/stat`
    : `/proc/${target.pid}/task/${target.tid}/stat`;
  try {
    return parsePidStatCpu(Deno.readTextFileSync(path));
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
}

/** cutime + cstime of process `pid` (its waited-for children's CPU seconds), or null once it is gone. */
function childrenCpuSeconds(pid: number): number | null {
  try {
    const fields = statFields(Deno.readTextFileSync(`/proc/${pid}/stat`));
    const seconds = (Number(fields?.[13]) + Number(fields?.[14])) / USER_HZ;
    return Number.isFinite(seconds) ? seconds : null;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
}

/** The perf-event rings process `pid` maps (0 once it has exited). */
function mappedPerfRings(pid: number): number {
  let count = 0;
  try {
    for (const line of Deno.readTextFileSync(`/proc/${pid}/maps`).split("\n")) {
      if (line.endsWith(" anon_inode:[perf_event]")) count++;
    }
  } catch {
    // the recorder has exited
  }
  return count;
}

/** The perf-event descriptors process `pid` holds open (0 once it has exited). */
function perfDescriptors(pid: number): number {
  let count = 0;
  try {
    for (const entry of Deno.readDirSync(`/proc/${pid}/fd`)) {
      try {
        if (Deno.readLinkSync(`/proc/${pid}/fd/${entry.name}`) === "anon_inode:[perf_event]") count++;
      } catch {
        // closed between the listing and the look
      }
    }
  } catch {
    // the recorder has exited
  }
  return count;
}

/**
 * How many sampling perf events process `pid` holds open: its perf events but those whose ring it maps
 * (the records of processes' mappings, open for the whole recording, not only while it samples). Null
 * when the look cannot tell: the rings changed while the descriptors were listed, or the records are
 * not all mapped yet. The recorder opens and maps a record event per CPU, one after the other, before
 * it samples; a look in between would count a descriptor not yet mapped as one that samples, and a
 * recording whose start was seen that way ended, for this watcher, before its first sample.
 */
function samplingEvents(pid: number, cpus: number): number | null {
  const mappedBefore = mappedPerfRings(pid);
  const descriptors = perfDescriptors(pid);
  const mappedAfter = mappedPerfRings(pid);
  if (mappedBefore !== mappedAfter) return null;
  const sampling = descriptors - mappedAfter;
  // Sampling events exist only once every record ring is mapped; an exited recorder holds nothing.
  if (sampling > 0 && mappedAfter !== cpus) return null;
  return sampling;
}

/** When to stop the recording with SIGINT, as a user's Ctrl-C does; it may also stop by itself. */
export interface WatchOptions {
  /** Once it has sampled this long. */
  interruptAfterMs?: number;
  /**
   * Once every target has used this much CPU time while sampled: a window of work, not of wall time, so
   * that a busy machine gives the test as many samples as an idle one.
   */
  interruptAfterCpuSeconds?: number;
}

/**
 * Runs `omniprof ARGS` from the repository root and brackets the CPU time of `targets` at the start and
 * the end of its sampling.
 */
export async function recordWatchingCpu(
  args: string[],
  targets: CpuTarget[],
  options: WatchOptions = {},
): Promise<WatchedRecording> {
  const steal = new StealMeter();
  const cpus = onlineCpus().length;
  const child = new Deno.Command(Deno.execPath(), {
    args: omniprofArgs(args),
    cwd: REPO_ROOT,
    env: DENO_RUN_ENV,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let finished = false;
  const output = child.output().finally(() => finished = true);

  let phase: "before" | "sampling" | "after" = "before";
  const startLow: (number | null)[] = targets.map(() => null);
  let startHigh: (number | null)[] = [];
  let endLow: (number | null)[] = [];
  let endHigh: (number | null)[] = [];
  let samplingSince = 0;
  let interrupted = false;
  let interruptedAt = 0;
  let childrenCpu = 0;
  try {
    while (phase !== "after") {
      const exited = finished;
      const before = targets.map(cpuSeconds);
      const events = exited ? 0 : samplingEvents(child.pid, cpus);
      const after = targets.map(cpuSeconds);
      if (phase === "before") {
        if (events === 0) before.forEach((seconds, i) => startLow[i] = seconds);
        if (events === cpus) {
          startHigh = after;
          endLow = before;
          phase = "sampling";
          samplingSince = performance.now();
        }
      } else if (events === cpus) {
        endLow = before;
        const { interruptAfterMs, interruptAfterCpuSeconds } = options;
        const due =
          (interruptAfterMs !== undefined && performance.now() - samplingSince >= interruptAfterMs) ||
          (interruptAfterCpuSeconds !== undefined &&
            before.every((seconds, i) =>
              seconds !== null && seconds - startHigh[i]! >= interruptAfterCpuSeconds
            ));
        if (due && !interrupted) {
          child.kill("SIGINT");
          interrupted = true;
          interruptedAt = performance.now();
        }
      } else if (events === 0) {
        endHigh = after;
        phase = "after";
      }
      if (exited && phase === "before") break;
      if (phase !== "after") await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
    // A recording that stops on its own duration waits for its command only after sampling: the
    // children's CPU time is read until the recorder exits.
    while (!finished) {
      childrenCpu = Math.max(childrenCpu, childrenCpuSeconds(child.pid) ?? 0);
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
    // A recorder slow to end after Ctrl-C is a finding of its own; say so beside whatever fails next.
    const endedAfterMs = performance.now() - interruptedAt;
    if (interrupted && endedAfterMs > SLOW_EXIT_MS) {
      console.log(`the recorder ended ${(endedAfterMs / 1000).toFixed(1)} s after SIGINT`);
    } else if (!interrupted && (options.interruptAfterMs ?? options.interruptAfterCpuSeconds) !== undefined) {
      const sampledMs = performance.now() - samplingSince;
      console.log(`sampling ended before SIGINT was due, ${(sampledMs / 1000).toFixed(1)} s after it began`);
    }
  } catch (error) {
    // Never leave a recorder running behind a failed look.
    child.kill("SIGKILL");
    await output;
    throw error;
  }
  const decoded = await output;
  const decoder = new TextDecoder();
  const result = {
    code: decoded.code,
    stdout: decoder.decode(decoded.stdout),
    stderr: decoder.decode(decoded.stderr),
  };
  if (phase !== "after") {
    throw new Error(`the recorder never held a perf event per CPU (exit ${result.code}):\n${result.stderr}`);
  }
  const span = (low: number | null, high: number | null): CpuSpan | null =>
    low === null || high === null ? null : { low, high: high + READING_SLACK };
  const start = targets.map((target, i) => {
    const bracket = span(startLow[i]!, startHigh[i]!);
    if (bracket === null) throw new Error(`process ${target.pid} was not running when sampling began`);
    return bracket;
  });
  return {
    result,
    start,
    end: targets.map((_, i) => span(endLow[i]!, endHigh[i]!)),
    steal: steal.fraction(),
    childrenCpu: { low: childrenCpu, high: childrenCpu + READING_SLACK },
  };
}

/** The CPU seconds used between two bracketed readings of one clock. */
export function cpuBetween(start: CpuSpan, end: CpuSpan): CpuSpan {
  return { low: Math.max(0, end.low - start.high), high: end.high - start.low };
}

/** What {@linkcode recordRunning} kept of a recording of one running program. */
export interface RunningRecording {
  /** The program's PID, as its samples carry it. */
  pid: number;
  /** The pprof file written. */
  pprof: Uint8Array;
  /** The `--stats` file written, parsed. */
  stats: { bpf: Record<string, number> };
  /** CPU seconds the program used while it was sampled. */
  cpu: CpuSpan;
  /** Share of the machine's CPU time stolen meanwhile. */
  steal: number;
}

/** How {@linkcode recordRunning} starts its program and when it stops recording. */
export interface RunningOptions {
  /** Arguments of the program. */
  args?: string[];
  /** Stop once the program has used this much CPU while sampled. */
  cpuSeconds: number;
  /** Time the program has to set itself up before the recording starts. */
  settleMs?: number;
}

/**
 * Starts `program`, records it with `record -p PID` until it has used `options.cpuSeconds` of CPU while
 * sampled, checks what every such recording must give (omniprof exits 0, the program outlived the
 * recording), and stops the program and removes the files whatever happened.
 *
 * @example
 * ```ts ignore
 * const { pprof, pid, cpu, steal } = await recordRunning(binary, { args: ["30"], cpuSeconds: 4 });
 * assertSampleCount(countOf(decodePprofBySchema(pprof), pid), cpu, 99, steal, "chain");
 * ```
 */
export async function recordRunning(program: string, options: RunningOptions): Promise<RunningRecording> {
  const dir = Deno.makeTempDirSync({ prefix: "omniprof-test-" });
  const child = new Deno.Command(program, { args: options.args ?? [], stdout: "null" }).spawn();
  try {
    await new Promise((resolve) => setTimeout(resolve, options.settleMs ?? 300));
    const out = `${dir}/out.pb.gz`;
    const stats = `${dir}/stats.json`;
    const { result, start, end, steal } = await recordWatchingCpu(
      ["record", "-p", String(child.pid), "-o", out, "--stats", stats],
      [{ pid: child.pid }],
      { interruptAfterCpuSeconds: options.cpuSeconds },
    );
    if (result.code !== 0) throw new Error(`record exited with ${result.code}:\n${result.stderr}`);
    if (end[0] === null || end[0] === undefined) throw new Error(`${program} exited during the recording`);
    return {
      pid: child.pid,
      pprof: Deno.readFileSync(out),
      stats: JSON.parse(Deno.readTextFileSync(stats)),
      cpu: cpuBetween(start[0]!, end[0]),
      steal,
    };
  } finally {
    try {
      child.kill();
    } catch {
      // already exited
    }
    await child.status;
    Deno.removeSync(dir, { recursive: true });
  }
}

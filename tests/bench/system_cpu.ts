/**
 * CPU time the whole machine and single processes used, from /proc, so the benchmark can tell how much
 * of each tool's window went to neither the tool nor the workload: other processes on a shared machine
 * compete with both, and their activity is part of what a whole-system profiler has to record.
 *
 * @example
 * ```ts
 * import { processCpuSeconds, systemCpu } from "./system_cpu.ts";
 * const before = systemCpu();
 * // ... run something ...
 * const busy = systemCpu().busySeconds - before.busySeconds;
 * const own = processCpuSeconds(Deno.pid);
 * ```
 *
 * @module
 */
import { statFields } from "../../lib/process/proc_stat.ts";

/** Clock ticks per second of /proc's CPU times (USER_HZ: 100 on every Linux architecture the tools run on). */
export const USER_HZ = 100;

/** Machine-wide CPU time since boot, seconds summed over all CPUs. */
export interface SystemCpu {
  /** user + nice + system + irq + softirq: time the CPUs ran anything. */
  busySeconds: number;
  /** Time a hypervisor ran something else while this machine's CPUs wanted to run. */
  stealSeconds: number;
}

/** Parses the `cpu` line of /proc/stat. */
export function parseProcStat(text: string): SystemCpu {
  const line = text.split("\n").find((candidate) => candidate.startsWith("cpu "));
  const fields = line?.trim().split(/\s+/).slice(1).map(Number) ?? [];
  if (fields.length < 8 || fields.some((value) => !Number.isFinite(value) || value < 0)) {
    throw new RangeError(`Cannot parse /proc/stat: bad cpu line ${JSON.stringify(line ?? "")}`);
  }
  const [user, nice, system, , , irq, softirq, steal] = fields as number[];
  return {
    busySeconds: (user! + nice! + system! + irq! + softirq!) / USER_HZ,
    stealSeconds: steal! / USER_HZ,
  };
}

/** The machine's CPU time now. */
export function systemCpu(): SystemCpu {
  return parseProcStat(Deno.readTextFileSync("/proc/stat"));
}

/** Parses utime + stime (seconds) from /proc/PID/stat text. */
export function parsePidStatCpu(text: string): number {
  const fields = statFields(text);
  const utime = Number(fields?.[11]);
  const stime = Number(fields?.[12]);
  if (!Number.isFinite(utime) || !Number.isFinite(stime) || utime < 0 || stime < 0) {
    throw new RangeError(
      `Cannot parse /proc/PID/stat: no utime and stime in ${JSON.stringify(text.slice(0, 200))}`,
    );
  }
  return (utime + stime) / USER_HZ;
}

/** CPU seconds process `pid` has used (all its threads); null when it is gone. */
export function processCpuSeconds(pid: number): number | null {
  try {
    return parsePidStatCpu(Deno.readTextFileSync(`/proc/${pid}/stat`));
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
}

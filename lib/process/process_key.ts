/**
 * One process over its whole life: its PID and its start time. A PID alone names whichever process holds
 * the number now, and the kernel hands a number out again once its process is gone (pid_max is 32768 on
 * many systems, so a busy machine goes round in minutes). The start time (field 22 of /proc/PID/stat,
 * clock ticks since boot) never changes for a process, and a PID could only come back within the same
 * tick after every other PID had been handed out in between, so the pair names one process.
 *
 * @example
 * ```ts
 * import { readProcessKey, sameProcess } from "./process_key.ts";
 * import type { Pid } from "../types.ts";
 * const self = readProcessKey(Deno.pid as Pid)!;
 * sameProcess(self, readProcessKey(Deno.pid as Pid)); // true
 * ```
 *
 * @module
 */
import type { Brand, Pid } from "../types.ts";
import { statFields } from "./proc_stat.ts";

/** When a process started: clock ticks since boot, as /proc/PID/stat's field 22 gives it. */
export type StartTicks = Brand<number, "StartTicks">;

/** A process, told apart from any later process that gets the same PID. */
export interface ProcessKey {
  readonly pid: Pid;
  readonly startTicks: StartTicks;
}

/** What one read of /proc/PID/stat says about the process holding `pid` now. */
export interface ProcessStatus {
  readonly key: ProcessKey;
  /** Field 3: R, S, D, T, t, Z (exited, not yet reaped), X... */
  readonly state: string;
}

/** The process holding `pid` now, and its state; null when there is none (or procfs says nothing). */
export function readProcessStatus(pid: Pid, procRoot = "/proc"): ProcessStatus | null {
  let text: string;
  try {
    text = Deno.readTextFileSync(`${procRoot}/${pid}/stat`);
  } catch {
    return null;
  }
  const fields = statFields(text);
  const state = fields?.[0];
  const startTicks = Number(fields?.[19]);
  if (state === undefined || state === "" || !Number.isSafeInteger(startTicks) || startTicks < 0) return null;
  return { key: { pid, startTicks: startTicks as StartTicks }, state };
}

/** The key of the process holding `pid` now, or null when there is none. */
export function readProcessKey(pid: Pid, procRoot = "/proc"): ProcessKey | null {
  return readProcessStatus(pid, procRoot)?.key ?? null;
}

/** Whether two keys name the same process. */
export function sameProcess(a: ProcessKey, b: ProcessKey | null | undefined): boolean {
  return b !== null && b !== undefined && a.pid === b.pid && a.startTicks === b.startTicks;
}

/**
 * Whether a process is still running, from `/proc/PID/stat`: an exited process whose parent has not
 * reaped it yet (a zombie) still has its /proc entry, but runs no code and will never be sampled again;
 * and a PID now held by another process (same number, another start time) is not the process asked about.
 *
 * @example
 * ```ts
 * import { processRunning, runningProcess } from "./liveness.ts";
 * import type { Pid } from "../types.ts";
 * const self = runningProcess(Deno.pid as Pid)!;
 * processRunning(self); // true
 * ```
 *
 * @module
 */

import type { Pid } from "../types.ts";
import { type ProcessKey, type ProcessStatus, readProcessStatus, sameProcess } from "./process_key.ts";

/** Exited: a zombie waiting for its parent, or one being torn down. */
function exited(status: ProcessStatus): boolean {
  return status.state === "Z" || status.state === "X" || status.state === "x";
}

/** The running process that holds `pid` now, or null when none does (never started, exited). */
export function runningProcess(pid: Pid, procRoot = "/proc"): ProcessKey | null {
  const status = readProcessStatus(pid, procRoot);
  return status === null || exited(status) ? null : status.key;
}

/** True while `process` exists and has not exited; false once its PID is gone or held by another process. */
export function processRunning(process: ProcessKey, procRoot = "/proc"): boolean {
  const status = readProcessStatus(process.pid, procRoot);
  return status !== null && !exited(status) && sameProcess(process, status.key);
}

/**
 * Whether a process is still running, from `/proc/PID/stat`: an exited process whose parent has not
 * reaped it yet (a zombie) still has its /proc entry, but runs no code and will never be sampled again.
 *
 * @example
 * ```ts
 * import { processRunning } from "./liveness.ts";
 * processRunning(Deno.pid); // true
 * ```
 *
 * @module
 */

import { statFields } from "./proc_stat.ts";

/**
 * True while process `pid` exists and has not exited. (A PID reused by a new process reads as running:
 * a check a second apart makes that unlikely, and it only keeps a session going.)
 */
export function processRunning(pid: number): boolean {
  let stat: string;
  try {
    stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  } catch {
    return false;
  }
  const state = statFields(stat)?.[0];
  return state !== undefined && state !== "Z" && state !== "X" && state !== "x";
}

/**
 * Watching the processes a test starts, independently of the code under test: a process is remembered
 * by its PID and start time as /proc shows them, so that "still running" never mistakes a later process
 * that got the same PID for it. Also starts a process on a chosen PID, to reuse one for real. Test-only.
 *
 * @module
 */
import { optional, type Requirement } from "./requirements.ts";

/** A process as a test saw it. */
export interface SeenProcess {
  pid: number;
  /** Field 22 of /proc/PID/stat, as text. */
  start: string;
}

/** State (field 3) and start time (field 22) of /proc/PID/stat, or null when there is no such process. */
function readStat(pid: number): { state: string; start: string } | null {
  try {
    const text = Deno.readTextFileSync(`/proc/${pid}/stat`);
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
    return { state: fields[0]!, start: fields[19]! };
  } catch {
    return null;
  }
}

/** The process that holds `pid` now, or null. */
export function seeProcess(pid: number): SeenProcess | null {
  const stat = readStat(pid);
  return stat === null ? null : { pid, start: stat.start };
}

/** Clock ticks per second of /proc/PID/stat's times (`getconf CLK_TCK`; 100 on every Linux port here). */
const TICKS_PER_SECOND = 100;

/** CPU time (user + system) the process seen has used so far, in seconds; null once it is gone. */
export function cpuSeconds(process: SeenProcess): number | null {
  try {
    const text = Deno.readTextFileSync(`/proc/${process.pid}/stat`);
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
    if (fields[19] !== process.start) return null;
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return null;
  }
}

/** Whether the process seen still runs (not if it is a zombie, nor if another process has its PID). */
export function stillRunning(process: SeenProcess): boolean {
  const stat = readStat(process.pid);
  return stat !== null && stat.start === process.start && stat.state !== "Z" && stat.state !== "X";
}

/**
 * Waits (up to `timeoutMs`) for `dir/NAME.pid` of each name, written by a workload when it runs, and
 * returns those processes.
 */
export async function waitForPidFiles(
  dir: string,
  names: string[],
  timeoutMs = 20_000,
): Promise<SeenProcess[]> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      return names.map((name) => {
        const pid = Number(Deno.readTextFileSync(`${dir}/${name}.pid`).trim());
        const seen = seeProcess(pid);
        if (seen === null) throw new Error(`${name} (PID ${pid}) exited already`);
        return seen;
      });
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound) || performance.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

/** Kills what a failed test left running; never a later process on the same PID. */
export function killLeftovers(processes: readonly SeenProcess[]): void {
  for (const process of processes) {
    if (stillRunning(process)) Deno.kill(process.pid, "SIGKILL");
  }
}

/**
 * Choosing the next PID through /proc/sys/kernel/ns_last_pid: root, on a kernel built with
 * CONFIG_CHECKPOINT_RESTORE (Debian's are). Root comes with the tests' own requirement (tracing); a kernel
 * without the file lacks it for good, so the requirement is optional.
 */
export function pidChoice(): Requirement {
  try {
    Deno.openSync("/proc/sys/kernel/ns_last_pid", { write: true }).close();
    return optional(null);
  } catch (error) {
    return optional(`cannot choose the next PID: /proc/sys/kernel/ns_last_pid (${(error as Error).message})`);
  }
}

/**
 * Starts `command` on PID `pid` by setting the last PID handed out just below it; another process may
 * take it first, so a few tries are made. Null when they all failed.
 */
export async function spawnWithPid(
  pid: number,
  command: string,
  args: string[],
): Promise<Deno.ChildProcess | null> {
  for (let attempt = 0; attempt < 20; attempt++) {
    Deno.writeTextFileSync("/proc/sys/kernel/ns_last_pid", String(pid - 1));
    const child = new Deno.Command(command, { args }).spawn();
    if (child.pid === pid) return child;
    child.kill("SIGKILL");
    await child.status;
  }
  return null;
}

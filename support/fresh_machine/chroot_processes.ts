/**
 * The processes running inside a chroot, found by their root folder (/proc/PID/root), and stopping
 * them: what the README's commands leave behind (a tmux server, a test's workload) or what an interrupt
 * cut short must not keep running, nor keep the root's mounts busy.
 *
 * @module
 */

/** The ids of the processes whose root folder is `root` (an absolute path without links). */
export function processesRootedIn(root: string): number[] {
  const pids: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      if (Deno.readLinkSync(`/proc/${entry.name}/root`) === root) pids.push(Number(entry.name));
    } catch {
      // exited meanwhile, or a kernel thread
    }
  }
  return pids;
}

function signalAll(pids: number[], signal: Deno.Signal): void {
  for (const pid of pids) {
    try {
      Deno.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

/** Waits until no process runs in `root`, up to `ms`; returns those still there. */
async function waitForNone(root: string, ms: number): Promise<number[]> {
  const deadline = performance.now() + ms;
  let left = processesRootedIn(root);
  while (left.length > 0 && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    left = processesRootedIn(root);
  }
  return left;
}

/**
 * Stops every process running in `root`: SIGTERM, then SIGKILL for those still there after `graceMs`.
 * Returns the ids of processes that survived even that (none, unless stuck in the kernel).
 */
export async function stopProcessesIn(root: string, graceMs = 5000): Promise<number[]> {
  const running = processesRootedIn(root);
  if (running.length === 0) return [];
  signalAll(running, "SIGTERM");
  const stubborn = await waitForNone(root, graceMs);
  if (stubborn.length === 0) return [];
  signalAll(stubborn, "SIGKILL");
  return await waitForNone(root, graceMs);
}

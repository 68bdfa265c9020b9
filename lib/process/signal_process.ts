/**
 * Sends a signal to one process named by its {@linkcode ProcessKey}, never to a later process that got the
 * same PID: a pidfd is opened on the PID, the start time read again then says whether the pidfd holds the
 * process meant, and the signal goes through the pidfd, which cannot change process. (`kill(PID)` after a
 * check would leave a gap in which the PID could change hands; omniprof runs as root and could hit anyone.)
 *
 * @example
 * ```ts ignore
 * import { signalProcess } from "./signal_process.ts";
 * signalProcess(key, "SIGTERM");
 * ```
 *
 * @module
 */
import { ESRCH } from "../sys/errno.ts";
import { libc } from "../sys/libc.ts";
import { type ProcessKey, readProcessKey, sameProcess } from "./process_key.ts";

/** The signals omniprof sends, by number (x86-64 and arm64 Linux agree on these). */
const SIGNAL_NUMBERS = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15, SIGCONT: 18 } as const;

/** A signal {@linkcode signalProcess} can send. */
export type ProcessSignal = keyof typeof SIGNAL_NUMBERS;

const SYS_PIDFD_SEND_SIGNAL = 424n;
const SYS_PIDFD_OPEN = 434n;

/** Whether pidfds work here (Linux 5.3 and later); learnt on first use. */
let pidfdsWork = true;

/** The number of `signal`. */
export function signalNumber(signal: ProcessSignal): number {
  return SIGNAL_NUMBERS[signal];
}

/**
 * Sends `signal` to `process` if it still runs; returns whether it was sent (false: the process is gone,
 * or its PID now belongs to another).
 */
export function signalProcess(process: ProcessKey, signal: ProcessSignal, procRoot = "/proc"): boolean {
  const { fn, errno } = libc();
  if (pidfdsWork) {
    const pidfd = Number(fn.syscall_integers(SYS_PIDFD_OPEN, BigInt(process.pid), 0n, 0n, 0n));
    if (pidfd >= 0) {
      try {
        if (!sameProcess(process, readProcessKey(process.pid, procRoot))) return false;
        return Number(
          fn.syscall_integers(SYS_PIDFD_SEND_SIGNAL, BigInt(pidfd), BigInt(signalNumber(signal)), 0n, 0n),
        ) === 0;
      } finally {
        fn.close(pidfd);
      }
    }
    if (errno() === ESRCH) return false;
    // ENOSYS before Linux 5.3, or a seccomp filter that refuses the call: signal by PID instead.
    pidfdsWork = false;
  }
  // Without pidfds (before Linux 5.3) the check and the kill are two steps; a PID changing hands between
  // them needs the whole PID space to be handed out in that instant.
  if (!sameProcess(process, readProcessKey(process.pid, procRoot))) return false;
  try {
    Deno.kill(process.pid, signal);
    return true;
  } catch {
    return false;
  }
}

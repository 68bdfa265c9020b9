/**
 * What ends `record -- COMMAND`'s command when omniprof itself is killed (SIGKILL, the OOM killer), when
 * none of its own code runs any more: a small shell started before the command, holding the read end of
 * a pipe whose write end only omniprof holds. Told the command's session, it waits; when the pipe closes
 * without the word "disarm" (omniprof died), it sends SIGKILL to every process of that session.
 *
 * The guard is started before sampling begins, so the tracer, which follows omniprof's children, never
 * sees it; it ignores the terminal's signals (Ctrl-C reaches omniprof, which stops the command itself)
 * and leaves the terminal's session. A session ID stays reserved while any process holds it, so the
 * processes it kills are the command's. What it cannot reach: a daemon that left the command's session
 * (omniprof's own stop finds those through its subreaper role, which dies with it).
 *
 * @example
 * ```ts ignore
 * import { CommandGuard } from "./command_guard.ts";
 * using guard = CommandGuard.start();
 * const command = CommandGroup.start("make", [], {}, guard);
 * // ... the command has been stopped and every process of it is gone:
 * guard.disarm();
 * ```
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import type { Pid } from "../types.ts";

const logger = getLogger(["omniprof", "process"]);

/**
 * `$1` is never used: the session arrives on the pipe, once the command has started. Processes in a
 * state other than Z are killed, again while any is found (it may fork meanwhile), at most 40 rounds.
 */
const GUARD_SCRIPT = `
trap '' INT TERM HUP QUIT TSTP
read -r session || exit 0
read -r word
[ "$word" = disarm ] && exit 0
round=0
while [ $round -lt 40 ]; do
  found=0
  for stat in /proc/[0-9]*/stat; do
    line=
    read -r line < "$stat" || continue
    set -- \${line##*) }
    [ "$4" = "$session" ] && [ "$1" != Z ] || continue
    pid=\${stat#/proc/}
    kill -KILL "\${pid%/stat}" && found=1
  done 2>/dev/null
  [ $found = 0 ] && exit 0
  round=$((round + 1))
  sleep 0.05
done
`;

/** A guard of one command's session; see the module's documentation. */
export class CommandGuard implements Disposable {
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  #armed = false;
  #closed = false;

  private constructor(child: Deno.ChildProcess) {
    this.#child = child;
    this.#writer = child.stdin.getWriter();
    // omniprof must not wait for its guard to exit: it exits at once when disarmed or closed.
    child.unref();
  }

  /**
   * Starts the guard. Start it before the tracer, which would otherwise follow it as omniprof's child.
   *
   * @throws {Error} as `Deno.Command.spawn` does when `sh` cannot be started.
   */
  static start(): CommandGuard {
    const child = new Deno.Command("sh", {
      args: ["-c", GUARD_SCRIPT, "omniprof-guard"],
      stdin: "piped",
      stdout: "null",
      stderr: "null",
      // A session of its own: the terminal's Ctrl-C and hang-up are omniprof's to handle.
      detached: true,
    }).spawn();
    return new CommandGuard(child);
  }

  /** The guard's process. */
  get pid(): Pid {
    return this.#child.pid as Pid;
  }

  /** From now on, omniprof's death kills every process of `session`. */
  arm(session: Pid): void {
    if (this.#armed || this.#closed) return;
    this.#armed = true;
    this.#send(`${session}\n`);
  }

  /** The command is over: the guard exits without killing anything. */
  disarm(): void {
    if (this.#closed) return;
    this.#closed = true;
    // Unarmed, closing the pipe is enough: the first read ends and the guard exits.
    if (this.#armed) this.#send("disarm\n");
    this.#writer.close().catch(() => {});
  }

  [Symbol.dispose](): void {
    this.disarm();
  }

  #send(text: string): void {
    this.#writer.write(new TextEncoder().encode(text)).catch((error) => {
      // The guard died (someone killed it): the command is unguarded, as it was before guards existed.
      logger.debug("Cannot reach the command's guard: {error}", { error: String(error) });
    });
  }
}

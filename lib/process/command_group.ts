/**
 * The command `record -- COMMAND` profiles, run so that it and everything it starts can be signalled
 * together and stopped for sure:
 *
 * - It leads a session (and so a process group) of its own: Deno's `detached` calls setsid() in the child
 *   between fork and exec, so the PID omniprof forked is the command's (the BPF filter, which follows the
 *   children of omniprof, covers it and its descendants). A new session rather than only a new group: a
 *   background group of omniprof's terminal would be stopped (SIGTTIN) as soon as the command read the
 *   terminal, while a process outside the terminal's session reads and writes it freely. What it loses is a
 *   controlling terminal: a program that opens /dev/tty (a password prompt) cannot. The terminal's Ctrl-C
 *   reaches omniprof only, which passes it on, so the command gets it once.
 * - omniprof becomes a child subreaper: a descendant that leaves the session (a daemon calling setsid())
 *   and loses its parent is adopted by omniprof instead of init, so it is still found. Adopted processes
 *   of its session that exit are reaped here (Deno only reaps the children it started), at most once a
 *   second while the command runs: a command that orphans thousands of short-lived processes must not
 *   fill the PID space with zombies.
 * - Its processes are found by reading /proc: everything in its session, and everything below omniprof
 *   (every child of omniprof counts as the command's: omniprof starts no other process while one runs,
 *   but for the command's guard).
 *   Signals go to its process group at once (kill(-pgid)), and to each process outside that group through
 *   a pidfd checked against the process's start time, so a PID that changed hands is never signalled.
 * - If omniprof itself is killed (SIGKILL, the OOM killer) none of this runs: the command's guard
 *   ({@linkcode CommandGuard}), a separate small process, then kills the command's session.
 *
 * @example
 * ```ts ignore
 * import { CommandGroup } from "./command_group.ts";
 * const command = CommandGroup.start("make", ["-j2"]);
 * await command.stop("SIGTERM"); // SIGTERM, then SIGKILL after STOP_GRACE_MS for what is left
 * ```
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import { libc } from "../sys/libc.ts";
import { after, delay } from "../sys/timer.ts";
import type { Pid } from "../types.ts";
import type { CommandGuard } from "./command_guard.ts";
import { statFields } from "./proc_stat.ts";
import { type ProcessKey, readProcessKey, type StartTicks } from "./process_key.ts";
import { type ProcessSignal, signalProcess } from "./signal_process.ts";

const logger = getLogger(["omniprof", "process"]);

/**
 * How long a stopped command has between the polite signal and SIGKILL. Long enough for a program to
 * flush its output and remove its temporary files (most exit within milliseconds of SIGTERM); short enough
 * that Ctrl-C still feels immediate, and that whoever sent omniprof SIGTERM (a service manager waits 10 or
 * 90 s before its own SIGKILL) sees it gone long before giving up on it.
 */
export const STOP_GRACE_MS = 2000;
/** How long to wait for killed processes to disappear (a process in uninterruptible sleep dies late). */
const KILL_WAIT_MS = 1000;
/** How often the processes left are looked for while waiting (each look reads /proc/PID/stat of all). */
const POLL_MS = 100;
const PR_SET_CHILD_SUBREAPER = 36;
/** Adopted processes that exited are reaped at most this often (each time reads all of /proc). */
const REAP_EVERY_MS = 1000;
const WNOHANG = 1;

/** Where the command's standard streams go (default: omniprof's own). */
export interface CommandStdio {
  stdin?: "inherit" | "null";
  stdout?: "inherit" | "null";
  stderr?: "inherit" | "null";
}

/** A live process of the command. */
interface Member {
  key: ProcessKey;
  /** Its process group. */
  pgrp: number;
  /** Stopped (by SIGSTOP, or SIGTTIN/SIGTTOU): acts on no signal but SIGKILL until continued. */
  stopped: boolean;
}

/** A command in its own session, with everything it starts. */
export class CommandGroup {
  /** The command's first process, which leads its session and process group. */
  readonly leader: ProcessKey;
  /** How the command's first process ended: `code` is 128 + N when signal N killed it, as shells say. */
  readonly status: Promise<Deno.CommandStatus>;
  #exited: Deno.CommandStatus | null = null;
  #procRoot: string;
  /** Reaps adopted processes when one of omniprof's children exits, until the command is stopped. */
  #onChildExit = () => this.#scheduleReaping();
  #reaping: Disposable | null = null;
  #lastReaped = 0;
  /** What kills the command if omniprof is killed; disarmed once the command is over. */
  readonly #guard: CommandGuard | null;

  private constructor(
    leader: ProcessKey,
    status: Promise<Deno.CommandStatus>,
    procRoot: string,
    guard: CommandGuard | null,
  ) {
    this.leader = leader;
    this.#procRoot = procRoot;
    this.#guard = guard;
    this.status = status.then((ended) => {
      this.#exited = ended;
      return ended;
    });
    Deno.addSignalListener("SIGCHLD", this.#onChildExit);
  }

  /**
   * Starts `program` with `args` in a session of its own, armed with `guard` (started before sampling
   * began: see {@linkcode CommandGuard}) when given.
   *
   * @throws {Deno.errors.NotFound | Deno.errors.PermissionDenied | Error} as `Deno.Command.spawn` does
   *   when the program cannot be started.
   */
  static start(
    program: string,
    args: readonly string[],
    stdio: CommandStdio = {},
    guard: CommandGuard | null = null,
  ): CommandGroup {
    becomeSubreaper();
    const child = new Deno.Command(program, {
      args: [...args],
      detached: true,
      stdin: stdio.stdin ?? "inherit",
      stdout: stdio.stdout ?? "inherit",
      stderr: stdio.stderr ?? "inherit",
    }).spawn();
    const pid = child.pid as Pid;
    // Read before its status is collected (that needs a turn of the event loop): until then its /proc
    // entry stays, even if it has exited already.
    const leader = readProcessKey(pid) ?? { pid, startTicks: -1 as StartTicks };
    // The command leads its session: its PID is the session's ID.
    guard?.arm(pid);
    return new CommandGroup(leader, child.status, "/proc", guard);
  }

  /** How the first process ended, once it has; null while it runs. */
  get exitStatus(): Deno.CommandStatus | null {
    return this.#exited;
  }

  /** Whether any process of the command still runs. */
  running(): boolean {
    return this.#members().length > 0;
  }

  /**
   * Stops the command and everything it started: `first` (SIGTERM, or the signal omniprof was stopped
   * with), SIGCONT for any process that is stopped, then SIGKILL for whatever is left after `graceMs` or
   * as soon as `hurry` aborts; resolves once none is left (or after a last wait for processes that
   * cannot die at once).
   */
  async stop(
    first: ProcessSignal = "SIGTERM",
    options: { graceMs?: number; hurry?: AbortSignal } = {},
  ): Promise<void> {
    const graceMs = options.graceMs ?? STOP_GRACE_MS;
    let members = this.#members();
    if (members.length > 0 && first !== "SIGKILL") {
      this.#send(members, first);
      this.#send(members.filter((member) => member.stopped), "SIGCONT");
      const deadline = performance.now() + graceMs;
      while (members.length > 0 && performance.now() < deadline && !options.hurry?.aborted) {
        const wait = Math.min(POLL_MS, deadline - performance.now());
        const waits = [delay(wait, options.hurry)];
        // The first process's exit ends the wait at once: often it is the only one.
        if (this.#exited === null) waits.push(this.status.then(() => {}));
        await Promise.race(waits);
        members = this.#members();
      }
    }
    const deadline = performance.now() + KILL_WAIT_MS;
    while (members.length > 0) {
      if (performance.now() >= deadline) {
        logger.warn("{count} processes of the command did not die after SIGKILL: {pids}", {
          count: members.length,
          pids: members.map((member) => member.key.pid).join(", "),
        });
        break;
      }
      this.#send(members, "SIGKILL");
      await delay(POLL_MS / 4);
      members = this.#members();
    }
    const settled = new AbortController();
    await Promise.race([this.status, delay(KILL_WAIT_MS, settled.signal)]);
    settled.abort();
    this.#members(); // reaps what the last signals left as zombies
    this.#guard?.disarm();
    Deno.removeSignalListener("SIGCHLD", this.#onChildExit);
    this.#reaping?.[Symbol.dispose]();
    this.#reaping = null;
  }

  #scheduleReaping(): void {
    if (this.#reaping !== null) return;
    this.#reaping = after(this.#lastReaped + REAP_EVERY_MS - performance.now(), () => {
      this.#reaping = null;
      this.#members();
    });
  }

  /**
   * Reaps the processes of the command's session that omniprof adopted and that have exited. Not the
   * command's first process, nor any other child of omniprof: Deno collects their status itself, and
   * would wait for ever for one reaped here. (A daemon that left the session is left as a zombie until
   * omniprof exits; it is long-lived by nature, not one of a flood.)
   */
  #reap(all: readonly ProcessEntry[]): void {
    this.#lastReaped = performance.now();
    for (const entry of all) {
      if (
        entry.ppid === Deno.pid && entry.state === "Z" && entry.session === this.leader.pid &&
        entry.key.pid !== this.leader.pid
      ) {
        libc().fn.waitpid(entry.key.pid, null, WNOHANG);
      }
    }
  }

  /**
   * Sends `signal` to the members: to the command's process group at once, and to each member that left
   * the group on its own.
   */
  #send(members: readonly Member[], signal: ProcessSignal): void {
    const group = this.leader.pid;
    // The group id stays reserved while a member holds it, so the group signalled is the command's.
    if (members.some((member) => member.pgrp === group)) {
      try {
        Deno.kill(-group, signal);
      } catch {
        // the group emptied in between
      }
    }
    for (const member of members) {
      if (member.pgrp !== group) signalProcess(member.key, signal, this.#procRoot);
    }
  }

  /** The command's processes still running: its session's and everything below omniprof. */
  #members(): Member[] {
    const all = readProcessTable(this.#procRoot);
    this.#reap(all);
    const children = new Map<number, ProcessEntry[]>();
    for (const entry of all) {
      const siblings = children.get(entry.ppid);
      if (siblings) siblings.push(entry);
      else children.set(entry.ppid, [entry]);
    }
    const found = new Set<ProcessEntry>();
    const guard = this.#guard?.pid;
    const pending = [
      ...all.filter((entry) => entry.session === this.leader.pid),
      ...(children.get(Deno.pid) ?? []).filter((entry) => entry.key.pid !== guard),
    ];
    for (let entry = pending.pop(); entry !== undefined; entry = pending.pop()) {
      if (found.has(entry)) continue;
      found.add(entry);
      pending.push(...(children.get(entry.key.pid) ?? []));
    }
    return [...found].filter((entry) => !entry.exited).map(({ key, pgrp, state }) => ({
      key,
      pgrp,
      stopped: state === "T",
    }));
  }
}

/** One line of the process table. */
interface ProcessEntry {
  key: ProcessKey;
  state: string;
  ppid: number;
  pgrp: number;
  session: number;
  /** A zombie with no thread left running. */
  exited: boolean;
}

/** Every process in `procRoot`, as /proc/PID/stat shows it (those that vanish meanwhile are left out). */
function readProcessTable(procRoot: string): ProcessEntry[] {
  const entries: ProcessEntry[] = [];
  for (const directory of Deno.readDirSync(procRoot)) {
    if (!/^[0-9]+$/.test(directory.name)) continue;
    let fields: string[] | null;
    try {
      fields = statFields(Deno.readTextFileSync(`${procRoot}/${directory.name}/stat`));
    } catch {
      continue;
    }
    if (fields === null || fields.length < 20) continue;
    const pid = Number(directory.name) as Pid;
    const state = fields[0]!;
    entries.push({
      key: { pid, startTicks: Number(fields[19]) as StartTicks },
      state,
      ppid: Number(fields[1]),
      pgrp: Number(fields[2]),
      session: Number(fields[3]),
      exited: (state === "Z" || state === "X") && !threadsLeft(procRoot, pid),
    });
  }
  return entries;
}

/** Whether a zombie process still has threads running (its main thread exited before them). */
function threadsLeft(procRoot: string, pid: Pid): boolean {
  try {
    let threads = 0;
    for (const _ of Deno.readDirSync(`${procRoot}/${pid}/task`)) if (++threads > 1) return true;
  } catch {
    // gone meanwhile
  }
  return false;
}

let subreaper = false;

/** Makes this process adopt its descendants' orphans (once; a failure only loses that). */
function becomeSubreaper(): void {
  if (subreaper) return;
  subreaper = true;
  if (libc().fn.prctl(PR_SET_CHILD_SUBREAPER, 1n, 0n, 0n, 0n) !== 0) {
    logger.debug("Cannot become a child subreaper: errno {errno}", { errno: libc().errno() });
  }
}

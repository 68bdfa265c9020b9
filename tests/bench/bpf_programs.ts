/**
 * The BPF programs a running profiler owns, and what they cost per sample.
 *
 * A process holds each program it loaded as an `anon_inode:bpf-prog` descriptor, and the descriptor's
 * `/proc/PID/fdinfo/FD` carries the program's id, type and run counters (`run_time_ns`, `run_cnt`): the
 * same per-program statistics `bpftool prog show` prints, kept by the kernel while
 * `kernel.bpf_stats_enabled` is 1. Reading them through the profiler's own descriptors attributes programs
 * to the tool that loaded them even when other tools load programs with the same names at the same time,
 * and is cheap enough to poll every few milliseconds, which is how a tool's first sample is timed when
 * the tool itself does not report it.
 *
 * @example
 * ```ts
 * import { ProgramWatcher, perSampleNs } from "./bpf_programs.ts";
 * declare const toolPid: number;
 * const watcher = new ProgramWatcher(toolPid);
 * watcher.poll(); // repeatedly, while the tool runs
 * const ns = perSampleNs(watcher.programs());
 * ```
 *
 * @module
 */
import { monotonicNs } from "./monotonic_clock.ts";
import { programInfoById } from "../kernel/bpf_info.ts";

/** BPF_PROG_TYPE_PERF_EVENT: programs attached to perf events, i.e. the sampling programs. */
export const PROG_TYPE_PERF_EVENT = 7;

/** One program's identity and counters, as its fdinfo shows them. */
export interface ProgramCounters {
  id: number;
  /** BPF_PROG_TYPE_* number. */
  type: number;
  tag: string;
  /** Total ns spent in the program since bpf_stats_enabled was set (entries through bpf_prog_run only). */
  runTimeNs: number;
  /** Times the program was entered through bpf_prog_run (tail calls into it are not counted). */
  runCount: number;
}

/** A program with the name the kernel knows it by ("" when it could not be asked). */
export interface NamedProgram extends ProgramCounters {
  name: string;
}

/** Parses the fdinfo of a descriptor; null when it is not a BPF program's. */
export function parseProgramFdinfo(text: string): ProgramCounters | null {
  const fields = new Map<string, string>();
  for (const line of text.split("\n")) {
    const colon = line.indexOf(":");
    if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 1).trim());
  }
  const id = fields.get("prog_id");
  const type = fields.get("prog_type");
  if (id === undefined || type === undefined) return null;
  const number = (key: string): number => {
    const value = Number(fields.get(key) ?? "0");
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new RangeError(`Cannot parse fdinfo: ${key} is ${fields.get(key)}`);
    }
    return value;
  };
  return {
    id: number("prog_id"),
    type: number("prog_type"),
    tag: fields.get("prog_tag") ?? "",
    runTimeNs: number("run_time_ns"),
    runCount: number("run_cnt"),
  };
}

/** `root` and every process below it, from /proc/PID/task/TID/children (each thread lists its own). */
export function processTree(root: number): number[] {
  const seen = new Set<number>();
  const queue = [root];
  while (queue.length > 0 && seen.size < 4096) {
    const pid = queue.pop()!;
    if (seen.has(pid)) continue;
    seen.add(pid);
    let tasks: Deno.DirEntry[];
    try {
      tasks = [...Deno.readDirSync(`/proc/${pid}/task`)];
    } catch {
      continue; // exited
    }
    for (const task of tasks) {
      let children = "";
      try {
        children = Deno.readTextFileSync(`/proc/${pid}/task/${task.name}/children`);
      } catch {
        continue;
      }
      for (const child of children.split(" ")) if (child.trim() !== "") queue.push(Number(child));
    }
  }
  return [...seen];
}

/** The BPF programs `pid` holds open right now. */
export function programsOf(pid: number): ProgramCounters[] {
  const programs: ProgramCounters[] = [];
  let fds: Deno.DirEntry[];
  try {
    fds = [...Deno.readDirSync(`/proc/${pid}/fd`)];
  } catch {
    return programs;
  }
  for (const fd of fds) {
    try {
      if (Deno.readLinkSync(`/proc/${pid}/fd/${fd.name}`) !== "anon_inode:bpf-prog") continue;
      const program = parseProgramFdinfo(Deno.readTextFileSync(`/proc/${pid}/fdinfo/${fd.name}`));
      if (program !== null) programs.push(program);
    } catch {
      // closed between the listing and the read
    }
  }
  return programs;
}

/**
 * Follows the BPF programs of a process tree while it runs: the latest counters of every program it
 * held (programs that were closed keep their last values), their names, and when a sampling program
 * first ran.
 */
export class ProgramWatcher {
  readonly #root: number;
  readonly #latest = new Map<number, ProgramCounters>();
  readonly #names = new Map<number, string>();
  #firstRunNs: number | null = null;

  /** Watches `root` and its descendants. */
  constructor(root: number) {
    this.#root = root;
  }

  /** Reads the tree's programs once; returns whether a sampling program has run yet. */
  poll(): boolean {
    for (const pid of processTree(this.#root)) {
      for (const program of programsOf(pid)) {
        this.#latest.set(program.id, program);
        if (this.#firstRunNs === null && program.type === PROG_TYPE_PERF_EVENT && program.runCount > 0) {
          this.#firstRunNs = monotonicNs();
        }
      }
    }
    return this.#firstRunNs !== null;
  }

  /**
   * Asks the kernel for the names of programs not named yet (programs must still be loaded). In process:
   * starting a tool such as bpftool while a profiler runs would hand the profiler new processes to handle,
   * more of them for a tool with more programs.
   */
  nameNewPrograms(): void {
    for (const id of this.#latest.keys()) {
      if (!this.#names.has(id)) this.#names.set(id, programInfoById(id)?.name ?? "");
    }
  }

  /** CLOCK_MONOTONIC ns of the first poll that saw a sampling program with runs, or null. */
  get firstRunNs(): number | null {
    return this.#firstRunNs;
  }

  /** Every program seen, with its latest counters and its name ("" when unknown). */
  programs(): NamedProgram[] {
    return [...this.#latest.values()].map((program) => ({
      ...program,
      name: this.#names.get(program.id) ?? "",
    }));
  }
}

/**
 * BPF ns per sample: the run time of all sampling (perf_event) programs divided by the runs of the entry
 * program, the one the perf event starts (named `entryName` when given, else the one with the most
 * runs). A tail-called program runs inside its caller's accounting, so whether the kernel charges it to
 * the caller or to itself, the sum covers the whole chain once. Null when nothing ran.
 */
export function perSampleNs(programs: NamedProgram[], entryName?: string): number | null {
  const sampling = programs.filter((program) => program.type === PROG_TYPE_PERF_EVENT);
  if (sampling.length === 0) return null;
  const byName = entryName === undefined ? undefined : sampling.find((program) => program.name === entryName);
  const entry = byName ??
    sampling.reduce((best, program) => program.runCount > best.runCount ? program : best);
  if (entry.runCount === 0) return null;
  return sampling.reduce((sum, program) => sum + program.runTimeNs, 0) / entry.runCount;
}

const STATS_SYSCTL = "/proc/sys/kernel/bpf_stats_enabled";

/**
 * Turns on kernel.bpf_stats_enabled and returns a function that puts the old value back (idempotent).
 * Throws when the setting cannot be written (not root, or a kernel without it).
 */
export function enableBpfStats(): () => void {
  const old = Deno.readTextFileSync(STATS_SYSCTL).trim();
  Deno.writeTextFileSync(STATS_SYSCTL, "1\n");
  let restored = false;
  return () => {
    if (restored) return;
    restored = true;
    Deno.writeTextFileSync(STATS_SYSCTL, `${old}\n`);
  };
}

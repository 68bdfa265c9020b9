/**
 * The one owner of process state: each sampled process's executable mappings, their entries in the BPF
 * pid/page trie, and the runtime instances attached to it. Absolute addresses in traces are turned into
 * (file, file offset) from the mappings while the process is alive, and interpreter frames are named by
 * its instances; symbolization of native frames happens later from the files.
 *
 * A process is read on first sight (its first trace or exec event) and re-read when it execs or when a
 * trace holds an address outside every known mapping (a library loaded with dlopen, new JIT code). Each
 * read is installed: the trie gets what changed (mapping_installer.ts), runtimes attach to the files they
 * claimed and are told of the new mappings (runtime_instances.ts). On exit all of it is removed. BPF
 * names processes by PID alone, so each read also notes the process's start time: a PID found held by
 * another process (its exit event was lost) has the old process's state removed before the new one is
 * installed. The files themselves belong to the file registry (file_registry.ts), which opens each once.
 *
 * With the kernel's records ({@linkcode ProcessManagerOptions.kernelRecords}: lib/perf/mapping_events.ts,
 * handed in through the `on*Record` methods in the order the kernel made them), a process's mappings come
 * from its exec, fork and mmap records instead, whether or not it still runs when they are handled;
 * `/proc/PID/maps` is read only for a process met without records since its start (it predates the
 * session: "seeded"), and again for each process met after the records were found incomplete
 * ({@linkcode ProcessManager.recordsLost}). Records older than a process's last read are already in it and
 * are skipped. The trie gets a process's changes at {@linkcode ProcessManager.installChanged}, once it has
 * been installed (BPF sampled it or saw it exec); exits stay the caller's to apply, after the samples
 * taken before them.
 *
 * @example
 * ```ts ignore
 * import { ProcessManager } from "./process_manager.ts";
 * using files = new FileRegistry();
 * using processes = new ProcessManager({ files });
 * const frame = processes.resolve(asPid(1234), 0x55d0c0a01234 as Address);
 * ```
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import type { InterpreterFrame, Metric, SymbolizedFrame } from "../interpreter/interpreter.ts";
import {
  type AttachedInstance,
  RuntimeInstances,
  type RuntimeInstanceStats,
} from "../interpreter/runtime_instances.ts";
import type { ExecutableMapping } from "../perf/perf_records.ts";
import { monotonicNs } from "../sys/monotonic_clock.ts";
import type { Address, Pid } from "../types.ts";
import type { FileRegistry } from "./file_registry.ts";
import type { ResolvedAddress, ResolvedMapping } from "./mapped_file.ts";
import { type InstalledMapping, MappingInstaller, type TrieStats } from "./mapping_installer.ts";
import { findMapping, type ProcMapping, readProcMaps } from "./proc_maps.ts";
import type { ProcessBpf } from "./process_bpf.ts";
import type { StartTicks } from "./process_key.ts";
import type { JitNames } from "../symbolize/jit_names.ts";
import type { PerfMaps, PerfMapsStats } from "../symbolize/perf_maps.ts";

const logger = getLogger(["omniprof", "process"]);

/** Counters reported with the session's metrics (`--stats`). */
export interface ProcessManagerStats {
  /** Reads of /proc/PID/maps. */
  syncs: number;
  /** Reads that failed (the process had exited). */
  syncFailures: number;
  /** Re-reads for addresses outside the known mappings. */
  resyncs: number;
  /** Addresses in no executable mapping. */
  unresolved: number;
  /** PIDs found held by another process than the one read before (its exit event was lost). */
  reusedPids: number;
  /** With kernel records: reads of processes met without records since their start (older than the session). */
  seeded: number;
  /** With kernel records: reads of processes met after records were lost. */
  rereadsAfterLoss: number;
  /**
   * With kernel records: addresses of samples taken before their process's last exec and resolved after
   * it, or taken in the exec call itself (its user registers are the old program's until the new one
   * starts), resolved against the mappings before it.
   */
  resolvedBeforeExec: number;
  /**
   * With kernel records: addresses of samples taken before the last two execs of their process, left
   * unresolved (the program they ran in is forgotten).
   */
  resolvedAcrossExec: number;
}

/** Counters of the runtimes' side. */
export interface ProcessRuntimeStats extends RuntimeInstanceStats {
  /** Processes with at least one attached instance now. */
  processes: number;
}

/** Options, mainly for tests. */
export interface ProcessManagerOptions {
  /** The session's files, which the processes' mappings reference. */
  files: FileRegistry;
  /** Where process state goes in BPF; without it only the host side is kept (tools, tests). */
  bpf?: ProcessBpf | null;
  /** Where procfs is mounted. */
  procRoot?: string;
  /** Minimum time between two re-reads of one process caused by unknown addresses. */
  resyncIntervalMs?: number;
  /**
   * The perf maps and jitdumps that name its processes' JIT code; the manager reads each to the end when
   * its process exits and closes them with itself. Without them, JIT frames stay addresses.
   */
  perfMaps?: PerfMaps | null;
  /**
   * Mappings come from the kernel's records (the `on*Record` methods); `/proc` only seeds processes
   * without records. Default false: every process is read from `/proc`.
   */
  kernelRecords?: boolean;
  /**
   * Told once per file of a process that maps a file whose runtime needs flags the process was started
   * without (runtime_instances.ts); default: logged at info level.
   */
  advise?: (advice: string) => void;
}

interface ProcessState {
  /** Start time of the process read, or null when not read yet (a forked child) or unreadable. */
  startTicks: StartTicks | null;
  mappings: ResolvedMapping[];
  /** performance.now() of the last read of /proc/PID/maps. */
  syncedAt: number;
  /** The maps file could not be read (the process is gone). */
  gone: boolean;
  /** The mappings are the parent's, copied at fork, not read from this process yet. */
  inherited: boolean;
  /** Its mappings as the trie holds them (with their files' references); null while not installed. */
  installed: InstalledMapping[] | null;
  /** The runtime instances attached to it. */
  instances: AttachedInstance[];
  /** Re-reads left that need not wait for the re-read interval (see QUICK_RESYNCS_AFTER_EXEC). */
  quickResyncs: number;
  /**
   * CLOCK_MONOTONIC ns at the start of the last successful read of /proc, or -1: the records stamped before
   * it are in what was read.
   */
  readNs: number;
  /** CLOCK_MONOTONIC ns of its last exec as the kernel recorded it, or -1. */
  execNs: number;
  /**
   * Its mappings before that exec, for the samples taken before it and resolved after, and the time of
   * the exec before (samples older than that have no image left to resolve against).
   */
  priorMappings: ResolvedMapping[];
  priorExecNs: number;
  /**
   * When the last exec call had surely returned, or -1 before: the time of the first mapping recorded
   * after the vdso's (the kernel maps the vdso last in the exec call; the next mapping is the new program's
   * own), or of a sample in the new program after the vdso was mapped (a static program maps nothing).
   * Until then the user registers of a sample may be the old program's.
   */
  execEndNs: number;
  /** When the vdso of the last exec was mapped, or -1 (see execEndNs). */
  vdsoNs: number;
  /** CLOCK_MONOTONIC ns when the state was made: records stamped before it may be of an earlier process. */
  createdNs: number;
  /**
   * With kernel records: its mappings are not all known (it was forked by, or is, a process older than
   * the session, and has not exec'd since): read it from /proc when it is met.
   */
  pending: boolean;
  /** The count of record losses when its state was last known complete (see recordsLost). */
  epoch: number;
}

/**
 * Re-reads a process may have at once after its exec, whatever the re-read interval. The exec event is
 * read before the dynamic loader maps the libraries (an interpreter's among them), so the first samples
 * in them find no mapping; waiting out the interval loses a quarter of a second of a process's start.
 */
const QUICK_RESYNCS_AFTER_EXEC = 4;

/** Tracks processes: their mappings, trie entries and runtime instances. */
export class ProcessManager implements Disposable {
  readonly #files: FileRegistry;
  readonly #installer: MappingInstaller;
  readonly #instances: RuntimeInstances | null;
  readonly #perfMaps: PerfMaps | null;
  readonly #procRoot: string;
  readonly #resyncIntervalMs: number;
  readonly #kernelRecords: boolean;
  #processes = new Map<Pid, ProcessState>();
  /** Processes whose mappings records changed since the last installChanged(). */
  #changed = new Set<Pid>();
  /** How many times records were found lost: a state of an older epoch may miss some. */
  #lossEpoch = 0;
  /** Counters reported with the session's metrics. */
  readonly stats: ProcessManagerStats = {
    syncs: 0,
    syncFailures: 0,
    resyncs: 0,
    unresolved: 0,
    reusedPids: 0,
    seeded: 0,
    rereadsAfterLoss: 0,
    resolvedBeforeExec: 0,
    resolvedAcrossExec: 0,
  };

  constructor(options: ProcessManagerOptions) {
    this.#files = options.files;
    this.#procRoot = options.procRoot ?? "/proc";
    this.#resyncIntervalMs = options.resyncIntervalMs ?? 250;
    this.#perfMaps = options.perfMaps ?? null;
    this.#kernelRecords = options.kernelRecords ?? false;
    const bpf = options.bpf ?? null;
    this.#installer = new MappingInstaller(this.#files, bpf);
    this.#instances = bpf === null
      ? null
      : new RuntimeInstances(this.#files, bpf.ebpf, { procRoot: this.#procRoot, advise: options.advise });
  }

  /** Whether mappings come from the kernel's records (see the module). */
  get kernelRecords(): boolean {
    return this.#kernelRecords;
  }

  /** Processes currently tracked. */
  get processCount(): number {
    return this.#processes.size;
  }

  /** The trie's counters. */
  get trieStats(): TrieStats {
    return this.#installer.stats;
  }

  /** The counters of perf maps and jitdumps, or null without them. */
  get perfMapStats(): PerfMapsStats | null {
    return this.#perfMaps?.stats ?? null;
  }

  /**
   * The names of `pid`'s JIT code, from its perf map and jitdump (looked for now, while it runs), or null
   * without perf maps.
   */
  jitNamesOf(pid: Pid): JitNames | null {
    return this.#perfMaps?.of(pid) ?? null;
  }

  /** The runtime instances' counters. */
  get runtimeStats(): ProcessRuntimeStats {
    let processes = 0;
    for (const state of this.#processes.values()) if (state.instances.length > 0) processes++;
    return { attachFailures: 0, symbolizeFailures: 0, ...this.#instances?.stats, processes };
  }

  /** The executable mappings of `pid` as last read (none when it is not tracked or has exited). */
  mappingsOf(pid: Pid): readonly ResolvedMapping[] {
    return this.#processes.get(pid)?.mappings ?? [];
  }

  /**
   * BPF saw the process exec: its mappings are new. Read them now, while it runs; with kernel records,
   * install what they said (or, when they have not come yet, as soon as they do).
   */
  onExec(pid: Pid): void {
    if (!this.#kernelRecords) {
      this.#sync(pid).quickResyncs = QUICK_RESYNCS_AFTER_EXEC;
      return;
    }
    let state = this.#processes.get(pid);
    if (state === undefined) {
      // Its records come with the next drain: an empty installed list asks for them to be installed then.
      state = this.#newState({ pending: true });
      this.#processes.set(pid, state);
    }
    if (state.pending || this.#stale(state)) state.installed ??= [];
    else this.#install(pid, state);
  }

  /** Kernel records: process `pid` ran exec at `timeNs`; its new mappings follow. */
  onExecRecord(pid: Pid, timeNs: number): void {
    let state = this.#processes.get(pid);
    if (state !== undefined && timeNs <= state.readNs) return;
    if (state === undefined) {
      state = this.#newState({});
      this.#processes.set(pid, state);
    }
    state.priorMappings = state.mappings;
    state.priorExecNs = state.execNs;
    state.mappings = [];
    state.inherited = false;
    state.pending = false;
    state.gone = false;
    state.startTicks = null;
    state.execNs = timeNs;
    state.execEndNs = -1;
    state.vdsoNs = -1;
    state.epoch = this.#lossEpoch;
    this.#changed.add(pid);
  }

  /**
   * Kernel records: process `child` was forked from `parent` at `timeNs` and has its mappings. As with
   * {@linkcode onFork}, it is installed only when BPF meets it. A parent without records or a read is not
   * read for it: most children exec at once.
   */
  onForkRecord(child: Pid, parent: Pid, timeNs: number): void {
    const existing = this.#processes.get(child);
    // Read after the fork (BPF met it before its records came): what was read is newer.
    if (existing !== undefined && !existing.gone && timeNs <= existing.readNs) return;
    const from = this.#processes.get(parent);
    const mappings = from?.mappings ?? [];
    const pending = from === undefined || from.pending || from.gone;
    if (existing !== undefined && timeNs <= existing.createdNs) {
      // Made for this very process when BPF met it before its records came (and perhaps read in vain).
      Object.assign(existing, { mappings, pending, inherited: true, gone: false, epoch: this.#lossEpoch });
      this.#changed.add(child);
      return;
    }
    // A process that held the PID before and whose exit was not recorded.
    if (existing !== undefined) this.#forgetReused(child);
    this.#processes.set(child, this.#newState({ mappings, inherited: true, pending }));
  }

  /** Kernel records: process `event.pid` mapped something executable. */
  onMappingRecord(event: ExecutableMapping): void {
    const pid = event.pid;
    let state = this.#processes.get(pid);
    if (state !== undefined && event.timeNs <= state.readNs) return;
    if (state === undefined) {
      // Older than the session (a library it loads now): the rest of it is read when it is met.
      state = this.#newState({ pending: true });
      this.#processes.set(pid, state);
    }
    const mapping: ProcMapping = {
      start: event.start,
      end: event.end,
      fileOffset: event.fileOffset,
      device: event.file === null
        ? "00:00"
        : `${event.file.major.toString(16)}:${event.file.minor.toString(16)}`,
      inode: event.file?.inode ?? 0,
      // As /proc names it: "" for anonymous memory, the kernel's names of its special mappings kept.
      path: event.anonymous ? (event.path.startsWith("[") ? event.path : "") : event.path,
      deleted: event.deleted,
    };
    using root = this.#files.readRoot(pid);
    const resolved = { ...mapping, file: this.#files.fileOf(root, mapping) };
    // The new mapping replaces whatever it overlaps (a MAP_FIXED mapping over an older one).
    const next: ResolvedMapping[] = [];
    for (const old of state.mappings) {
      if (old.end <= mapping.start || old.start >= mapping.end) {
        next.push(old);
        continue;
      }
      if (old.start < mapping.start) next.push({ ...old, end: mapping.start });
      if (old.end > mapping.end) {
        next.push({ ...old, start: mapping.end, fileOffset: old.fileOffset + (mapping.end - old.start) });
      }
    }
    next.push(resolved);
    next.sort((a, b) => a.start - b.start);
    if (state.execEndNs < 0) {
      if (state.vdsoNs >= 0) state.execEndNs = event.timeNs;
      else if (mapping.path === "[vdso]") state.vdsoNs = event.timeNs;
    }
    // A new array: a forked child may share the old one.
    state.mappings = next;
    state.inherited = false;
    this.#changed.add(pid);
  }

  /**
   * Brings the trie to the records handled since the last call, for the processes installed already
   * (others are installed when BPF meets them); not for those in `exiting`, whose exits are pending.
   */
  installChanged(exiting: ReadonlySet<Pid>): void {
    for (const pid of this.#changed) {
      const state = this.#processes.get(pid);
      if (state !== undefined && state.installed !== null && !exiting.has(pid)) this.#install(pid, state);
    }
    this.#changed.clear();
  }

  /**
   * Kernel records were dropped: any process may miss some. Each is read from /proc once when next met.
   */
  recordsLost(): void {
    this.#lossEpoch++;
  }

  /** CLOCK_MONOTONIC ns of the process's last recorded exec, or -1. */
  execNsOf(pid: Pid): number {
    return this.#processes.get(pid)?.execNs ?? -1;
  }

  /**
   * A process forked: the child starts with the parent's mappings. They are installed only when the
   * child's code is first sampled (onUnknown): most children exec at once or exit, and installing a copy
   * of the parent's mappings that the exec or exit then removes cost two rounds of writes to BPF maps.
   * A parent not read yet is read now, once, rather than each of its children (a shell loop forks many).
   */
  onFork(parent: Pid, child: Pid): void {
    if (this.#kernelRecords) return;
    // A new process cannot have a PID that a live one holds: the last holder exited unseen.
    if (this.#processes.has(child)) this.#forgetReused(child);
    const state = this.#processes.get(parent) ?? this.#sync(parent);
    if (state.gone) {
      this.#sync(child);
      return;
    }
    this.#processes.set(
      child,
      this.#newState({ mappings: state.mappings, syncedAt: state.syncedAt, inherited: true }),
    );
  }

  /** The process exited: nothing of it is needed any more (its traces are already resolved). */
  onExit(pid: Pid): void {
    this.#perfMaps?.onExit(pid);
    const state = this.#processes.get(pid);
    if (state === undefined) return;
    this.#processes.delete(pid);
    this.#changed.delete(pid);
    this.#instances?.detach(pid, state.instances);
    this.#installer.remove(pid, state.installed ?? []);
    this.#installer.forget(pid);
  }

  /** The unwinder met a process it has no mappings for: read it unless that just happened. */
  onUnknown(pid: Pid): void {
    const state = this.#processes.get(pid);
    if (this.#kernelRecords) {
      if (state === undefined || this.#needsRead(state)) this.#sync(pid);
      else this.#install(pid, state);
      return;
    }
    if (state && !state.gone) {
      // Known here but not in BPF (a forked child, or a process BPF could not mark): install it.
      this.#install(pid, state);
      return;
    }
    if (!state) this.#sync(pid);
  }

  /**
   * The unwinder met code outside the process's known mappings, or a runtime's record was not usable yet:
   * re-read the process (rate-limited), or else have its instances republish their records.
   */
  onStale(pid: Pid): void {
    const state = this.#processes.get(pid);
    if (this.#kernelRecords) {
      // The records say what it maps: only a process without them is read.
      if (state === undefined || this.#needsRead(state)) this.#sync(pid);
      else this.#instances?.refresh(pid, state.instances, state.mappings);
      return;
    }
    if (!state || (!state.gone && this.#mayResync(state))) {
      this.stats.resyncs++;
      this.#sync(pid);
    } else {
      this.#instances?.refresh(pid, state.instances, state.mappings);
    }
  }

  /**
   * Resolves an address of a process to a mapping and file offset; reads or re-reads the process's
   * mappings when needed. Null when the address is in no executable mapping.
   */
  resolve(pid: Pid, address: Address, takenAtNs = -1): ResolvedAddress | null {
    return this.#resolve(pid, address, takenAtNs, true);
  }

  /**
   * Resolves an address with the mappings as last read, never reading the process again (null when
   * none holds it): for the callers found on a stack unwound on the host, where a garbage address must not
   * spend the re-reads that the process's new code needs. A sample's time picks the program it was taken
   * in, as for {@linkcode resolve}.
   */
  resolveAsRead(pid: Pid, address: Address, takenAtNs = -1): ResolvedAddress | null {
    return this.#resolve(pid, address, takenAtNs, false);
  }

  #resolve(pid: Pid, address: Address, takenAtNs: number, mayRead: boolean): ResolvedAddress | null {
    let state = this.#processes.get(pid);
    if (mayRead && (state === undefined || (this.#kernelRecords && this.#needsRead(state)))) {
      state = this.#sync(pid);
    }
    if (state === undefined) return null;
    if (takenAtNs >= 0 && takenAtNs < state.execNs) {
      // Taken before the exec the records already told of: in the program before it.
      if (takenAtNs < state.priorExecNs) {
        this.stats.resolvedAcrossExec++;
        return null;
      }
      this.stats.resolvedBeforeExec++;
      const before = findMapping(state.priorMappings, address);
      if (before < 0) {
        this.stats.unresolved++;
        return null;
      }
      const mapping = state.priorMappings[before]!;
      return { mapping, fileOffset: address - mapping.start + mapping.fileOffset };
    }
    let index = findMapping(state.mappings, address);
    if (index >= 0 && state.execEndNs < 0 && state.vdsoNs >= 0 && takenAtNs > state.vdsoNs) {
      // The new program ran: its exec call had returned.
      state.execEndNs = takenAtNs;
    }
    if (
      index < 0 && state.execNs >= 0 && takenAtNs >= state.execNs &&
      (state.execEndNs < 0 || takenAtNs < state.execEndNs)
    ) {
      // The records tell of every mapping before code runs in it: an address in none of them, in a sample
      // taken in the exec call, is where the old program called exec.
      const before = findMapping(state.priorMappings, address);
      if (before >= 0) {
        this.stats.resolvedBeforeExec++;
        const mapping = state.priorMappings[before]!;
        return { mapping, fileOffset: address - mapping.start + mapping.fileOffset };
      }
    }
    // A forked child that has exec'd runs code its parent never mapped: read it at once.
    if (
      mayRead && index < 0 && !this.#kernelRecords && !state.gone &&
      (state.inherited || this.#mayResync(state))
    ) {
      this.stats.resyncs++;
      state = this.#sync(pid);
      index = findMapping(state.mappings, address);
    }
    if (index < 0) {
      this.stats.unresolved++;
      return null;
    }
    const mapping = state.mappings[index]!;
    return { mapping, fileOffset: address - mapping.start + mapping.fileOffset };
  }

  /**
   * Names an interpreter frame of `pid` through its runtime instances, or returns null when none of them
   * knows its kind (the process was not attached, or has exited).
   */
  symbolize(pid: Pid, frame: InterpreterFrame): readonly SymbolizedFrame[] | null {
    return this.#instances?.symbolize(pid, this.#processes.get(pid)?.instances ?? [], frame) ?? null;
  }

  /** The runtime instances' counters since the last call, summed by id. */
  runtimeMetrics(): Metric[] {
    const lists = [...this.#processes.values()].map((state) => state.instances);
    return this.#instances?.metrics(lists) ?? [];
  }

  /**
   * Reads `pid` now and has every file it maps loaded whole: for processes the user named, whose first
   * samples should unwind completely.
   */
  preloadProcess(pid: Pid): void {
    const state = this.#sync(pid);
    for (const mapping of state.mappings) {
      if (mapping.file.kind !== "anonymous") this.#files.preload(mapping.file);
    }
  }

  /** Detaches every runtime instance. Safe to call twice. */
  close(): void {
    for (const [pid, state] of this.#processes) {
      this.#instances?.detach(pid, state.instances);
      state.instances = [];
    }
    this.#perfMaps?.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  /** Whether the process may be read again now for an unknown address; takes a quick re-read if so. */
  #mayResync(state: ProcessState): boolean {
    if (performance.now() - state.syncedAt >= this.#resyncIntervalMs) return true;
    if (state.quickResyncs === 0) return false;
    state.quickResyncs--;
    return true;
  }

  /** With kernel records: whether the process must be read (its records are incomplete) and can be. */
  #needsRead(state: ProcessState): boolean {
    return !state.gone && (state.pending || this.#stale(state));
  }

  /** Whether records were lost since the process's state was last known complete. */
  #stale(state: ProcessState): boolean {
    return state.epoch < this.#lossEpoch;
  }

  #newState(fields: Partial<ProcessState>): ProcessState {
    return {
      startTicks: null,
      mappings: [],
      syncedAt: performance.now(),
      gone: false,
      inherited: false,
      installed: null,
      instances: [],
      quickResyncs: 0,
      readNs: -1,
      execNs: -1,
      priorMappings: [],
      priorExecNs: -1,
      execEndNs: -1,
      vdsoNs: -1,
      createdNs: monotonicNs(),
      pending: false,
      epoch: this.#lossEpoch,
      ...fields,
    };
  }

  #sync(pid: Pid): ProcessState {
    this.stats.syncs++;
    if (this.#kernelRecords) {
      const known = this.#processes.get(pid);
      if (known !== undefined && !known.pending && this.#stale(known)) this.stats.rereadsAfterLoss++;
      else this.stats.seeded++;
    }
    const readNs = monotonicNs();
    const { key, mappings: read } = readProcMaps(pid, this.#procRoot);
    const gone = read === null;
    if (gone) this.stats.syncFailures++;
    let previous = this.#processes.get(pid);
    if (
      previous !== undefined && previous.startTicks !== null && key !== null &&
      previous.startTicks !== key.startTicks
    ) {
      this.#forgetReused(pid);
      previous = undefined;
    }
    if (gone && previous) {
      // Keep what we knew: the process is exiting, its old mappings are still right.
      previous.gone = true;
      previous.pending = false;
      return previous;
    }
    let mappings: ResolvedMapping[] = [];
    if (read !== null) {
      using root = this.#files.readRoot(pid);
      mappings = read.map((mapping) => ({ ...mapping, file: this.#files.fileOf(root, mapping) }));
    }
    const state = this.#newState({
      startTicks: key?.startTicks ?? null,
      mappings,
      gone,
      installed: previous?.installed ?? null,
      instances: previous?.instances ?? [],
      quickResyncs: previous?.quickResyncs ?? 0,
      readNs: gone ? -1 : readNs,
      execNs: previous?.execNs ?? -1,
      priorMappings: previous?.priorMappings ?? [],
      priorExecNs: previous?.priorExecNs ?? -1,
      execEndNs: previous?.execEndNs ?? -1,
      vdsoNs: previous?.vdsoNs ?? -1,
    });
    this.#processes.set(pid, state);
    if (!gone) this.#install(pid, state);
    return state;
  }

  /**
   * Brings BPF to the process's mappings: the trie first (a runtime's file gets its program there), then
   * the runtimes, which attach to what they claimed and hear of the rest.
   */
  #install(pid: Pid, state: ProcessState): void {
    state.installed = this.#installer.update(pid, state.installed ?? [], state.mappings);
    if (this.#instances) state.instances = this.#instances.update(pid, state.instances, state.mappings);
  }

  /** The process that held `pid` is gone, though no exit was seen (events lost): drop what it left. */
  #forgetReused(pid: Pid): void {
    this.stats.reusedPids++;
    logger.debug("PID {pid} now belongs to another process: forgetting the previous one", { pid });
    this.onExit(pid);
  }
}

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
import type { Address, Pid } from "../types.ts";
import type { FileRegistry } from "./file_registry.ts";
import type { ResolvedAddress, ResolvedMapping } from "./mapped_file.ts";
import { type InstalledMapping, MappingInstaller, type TrieStats } from "./mapping_installer.ts";
import { findMapping, readProcMaps } from "./proc_maps.ts";
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
  #processes = new Map<Pid, ProcessState>();
  /** Counters reported with the session's metrics. */
  readonly stats: ProcessManagerStats = {
    syncs: 0,
    syncFailures: 0,
    resyncs: 0,
    unresolved: 0,
    reusedPids: 0,
  };

  constructor(options: ProcessManagerOptions) {
    this.#files = options.files;
    this.#procRoot = options.procRoot ?? "/proc";
    this.#resyncIntervalMs = options.resyncIntervalMs ?? 250;
    this.#perfMaps = options.perfMaps ?? null;
    const bpf = options.bpf ?? null;
    this.#installer = new MappingInstaller(this.#files, bpf);
    this.#instances = bpf === null
      ? null
      : new RuntimeInstances(this.#files, bpf.ebpf, { procRoot: this.#procRoot });
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

  /** The process exec'd: its mappings are new. Read them now, while it runs. */
  onExec(pid: Pid): void {
    this.#sync(pid).quickResyncs = QUICK_RESYNCS_AFTER_EXEC;
  }

  /**
   * A process forked: the child starts with the parent's mappings. They are installed only when the
   * child's code is first sampled (onUnknown): most children exec at once or exit, and installing a copy
   * of the parent's mappings that the exec or exit then removes cost two rounds of writes to BPF maps.
   * A parent not read yet is read now, once, rather than each of its children (a shell loop forks many).
   */
  onFork(parent: Pid, child: Pid): void {
    // A new process cannot have a PID that a live one holds: the last holder exited unseen.
    if (this.#processes.has(child)) this.#forgetReused(child);
    const state = this.#processes.get(parent) ?? this.#sync(parent);
    if (state.gone) {
      this.#sync(child);
      return;
    }
    this.#processes.set(child, {
      startTicks: null,
      mappings: state.mappings,
      syncedAt: state.syncedAt,
      gone: false,
      inherited: true,
      installed: null,
      instances: [],
      quickResyncs: 0,
    });
  }

  /** The process exited: nothing of it is needed any more (its traces are already resolved). */
  onExit(pid: Pid): void {
    this.#perfMaps?.onExit(pid);
    const state = this.#processes.get(pid);
    if (state === undefined) return;
    this.#processes.delete(pid);
    this.#instances?.detach(pid, state.instances);
    this.#installer.remove(pid, state.installed ?? []);
    this.#installer.forget(pid);
  }

  /** The unwinder met a process it has no mappings for: read it unless that just happened. */
  onUnknown(pid: Pid): void {
    const state = this.#processes.get(pid);
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
  resolve(pid: Pid, address: Address): ResolvedAddress | null {
    let state = this.#processes.get(pid) ?? this.#sync(pid);
    let index = findMapping(state.mappings, address);
    // A forked child that has exec'd runs code its parent never mapped: read it at once.
    if (index < 0 && !state.gone && (state.inherited || this.#mayResync(state))) {
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
   * Resolves an address with the mappings as last read, never reading the process again (null when
   * none holds it): for the callers found on a stack unwound on the host, where a garbage address must not
   * spend the re-reads that the process's new code needs.
   */
  resolveAsRead(pid: Pid, address: Address): ResolvedAddress | null {
    const state = this.#processes.get(pid);
    const index = state === undefined ? -1 : findMapping(state.mappings, address);
    if (index < 0) return null;
    const mapping = state!.mappings[index]!;
    return { mapping, fileOffset: address - mapping.start + mapping.fileOffset };
  }

  /**
   * Names an interpreter frame of `pid` through its runtime instances, or returns null when none of them
   * knows its kind (the process was not attached, or has exited).
   */
  symbolize(pid: Pid, frame: InterpreterFrame): SymbolizedFrame | null {
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

  #sync(pid: Pid): ProcessState {
    this.stats.syncs++;
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
      return previous;
    }
    let mappings: ResolvedMapping[] = [];
    if (read !== null) {
      using root = this.#files.readRoot(pid);
      mappings = read.map((mapping) => ({ ...mapping, file: this.#files.fileOf(root, mapping) }));
    }
    const state: ProcessState = {
      startTicks: key?.startTicks ?? null,
      mappings,
      syncedAt: performance.now(),
      gone,
      inherited: false,
      installed: previous?.installed ?? null,
      instances: previous?.instances ?? [],
      quickResyncs: previous?.quickResyncs ?? 0,
    };
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

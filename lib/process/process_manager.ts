/**
 * Knows each sampled process's executable mappings, so that absolute addresses in traces can be turned
 * into (file, file offset) while the process is alive; symbolization happens later from the files.
 *
 * A process is read on first sight (its first trace or exec event) and re-read when it execs or when a
 * trace holds an address outside every known mapping (a library loaded with dlopen, new JIT code). On
 * exit its mappings are dropped. BPF names processes by PID alone, so each read also notes the process's
 * start time: a PID found held by another process (its exit event was lost) has the old process's state
 * dropped, and the listener told of its exit, before the new one is installed. Files are identified once per (device, inode) and kept open, so a
 * binary that is deleted or replaced while the session runs is still symbolized from the right bytes.
 *
 * @example
 * ```ts ignore
 * import { ProcessManager } from "./process_manager.ts";
 * using processes = new ProcessManager();
 * const frame = processes.resolve(asPid(1234), 0x55d0c0a01234 as Address);
 * ```
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import { cString, libc, O_CLOEXEC, O_RDONLY, raiseOpenFileLimit } from "../sys/libc.ts";
import type { Address, FileId, Pid } from "../types.ts";
import { fileIdOf } from "./file_id.ts";
import { findMapping, parseProcMaps, type ProcMapping } from "./proc_maps.ts";
import { type ProcessKey, readProcessKey, sameProcess, type StartTicks } from "./process_key.ts";

const logger = getLogger(["omniprof", "process"]);

/** A file (or pseudo file) that code runs from. One object per distinct file in the session. */
export interface MappedFile {
  /** "device:inode" for files; the pseudo name (`[vdso]`) or `[anonymous]` otherwise. */
  readonly key: string;
  readonly kind: "file" | "vdso" | "anonymous";
  /** The path as the first process that mapped it saw it. */
  readonly path: string;
  /** Content identity, or null when the file could not be read. */
  readonly fileId: FileId | null;
  /** A path that opens this very file for the rest of the session, or null when it cannot be opened. */
  readonly openPath: string | null;
}

/** An executable mapping of a process with the file it maps. */
export interface ResolvedMapping extends ProcMapping {
  readonly file: MappedFile;
}

/** Where an address lands: a file and the offset in it. */
export interface ResolvedAddress {
  readonly mapping: ResolvedMapping;
  readonly fileOffset: number;
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
  inherited?: boolean;
}

/** Told when a process's mappings are known or gone (the native unwinder installs them in BPF). */
export interface ProcessListener {
  onMappings(pid: Pid, mappings: readonly ResolvedMapping[]): void;
  onExit(pid: Pid): void;
  /** A file of a program the user named: prepare it before sampling starts. */
  onPreload?(file: MappedFile): void;
}

/** Options, mainly for tests. */
export interface ProcessManagerOptions {
  listener?: ProcessListener;
  /** Where procfs is mounted. */
  procRoot?: string;
  /** Minimum time between two re-reads of one process caused by unknown addresses. */
  resyncIntervalMs?: number;
  /** How many files to keep open at most. */
  maxPinnedFiles?: number;
}

/** Tracks processes and their mapped files. */
export class ProcessManager {
  #procRoot: string;
  #resyncIntervalMs: number;
  #maxPinnedFiles: number;
  #processes = new Map<Pid, ProcessState>();
  #listener: ProcessListener | undefined;
  #files = new Map<string, MappedFile>();
  #pinnedFds: number[] = [];
  /** Counters reported with the session's metrics. */
  readonly stats = { syncs: 0, syncFailures: 0, resyncs: 0, unresolved: 0, reusedPids: 0 };

  constructor(options: ProcessManagerOptions = {}) {
    this.#procRoot = options.procRoot ?? "/proc";
    this.#listener = options.listener;
    this.#resyncIntervalMs = options.resyncIntervalMs ?? 250;
    const limit = raiseOpenFileLimit();
    this.#maxPinnedFiles = options.maxPinnedFiles ?? Math.max(0, Math.min(8192, limit - 256));
  }

  /** Processes currently tracked. */
  get processCount(): number {
    return this.#processes.size;
  }

  /** Every file seen so far. */
  files(): IterableIterator<MappedFile> {
    return this.#files.values();
  }

  /** The process exec'd: its mappings are new. Read them now, while it runs. */
  onExec(pid: Pid): void {
    this.#sync(pid);
  }

  /**
   * A process forked: the child starts with the parent's mappings. They reach the listener only when the
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
    });
  }

  /** The process exited: nothing of it is needed any more (its traces are already resolved). */
  onExit(pid: Pid): void {
    if (this.#processes.delete(pid)) this.#listener?.onExit(pid);
  }

  /** The unwinder met a process it has no mappings for: read it unless that just happened. */
  onUnknown(pid: Pid): void {
    const state = this.#processes.get(pid);
    if (state && !state.gone) {
      // Known here but not (yet) in BPF, e.g. read before the unwinder existed: hand it over.
      this.#listener?.onMappings(pid, state.mappings);
      return;
    }
    if (!state) this.#sync(pid);
  }

  /** The unwinder met code outside the process's known mappings: re-read them (rate-limited). */
  onStale(pid: Pid): void {
    const state = this.#processes.get(pid);
    if (!state || (!state.gone && performance.now() - state.syncedAt >= this.#resyncIntervalMs)) {
      this.stats.resyncs++;
      this.#sync(pid);
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
    if (
      index < 0 && !state.gone &&
      (state.inherited || performance.now() - state.syncedAt >= this.#resyncIntervalMs)
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
   * Reads `pid` now and hands every file it maps to the listener to prepare: for processes the user
   * named, whose first samples should unwind completely.
   */
  preloadProcess(pid: Pid): void {
    const state = this.#sync(pid);
    for (const mapping of state.mappings) {
      if (mapping.file.kind !== "anonymous") this.#listener?.onPreload?.(mapping.file);
    }
  }

  /**
   * Hands the file at `path` to the listener before any process maps it (the command `record` is about
   * to start). Ignored when the file cannot be read.
   */
  preloadPath(path: string): void {
    let stat: Deno.FileInfo;
    try {
      stat = Deno.statSync(path);
    } catch {
      return;
    }
    if (!stat.isFile || stat.dev === null || stat.ino === null) return;
    // The device number as /proc/PID/maps prints it: major:minor in hex.
    const dev = stat.dev;
    const major = Math.floor(dev / 256) & 0xfff | (Math.floor(dev / 2 ** 32) & ~0xfff);
    const minor = (dev & 0xff) | (Math.floor(dev / 4096) & ~0xff);
    const hex = (value: number) => value.toString(16).padStart(2, "0");
    const mapping: ProcMapping = {
      start: 0 as Address,
      end: 0 as Address,
      fileOffset: 0,
      device: `${hex(major)}:${hex(minor)}`,
      inode: stat.ino,
      path: Deno.realPathSync(path),
      deleted: false,
    };
    this.#listener?.onPreload?.(this.#fileOf(Deno.pid as Pid, mapping));
  }

  /** Closes the files kept open. Safe to call twice. */
  close(): void {
    const { fn } = libc();
    for (const fd of this.#pinnedFds) fn.close(fd);
    this.#pinnedFds = [];
  }

  [Symbol.dispose](): void {
    this.close();
  }

  #sync(pid: Pid): ProcessState {
    this.stats.syncs++;
    const { key, text } = this.#readMaps(pid);
    const gone = text === null;
    if (gone) this.stats.syncFailures++;
    let previous = this.#processes.get(pid);
    if (
      previous !== undefined && previous.startTicks !== null && key !== null &&
      previous.startTicks !== key.startTicks
    ) {
      this.#forgetReused(pid);
      previous = undefined;
    }
    const mappings = text === null
      ? []
      : parseProcMaps(text).map((mapping) => ({ ...mapping, file: this.#fileOf(pid, mapping) }));
    // Keep what we knew if a re-read failed: the process is exiting, its old mappings are still right.
    const state: ProcessState = gone && previous
      ? { ...previous, gone: true }
      : { startTicks: key?.startTicks ?? null, mappings, syncedAt: performance.now(), gone };
    this.#processes.set(pid, state);
    if (!gone) this.#listener?.onMappings(pid, state.mappings);
    return state;
  }

  /**
   * The maps of the process holding `pid` and its key (null when procfs has no stat for it), or null
   * text when it has exited. The start time is read before and after: the same both times says whose
   * maps they are (a PID that changed hands in between is read again).
   */
  #readMaps(pid: Pid): { key: ProcessKey | null; text: string | null } {
    for (let attempt = 0;; attempt++) {
      const before = readProcessKey(pid, this.#procRoot);
      let text: string;
      try {
        text = Deno.readTextFileSync(`${this.#procRoot}/${pid}/maps`);
      } catch (error) {
        // ENOENT/ESRCH: the process exited before we looked. Its traces keep their raw addresses.
        if (!(error instanceof Deno.errors.NotFound)) {
          logger.debug("Cannot read mappings of {pid}: {error}", { pid, error: String(error) });
        }
        return { key: before, text: null };
      }
      if (before === null) return { key: null, text };
      const after = readProcessKey(pid, this.#procRoot);
      if (sameProcess(before, after)) return { key: after, text };
      if (attempt > 0) return { key: after, text: null };
    }
  }

  /** The process that held `pid` is gone, though no exit was seen (events lost): drop what it left. */
  #forgetReused(pid: Pid): void {
    this.stats.reusedPids++;
    logger.debug("PID {pid} now belongs to another process: forgetting the previous one", { pid });
    this.onExit(pid);
  }

  #fileOf(pid: Pid, mapping: ProcMapping): MappedFile {
    const isFile = mapping.inode !== 0 && mapping.path.startsWith("/");
    const key = isFile ? `${mapping.device}:${mapping.inode}` : mapping.path || "[anonymous]";
    const known = this.#files.get(key);
    if (known) return known;
    const file = isFile ? this.#openFile(pid, mapping, key) : mapping.path === "[vdso]" ? this.#vdso() : {
      key,
      kind: "anonymous" as const,
      path: mapping.path || "[anonymous]",
      fileId: null,
      openPath: null,
    };
    this.#files.set(key, file);
    return file;
  }

  /**
   * Opens the file behind a mapping. /proc/PID/map_files reaches the exact file even when it was
   * deleted or lives in another mount namespace; /proc/PID/root/PATH and PATH are the fallbacks.
   */
  #openFile(pid: Pid, mapping: ProcMapping, key: string): MappedFile {
    const range = `${mapping.start.toString(16)}-${mapping.end.toString(16)}`;
    const candidates = [
      `${this.#procRoot}/${pid}/map_files/${range}`,
      `${this.#procRoot}/${pid}/root${mapping.path}`,
      mapping.path,
    ];
    for (const candidate of candidates) {
      let fileId: FileId;
      try {
        using file = Deno.openSync(candidate);
        fileId = fileIdOf(file);
      } catch {
        continue;
      }
      return { key, kind: "file", path: mapping.path, fileId, openPath: this.#pin(candidate) ?? candidate };
    }
    logger.debug("Cannot open {path} of process {pid}", { path: mapping.path, pid });
    return { key, kind: "file", path: mapping.path, fileId: null, openPath: null };
  }

  /**
   * The vdso: the kernel maps the same image into every process, so this process's copy, put into an
   * in-memory file, serves for unwinding (its .eh_frame) and symbolization (its .dynsym) of all.
   */
  #vdso(): MappedFile {
    const base = { key: "[vdso]", kind: "vdso" as const, path: "[vdso]", fileId: null, openPath: null };
    try {
      const own = parseProcMaps(Deno.readTextFileSync(`${this.#procRoot}/self/maps`)).find((m) =>
        m.path === "[vdso]"
      );
      if (!own) return base;
      const bytes = new Uint8Array(own.end - own.start);
      using memory = Deno.openSync(`${this.#procRoot}/self/mem`);
      memory.seekSync(own.start, Deno.SeekMode.Start);
      let filled = 0;
      while (filled < bytes.length) {
        const count = memory.readSync(bytes.subarray(filled));
        if (!count) break;
        filled += count;
      }
      const { fn } = libc();
      const fd = fn.memfd_create(cString("vdso"), 0);
      if (fd < 0) return base;
      if (Number(fn.write(fd, bytes, BigInt(filled))) !== filled) {
        fn.close(fd);
        return base;
      }
      this.#pinnedFds.push(fd);
      return { ...base, openPath: `/proc/self/fd/${fd}` };
    } catch (error) {
      logger.debug("Cannot copy the vdso: {error}", { error: String(error) });
      return base;
    }
  }

  /** Keeps a descriptor open and returns a path that reopens it for as long as the session runs. */
  #pin(path: string): string | null {
    if (this.#pinnedFds.length >= this.#maxPinnedFiles) return null;
    const fd = libc().fn.open(cString(path), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return null;
    this.#pinnedFds.push(fd);
    return `/proc/self/fd/${fd}`;
  }
}

/**
 * Knows each sampled process's executable mappings, so that absolute addresses in traces can be turned
 * into (file, file offset) while the process is alive; symbolization happens later from the files.
 *
 * A process is read on first sight (its first trace or exec event) and re-read when it execs or when a
 * trace holds an address outside every known mapping (a library loaded with dlopen, new JIT code). On
 * exit its mappings are dropped. BPF names processes by PID alone, so each read also notes the process's
 * start time: a PID found held by another process (its exit event was lost) has the old process's state
 * dropped, and the listener told of its exit, before the new one is installed. Files are identified once
 * per (device, inode) and kept open, so a binary that is deleted or replaced while the session runs is still symbolized from the right bytes.
 * They are opened only through {@linkcode openMappedFile} (the very file of the mapping, or nothing):
 * a file that cannot be read that way is counted by reason in `stats.filesRefused` and its frames stay
 * unsymbolized. The root of each process that shows a new file is kept too, when it is not the host's,
 * so that a container's debug files are found inside the container even after its processes exited.
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
import { cString, libc, raiseOpenFileLimit } from "../sys/libc.ts";
import {
  type FileRefusal,
  FileRefusedError,
  formatIdentity,
  openPathDescriptor,
  RegularFile,
  sameIdentity,
} from "../sys/regular_file.ts";
import { RootDirectory } from "../sys/root_directory.ts";
import type { Address, FileId, Pid } from "../types.ts";
import { fileIdOf } from "./file_id.ts";
import { mappingIdentity, openMappedFile } from "./mapped_file_opener.ts";
import { findMapping, type ProcMapping, readProcMaps } from "./proc_maps.ts";
import type { StartTicks } from "./process_key.ts";

const logger = getLogger(["omniprof", "process"]);

/** A file (or pseudo file) that code runs from. One object per distinct file in the session. */
export interface MappedFile {
  /** "major:minor inode" (device in hex, as maps prints it) for files; `[vdso]` or `[anonymous]` else. */
  readonly key: string;
  readonly kind: "file" | "vdso" | "anonymous";
  /** The path as the first process that mapped it saw it. */
  readonly path: string;
  /** Content identity, or null when the file could not be read. */
  readonly fileId: FileId | null;
  /** Whether {@linkcode MappedFile.open} reads the file; false for anonymous memory and refused files. */
  readonly readable: boolean;
  /** Why a file could not be read, or null. */
  readonly refusal: FileRefusal | null;
  /** The root of the first process that mapped it, when not the host's: its debug files are there. */
  readonly root: RootDirectory | null;
  /**
   * Opens this very file (a new handle each time, which the caller closes).
   *
   * @throws {FileRefusedError} when it cannot be read.
   */
  open(): RegularFile;
}

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
  /** Distinct mapped files opened. */
  filesOpened: number;
  /** Distinct mapped files not read, by reason: their frames stay unsymbolized. */
  filesRefused: Record<FileRefusal, number>;
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

/** The root of a process while its mappings are read. */
interface ReadRoot {
  readonly pid: Pid;
  /** Opened at the first new file; null when it cannot be. */
  directory: RootDirectory | null | undefined;
  /** The directory kept for the session for this root, or null (the host's root, or over the limit). */
  kept: RootDirectory | null;
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
  /** Files kept open for the session, so that they stay readable whatever happens to their paths. */
  #pinned: RegularFile[] = [];
  /**
   * Roots of processes other than the host's, by mount namespace and root directory, each with an
   * O_PATH descriptor of its mount namespace: that keeps the namespace's mounts in place after its
   * processes exit (a container's debug files are often on a mount of their own).
   */
  #roots = new Map<string, { directory: RootDirectory; namespace: number }>();
  #hostRoot: { namespace: string; directory: RootDirectory } | null | undefined;
  /** Counters reported with the session's metrics. */
  readonly stats: ProcessManagerStats = {
    syncs: 0,
    syncFailures: 0,
    resyncs: 0,
    unresolved: 0,
    reusedPids: 0,
    filesOpened: 0,
    filesRefused: { missing: 0, denied: 0, "not-regular": 0, replaced: 0, failed: 0 },
  };

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

  /** The executable mappings of `pid` as last read (none when it is not tracked or has exited). */
  mappingsOf(pid: Pid): readonly ResolvedMapping[] {
    return this.#processes.get(pid)?.mappings ?? [];
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
    let handle: RegularFile;
    let realPath: string;
    try {
      handle = RegularFile.open(path);
      realPath = Deno.realPathSync(path);
    } catch {
      return;
    }
    const identity = handle.identity;
    const key = formatIdentity(identity);
    let file = this.#files.get(key);
    if (file === undefined) {
      // Its process does not exist yet: reopened, if ever needed, by path and checked to be this file.
      file = this.#adopt(key, realPath, handle, null, () => RegularFile.open(realPath, { expect: identity }));
      this.#files.set(key, file);
    } else {
      handle.close();
    }
    this.#listener?.onPreload?.(file);
  }

  /** Closes the files kept open. Safe to call twice. */
  close(): void {
    for (const file of this.#pinned) file.close();
    this.#pinned = [];
    for (const root of this.#roots.values()) {
      root.directory.close();
      if (root.namespace >= 0) libc().fn.close(root.namespace);
    }
    this.#roots.clear();
    this.#hostRoot?.directory.close();
    this.#hostRoot = undefined;
  }

  [Symbol.dispose](): void {
    this.close();
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
    let mappings: ResolvedMapping[] = [];
    if (read !== null) {
      const root: ReadRoot = { pid, directory: undefined, kept: null };
      try {
        mappings = read.map((mapping) => ({
          ...mapping,
          file: this.#fileOf(pid, mapping, root),
        }));
      } finally {
        if (root.directory && root.directory !== root.kept) root.directory.close();
      }
    }
    // Keep what we knew if a re-read failed: the process is exiting, its old mappings are still right.
    const state: ProcessState = gone && previous
      ? { ...previous, gone: true }
      : { startTicks: key?.startTicks ?? null, mappings, syncedAt: performance.now(), gone };
    this.#processes.set(pid, state);
    if (!gone) this.#listener?.onMappings(pid, state.mappings);
    return state;
  }

  /** The process that held `pid` is gone, though no exit was seen (events lost): drop what it left. */
  #forgetReused(pid: Pid): void {
    this.stats.reusedPids++;
    logger.debug("PID {pid} now belongs to another process: forgetting the previous one", { pid });
    this.onExit(pid);
  }

  #fileOf(pid: Pid, mapping: ProcMapping, root: ReadRoot): MappedFile {
    const identity = mapping.path.startsWith("/") ? mappingIdentity(mapping) : null;
    const key = identity !== null ? formatIdentity(identity) : mapping.path || "[anonymous]";
    const known = this.#files.get(key);
    if (known) return known;
    const file = identity !== null
      ? this.#openFile(pid, mapping, key, root)
      : mapping.path === "[vdso]"
      ? this.#vdso()
      : unreadable(key, "anonymous", mapping.path || "[anonymous]", null);
    this.#files.set(key, file);
    return file;
  }

  /** Opens the file behind a mapping, through the process (see {@linkcode openMappedFile}). */
  #openFile(pid: Pid, mapping: ProcMapping, key: string, root: ReadRoot): MappedFile {
    const procRoot = this.#procRoot;
    const directory = this.#openRoot(root);
    let handle: RegularFile;
    try {
      handle = openMappedFile(
        pid,
        mapping,
        directory === null ? { procRoot } : { procRoot, root: directory },
      );
    } catch (error) {
      if (!(error instanceof FileRefusedError)) throw error;
      this.stats.filesRefused[error.reason]++;
      logger.debug("Not reading {path}: {error}", { path: mapping.path, error: error.message });
      return unreadable(key, "file", mapping.path, error.reason);
    }
    // Over the limit of open files, it is opened again, from the process, each time it is needed.
    return this.#adopt(
      key,
      mapping.path,
      handle,
      root.kept,
      () => openMappedFile(pid, mapping, { procRoot }),
    );
  }

  /** A readable file from its first handle, kept open when the limit allows. */
  #adopt(
    key: string,
    path: string,
    handle: RegularFile,
    root: RootDirectory | null,
    reopen: () => RegularFile,
  ): MappedFile {
    let fileId: FileId;
    try {
      fileId = fileIdOf(handle);
    } catch (error) {
      handle.close();
      this.stats.filesRefused.failed++;
      logger.debug("Not reading {path}: {error}", { path, error: String(error) });
      return unreadable(key, "file", path, "failed");
    }
    this.stats.filesOpened++;
    let pinned: RegularFile | null = null;
    if (this.#pinned.length + 2 * this.#roots.size < this.#maxPinnedFiles) {
      pinned = handle;
      this.#pinned.push(handle);
    } else {
      handle.close();
    }
    return {
      key,
      kind: "file",
      path,
      fileId,
      readable: true,
      refusal: null,
      root,
      open: () => pinned?.duplicate() ?? reopen(),
    };
  }

  /**
   * Opens the root of the process being read, once per read, and decides whether to keep it for the
   * session to look for its files' debug files in: not when it is the host's (the same mount namespace
   * and root directory as omniprof's); else one kept directory per distinct root, within the limit of
   * open files. Null when the root cannot be opened.
   */
  #openRoot(root: ReadRoot): RootDirectory | null {
    if (root.directory !== undefined) return root.directory;
    const processDir = `${this.#procRoot}/${root.pid}`;
    try {
      root.directory = RootDirectory.open(`${processDir}/root`);
    } catch {
      root.directory = null;
      return null;
    }
    const namespace = this.#namespaceOf(processDir);
    const host = this.#host();
    if (
      host !== null && namespace === host.namespace &&
      sameIdentity(root.directory.identity, host.directory.identity)
    ) {
      return root.directory;
    }
    const rootKey = `${namespace} ${formatIdentity(root.directory.identity)}`;
    root.kept = this.#roots.get(rootKey)?.directory ?? null;
    if (root.kept === null && this.#pinned.length + 2 * this.#roots.size + 1 < this.#maxPinnedFiles) {
      root.kept = root.directory;
      let namespaceFd = -1;
      try {
        namespaceFd = openPathDescriptor(`${processDir}/ns/mnt`, undefined);
      } catch {
        // Without it, the root still serves while the process lives.
      }
      this.#roots.set(rootKey, { directory: root.kept, namespace: namespaceFd });
    }
    return root.directory;
  }

  #host(): { namespace: string; directory: RootDirectory } | null {
    if (this.#hostRoot === undefined) {
      try {
        this.#hostRoot = {
          namespace: this.#namespaceOf("/proc/self"),
          directory: RootDirectory.open("/proc/self/root"),
        };
      } catch {
        this.#hostRoot = null;
      }
    }
    return this.#hostRoot;
  }

  /** The mount namespace of a process, "" when unknown. */
  #namespaceOf(processDir: string): string {
    try {
      return Deno.readLinkSync(`${processDir}/ns/mnt`);
    } catch {
      return "";
    }
  }

  /**
   * The vdso: the kernel maps the same image into every process, so this process's copy, put into an
   * in-memory file, serves for unwinding (its .eh_frame) and symbolization (its .dynsym) of all.
   */
  #vdso(): MappedFile {
    const base = unreadable("[vdso]", "vdso", "[vdso]", "failed");
    try {
      const own = readProcMaps(Deno.pid as Pid, this.#procRoot).mappings?.find((m) => m.path === "[vdso]");
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
      const file = RegularFile.adopt(fd, "[vdso]");
      this.#pinned.push(file);
      return { ...base, readable: true, refusal: null, open: () => file.duplicate() };
    } catch (error) {
      logger.debug("Cannot copy the vdso: {error}", { error: String(error) });
      return base;
    }
  }
}

/** A file that cannot be read (or pseudo memory without a file). */
function unreadable(
  key: string,
  kind: MappedFile["kind"],
  path: string,
  refusal: FileRefusal | null,
): MappedFile {
  return {
    key,
    kind,
    path,
    fileId: null,
    readable: false,
    refusal,
    root: null,
    open: () => {
      throw new FileRefusedError(
        path,
        refusal ?? "not-regular",
        refusal === null ? "no file" : `refused (${refusal})`,
      );
    },
  };
}

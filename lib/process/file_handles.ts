/**
 * Keeps the session's mapped files readable whatever happens to their paths: each file is opened once,
 * through the process that maps it ({@linkcode openMappedFile}: the very file of the mapping, or nothing),
 * and its handle kept open while the limit of open files allows (else it is opened again, the same way,
 * when needed). A process that has exited by then (its mappings came from the kernel's records) leaves
 * one way: its file's path on the host, opened only if it is the very file the mapping named (device
 * and inode), never another file of that name (a container's `/usr/bin/x` is not the host's). The root
 * of each process that shows a new file is kept too, when it is not the host's, so
 * that a container's debug files are found inside the container even after its processes exited. The
 * vdso, which no path names, is copied into an in-memory file.
 *
 * The file registry (file_registry.ts) is the only user: it decides which files are new.
 *
 * @example
 * ```ts ignore
 * import { FileHandles } from "./file_handles.ts";
 * using handles = new FileHandles();
 * using root = handles.readRoot(pid);
 * const opened = handles.openMapping(root, mapping);
 * const open = handles.keep(opened); // later: using file = open();
 * ```
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import { cString, libc, raiseOpenFileLimit } from "../sys/libc.ts";
import {
  FileRefusedError,
  formatIdentity,
  openPathDescriptor,
  RegularFile,
  sameIdentity,
} from "../sys/regular_file.ts";
import { RootDirectory } from "../sys/root_directory.ts";
import type { Pid } from "../types.ts";
import { mappingIdentity, openMappedFile } from "./mapped_file_opener.ts";
import { type ProcMapping, readProcMaps } from "./proc_maps.ts";

const logger = getLogger(["omniprof", "process"]);

/** A file just opened: its first handle, how to open it again, and where its debug files are. */
export interface OpenedFile {
  /** The first handle: read it, then {@linkcode FileHandles.keep} it or close it. */
  readonly handle: RegularFile;
  /** Opens the same file again (checked to be it) when its handle is not kept. */
  readonly reopen: () => RegularFile;
  /** The root of the process it was found in, when kept for the session (not the host's). */
  readonly root: RootDirectory | null;
}

/** The root of one process while its mappings' files are opened: opened at the first new file. */
export class ProcessRootRead implements Disposable {
  readonly pid: Pid;
  /** Opened at the first new file; null when it cannot be. */
  directory: RootDirectory | null | undefined;
  /** The directory kept for the session for this root, or null (the host's root, or over the limit). */
  kept: RootDirectory | null = null;

  constructor(pid: Pid) {
    this.pid = pid;
  }

  /** Closes the root unless it is kept for the session. */
  [Symbol.dispose](): void {
    if (this.directory && this.directory !== this.kept) this.directory.close();
  }
}

/** Options, mainly for tests. */
export interface FileHandlesOptions {
  /** Where procfs is mounted. */
  procRoot?: string;
  /** How many files to keep open at most. */
  maxPinnedFiles?: number;
}

/** The open handles and roots of the session's files. */
export class FileHandles implements Disposable {
  readonly #procRoot: string;
  readonly #maxPinnedFiles: number;
  /** Files kept open for the session, so that they stay readable whatever happens to their paths. */
  #pinned: RegularFile[] = [];
  /**
   * Roots of processes other than the host's, by mount namespace and root directory, each with an
   * O_PATH descriptor of its mount namespace: that keeps the namespace's mounts in place after its
   * processes exit (a container's debug files are often on a mount of their own).
   */
  #roots = new Map<string, { directory: RootDirectory; namespace: number }>();
  #hostRoot: { namespace: string; directory: RootDirectory } | null | undefined;

  constructor(options: FileHandlesOptions = {}) {
    this.#procRoot = options.procRoot ?? "/proc";
    const limit = raiseOpenFileLimit();
    this.#maxPinnedFiles = options.maxPinnedFiles ?? Math.max(0, Math.min(8192, limit - 256));
  }

  /** Where procfs is mounted. */
  get procRoot(): string {
    return this.#procRoot;
  }

  /** Begins opening the files of process `pid`; dispose of it when its mappings are done. */
  readRoot(pid: Pid): ProcessRootRead {
    return new ProcessRootRead(pid);
  }

  /**
   * Opens the file of `mapping` of the process of `read`.
   *
   * @throws {FileRefusedError} when it cannot be read that way.
   */
  openMapping(read: ProcessRootRead, mapping: ProcMapping): OpenedFile {
    const procRoot = this.#procRoot;
    const directory = this.#openRoot(read);
    let handle: RegularFile;
    try {
      handle = openMappedFile(
        read.pid,
        mapping,
        directory === null ? { procRoot } : { procRoot, root: directory },
      );
    } catch (error) {
      // No root: the process has exited.
      if (!(error instanceof FileRefusedError) || directory !== null) throw error;
      return this.#openGone(read.pid, mapping);
    }
    // Over the limit of open files, it is opened again, from the process, each time it is needed.
    return { handle, reopen: () => openMappedFile(read.pid, mapping, { procRoot }), root: read.kept };
  }

  /**
   * The file of `mapping` of a process that has exited: its path on the host, if that is the file the
   * mapping named (checked by device and inode, the last part of the path not a link).
   */
  #openGone(pid: Pid, mapping: ProcMapping): OpenedFile {
    const expect = mappingIdentity(mapping);
    if (expect === null || !mapping.path.startsWith("/")) {
      throw new FileRefusedError(mapping.path, "not-regular", "the mapping is not of a file");
    }
    const open = () => RegularFile.open(mapping.path, { expect, noFollow: true });
    try {
      return { handle: open(), reopen: open, root: null };
    } catch (error) {
      if (!(error instanceof FileRefusedError)) throw error;
      throw new FileRefusedError(
        `${mapping.path} of process ${pid}`,
        error.reason,
        `the process has exited, and on the host: ${error.message.replace(/^Cannot open /, "")}`,
      );
    }
  }

  /**
   * Opens the file at `path` before any process maps it (the command `record` is about to start).
   *
   * @throws {FileRefusedError} or a Deno error when it cannot be opened.
   */
  openPath(path: string): OpenedFile & { readonly path: string } {
    const handle = RegularFile.open(path);
    try {
      const realPath = Deno.realPathSync(path);
      const identity = handle.identity;
      // Its process does not exist yet: reopened, if ever needed, by path and checked to be this file.
      return {
        handle,
        reopen: () => RegularFile.open(realPath, { expect: identity }),
        root: null,
        path: realPath,
      };
    } catch (error) {
      handle.close();
      throw error;
    }
  }

  /** Keeps `opened`'s handle open when the limit allows (else closes it); returns how to open the file. */
  keep(opened: OpenedFile): () => RegularFile {
    if (this.#pinned.length + 2 * this.#roots.size < this.#maxPinnedFiles) {
      const pinned = opened.handle;
      this.#pinned.push(pinned);
      return () => pinned.duplicate();
    }
    opened.handle.close();
    return opened.reopen;
  }

  /**
   * The vdso: the kernel maps the same image into every process, so this process's copy, put into an
   * in-memory file, serves for unwinding (its .eh_frame) and symbolization (its .dynsym) of all. The copy
   * is kept open whatever the limit (nothing could open it again); null when it cannot be made.
   */
  vdso(): OpenedFile | null {
    try {
      const own = readProcMaps(Deno.pid as Pid, this.#procRoot).mappings?.find((m) => m.path === "[vdso]");
      if (!own) return null;
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
      if (fd < 0) return null;
      if (Number(fn.write(fd, bytes, BigInt(filled))) !== filled) {
        fn.close(fd);
        return null;
      }
      const file = RegularFile.adopt(fd, "[vdso]");
      this.#pinned.push(file);
      return { handle: file.duplicate(), reopen: () => file.duplicate(), root: null };
    } catch (error) {
      logger.debug("Cannot copy the vdso: {error}", { error: String(error) });
      return null;
    }
  }

  /** Closes the files and roots kept open. Safe to call twice. */
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

  /**
   * Opens the root of the process being read, once per read, and decides whether to keep it for the
   * session to look for its files' debug files in: not when it is the host's (the same mount namespace
   * and root directory as omniprof's); else one kept directory per distinct root, within the limit of
   * open files. Null when the root cannot be opened.
   */
  #openRoot(read: ProcessRootRead): RootDirectory | null {
    if (read.directory !== undefined) return read.directory;
    const processDir = `${this.#procRoot}/${read.pid}`;
    try {
      read.directory = RootDirectory.open(`${processDir}/root`);
    } catch {
      read.directory = null;
      return null;
    }
    const namespace = this.#namespaceOf(processDir);
    const host = this.#host();
    if (
      host !== null && namespace === host.namespace &&
      sameIdentity(read.directory.identity, host.directory.identity)
    ) {
      return read.directory;
    }
    const rootKey = `${namespace} ${formatIdentity(read.directory.identity)}`;
    read.kept = this.#roots.get(rootKey)?.directory ?? null;
    if (read.kept === null && this.#pinned.length + 2 * this.#roots.size + 1 < this.#maxPinnedFiles) {
      read.kept = read.directory;
      let namespaceFd = -1;
      try {
        namespaceFd = openPathDescriptor(`${processDir}/ns/mnt`, undefined);
      } catch {
        // Without it, the root still serves while the process lives.
      }
      this.#roots.set(rootKey, { directory: read.kept, namespace: namespaceFd });
    }
    return read.directory;
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
}

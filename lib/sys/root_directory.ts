/**
 * A directory held open and used as the root of path lookups, the way a process in a container or a
 * chroot sees its files: `/usr/lib/debug/x` inside `/proc/PID/root` is the container's, and a link to
 * `/etc` in there stays in there (openat2 with RESOLVE_IN_ROOT). Holding the descriptor keeps the
 * directory reachable after the process that showed it has exited.
 *
 * @example
 * ```ts
 * import { RootDirectory } from "./root_directory.ts";
 * using root = RootDirectory.open(`/proc/${Deno.pid}/root`);
 * using file = root.openFile("/etc/os-release");
 * console.log(file.size);
 * ```
 *
 * @module
 */
import { libc } from "./libc.ts";
import {
  type FileIdentity,
  identityOf,
  openCheckedPath,
  RegularFile,
  type ResolutionRoot,
} from "./regular_file.ts";

/** An open directory that paths are resolved inside of. Owns its descriptor. */
export class RootDirectory implements ResolutionRoot, Disposable {
  readonly path: string;
  readonly identity: FileIdentity;
  #fd: number;

  private constructor(fd: number, path: string, identity: FileIdentity) {
    this.#fd = fd;
    this.path = path;
    this.identity = identity;
  }

  /**
   * Opens the directory at `path` (links followed, `/proc/PID/root` included).
   *
   * @throws {FileRefusedError} when it is missing, unreadable or not a directory.
   */
  static open(path: string): RootDirectory {
    const { fd, status } = openCheckedPath(path, "directory");
    return new RootDirectory(fd, path.replace(/\/+$/, ""), identityOf(status));
  }

  /** The O_PATH descriptor, for openat2. */
  get fd(): number {
    if (this.#fd < 0) throw new Error(`Cannot resolve in ${this.path}: the directory is closed`);
    return this.#fd;
  }

  /**
   * Opens the regular file at `path` as seen from this root (see {@linkcode RegularFile.open}).
   *
   * @throws {FileRefusedError} as RegularFile.open does.
   */
  openFile(path: string, expect?: FileIdentity): RegularFile {
    return RegularFile.open(path, expect === undefined ? { root: this } : { root: this, expect });
  }

  /** Closes the descriptor. Idempotent. */
  close(): void {
    if (this.#fd < 0) return;
    libc().fn.close(this.#fd);
    this.#fd = -1;
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

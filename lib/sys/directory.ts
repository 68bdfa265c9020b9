/**
 * A folder held open by file descriptor, and the `*at` system calls that work inside it: a name looked up
 * in it always means an entry of that folder, however its path is changed meanwhile (renamed, or a parent
 * replaced by a link). Deno has none of these calls, so they go through the C library.
 *
 * @example
 * ```ts
 * import { Directory } from "./directory.ts";
 * using tmp = Directory.open("/tmp");
 * console.log(tmp.status("no-such-entry")); // null
 * ```
 *
 * @module
 */
import { EEXIST, EINVAL, ENOENT, ENOSYS } from "./errno.ts";
import { cString, libc, SystemError } from "./libc.ts";
import {
  AT_EMPTY_PATH,
  AT_FDCWD,
  AT_SYMLINK_FOLLOW,
  AT_SYMLINK_NOFOLLOW,
  O_CLOEXEC,
  O_DIRECTORY,
} from "./open_flags.ts";
import { type FileKind, type Statx, statx } from "./statx.ts";

/** What statx says about a file: its kind, identity and owner. */
export interface FileStatus {
  kind: FileKind;
  /** Device and inode, `major:minor:inode`: equal for the same file, different for any other. */
  identity: string;
  uid: number;
  /** Permission bits (`0o7777`). */
  mode: number;
  size: number;
  /** Hard links to it: 0 once a file or folder held open was removed. */
  links: number;
}

const RENAME_NOREPLACE = 1;

/** A `struct statx` as this module's callers read it. */
function fromStatx(status: Statx): FileStatus {
  return {
    kind: status.kind ?? "file",
    identity: `${status.major}:${status.minor}:${status.inode}`,
    uid: status.uid,
    mode: status.mode & 0o7777,
    size: status.size,
    links: status.links,
  };
}

/** statx of an open file descriptor. */
export function fileStatus(fd: number): FileStatus {
  const status = statx(fd, "", AT_EMPTY_PATH);
  if (status === null) throw new SystemError("stat an open file", libc().errno());
  return fromStatx(status);
}

/** Closes a file descriptor, ignoring errors (nothing can be done about them). */
export function closeFd(fd: number): void {
  libc().fn.close(fd);
}

/** A folder held open; see the module documentation. */
export class Directory implements Disposable {
  /** The path the folder was opened by. */
  readonly path: string;
  #fd: number;

  private constructor(path: string, fd: number) {
    this.path = path;
    this.#fd = fd;
  }

  /**
   * Opens the folder `path` (relative to the folder `at`, or to the working folder). Links on the way are
   * followed as the kernel follows them for any open, so its protection against links planted in shared
   * folders such as /tmp (`fs.protected_symlinks`) applies.
   *
   * @throws {SystemError} ENOENT, ENOTDIR, EACCES, ...
   */
  static open(path: string, at: Directory | null = null): Directory {
    const fd = libc().fn.openat(at?.fd ?? AT_FDCWD, cString(path), O_DIRECTORY | O_CLOEXEC, 0);
    if (fd < 0) throw new SystemError(`open the folder ${path}`, libc().errno());
    return new Directory(path, fd);
  }

  /** The folder's file descriptor (valid until {@linkcode close}). */
  get fd(): number {
    if (this.#fd < 0) throw new Error(`Cannot use the folder ${this.path}: it is closed`);
    return this.#fd;
  }

  /** The folder itself: kind "directory", and its identity. */
  self(): FileStatus {
    return fileStatus(this.fd);
  }

  /** What `name` is in this folder (a link itself, not what it points to), or null when there is none. */
  status(name: string): FileStatus | null {
    const status = statx(this.fd, name, AT_SYMLINK_NOFOLLOW);
    if (status !== null) return fromStatx(status);
    const error = libc().errno();
    if (error === ENOENT) return null;
    throw new SystemError(`stat ${name} in ${this.path}`, error);
  }

  /** The text of the link `name`. */
  readLink(name: string): string {
    const buffer = new Uint8Array(4096);
    const length = Number(libc().fn.readlinkat(this.fd, cString(name), buffer, BigInt(buffer.length)));
    if (length < 0) throw new SystemError(`read the link ${name} in ${this.path}`, libc().errno());
    return new TextDecoder().decode(buffer.subarray(0, length));
  }

  /**
   * Opens `name` (".", with O_TMPFILE) with `flags` and, when created, `mode` (less the umask).
   * Returns the file descriptor, or the errno (negative) when `expected` lists it; throws otherwise.
   */
  openAt(name: string, flags: number, mode: number, expected: readonly number[] = []): number {
    const fd = libc().fn.openat(this.fd, cString(name), flags | O_CLOEXEC, mode);
    if (fd >= 0) return fd;
    const error = libc().errno();
    if (expected.includes(error)) return -error;
    throw new SystemError(`open ${name} in ${this.path}`, error);
  }

  /**
   * Gives the unnamed file `fd` (opened with O_TMPFILE) the name `name` in this folder; fails with EEXIST
   * (returned negative) when the name is taken, whatever it is: a link there is never followed.
   */
  linkUnnamed(fd: number, name: string): number {
    const { fn, errno } = libc();
    // Through /proc, which needs no privilege; AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH but no /proc.
    const viaProc = cString(`/proc/self/fd/${fd}`);
    let error = fn.linkat(AT_FDCWD, viaProc, this.fd, cString(name), AT_SYMLINK_FOLLOW) === 0 ? 0 : errno();
    if (error === ENOENT) {
      error = fn.linkat(fd, cString(""), this.fd, cString(name), AT_EMPTY_PATH) === 0 ? 0 : errno();
    }
    if (error === 0 || error === EEXIST) return -error;
    throw new SystemError(`name a new file ${name} in ${this.path}`, error);
  }

  /**
   * Renames `from` to `to`, both in this folder. With `noReplace`, fails with EEXIST (returned negative)
   * when `to` exists; without it, replaces the entry `to` itself (a link there is replaced, not followed).
   */
  rename(from: string, to: string, options: { noReplace?: boolean } = {}): number {
    const { fn, errno } = libc();
    const flags = options.noReplace ? RENAME_NOREPLACE : 0;
    if (fn.renameat2(this.fd, cString(from), this.fd, cString(to), flags) === 0) return 0;
    const error = errno();
    if (error === EEXIST && options.noReplace) return -EEXIST;
    // Some file systems do not know RENAME_NOREPLACE: the caller checked just before.
    if ((error === EINVAL || error === ENOSYS) && options.noReplace) return this.rename(from, to);
    throw new SystemError(`rename ${from} to ${to} in ${this.path}`, error);
  }

  /** Removes the file `name`; true when it was removed, false when it was not there. */
  unlink(name: string): boolean {
    if (libc().fn.unlinkat(this.fd, cString(name), 0) === 0) return true;
    const error = libc().errno();
    if (error === ENOENT) return false;
    throw new SystemError(`remove ${name} in ${this.path}`, error);
  }

  /** Flushes the folder's entries (a new name) to disk; errors are ignored (some file systems refuse). */
  sync(): void {
    libc().fn.fsync(this.fd);
  }

  /** Closes the folder; idempotent. */
  close(): void {
    if (this.#fd >= 0) libc().fn.close(this.#fd);
    this.#fd = -1;
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

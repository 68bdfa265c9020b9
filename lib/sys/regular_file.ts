/**
 * A regular file opened so that opening it cannot hang or touch anything else, then read by position.
 * omniprof runs as root and opens files that other users name (the paths in `/proc/PID/maps`, debug
 * files inside a container): such a path may lead to a FIFO (opening it waits for a writer, forever), a
 * device (opening it can have effects) or a file other than the one expected. So a path is first opened
 * with O_PATH, which runs no driver or FIFO code; statx on that descriptor says what it names; only a
 * regular file, with the expected device and inode when the caller knows them, is then reopened for
 * reading through `/proc/self/fd` (the very inode checked, with O_NONBLOCK as a second guard). Reads use
 * pread, so the descriptor can be shared by duplicates and nothing ever seeks.
 *
 * @example
 * ```ts
 * import { RegularFile } from "./regular_file.ts";
 * using file = RegularFile.open("/bin/true");
 * const magic = file.read(0, 4); // 7f 45 4c 46
 * console.log(file.size, file.identity, magic);
 * ```
 *
 * @module
 */
import { EACCES, EINTR, ENOENT, ENOSYS, EPERM, ESRCH } from "./errno.ts";
import { cString, F_DUPFD_CLOEXEC, libc, strerror, SYS_OPENAT2 } from "./libc.ts";
import {
  AT_EMPTY_PATH,
  O_CLOEXEC,
  O_DIRECTORY,
  O_NOCTTY,
  O_NOFOLLOW,
  O_NONBLOCK,
  O_PATH,
  O_RDONLY,
  RESOLVE_IN_ROOT,
  RESOLVE_NO_MAGICLINKS,
} from "./open_flags.ts";
import { type FileKind, type Statx, statx } from "./statx.ts";

/** How the kernel tells files apart: the device a file lives on and its inode number there. */
export interface FileIdentity {
  readonly major: number;
  readonly minor: number;
  readonly inode: number;
}

/** Why a file was not opened; every refusal is one of these, so callers can count them. */
export type FileRefusal =
  /** The path or the process no longer exists. */
  | "missing"
  /** The kernel refused access (no privilege for another process's files, a security module). */
  | "denied"
  /** The path leads to a FIFO, device, socket or folder. */
  | "not-regular"
  /** The path leads to a regular file, but not the one expected (another device or inode). */
  | "replaced"
  /** Any other error of the open or statx call. */
  | "failed";

/** A file that was not opened, with the reason. */
export class FileRefusedError extends Error {
  readonly reason: FileRefusal;
  readonly path: string;
  constructor(path: string, reason: FileRefusal, detail: string) {
    super(`Cannot open ${path}: ${detail}`);
    this.name = "FileRefusedError";
    this.reason = reason;
    this.path = path;
  }
}

/** A directory that paths are resolved inside of, as a chroot would (absolute links stay inside). */
export interface ResolutionRoot {
  /** An O_PATH descriptor of the directory. */
  readonly fd: number;
  /** Its path, for messages and for kernels without openat2. */
  readonly path: string;
}

/** How {@linkcode RegularFile.open} and {@linkcode openCheckedPath} find and check the file. */
export interface OpenOptions {
  /** Resolve `path` inside this directory instead of from the host's root. */
  root?: ResolutionRoot;
  /** The file must be this one; another file at the path is refused as "replaced". */
  expect?: FileIdentity;
  /**
   * A symbolic link as the last part of the path is refused ("not-regular") instead of followed: for a
   * name in a folder that others write to (`/tmp`), where a link may point at any file.
   */
  noFollow?: boolean;
}

/** What {@linkcode openCheckedPath} requires a path to lead to. */
export type CheckedKind = Extract<FileKind, "file" | "directory">;

/** A path opened with O_PATH and checked by {@linkcode openCheckedPath}. */
export interface CheckedPath {
  /** The O_PATH descriptor, which the caller owns. */
  readonly fd: number;
  /** The path as messages name it: inside a root, the root's path first. */
  readonly name: string;
  /** What statx said of the descriptor. */
  readonly status: Statx;
}

/** openat2's `struct open_how`: flags, mode, resolve (three u64). */
const OPEN_HOW_SIZE = 24;
/** One pread moves at most this much (Linux caps a read near 2 GiB). */
const MAX_READ_CHUNK = 1 << 30;

/** What a file other than a regular one is, for messages. */
const KIND_NAMES: Record<Exclude<FileKind, "file">, string> = {
  fifo: "a FIFO",
  "char device": "a character device",
  directory: "a folder",
  "block device": "a block device",
  symlink: "a symbolic link",
  socket: "a socket",
};

/** Whether `a` and `b` are the same file. */
export function sameIdentity(a: FileIdentity, b: FileIdentity): boolean {
  return a.inode === b.inode && a.major === b.major && a.minor === b.minor;
}

/** The identity as /proc/PID/maps prints it: `major:minor inode`, the device in hex (e.g. `fd:01 1234`). */
export function formatIdentity(identity: FileIdentity): string {
  const hex = (value: number) => value.toString(16).padStart(2, "0");
  return `${hex(identity.major)}:${hex(identity.minor)} ${identity.inode}`;
}

/** statx of an open descriptor (O_PATH ones too); throws a FileRefusedError when it fails. */
function statusOf(fd: number, name: string): Statx {
  const status = statx(fd, "", AT_EMPTY_PATH);
  if (status === null) throw refusal(name, libc().errno(), "statx");
  return status;
}

/**
 * Opens `path` with O_PATH (no open side effects, never blocks) from the host's root or inside
 * `root`; returns the descriptor. Nothing is checked: {@linkcode openCheckedPath} does that.
 */
export function openPathDescriptor(path: string, root: ResolutionRoot | undefined, extraFlags = 0): number {
  const { fn } = libc();
  const flags = O_PATH | O_CLOEXEC | extraFlags;
  if (root !== undefined) {
    const how = new BigUint64Array([BigInt(flags), 0n, BigInt(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)]);
    const fd = Number(
      fn.openat2(
        BigInt(SYS_OPENAT2),
        BigInt(root.fd),
        cString(path),
        new Uint8Array(how.buffer),
        BigInt(OPEN_HOW_SIZE),
      ),
    );
    if (fd >= 0) return fd;
    const errno = libc().errno();
    // A seccomp filter (some container runtimes) may hide openat2: resolve from the root's path then.
    // Links inside then resolve against the host's root, which the caller's identity check catches.
    if (errno !== ENOSYS) throw refusal(`${root.path}${path}`, errno, "open");
  }
  const full = root === undefined ? path : `${root.path}${path}`;
  const fd = fn.open(cString(full), flags);
  if (fd < 0) throw refusal(full, libc().errno(), "open");
  return fd;
}

/**
 * Opens `path` as the module describes, up to the check: with O_PATH (a directory with O_DIRECTORY as
 * well), then statx on that descriptor must say it is a `kind` and, with `options.expect`, that very
 * file. Only then may the caller open it for real ({@linkcode RegularFile}) or keep the descriptor
 * ({@linkcode RootDirectory}).
 *
 * @throws {FileRefusedError} when the path is missing or unreadable, leads to something else than a
 * `kind`, or is not the file `options.expect` names; no descriptor is left open then.
 */
export function openCheckedPath(path: string, kind: CheckedKind, options: OpenOptions = {}): CheckedPath {
  const name = options.root === undefined ? path : `${options.root.path}${path}`;
  const flags = (kind === "directory" ? O_DIRECTORY : 0) | (options.noFollow ? O_NOFOLLOW : 0);
  const fd = openPathDescriptor(path, options.root, flags);
  try {
    const status = statusOf(fd, name);
    checkStatus(status, name, kind, options.expect);
    return { fd, name, status };
  } catch (error) {
    libc().fn.close(fd);
    throw error;
  }
}

/** An open regular file, read by position. Owns its descriptor. */
export class RegularFile implements Disposable {
  /** The path it was opened by, for messages. */
  readonly name: string;
  readonly identity: FileIdentity;
  /** Length in bytes when it was opened. */
  readonly size: number;
  #fd: number;

  private constructor(fd: number, name: string, identity: FileIdentity, size: number) {
    this.#fd = fd;
    this.name = name;
    this.identity = identity;
    this.size = size;
  }

  /**
   * Opens the regular file at `path` for reading, checked as the module describes.
   *
   * @throws {FileRefusedError} when the path is missing or unreadable, is not a regular file, or is not
   * the file `options.expect` names.
   */
  static open(path: string, options: OpenOptions = {}): RegularFile {
    const checked = openCheckedPath(path, "file", options);
    let fd: number;
    try {
      fd = reopen(checked.fd, checked.name);
    } finally {
      libc().fn.close(checked.fd);
    }
    // The same inode as checked (the descriptor pinned it); checked again because it is free.
    return RegularFile.#own(fd, checked.name, options.expect);
  }

  /**
   * Takes ownership of an open descriptor (e.g. a memfd this process wrote) after checking it is a
   * regular file; closes it and throws otherwise.
   */
  static adopt(fd: number, name: string): RegularFile {
    return RegularFile.#own(fd, name, undefined);
  }

  /** Wraps `fd` once statx says it is a regular file (and `expect`); closes it and throws otherwise. */
  static #own(fd: number, name: string, expect: FileIdentity | undefined): RegularFile {
    try {
      const status = statusOf(fd, name);
      checkStatus(status, name, "file", expect);
      return new RegularFile(fd, name, identityOf(status), status.size);
    } catch (error) {
      libc().fn.close(fd);
      throw error;
    }
  }

  /**
   * What statx says of the open file now: its owner and links, and its size as it grows.
   *
   * @throws {FileRefusedError} when statx fails; {Error} when the file is closed.
   */
  status(): Statx {
    if (this.#fd < 0) throw new Error(`Cannot stat ${this.name}: the file is closed`);
    return statusOf(this.#fd, this.name);
  }

  /** Whether the file is closed. */
  get closed(): boolean {
    return this.#fd < 0;
  }

  /**
   * Returns the `length` bytes at `offset`. The caller bounds `length` (it is allocated at once).
   *
   * @throws {RangeError} when the file ends before (it shrank since it was opened).
   */
  read(offset: number, length: number): Uint8Array<ArrayBuffer> {
    const out = new Uint8Array(length);
    let filled = 0;
    // Each iteration reads at least one byte or leaves the loop, so it ends.
    while (filled < length) {
      const count = this.readInto(offset + filled, out.subarray(filled));
      if (count === 0) throw new RangeError(`${this.name} ended at ${offset + filled} (it shrank?)`);
      filled += count;
    }
    return out;
  }

  /**
   * Reads what one pread gives at `offset` into `buffer` (up to its length, at most 1 GiB); returns the
   * count, 0 at the end of the file. For streaming through a file in windows of a fixed buffer.
   */
  readInto(offset: number, buffer: Uint8Array): number {
    if (this.#fd < 0) throw new Error(`Cannot read ${this.name}: the file is closed`);
    const { fn } = libc();
    const target = buffer.length > MAX_READ_CHUNK ? buffer.subarray(0, MAX_READ_CHUNK) : buffer;
    for (;;) {
      const count = Number(fn.pread(this.#fd, target, BigInt(target.length), BigInt(offset)));
      if (count >= 0) return count;
      const errno = libc().errno();
      if (errno !== EINTR) throw new Error(`Cannot read ${this.name} at ${offset}: ${strerror(errno)}`);
    }
  }

  /** A second handle of the same open file, closed independently of this one. */
  duplicate(): RegularFile {
    if (this.#fd < 0) throw new Error(`Cannot duplicate ${this.name}: the file is closed`);
    const fd = libc().fn.fcntl(this.#fd, F_DUPFD_CLOEXEC, 0n);
    if (fd < 0) throw new Error(`Cannot duplicate ${this.name}: ${strerror(libc().errno())}`);
    return new RegularFile(fd, this.name, this.identity, this.size);
  }

  /** Closes the descriptor. Idempotent; reads after it throw. */
  close(): void {
    if (this.#fd < 0) return;
    libc().fn.close(this.#fd);
    this.#fd = -1;
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/** The device and inode of what statx described. */
export function identityOf(status: Statx): FileIdentity {
  return { major: status.major, minor: status.minor, inode: status.inode };
}

/** Throws the FileRefusedError for a `status` that is not a `kind`, or not the file `expect` names. */
function checkStatus(status: Statx, name: string, kind: CheckedKind, expect: FileIdentity | undefined): void {
  if (kind === "directory" && status.kind !== "directory") {
    throw new FileRefusedError(name, "not-regular", "not a directory");
  }
  if (kind === "file" && status.kind !== "file") {
    const what = status.kind === null ? "not a regular file" : KIND_NAMES[status.kind];
    throw new FileRefusedError(name, "not-regular", `it is ${what}`);
  }
  const identity = identityOf(status);
  if (expect !== undefined && !sameIdentity(identity, expect)) {
    throw new FileRefusedError(
      name,
      "replaced",
      `it is file ${formatIdentity(identity)}, not the expected ${formatIdentity(expect)}`,
    );
  }
}

/** Opens the file an O_PATH descriptor names, for reading. */
function reopen(pathFd: number, name: string): number {
  const fd = libc().fn.open(cString(`/proc/self/fd/${pathFd}`), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) throw refusal(name, libc().errno(), "open");
  return fd;
}

function refusal(path: string, errno: number, call: string): FileRefusedError {
  const reason: FileRefusal = errno === ENOENT || errno === ESRCH
    ? "missing"
    : errno === EACCES || errno === EPERM
    ? "denied"
    : "failed";
  return new FileRefusedError(path, reason, `${call}: ${strerror(errno)} (errno ${errno})`);
}

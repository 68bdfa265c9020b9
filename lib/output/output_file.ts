/**
 * Where a command writes its output: every file omniprof writes goes through here. The path is looked at
 * once, when the command starts (so a bad path fails fast and loses nothing), and its folder is held open
 * from then on:
 *
 * - A regular file, or a name not yet taken, is replaced atomically by a complete new file (see
 *   replace_file.ts): a reader never sees half a profile, and a link or file planted at the name while
 *   the command runs is left alone, never written through; the profile is then kept beside it under a
 *   new name, which the error message gives.
 * - `-` (and `/dev/stdout`, `/dev/fd/1`, `/proc/self/fd/1`) is standard output, written as it is.
 * - A FIFO or a character device (`/dev/null`, a terminal) is written in place, opened without blocking:
 *   a FIFO waits at most {@linkcode READER_WAIT_MS} for a reader, and a slow reader never blocks the event
 *   loop. `/proc/PID/fd/N` is written in place too. Nothing else under /proc is written, and no file is
 *   created under /dev (but in /dev/shm).
 * - A symbolic link at the path is followed only when it belongs to root or to the user running omniprof
 *   (under sudo, the user who ran sudo), as the user named it; a link of anyone else is refused. Links in
 *   the folders on the way are followed as for any open: a folder the user names may well be a link of
 *   theirs (and with `fs.protected_symlinks`, the kernel refuses links planted by others in shared
 *   folders such as /tmp).
 *
 * Under sudo, new files belong to the user who ran sudo (`SUDO_UID`/`SUDO_GID`). They are readable by
 * all (0644, less the umask) unless written as private (0600): output that holds kernel addresses.
 *
 * @example
 * ```ts ignore
 * import { OutputFile } from "./output_file.ts";
 * using output = OutputFile.open("profile.pb.gz"); // before recording: fails fast on a bad path
 * await output.write(bytes, { private: false });
 * ```
 *
 * @module
 */
import { closeFd, Directory, fileStatus } from "../sys/directory.ts";
import {
  EACCES,
  EAGAIN,
  EINTR,
  ELOOP,
  ENAMETOOLONG,
  ENOENT,
  ENOSPC,
  ENOTDIR,
  ENXIO,
  EPERM,
  EPIPE,
  EROFS,
} from "../sys/errno.ts";
import { type FileOwner, invokingUser } from "../sys/invoking_user.ts";
import { cString, libc, SystemError } from "../sys/libc.ts";
import {
  AT_FDCWD,
  O_CLOEXEC,
  O_NOCTTY,
  O_NOFOLLOW,
  O_NONBLOCK,
  O_TRUNC,
  O_WRONLY,
} from "../sys/open_flags.ts";
import { absolutePath, baseName, parentDir } from "../sys/path.ts";
import { delay } from "../sys/timer.ts";
import { checkCreatable, keepFile, OutputChangedError, replaceFile } from "./replace_file.ts";

/** The path that means standard output. */
export const STDOUT_PATH = "-";

/** How a path is written: replaced atomically, written in place, or standard output. */
export type OutputKind = "file" | "in place" | "stdout";

/** How long writing to a FIFO waits for a program to open it for reading. */
export const READER_WAIT_MS = 10_000;

/** Paths that name standard output itself (its descriptor is written, at its offset and in its mode). */
const STDOUT_ALIASES = new Set(["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1", "/proc/thread-self/fd/1"]);
/** The only paths under /proc that are written: a process's open files. */
const PROC_FD = /^\/proc\/(self|thread-self|[0-9]+)\/fd\/[0-9]+$/;
/** Links followed from the path at most, as the kernel's own limit for a path (ELOOP). */
const MAX_LINKS = 40;

const POLLOUT = 4;

/** Options of {@linkcode OutputFile.open}. */
export interface OutputOpenOptions {
  /** Whom new files are given to; default: the user who ran sudo, if any (see invoking_user.ts). */
  owner?: FileOwner | null;
  /** false: a named temporary even where unnamed files work (to test that path). */
  unnamedTemporary?: boolean;
  /** How long a FIFO waits for a reader (ms); default {@linkcode READER_WAIT_MS}. */
  readerWaitMs?: number;
}

/** Options of {@linkcode OutputFile.write}. */
export interface OutputWriteOptions {
  /** The data holds kernel addresses: only its owner may read the new file (0600 instead of 0644). */
  private?: boolean;
}

/** Where the bytes go, decided once at open. */
type Target =
  | { kind: "stdout" }
  /** A name in a folder held open; `before`: the identity of the file there at the start, or null. */
  | { kind: "file"; dir: Directory; folder: string; name: string; before: string | null }
  /** A FIFO or character device, by name in a folder held open and identity. */
  | { kind: "in place"; dir: Directory; folder: string; name: string; before: string }
  /** A /proc/PID/fd/N link, opened through. */
  | { kind: "in place"; dir: null; path: string };

/** Why an output path cannot be written, for the user: the path, then why. */
class OutputError extends Error {
  constructor(path: string, reason: string, cause?: unknown) {
    super(`Cannot write the profile to ${path}: ${reason}`, { cause });
    this.name = "OutputError";
  }
}

/** The reason in words for a failed system call on `folder` (or its entry). */
function reasonOf(error: unknown, folder: string): string {
  if (!(error instanceof SystemError)) return error instanceof Error ? error.message : String(error);
  switch (error.errno) {
    case ENOENT:
      return `folder ${folder} does not exist`;
    case ENOTDIR:
      return `${folder} is not a folder`;
    case EACCES:
    case EPERM:
      return `no permission to write in ${folder}`;
    case EROFS:
      return `${folder} is on a read-only file system`;
    case ENOSPC:
      return `no space left on the file system of ${folder}`;
    case ELOOP:
      return "too many levels of symbolic links";
    case ENAMETOOLONG:
      return "the name is too long";
    default:
      return error.message;
  }
}

/** Finds what `path` (relative to `at`, or to the working folder) is; see the module documentation. */
function locate(
  userPath: string,
  path: string,
  at: { dir: Directory; folder: string } | null,
  trusted: ReadonlySet<number>,
  links = 0,
): Target {
  const absolute = absolutePath(path, at?.folder ?? Deno.cwd());
  if (STDOUT_ALIASES.has(absolute)) return { kind: "stdout" };
  if (absolute.startsWith("/proc/")) {
    if (PROC_FD.test(absolute)) return { kind: "in place", dir: null, path: absolute };
    throw new OutputError(userPath, "under /proc, omniprof writes only to /proc/PID/fd/N");
  }
  const folder = parentDir(absolute);
  const name = baseName(path);
  // Messages name the path the links led to, or "it" for the path the user gave.
  const subject = absolute === absolutePath(userPath) ? "it" : absolute;
  let dir: Directory;
  try {
    dir = Directory.open(parentDir(path), at?.dir ?? null);
  } catch (error) {
    throw new OutputError(userPath, reasonOf(error, folder), error);
  }
  let target: Target | null = null;
  try {
    const status = name === "" ? dir.self() : dir.status(name);
    if (status === null) {
      // A mistyped device name must not become a file among the devices (/dev/shm is plain memory).
      if (absolute.startsWith("/dev/") && !absolute.startsWith("/dev/shm/")) {
        throw new OutputError(userPath, `${subject} does not exist (omniprof creates no files under /dev)`);
      }
      target = { kind: "file", dir, folder, name, before: null };
      return target;
    }
    switch (status.kind) {
      case "file":
        target = { kind: "file", dir, folder, name, before: status.identity };
        return target;
      case "fifo":
      case "char device":
        target = { kind: "in place", dir, folder, name, before: status.identity };
        return target;
      case "directory":
        throw new OutputError(
          userPath,
          `${subject} is a directory`,
        );
      case "symlink": {
        if (!trusted.has(status.uid)) {
          throw new OutputError(
            userPath,
            `${subject} is a symbolic link of user ${status.uid}: omniprof follows a link only when it ` +
              `belongs to you or root (name the file it points to instead)`,
          );
        }
        if (links >= MAX_LINKS) throw new OutputError(userPath, "too many levels of symbolic links");
        const text = dir.readLink(name);
        return locate(userPath, text, text.startsWith("/") ? null : { dir, folder }, trusted, links + 1);
      }
      default:
        throw new OutputError(
          userPath,
          `${subject} is a ${status.kind}: omniprof writes only files, FIFOs and character devices`,
        );
    }
  } catch (error) {
    if (error instanceof OutputError) throw error;
    throw new OutputError(userPath, reasonOf(error, folder), error);
  } finally {
    // The folder stays open only as part of the target.
    if (target === null) dir.close();
  }
}

/** Writes all of `bytes` to standard output. */
function writeStdout(bytes: Uint8Array): void {
  // writeSync may write part of a large buffer to a pipe: loop until all of it is out.
  for (let written = 0; written < bytes.length;) written += Deno.stdout.writeSync(bytes.subarray(written));
}

/** Writes all of `bytes` to the non-blocking `fd`, waiting (off the event loop) while it is full. */
async function writeNonBlocking(fd: number, bytes: Uint8Array, signal: AbortSignal): Promise<void> {
  const { fn, errno } = libc();
  const pollfd = new Uint8Array(8);
  const view = new DataView(pollfd.buffer);
  view.setInt32(0, fd, true);
  view.setInt16(4, POLLOUT, true);
  for (let offset = 0; offset < bytes.length;) {
    const chunk = bytes.subarray(offset, offset + (1 << 20));
    const written = Number(fn.write(fd, chunk, BigInt(chunk.length)));
    if (written >= 0) {
      offset += written;
      continue;
    }
    const error = errno();
    if (error !== EAGAIN && error !== EINTR) throw new SystemError("write", error);
    if (signal.aborted) throw new Error("interrupted");
    // Wakes when there is room, when the reader goes away (the next write then fails), or each second
    // to look at `signal`.
    await fn.poll(pollfd, 1n, 1000);
  }
}

/** Whether the folder held open was removed meanwhile (a new file in it then fails with ENOENT or EPERM). */
function folderRemoved(dir: Directory): boolean {
  try {
    return dir.self().links === 0;
  } catch {
    return false;
  }
}

/** Whether the open `fd` is the file of `identity`; false when it cannot be told. */
function sameFile(fd: number, identity: string): boolean {
  try {
    return fileStatus(fd).identity === identity;
  } catch {
    return false;
  }
}

/** An output path checked and held from the start of a command until its data is written. */
export class OutputFile implements Disposable {
  /** The path as the user gave it. */
  readonly path: string;
  #target: Target;
  #owner: FileOwner | null;
  #unnamedTemporary: boolean;
  #readerWaitMs: number;
  #abort = new AbortController();

  private constructor(path: string, target: Target, owner: FileOwner | null, options: OutputOpenOptions) {
    this.path = path;
    this.#target = target;
    this.#owner = owner;
    this.#unnamedTemporary = options.unnamedTemporary !== false;
    this.#readerWaitMs = options.readerWaitMs ?? READER_WAIT_MS;
  }

  /**
   * Looks at `path` and holds its folder open; checks that it can be written (a new file can be made in
   * the folder, a device opened), leaving nothing behind.
   *
   * @throws {Error} "Cannot write the profile to PATH: reason" (missing folder, a directory, a link of
   *   another user, no permission, a bad SUDO_UID...).
   */
  static open(path: string, options: OutputOpenOptions = {}): OutputFile {
    if (path === STDOUT_PATH) return new OutputFile(path, { kind: "stdout" }, null, options);
    let owner: FileOwner | null;
    try {
      owner = options.owner === undefined ? invokingUser() : options.owner;
    } catch (error) {
      throw new OutputError(path, error instanceof Error ? error.message : String(error), error);
    }
    const trusted = new Set([0, Deno.uid() ?? 0, owner?.uid ?? 0]);
    const target = locate(path, path, null, trusted);
    const output = new OutputFile(path, target, owner, options);
    try {
      output.#check();
    } catch (error) {
      output.close();
      throw error;
    }
    return output;
  }

  /** How the path is written. */
  get kind(): OutputKind {
    return this.#target.kind;
  }

  #check(): void {
    const target = this.#target;
    if (target.kind === "stdout") return;
    if (target.kind === "file") {
      try {
        checkCreatable(target.dir, { unnamedTemporary: this.#unnamedTemporary });
      } catch (error) {
        throw new OutputError(this.path, reasonOf(error, target.folder), error);
      }
      return;
    }
    // A FIFO without a reader (ENXIO) is fine now: one may come by the time the data is written.
    const fd = this.#openInPlace(target, [ENXIO]);
    if (fd >= 0) closeFd(fd);
  }

  /** Opens an in-place target for writing, without blocking; a listed errno comes back negative. */
  #openInPlace(target: Extract<Target, { kind: "in place" }>, expected: readonly number[]): number {
    const flags = O_WRONLY | O_NONBLOCK | O_NOCTTY;
    try {
      if (target.dir !== null) {
        return target.dir.openAt(target.name, flags | O_NOFOLLOW, 0, [...expected, ELOOP]);
      }
      // O_CLOEXEC as Directory.openAt adds it: a command omniprof starts must not inherit the output.
      const fd = libc().fn.openat(AT_FDCWD, cString(target.path), flags | O_TRUNC | O_CLOEXEC, 0);
      if (fd >= 0) return fd;
      const error = libc().errno();
      if (expected.includes(error)) return -error;
      throw new SystemError(`open ${target.path}`, error);
    } catch (error) {
      const reason = error instanceof SystemError && error.errno === ENOENT
        ? "it does not exist"
        : error instanceof SystemError && (error.errno === EACCES || error.errno === EPERM)
        ? "no permission to write it"
        : reasonOf(error, target.dir === null ? parentDir(target.path) : target.folder);
      throw new OutputError(this.path, reason, error);
    }
  }

  /**
   * Writes `data` as the module documentation says.
   *
   * @throws {Error} "Cannot write the profile to PATH: reason": the path changed since the start (the
   *   message says where the profile was kept), no reader opened the FIFO, the disk is full... Nothing
   *   is left behind but the kept profile.
   */
  async write(data: Uint8Array | string, options: OutputWriteOptions = {}): Promise<void> {
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    const target = this.#target;
    if (target.kind === "stdout") return writeStdout(bytes);
    const mode = options.private ? 0o600 : 0o644;
    const replace = { mode, owner: this.#owner, unnamedTemporary: this.#unnamedTemporary };
    if (target.kind === "file") {
      try {
        replaceFile(target.dir, target.name, target.before, bytes, replace);
      } catch (error) {
        if (error instanceof OutputChangedError) {
          throw new OutputError(
            this.path,
            `${error.reason}, so it was left alone; the profile is in ${target.folder}/${error.keptName}`,
            error,
          );
        }
        const reason = folderRemoved(target.dir)
          ? `folder ${target.folder} does not exist (removed since omniprof started)`
          : reasonOf(error, target.folder);
        throw new OutputError(this.path, reason, error);
      }
      return;
    }
    await this.#writeInPlace(target, bytes, replace);
  }

  async #writeInPlace(
    target: Extract<Target, { kind: "in place" }>,
    bytes: Uint8Array,
    replace: { mode: number; owner: FileOwner | null; unnamedTemporary: boolean },
  ): Promise<void> {
    const signal = this.#abort.signal;
    const deadline = performance.now() + this.#readerWaitMs;
    let fd = this.#openInPlace(target, [ENXIO]);
    while (fd === -ENXIO && performance.now() < deadline) {
      await delay(100, signal);
      if (signal.aborted) break;
      fd = this.#openInPlace(target, [ENXIO]);
    }
    if (signal.aborted) {
      if (fd >= 0) closeFd(fd);
      throw new OutputError(this.path, "interrupted");
    }
    let problem: string | null = null;
    if (fd === -ENXIO) {
      problem = `no program opened the FIFO for reading within ${this.#readerWaitMs / 1000} s`;
    } else if (fd === -ELOOP) {
      problem = "it is now a symbolic link";
    } else if (target.dir !== null && !sameFile(fd, target.before)) {
      closeFd(fd);
      problem = "it is now another file than when omniprof started";
    }
    if (problem !== null) {
      if (target.dir === null) throw new OutputError(this.path, problem);
      // Kept beside it, as a regular file changed meanwhile would be.
      let kept: string;
      try {
        kept = keepFile(target.dir, target.name, bytes, replace);
      } catch (error) {
        throw new OutputError(
          this.path,
          `${problem}, and the profile could not be kept: ${reasonOf(error, target.folder)}`,
        );
      }
      throw new OutputError(this.path, `${problem}; the profile is in ${target.folder}/${kept}`);
    }
    try {
      await writeNonBlocking(fd, bytes, signal);
    } catch (error) {
      const reason = error instanceof SystemError && error.errno === EPIPE
        ? "its reader closed it before the whole profile was written"
        : reasonOf(error, "");
      throw new OutputError(this.path, reason, error);
    } finally {
      closeFd(fd);
    }
  }

  /**
   * Stops a write that waits (for a FIFO's reader, or a slow one) and releases the folder. A replaced file
   * needs nothing more: its data goes to an unnamed file that the kernel frees if omniprof dies before it
   * is in place. Where the file system has no unnamed files, the named temporary exists only within one
   * synchronous call, which removes it on any error and which no signal handler of omniprof can interrupt
   * (a signal that kills the process outright in that moment can still leave it).
   */
  abort(): void {
    this.#abort.abort();
    this.close();
  }

  /** Releases the folder held open; idempotent. */
  close(): void {
    const target = this.#target;
    if (target.kind !== "stdout" && target.dir !== null) target.dir.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

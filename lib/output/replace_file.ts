/**
 * Puts a complete new file at a name in a folder held open, without ever writing through a link and
 * without leaving half a file anywhere:
 *
 * 1. The bytes go to an unnamed file in the folder (`O_TMPFILE`), which the kernel frees if omniprof dies
 *    before step 3, whatever kills it (to replace an existing file, it gets a random name for the instant
 *    between its link and the rename). Where the file system has no unnamed files, to a new file with a
 *    random name (64 bits from the system's random generator), created with `O_CREAT|O_EXCL|O_NOFOLLOW`:
 *    a file or link planted at any name it could pick makes the create fail, never redirects it.
 * 2. It is given to the user who asked for it (sudo's `SUDO_UID`), then flushed to disk.
 * 3. The name is checked against what it was when the command started: still missing, or still the same
 *    regular file (device and inode). Then the file is renamed (or linked) to the name, through the
 *    folder's descriptor: the entry itself is replaced, so a link planted there meanwhile is replaced,
 *    never followed.
 *
 * A name that changed since the start (a link or another file appeared at it) is left alone: the profile
 * is kept beside it under a new name, which {@linkcode OutputChangedError} reports.
 *
 * @example
 * ```ts ignore
 * import { Directory } from "../sys/directory.ts";
 * import { replaceFile } from "./replace_file.ts";
 * using dir = Directory.open("/tmp");
 * replaceFile(dir, "profile.folded", dir.status("profile.folded")?.identity ?? null, bytes, { mode: 0o644 });
 * ```
 *
 * @module
 */
import { closeFd, type Directory, type FileStatus } from "../sys/directory.ts";
import { EEXIST, EINVAL, EISDIR, ENAMETOOLONG, EOPNOTSUPP } from "../sys/errno.ts";
import type { FileOwner } from "../sys/invoking_user.ts";
import { libc, SystemError } from "../sys/libc.ts";
import { O_CREAT, O_EXCL, O_NOFOLLOW, O_TMPFILE, O_WRONLY } from "../sys/open_flags.ts";

/** How the new file is made. */
export interface ReplaceOptions {
  /** Permission bits of the new file (less the umask). */
  mode: number;
  /** Whom to give the file to; null: whoever runs omniprof. */
  owner?: FileOwner | null;
  /** false: a named temporary even where unnamed files work (to test that path). */
  unnamedTemporary?: boolean;
}

/** The name changed since the command started: it was left alone, and the data kept under another name. */
export class OutputChangedError extends Error {
  /** How the name changed, e.g. "it is now a symbolic link". */
  readonly reason: string;
  /** The new name in the same folder that holds the data. */
  readonly keptName: string;
  constructor(reason: string, keptName: string) {
    super(`Cannot write the file: ${reason}; the data is in ${keptName} beside it`);
    this.name = "OutputChangedError";
    this.reason = reason;
    this.keptName = keptName;
  }
}

/** Random lowercase hex of `bytes` bytes from the system's random generator. */
function randomHex(bytes: number): string {
  return [...crypto.getRandomValues(new Uint8Array(bytes))].map((b) => b.toString(16).padStart(2, "0")).join(
    "",
  );
}

/** A name for a temporary file: hidden, unpredictable, and not longer than any file system allows. */
export function temporaryName(): string {
  return `.omniprof-${randomHex(8)}.tmp`;
}

/** A visible name beside `name` for data that could not go to `name`. */
function keptName(name: string): string {
  return name.length <= 200 ? `omniprof-kept-${randomHex(4)}-${name}` : `omniprof-kept-${randomHex(8)}`;
}

/** Attempts at a fresh random name before giving up (each collides with chance 2^-32 or less). */
const NAME_ATTEMPTS = 8;

/** A new empty file in `dir`: unnamed if possible, else under a fresh random name. */
function createTemporary(dir: Directory, options: ReplaceOptions): { fd: number; name: string | null } {
  if (options.unnamedTemporary !== false) {
    // EOPNOTSUPP: the file system has no unnamed files; EISDIR/EINVAL: the kernel predates them.
    const fd = dir.openAt(".", O_TMPFILE | O_WRONLY, options.mode, [EOPNOTSUPP, EISDIR, EINVAL]);
    if (fd >= 0) return { fd, name: null };
  }
  for (let attempt = 0; attempt < NAME_ATTEMPTS; attempt++) {
    const name = temporaryName();
    const fd = dir.openAt(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, options.mode, [EEXIST]);
    if (fd >= 0) return { fd, name };
  }
  throw new Error(`Cannot create a temporary file in ${dir.path}: every random name was taken`);
}

/**
 * Throws when no new file can be made in `dir` (no permission, a read-only file system); leaves nothing
 * behind.
 */
export function checkCreatable(dir: Directory, options: Pick<ReplaceOptions, "unnamedTemporary"> = {}): void {
  const { fd, name } = createTemporary(dir, { mode: 0o600, unnamedTemporary: options.unnamedTemporary });
  closeFd(fd);
  if (name !== null) dir.unlink(name);
}

/** Writes all of `bytes` to the blocking descriptor `fd`. */
function writeAll(fd: number, bytes: Uint8Array): void {
  const { fn, errno } = libc();
  for (let offset = 0; offset < bytes.length;) {
    const chunk = bytes.subarray(offset, offset + (1 << 24));
    const written = Number(fn.write(fd, chunk, BigInt(chunk.length)));
    if (written < 0) {
      const error = errno();
      if (error === 4) continue; // EINTR
      throw new SystemError("write the file", error);
    }
    offset += written;
  }
}

/** How `now` differs from what the name was at the start (`before`: an identity, or null for none). */
function change(before: string | null, now: FileStatus): string {
  const kind = now.kind === "symlink" ? "a symbolic link" : now.kind === "file" ? "a file" : `a ${now.kind}`;
  if (before === null) return `it did not exist when omniprof started and is now ${kind}`;
  return now.kind === "file" ? "it is now another file than when omniprof started" : `it is now ${kind}`;
}

/**
 * Writes `bytes` as a new file named `name` in `dir` (see the module documentation). `before` is the
 * identity of the regular file the name held when the command started, or null when it held nothing.
 *
 * @returns the name written.
 * @throws {OutputChangedError} when the name changed since the start: the data is then kept beside it.
 * @throws {SystemError} when writing fails (a full disk...): nothing is left behind.
 */
export function replaceFile(
  dir: Directory,
  name: string,
  before: string | null,
  bytes: Uint8Array,
  options: ReplaceOptions,
): string {
  const temporary = createTemporary(dir, options);
  const { fd } = temporary;
  // The name under which the data lies in the folder and must be removed on failure, if any.
  let pending = temporary.name;
  try {
    writeAll(fd, bytes);
    const owner = options.owner ?? null;
    if (owner !== null && libc().fn.fchown(fd, owner.uid, owner.gid) !== 0) {
      throw new SystemError(`give the file to user ${owner.uid}`, libc().errno());
    }
    if (libc().fn.fsync(fd) !== 0) throw new SystemError("flush the file to disk", libc().errno());

    let now = dir.status(name);
    if (now === null || (before !== null && now.kind === "file" && now.identity === before)) {
      let placed: number;
      if (now !== null) {
        // Replacing: rename needs a name to rename from.
        if (pending === null) pending = linkTemporary(dir, fd);
        placed = dir.rename(pending, name);
      } else {
        // The name stays free only until the data is in place: what appears there meanwhile stays.
        placed = pending === null
          ? dir.linkUnnamed(fd, name)
          : dir.rename(pending, name, { noReplace: true });
      }
      if (placed === 0) {
        pending = null;
        dir.sync();
        return name;
      }
      now = dir.status(name);
    }
    const keptName = keep(dir, fd, pending, name);
    pending = null;
    throw new OutputChangedError(
      now === null ? "it changed while being written" : change(before, now),
      keptName,
    );
  } finally {
    closeFd(fd);
    if (pending !== null) {
      try {
        dir.unlink(pending);
      } catch {
        // the folder is gone or refuses: nothing more can be done
      }
    }
  }
}

/** Gives the unnamed file `fd` a fresh temporary name (to rename it over an existing file). */
function linkTemporary(dir: Directory, fd: number): string {
  for (let attempt = 0; attempt < NAME_ATTEMPTS; attempt++) {
    const name = temporaryName();
    if (dir.linkUnnamed(fd, name) === 0) return name;
  }
  throw new Error(`Cannot name a temporary file in ${dir.path}: every random name was taken`);
}

/** Puts the data (`fd`, named `pending` or unnamed) under a fresh visible name beside `name`. */
function keep(dir: Directory, fd: number, pending: string | null, name: string): string {
  for (let attempt = 0; attempt < NAME_ATTEMPTS; attempt++) {
    let kept = keptName(name);
    let result: number;
    try {
      result = pending === null ? dir.linkUnnamed(fd, kept) : dir.rename(pending, kept, { noReplace: true });
    } catch (error) {
      if (!(error instanceof SystemError && error.errno === ENAMETOOLONG)) throw error;
      kept = `omniprof-kept-${randomHex(8)}`;
      result = pending === null ? dir.linkUnnamed(fd, kept) : dir.rename(pending, kept, { noReplace: true });
    }
    if (result === 0) return kept;
  }
  throw new Error(`Cannot keep the data in ${dir.path}: every random name was taken`);
}

/**
 * Writes `bytes` as a new file under a fresh visible name beside `name` (`omniprof-kept-XXXXXXXX-NAME`),
 * for data that could not go to `name`.
 *
 * @returns the name written.
 */
export function keepFile(dir: Directory, name: string, bytes: Uint8Array, options: ReplaceOptions): string {
  let candidate = keptName(name);
  try {
    return replaceFile(dir, candidate, null, bytes, options);
  } catch (error) {
    if (error instanceof OutputChangedError) return error.keptName;
    if (!(error instanceof SystemError && error.errno === ENAMETOOLONG)) throw error;
    candidate = `omniprof-kept-${randomHex(8)}`;
  }
  try {
    return replaceFile(dir, candidate, null, bytes, options);
  } catch (error) {
    if (error instanceof OutputChangedError) return error.keptName;
    throw error;
  }
}

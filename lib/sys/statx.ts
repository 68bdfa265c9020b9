/**
 * statx(2), the one reader of `struct statx` (its layout is the same on every architecture): what a file
 * descriptor, or a name relative to one, says about the file it names. {@linkcode Directory} and
 * {@linkcode RegularFile} each present these fields as their callers need them.
 *
 * @example
 * ```ts
 * import { AT_FDCWD } from "./open_flags.ts";
 * import { statx } from "./statx.ts";
 * const root = statx(AT_FDCWD, "/", 0);
 * console.log(root !== null && (root.mode & 0o170000) === 0o040000); // true: a folder
 * console.log(statx(AT_FDCWD, "/no/such/file", 0)); // null, errno ENOENT
 * ```
 *
 * @module
 */
import { cString, libc } from "./libc.ts";

/** The fields omniprof reads of a `struct statx`. */
export interface Statx {
  /** `stx_mode`: file type (`& 0o170000`) and permission bits. */
  readonly mode: number;
  readonly uid: number;
  /** Hard links: 0 once a file held open was removed. */
  readonly links: number;
  readonly size: number;
  readonly major: number;
  readonly minor: number;
  readonly inode: number;
}

const STATX_BASIC_STATS = 0x7ff;
const STATX_SIZE = 256;

/**
 * statx of `path` relative to `dirfd` (with AT_EMPTY_PATH and an empty path: `dirfd` itself), or null
 * when the call fails, with errno as it left it for the caller to read.
 */
export function statx(dirfd: number, path: string, flags: number): Statx | null {
  const buffer = new Uint8Array(STATX_SIZE);
  if (libc().fn.statx(dirfd, cString(path), flags, STATX_BASIC_STATS, buffer) !== 0) return null;
  const view = new DataView(buffer.buffer);
  return {
    mode: view.getUint16(28, true),
    uid: view.getUint32(20, true),
    links: view.getUint32(16, true),
    size: Number(view.getBigUint64(40, true)),
    major: view.getUint32(136, true),
    minor: view.getUint32(140, true),
    inode: Number(view.getBigUint64(32, true)),
  };
}

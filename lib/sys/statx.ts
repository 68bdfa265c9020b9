/**
 * statx(2), the one reader of `struct statx` (its layout is the same on every architecture): what a file
 * descriptor, or a name relative to one, says about the file it names. {@linkcode Directory} and
 * {@linkcode RegularFile} each present these fields as their callers need them.
 *
 * @example
 * ```ts
 * import { AT_FDCWD } from "./open_flags.ts";
 * import { statx } from "./statx.ts";
 * console.log(statx(AT_FDCWD, "/", 0)?.kind); // "directory"
 * console.log(statx(AT_FDCWD, "/no/such/file", 0)); // null, errno ENOENT
 * ```
 *
 * @module
 */
import { cString, libc } from "./libc.ts";

/** What a file is, from the type bits of its mode. */
export type FileKind = "file" | "directory" | "symlink" | "fifo" | "char device" | "block device" | "socket";

/** The fields omniprof reads of a `struct statx`. */
export interface Statx {
  /** The type bits of `stx_mode`; null for a type Linux does not define. */
  readonly kind: FileKind | null;
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

const S_IFMT = 0o170000;
const KIND_OF_TYPE = new Map<number, FileKind>([
  [0o100000, "file"],
  [0o040000, "directory"],
  [0o120000, "symlink"],
  [0o010000, "fifo"],
  [0o020000, "char device"],
  [0o060000, "block device"],
  [0o140000, "socket"],
]);

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
  const mode = view.getUint16(28, true);
  return {
    kind: KIND_OF_TYPE.get(mode & S_IFMT) ?? null,
    mode,
    uid: view.getUint32(20, true),
    links: view.getUint32(16, true),
    size: Number(view.getBigUint64(40, true)),
    major: view.getUint32(136, true),
    minor: view.getUint32(140, true),
    inode: Number(view.getBigUint64(32, true)),
  };
}

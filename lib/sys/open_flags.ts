/**
 * The flags that say how a path is opened and looked up: open(2) and openat(2)'s `O_*`, the `AT_*` of
 * the `*at` calls and statx, and openat2(2)'s `RESOLVE_*`. The numbers are x86-64's (some, O_DIRECTORY
 * and O_NOFOLLOW among them, differ on other architectures).
 *
 * @example
 * ```ts
 * import { cString, libc } from "./libc.ts";
 * import { AT_FDCWD, O_CLOEXEC, O_DIRECTORY } from "./open_flags.ts";
 * const fd = libc().fn.openat(AT_FDCWD, cString("/tmp"), O_DIRECTORY | O_CLOEXEC, 0);
 * ```
 *
 * @module
 */

export const O_RDONLY = 0;
export const O_WRONLY = 0o1;
export const O_CREAT = 0o100;
export const O_EXCL = 0o200;
/** Opening a terminal does not make it the controlling terminal. */
export const O_NOCTTY = 0o400;
export const O_TRUNC = 0o1000;
/** Open without blocking: a FIFO without writer or a device that waits for a peer returns at once. */
export const O_NONBLOCK = 0o4000;
export const O_DIRECTORY = 0o200000;
/** Refuse (ELOOP) when the last part of the path is a symbolic link. */
export const O_NOFOLLOW = 0o400000;
export const O_CLOEXEC = 0o2000000;
/**
 * A descriptor that only names a file: opening it runs no driver or FIFO code and reads nothing, so what
 * the name leads to can be checked with statx before the file is really opened.
 */
export const O_PATH = 0o10000000;
/** An unnamed file in a folder, freed by the kernel unless linked in (with O_DIRECTORY, as the kernel defines it). */
export const O_TMPFILE = 0o20000000 | O_DIRECTORY;

/** As the folder descriptor of a `*at` call: the working folder. */
export const AT_FDCWD = -100;
/** The name of a link itself, not of what it points to. */
export const AT_SYMLINK_NOFOLLOW = 0x100;
/** linkat: link the file a link points to. */
export const AT_SYMLINK_FOLLOW = 0x400;
/** statx, linkat: the descriptor itself, not a path relative to it. */
export const AT_EMPTY_PATH = 0x1000;

/** openat2: refuse /proc's magic links (`/proc/self/fd/N`, `/proc/PID/root`) on the way. */
export const RESOLVE_NO_MAGICLINKS = 0x02;
/** openat2: resolve the path as if the directory were the root (absolute links and `..` stay inside). */
export const RESOLVE_IN_ROOT = 0x10;

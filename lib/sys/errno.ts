/**
 * The errno values omniprof tells apart, with Linux's numbers (the same on x86-64 and arm64). Messages
 * give the C library's words for an errno (`strerror` in libc.ts), so only the numbers live here.
 *
 * @example
 * ```ts
 * import { ENOENT } from "./errno.ts";
 * import { SystemError } from "./libc.ts";
 * const missing = (error: unknown) => error instanceof SystemError && error.errno === ENOENT;
 * ```
 *
 * @module
 */

/** Operation not permitted (a privilege the caller lacks, a security module, a sealed file). */
export const EPERM = 1;
/** No such file or folder. */
export const ENOENT = 2;
/** No such process: it exited. */
export const ESRCH = 3;
/** A signal interrupted the call before it did anything: call it again. */
export const EINTR = 4;
/** No such device or address: opening a FIFO for writing, non-blocking, while no reader has it open. */
export const ENXIO = 6;
/** Argument list too long: also what a full BPF hash map answers an update with. */
export const E2BIG = 7;
/** Try again: a non-blocking call would wait, or the BPF verifier was interrupted. */
export const EAGAIN = 11;
/** Permission denied by the file's mode or owner. */
export const EACCES = 13;
/** The name exists already. */
export const EEXIST = 17;
/** A part of the path is not a folder. */
export const ENOTDIR = 20;
/** A folder where a file was needed (and O_TMPFILE on a kernel that predates it). */
export const EISDIR = 21;
/** Invalid argument: also what a file system that lacks a flag (RENAME_NOREPLACE) answers. */
export const EINVAL = 22;
/** No space left on the device: also what a full BPF LPM trie answers an update with. */
export const ENOSPC = 28;
/** Read-only file system. */
export const EROFS = 30;
/** The reader of a pipe or FIFO went away. */
export const EPIPE = 32;
/** A name or path longer than the kernel takes. */
export const ENAMETOOLONG = 36;
/** The kernel lacks the system call, or a seccomp filter hides it. */
export const ENOSYS = 38;
/** Too many levels of symbolic links, or O_NOFOLLOW met a link. */
export const ELOOP = 40;
/** The operation is not supported here (O_TMPFILE on a file system without it). */
export const EOPNOTSUPP = 95;

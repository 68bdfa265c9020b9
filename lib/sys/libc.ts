/**
 * The few C library functions omniprof calls through Deno's FFI: raw syscalls (perf_event_open, openat2,
 * pidfds), mmap for ring buffers, epoll to wait for them, ioctl, prctl, errno, clock_gettime, and the file
 * calls Deno's own API lacks: opening with flags such as O_PATH and O_NONBLOCK, statx and pread on a raw
 * descriptor, the `*at` calls that write output files relative to a folder held open, and free() for what
 * other C libraries allocate.
 *
 * @example
 * ```ts
 * import { libc } from "./libc.ts";
 * const pageSize = libc().pageSize;
 * ```
 *
 * @module
 */
import { lazySymbols } from "./lazy_symbols.ts";

const symbols = {
  // glibc's syscall() is variadic, but on x86-64 integer arguments travel in the same registers either
  // way and glibc's implementation only moves them, so a fixed six-argument signature is safe.
  syscall: { parameters: ["i64", "buffer", "i64", "i64", "i64", "i64"], result: "i64" },
  ioctl: { parameters: ["i32", "u64", "u64"], result: "i32" },
  dlopen: { parameters: ["buffer", "i32"], result: "pointer" },
  dlsym: { parameters: ["pointer", "buffer"], result: "pointer" },
  mmap: { parameters: ["pointer", "usize", "i32", "i32", "i32", "i64"], result: "pointer" },
  munmap: { parameters: ["pointer", "usize"], result: "i32" },
  // openat2(2) has no glibc wrapper: the same variadic syscall() with the argument kinds it takes.
  openat2: { name: "syscall", parameters: ["i64", "i64", "buffer", "buffer", "usize"], result: "i64" },
  open: { parameters: ["buffer", "i32"], result: "i32" },
  close: { parameters: ["i32"], result: "i32" },
  statx: { parameters: ["i32", "buffer", "i32", "u32", "buffer"], result: "i32" },
  pread: { parameters: ["i32", "buffer", "usize", "i64"], result: "isize" },
  // Variadic too; F_DUPFD_CLOEXEC takes one integer argument, passed in a register either way.
  fcntl: { parameters: ["i32", "i32", "i64"], result: "i32" },
  readlink: { parameters: ["buffer", "buffer", "usize"], result: "isize" },
  write: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  memfd_create: { parameters: ["buffer", "u32"], result: "i32" },
  __errno_location: { parameters: [], result: "pointer" },
  strerror: { parameters: ["i32"], result: "pointer" },
  vsnprintf: { parameters: ["buffer", "usize", "pointer", "pointer"], result: "i32" },
  sysconf: { parameters: ["i32"], result: "i64" },
  clock_gettime: { parameters: ["i32", "buffer"], result: "i32" },
  getrlimit: { parameters: ["i32", "buffer"], result: "i32" },
  epoll_create1: { parameters: ["i32"], result: "i32" },
  epoll_ctl: { parameters: ["i32", "i32", "i32", "buffer"], result: "i32" },
  // Runs on a worker thread and returns a Promise, so waiting never blocks the event loop.
  epoll_wait: { parameters: ["i32", "buffer", "i32", "i32"], result: "i32", nonblocking: true },
  eventfd: { parameters: ["u32", "i32"], result: "i32" },
  setrlimit: { parameters: ["i32", "buffer"], result: "i32" },
  waitpid: { parameters: ["i32", "pointer", "i32"], result: "i32" },
  // Variadic like syscall(), and safe for the same reason; PR_SET_CHILD_SUBREAPER takes one integer.
  prctl: { parameters: ["i32", "u64", "u64", "u64", "u64"], result: "i32" },
  // syscall() again, for calls whose arguments are all integers (pidfd_open, pidfd_send_signal).
  syscall_integers: { name: "syscall", parameters: ["i64", "i64", "i64", "i64", "i64"], result: "i64" },
  // openat's mode is variadic; on x86-64 it travels in the same register either way (see syscall above).
  openat: { parameters: ["i32", "buffer", "i32", "u32"], result: "i32" },
  readlinkat: { parameters: ["i32", "buffer", "buffer", "usize"], result: "isize" },
  linkat: { parameters: ["i32", "buffer", "i32", "buffer", "i32"], result: "i32" },
  renameat2: { parameters: ["i32", "buffer", "i32", "buffer", "u32"], result: "i32" },
  unlinkat: { parameters: ["i32", "buffer", "i32"], result: "i32" },
  fchown: { parameters: ["i32", "u32", "u32"], result: "i32" },
  fsync: { parameters: ["i32"], result: "i32" },
  // On a worker thread: waiting for a slow reader never blocks the event loop.
  poll: { parameters: ["buffer", "u64", "i32"], result: "i32", nonblocking: true },
  free: { parameters: ["pointer"], result: "void" },
  mount: { parameters: ["buffer", "buffer", "buffer", "u64", "pointer"], result: "i32" },
  umount2: { parameters: ["buffer", "i32"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

export const PROT_READ = 1;
export const PROT_WRITE = 2;
export const MAP_SHARED = 1;
export const F_DUPFD_CLOEXEC = 1030;
export const SYS_OPENAT2 = 437;
const SC_PAGESIZE = 30;
const RLIMIT_NOFILE = 7;

/** An error from a system call, with the errno it failed with. */
export class SystemError extends Error {
  /** The errno value (positive). */
  readonly errno: number;
  constructor(action: string, errno: number) {
    super(`Cannot ${action}: ${strerror(errno)} (errno ${errno})`);
    this.name = "SystemError";
    this.errno = errno;
  }
}

/** The loaded C library and a few derived values. */
export interface Libc {
  readonly fn: Deno.DynamicLibrary<typeof symbols>["symbols"];
  readonly pageSize: number;
  /** errno of the last failed call on this thread; read it right after a synchronous call. */
  errno(): number;
}

let loaded: Libc | undefined;

/** Opens the C library once and returns it; each function is bound on first use (lazy_symbols.ts). */
export function libc(): Libc {
  if (loaded) return loaded;
  const fn = lazySymbols("libc.so.6", symbols);
  const errnoPointer = fn.__errno_location();
  if (errnoPointer === null) throw new Error("Cannot locate errno: __errno_location returned NULL");
  const errnoView = new Deno.UnsafePointerView(errnoPointer);
  loaded = {
    fn,
    pageSize: Number(fn.sysconf(SC_PAGESIZE)),
    errno: () => errnoView.getInt32(),
  };
  return loaded;
}

/** Whether mmap's result is MAP_FAILED ((void *)-1). */
export function isMapFailed(pointer: Deno.PointerValue): boolean {
  return pointer === null || Deno.UnsafePointer.value(pointer) === 0xffffffffffffffffn;
}

/** The C library's text for an errno value. */
export function strerror(errno: number): string {
  const pointer = libc().fn.strerror(errno);
  return pointer === null ? `errno ${errno}` : Deno.UnsafePointerView.getCString(pointer);
}

/** Encodes a string as a NUL-terminated C string. */
export function cString(text: string): Uint8Array<ArrayBuffer> {
  const bytes = new TextEncoder().encode(text);
  const out = new Uint8Array(bytes.length + 1);
  out.set(bytes);
  return out;
}

/**
 * Raises the soft limit on open files to the hard limit: the profiler keeps one descriptor per
 * profiled executable (so files that are replaced or deleted can still be symbolized) plus one per CPU
 * for perf events. Returns the new soft limit.
 */
export function raiseOpenFileLimit(): number {
  const limits = new BigUint64Array(2);
  const { fn } = libc();
  if (fn.getrlimit(RLIMIT_NOFILE, limits) !== 0) return 1024;
  if (limits[0]! < limits[1]!) {
    limits[0] = limits[1]!;
    if (fn.setrlimit(RLIMIT_NOFILE, limits) !== 0) return 1024;
  }
  return Number(limits[0]);
}

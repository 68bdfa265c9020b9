/**
 * The kernel's tracing file system, where tracepoints are listed with their ids. libbpf looks for it at
 * /sys/kernel/tracing (or under debugfs): where it is not mounted there, omniprof mounts it for the
 * session and unmounts it after, as perf does for its own use.
 *
 * @example
 * ```ts ignore
 * import { Tracefs } from "./tracefs.ts";
 * using tracefs = Tracefs.mount();
 * const exists = tracefs.hasTracepoint("syscalls", "sys_enter_write");
 * ```
 *
 * @module
 */
import { pathExists } from "../sys/files.ts";
import { libc, SystemError } from "../sys/libc.ts";

/** Where libbpf looks first when debugfs is not mounted, and where tracefs belongs. */
export const TRACEFS = "/sys/kernel/tracing";
/** tracefs under a mounted debugfs, which libbpf prefers when it exists. */
const DEBUGFS_TRACING = "/sys/kernel/debug/tracing";

const encoder = new TextEncoder();

/** A mounted tracefs; unmounted on close when this session mounted it. */
export class Tracefs {
  /** The folder libbpf reads (events/CATEGORY/NAME/id). */
  readonly path: string;
  #mountedHere: boolean;

  private constructor(path: string, mountedHere: boolean) {
    this.path = path;
    this.#mountedHere = mountedHere;
  }

  /**
   * The tracefs libbpf will use, mounted at {@linkcode TRACEFS} first if it is not there.
   *
   * @throws {SystemError} when it cannot be mounted (no tracefs in this kernel, no privilege).
   */
  static mount(): Tracefs {
    // libbpf takes debugfs's when that folder exists at all.
    if (pathExists(DEBUGFS_TRACING)) return new Tracefs(DEBUGFS_TRACING, false);
    if (pathExists(`${TRACEFS}/events`)) return new Tracefs(TRACEFS, false);
    const result = libc().fn.mount(
      encoder.encode("tracefs\0"),
      encoder.encode(`${TRACEFS}\0`),
      encoder.encode("tracefs\0"),
      0n,
      null,
    );
    if (result !== 0) throw new SystemError(`mount tracefs at ${TRACEFS}`, libc().errno());
    return new Tracefs(TRACEFS, true);
  }

  /** Whether tracepoint `category`:`name` exists in this kernel. */
  hasTracepoint(category: string, name: string): boolean {
    return pathExists(`${this.path}/events/${category}/${name}/id`);
  }

  /** Unmounts tracefs if {@linkcode mount} mounted it. Safe to call twice. */
  close(): void {
    if (!this.#mountedHere) return;
    this.#mountedHere = false;
    // MNT_DETACH: a file the kernel still holds open there must not keep it mounted.
    libc().fn.umount2(encoder.encode(`${TRACEFS}\0`), 2);
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

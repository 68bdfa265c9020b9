/**
 * The C library and the dynamic loader among a process's mappings: where they are mapped and a way to open
 * the very file the process mapped. Interpreter plug-ins need them to find thread data (glibc's thread
 * layout) and loader data (`_r_debug`, a module's static TLS block). They look in the mappings the process
 * manager read and hands to every instance, so /proc/PID/maps is read in one place only.
 *
 * @example
 * ```ts ignore
 * import { findProcessLibraries } from "./process_libraries.ts";
 * const { libc } = findProcessLibraries(mappings); // from Data.attach or Instance.synchronizeMappings
 * using elf = libc === null ? null : ElfFile.fromFile(libc.open(), libc.path);
 * ```
 *
 * @module
 */
import type { ProcMapping } from "../process/proc_maps.ts";
import type { RegularFile } from "../sys/regular_file.ts";

/** A mapping whose file can be opened (a {@linkcode ResolvedMapping} of the process manager is one). */
export interface OpenableMapping extends ProcMapping {
  readonly file: {
    /**
     * Opens the file the process mapped (a new handle each time, which the caller closes).
     *
     * @throws {FileRefusedError} when it cannot be read.
     */
    open(): RegularFile;
  };
}

/** A library as one process maps it. */
export interface MappedLibrary {
  /** The path the process mapped. */
  readonly path: string;
  /** An executable mapping of it. */
  readonly mapping: ProcMapping;
  /**
   * Opens the file the process mapped (a new handle each time, which the caller closes).
   *
   * @throws {FileRefusedError} when it cannot be read.
   */
  open(): RegularFile;
}

/** The libraries {@linkcode findProcessLibraries} looks for. */
export interface ProcessLibraries {
  /** glibc's `libc.so.6` (or an old `libc-2.NN.so`). */
  readonly libc: MappedLibrary | null;
  /** The dynamic loader (`ld-linux-x86-64.so.2`, `ld-2.NN.so`). */
  readonly loader: MappedLibrary | null;
}

const LIBC = /\/libc(?:\.so\.6|-\d+\.\d+\.so)$/;
const LOADER = /\/ld-(?:linux-x86-64\.so\.2|\d+\.\d+\.so)$/;

/** Finds libc and the dynamic loader among a process's executable mappings. */
export function findProcessLibraries(mappings: readonly OpenableMapping[]): ProcessLibraries {
  const find = (pattern: RegExp): MappedLibrary | null => {
    const mapping = mappings.find((m) => !m.deleted && pattern.test(m.path));
    if (mapping === undefined) return null;
    return { path: mapping.path, mapping, open: () => mapping.file.open() };
  };
  return { libc: find(LIBC), loader: find(LOADER) };
}

/** Re-exported from lib/process/proc_maps.ts, where it belongs with the mappings it reads. */
export { mappingBias } from "../process/proc_maps.ts";

/**
 * The C library and the dynamic loader of a running process: where they are mapped and with which bias,
 * and a path that opens the very file the process mapped. Interpreter plug-ins need them to find thread
 * data (glibc's thread layout) and loader data (`_r_debug`, a module's static TLS block).
 *
 * @example
 * ```ts ignore
 * import { findProcessLibraries } from "./process_libraries.ts";
 * const { libc, loader } = findProcessLibraries(asPid(1234));
 * console.log(libc?.path, libc?.bias.toString(16));
 * ```
 *
 * @module
 */
import { parseProcMaps, type ProcMapping } from "../process/proc_maps.ts";
import { isFile } from "../sys/files.ts";
import type { Pid } from "../types.ts";

/** A library as one process maps it. */
export interface MappedLibrary {
  /** The path the process mapped. */
  readonly path: string;
  /** A path that opens that file from this process (through the process's view of the file system). */
  readonly openPath: string;
  /** An executable mapping of it. */
  readonly mapping: ProcMapping;
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

/**
 * Finds libc and the dynamic loader among the executable mappings of `pid`.
 *
 * @throws {Deno.errors.NotFound} when the process does not exist.
 */
export function findProcessLibraries(pid: Pid, procRoot = "/proc"): ProcessLibraries {
  const mappings = parseProcMaps(Deno.readTextFileSync(`${procRoot}/${pid}/maps`));
  const find = (pattern: RegExp): MappedLibrary | null => {
    const mapping = mappings.find((m) => !m.deleted && pattern.test(m.path));
    if (mapping === undefined) return null;
    const range = `${mapping.start.toString(16)}-${mapping.end.toString(16)}`;
    const candidates = [`${procRoot}/${pid}/map_files/${range}`, `${procRoot}/${pid}/root${mapping.path}`];
    const openPath = candidates.find(isFile) ?? mapping.path;
    return { path: mapping.path, openPath, mapping };
  };
  return { libc: find(LIBC), loader: find(LOADER) };
}

/** Re-exported from lib/process/proc_maps.ts, where it belongs with the mappings it reads. */
export { mappingBias } from "../process/proc_maps.ts";

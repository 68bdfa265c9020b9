/**
 * Finds and opens the jitdump of a process: `jit-PID.dump`, PID being the process's PID in its own PID
 * namespace. A runtime writes it where it likes (V8 in its working directory, .NET and JVM agents in
 * `/tmp`) and maps it executable so that perf, which watches mappings, finds it: the file is looked for
 * among the process's mappings (`/proc/PID/maps`) first, then as `/tmp/jit-PID.dump` and
 * `/tmp/perf-PID.dump`. The paths of `/proc/PID/maps` are the process's (a process in a container shows
 * its container's), so every path is resolved in the process's root, and each file is checked as a perf
 * map is ({@linkcode openProcessOwnFile}: no link as the last part, a regular file only, the process's
 * user's or root's, one name): a folder anyone writes to may hold a planted one.
 *
 * @example
 * ```ts ignore
 * import { openJitDumpFile } from "./jitdump_file.ts";
 * const opening = openJitDumpFile(pid);
 * if (opening.kind === "opened") using file = opening.file;
 * ```
 *
 * @module
 */
import { type ProcMapping, readProcMaps } from "../process/proc_maps.ts";
import type { Pid } from "../types.ts";
import { openProcessOwnFile, type PerfMapOpening } from "./perf_map_file.ts";

/**
 * Where the jitdump of a process whose PID in its namespace is `namespacePid` may be, most likely first:
 * the mapped files named `jit-PID.dump` (not deleted since), then the names in `/tmp`.
 */
export function jitDumpPaths(namespacePid: number, mappings: readonly ProcMapping[]): string[] {
  const name = `jit-${namespacePid}.dump`;
  const paths: string[] = [];
  for (const mapping of mappings) {
    const { path } = mapping;
    if (mapping.deleted || !path.startsWith("/") || !path.endsWith(`/${name}`)) continue;
    if (!paths.includes(path)) paths.push(path);
  }
  for (const path of [`/tmp/${name}`, `/tmp/perf-${namespacePid}.dump`]) {
    if (!paths.includes(path)) paths.push(path);
  }
  return paths;
}

/** Finds and opens the jitdump of process `pid`, as the module describes. Never throws. */
export function openJitDumpFile(pid: Pid, procRoot = "/proc"): PerfMapOpening {
  return openProcessOwnFile(pid, (info) => {
    const mappings = readProcMaps(pid, procRoot).mappings ?? [];
    return jitDumpPaths(info.namespacePid ?? pid, mappings);
  }, procRoot);
}

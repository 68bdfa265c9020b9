/**
 * Finds the separate debug file of a stripped ELF the way debuggers do: by GNU build ID under
 * `<debug dir>/.build-id/xx/rest.debug`, then by `.gnu_debuglink` next to the binary, in its `.debug/`
 * subdirectory and under `<debug dir>/<binary's dir>/`. A build-ID candidate must carry the same build ID;
 * a debuglink candidate must match the link's CRC-32. All paths are looked up under a root prefix, so the
 * files of a containerized process are found through `/proc/PID/root`.
 *
 * @example
 * ```ts
 * import { ElfFile } from "../elf/elf_file.ts";
 * import { findDebugFile } from "./debug_file.ts";
 * using elf = ElfFile.open("/usr/bin/bash");
 * console.log(findDebugFile(elf, "/usr/bin/bash")); // "/usr/lib/debug/.build-id/ab/cdef.debug" or null
 * ```
 *
 * @module
 */

import { crc32 } from "../hash/crc32.ts";
import { ElfFile } from "../elf/elf_file.ts";

/** Where to look for debug files. */
export interface DebugFileOptions {
  /** Prefix of every path looked at, e.g. `/proc/PID/root` for a process in a container. Default "/". */
  root?: string;
  /** Global debug directories inside the root. Default `["/usr/lib/debug"]`. */
  debugDirs?: readonly string[];
  /** Debug files larger than this are not checksummed (and so not used by debuglink). Default 4 GiB. */
  maxCrcBytes?: number;
}

const DEFAULT_DEBUG_DIRS = ["/usr/lib/debug"];
const DEFAULT_MAX_CRC_BYTES = 4 * 1024 * 1024 * 1024;
const CRC_CHUNK_BYTES = 1 << 20;

/**
 * Returns the host path of the debug file for `elf`, or null when none is found. `path` is where the
 * binary lives inside `options.root` (the path the process sees); it locates debuglink candidates.
 * Never throws for unreadable or malformed candidates: they are skipped.
 */
export function findDebugFile(elf: ElfFile, path: string, options: DebugFileOptions = {}): string | null {
  const root = options.root ?? "/";
  const debugDirs = options.debugDirs ?? DEFAULT_DEBUG_DIRS;
  const self = underRoot(root, path);

  const buildId = safe(() => elf.buildId(), "");
  // A build ID shorter than 2 bytes cannot be split into the xx/rest layout.
  if (buildId.length > 2) {
    for (const dir of debugDirs) {
      const candidate = underRoot(root, `${dir}/.build-id/${buildId.slice(0, 2)}/${buildId.slice(2)}.debug`);
      if (candidate !== self && hasBuildId(candidate, buildId)) return candidate;
    }
  }

  const link = safe(() => elf.debugLink(), null);
  if (link === null || !path.startsWith("/")) return null;
  const dir = path.slice(0, path.lastIndexOf("/")) || "";
  const candidates = [`${dir}/${link.fileName}`, `${dir}/.debug/${link.fileName}`];
  for (const debugDir of debugDirs) candidates.push(`${debugDir}${dir}/${link.fileName}`);
  for (const relative of candidates) {
    const candidate = underRoot(root, relative);
    if (
      candidate !== self && fileCrc32(candidate, options.maxCrcBytes ?? DEFAULT_MAX_CRC_BYTES) === link.crc32
    ) {
      return candidate;
    }
  }
  return null;
}

/**
 * CRC-32 (the zlib / `.gnu_debuglink` polynomial) of a whole regular file, read in chunks; null when the
 * file is missing, not a regular file, unreadable or larger than `maxBytes`.
 */
export function fileCrc32(path: string, maxBytes: number = DEFAULT_MAX_CRC_BYTES): number | null {
  let file: Deno.FsFile | undefined;
  try {
    if (!Deno.statSync(path).isFile) return null;
    file = Deno.openSync(path, { read: true });
    const stat = file.statSync();
    if (!stat.isFile || stat.size > maxBytes) return null;
    const buffer = new Uint8Array(CRC_CHUNK_BYTES);
    let crc = 0;
    let total = 0;
    for (;;) {
      const n = file.readSync(buffer);
      if (n === null || n === 0) break;
      total += n;
      // A file growing while it is read is not the file the link was made for.
      if (total > maxBytes) return null;
      crc = crc32(buffer.subarray(0, n), crc);
    }
    return crc >>> 0;
  } catch {
    return null;
  } finally {
    file?.close();
  }
}

/** Joins a root prefix and an absolute path inside it. */
export function underRoot(root: string, path: string): string {
  const trimmed = root.replace(/\/+$/, "");
  return trimmed === "" ? path : trimmed + path;
}

function hasBuildId(path: string, buildId: string): boolean {
  try {
    using candidate = ElfFile.open(path);
    return candidate.buildId() === buildId;
  } catch {
    return false;
  }
}

function safe<T>(read: () => T, fallback: T): T {
  try {
    return read();
  } catch {
    return fallback;
  }
}

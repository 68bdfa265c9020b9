/**
 * Finds the separate debug file of a stripped ELF the way debuggers do: by GNU build ID under
 * `<debug dir>/.build-id/xx/rest.debug`, then by `.gnu_debuglink` next to the binary, in its `.debug/`
 * subdirectory and under `<debug dir>/<binary's dir>/`. A build-ID candidate must carry the same build ID;
 * a debuglink candidate must match the link's CRC-32.
 *
 * Where: first inside the process's own root (a container's files, its links resolved inside it), since
 * that is where the binary came from and its debug package would be installed; then in the host's debug
 * directories, which hold what the host's administrator installed (e.g. debug packages for the images it
 * runs). Beside-the-binary candidates are looked for in the process's root only: on the host, that folder
 * is another system's. Every candidate is opened as a regular file only (no FIFO or device is opened)
 * and checked by content, so a wrong file found anywhere is skipped.
 *
 * @example
 * ```ts
 * import { ElfFile } from "../elf/elf_file.ts";
 * import { findDebugFile } from "./debug_file.ts";
 * using elf = ElfFile.open("/usr/bin/bash");
 * using debug = findDebugFile(elf, "/usr/bin/bash");
 * console.log(debug?.name ?? "no debug file"); // "/usr/lib/debug/.build-id/ab/cdef.debug"
 * ```
 *
 * @module
 */

import { crc32 } from "../hash/crc32.ts";
import { ElfFile, type ElfFileOptions } from "../elf/elf_file.ts";
import { type FileIdentity, RegularFile, sameIdentity } from "../sys/regular_file.ts";
import type { RootDirectory } from "../sys/root_directory.ts";

/** Where to look for debug files. */
export interface DebugFileOptions {
  /** The process's root (e.g. `/proc/PID/root` of a process in a container); null: the host's only. */
  root?: RootDirectory | null;
  /** Global debug directories, in each root. Default `["/usr/lib/debug"]`. */
  debugDirs?: readonly string[];
  /** Whether to look in the host's debug directories after the process's root. Default true. */
  host?: boolean;
  /** The binary itself, which is never its own debug file. */
  binary?: FileIdentity;
  /** Debug files larger than this are not checksummed (and so not used by debuglink). Default 4 GiB. */
  maxCrcBytes?: number;
  /** How the debug file is parsed. */
  elfOptions?: ElfFileOptions;
}

const DEFAULT_DEBUG_DIRS = ["/usr/lib/debug"];
const DEFAULT_MAX_CRC_BYTES = 4 * 1024 * 1024 * 1024;
const CRC_CHUNK_BYTES = 1 << 20;

/** One place to look: a root (null for the host's) and whether beside-the-binary candidates count. */
interface Place {
  root: RootDirectory | null;
  beside: boolean;
}

/**
 * Returns the debug file of `elf`, opened (the caller closes it), or null when none is found. `path` is
 * where the binary lives as its process sees it; it locates debuglink candidates. Never throws for
 * unreadable or malformed candidates: they are skipped.
 */
export function findDebugFile(elf: ElfFile, path: string, options: DebugFileOptions = {}): ElfFile | null {
  const debugDirs = options.debugDirs ?? DEFAULT_DEBUG_DIRS;
  const places: Place[] = options.root ? [{ root: options.root, beside: true }] : [];
  if (options.host ?? true) places.push({ root: null, beside: !options.root });
  const buildId = safe(() => elf.buildId(), "");
  const link = safe(() => elf.debugLink(), null);
  const dir = path.startsWith("/") ? path.slice(0, path.lastIndexOf("/")) : null;

  for (const { root, beside } of places) {
    // A build ID shorter than 2 bytes cannot be split into the xx/rest layout.
    if (buildId.length > 2) {
      for (const debugDir of debugDirs) {
        const candidate = `${debugDir}/.build-id/${buildId.slice(0, 2)}/${buildId.slice(2)}.debug`;
        const found = openCandidate(
          root,
          candidate,
          options,
          (debug) => safe(() => debug.buildId(), "") === buildId,
        );
        if (found !== null) return found;
      }
    }
    if (link === null || dir === null) continue;
    const candidates = beside ? [`${dir}/${link.fileName}`, `${dir}/.debug/${link.fileName}`] : [];
    for (const debugDir of debugDirs) candidates.push(`${debugDir}${dir}/${link.fileName}`);
    for (const candidate of candidates) {
      const found = openCandidate(root, candidate, options, undefined, link.crc32);
      if (found !== null) return found;
    }
  }
  return null;
}

/**
 * CRC-32 (the zlib / `.gnu_debuglink` polynomial) of a whole regular file, read in 1 MiB windows; null
 * when the file is missing, not a regular file, unreadable or larger than `maxBytes`.
 */
export function fileCrc32(
  file: string | RegularFile,
  maxBytes: number = DEFAULT_MAX_CRC_BYTES,
): number | null {
  let opened: RegularFile | undefined;
  try {
    if (typeof file === "string") file = opened = RegularFile.open(file);
    if (file.size > maxBytes) return null;
    const buffer = new Uint8Array(CRC_CHUNK_BYTES);
    let crc = 0;
    let total = 0;
    for (;;) {
      const n = file.readInto(total, buffer);
      if (n === 0) break;
      total += n;
      // A file growing while it is read is not the file the link was made for.
      if (total > maxBytes) return null;
      crc = crc32(buffer.subarray(0, n), crc);
    }
    return crc >>> 0;
  } catch {
    return null;
  } finally {
    opened?.close();
  }
}

/**
 * Opens `path` in `root` (the host's when null) and returns it as an ELF when it passes `accept` or has
 * the CRC `crc`; else closes it and returns null.
 */
function openCandidate(
  root: RootDirectory | null,
  path: string,
  options: DebugFileOptions,
  accept?: (debug: ElfFile) => boolean,
  crc?: number,
): ElfFile | null {
  let file: RegularFile;
  try {
    file = root === null ? RegularFile.open(path) : root.openFile(path);
  } catch {
    return null;
  }
  if (options.binary !== undefined && sameIdentity(file.identity, options.binary)) {
    file.close();
    return null;
  }
  if (crc !== undefined && fileCrc32(file, options.maxCrcBytes ?? DEFAULT_MAX_CRC_BYTES) !== crc) {
    file.close();
    return null;
  }
  let debug: ElfFile;
  try {
    debug = ElfFile.fromFile(file, file.name, options.elfOptions);
  } catch {
    return null;
  }
  if (accept === undefined || accept(debug)) return debug;
  debug.close();
  return null;
}

function safe<T>(read: () => T, fallback: T): T {
  try {
    return read();
  } catch {
    return fallback;
  }
}

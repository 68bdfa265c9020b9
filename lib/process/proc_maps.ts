/**
 * Reads and parses `/proc/PID/maps`, keeping the executable mappings (the only ones a program counter or
 * return address can point into). {@linkcode readProcMaps} is the one reader of the file: the process
 * manager reads every sampled process through it, and tools read their own through it.
 *
 * @example
 * ```ts
 * import { parseProcMaps } from "./proc_maps.ts";
 * import assert from "node:assert/strict";
 * const [m] = parseProcMaps("55d0c0a00000-55d0c0a21000 r-xp 00002000 fd:01 1234  /usr/bin/true\n");
 * assert.equal(m?.path, "/usr/bin/true");
 * assert.equal(m?.fileOffset, 0x2000);
 * ```
 *
 * @module
 */
import type { LoadSegment } from "../elf/elf_file.ts";
import { getLogger } from "../log/logger.ts";
import type { Address, Pid } from "../types.ts";
import { type ProcessKey, readProcessKey, sameProcess } from "./process_key.ts";

const logger = getLogger(["omniprof", "process"]);

/** One executable mapping of a process. */
export interface ProcMapping {
  start: Address;
  /** Exclusive end. */
  end: Address;
  /** Offset in the file of `start`. */
  fileOffset: number;
  /** Device as "major:minor" in hex, as the kernel prints it. */
  device: string;
  inode: number;
  /** The mapped file, or a pseudo name like `[vdso]`, or "" for anonymous memory (e.g. JIT code). */
  path: string;
  /** The kernel appends " (deleted)" when the file was removed or replaced since it was mapped. */
  deleted: boolean;
}

// Numbers as the kernel prints them: 64-bit addresses and offsets (at most 16 hex digits), a device's
// major and minor numbers (32 bits at most), a 64-bit inode.
const LINE =
  /^([0-9a-f]{1,16})-([0-9a-f]{1,16}) ([r-])([w-])([x-])([ps]) ([0-9a-f]{1,16}) ([0-9a-f]{1,8}:[0-9a-f]{1,8}) (\d{1,20})(?:\s+(.*))?$/;

/**
 * Parses the text of a maps file. Lines that are not executable are skipped; malformed lines throw a
 * RangeError (the kernel never writes them, so they mean the input is not a maps file).
 */
export function parseProcMaps(text: string): ProcMapping[] {
  const mappings: ProcMapping[] = [];
  let lineStart = 0;
  while (lineStart < text.length) {
    let lineEnd = text.indexOf("\n", lineStart);
    if (lineEnd < 0) lineEnd = text.length;
    // Cheap test of the x permission before running the regular expression: most lines are data.
    const permissions = text.indexOf(" ", lineStart) + 1;
    if (permissions > 0 && text.charCodeAt(permissions + 2) === 0x78 /* x */) {
      const line = text.slice(lineStart, lineEnd);
      const match = LINE.exec(line);
      if (!match) throw new RangeError(`Cannot parse maps line: "${line}"`);
      const start = parseInt(match[1]!, 16) as Address;
      const end = parseInt(match[2]!, 16) as Address;
      const inode = Number(match[9]);
      // 2^64 itself: the largest inode (2^64 - 1) rounds up to it as a double.
      if (!(start < end) || inode > 2 ** 64) throw new RangeError(`Cannot parse maps line: "${line}"`);
      let path = match[10] ?? "";
      const deleted = path.endsWith(" (deleted)");
      if (deleted) path = path.slice(0, -" (deleted)".length);
      mappings.push({
        start,
        end,
        fileOffset: parseInt(match[7]!, 16),
        device: match[8]!,
        inode,
        path,
        deleted,
      });
    }
    lineStart = lineEnd + 1;
  }
  mappings.sort((a, b) => a.start - b.start);
  return mappings;
}

/** One read of a process's maps: whose they are, and what they hold. */
export interface ProcMapsRead {
  /** The process read, or null when procfs has no stat for it. */
  readonly key: ProcessKey | null;
  /** Its executable mappings, sorted by address; null when it has exited (or changed hands twice). */
  readonly mappings: ProcMapping[] | null;
}

/**
 * The executable mappings of the process holding `pid`, and its key. The start time is read before and
 * after the maps: the same both times says whose maps they are (a PID that changed hands in between is
 * read again, once).
 */
export function readProcMaps(pid: Pid, procRoot = "/proc"): ProcMapsRead {
  for (let attempt = 0;; attempt++) {
    const before = readProcessKey(pid, procRoot);
    let text: string;
    try {
      text = Deno.readTextFileSync(`${procRoot}/${pid}/maps`);
    } catch (error) {
      // ENOENT/ESRCH: the process exited before we looked. Its traces keep their raw addresses.
      if (!(error instanceof Deno.errors.NotFound)) {
        logger.debug("Cannot read mappings of {pid}: {error}", { pid, error: String(error) });
      }
      return { key: before, mappings: null };
    }
    if (before === null) return { key: null, mappings: parseProcMaps(text) };
    const after = readProcessKey(pid, procRoot);
    if (sameProcess(before, after)) return { key: after, mappings: parseProcMaps(text) };
    if (attempt > 0) return { key: after, mappings: null };
  }
}

/** Index of the mapping containing `address` in a start-sorted list, or -1. */
export function findMapping(mappings: readonly ProcMapping[], address: number): number {
  let low = 0;
  let high = mappings.length - 1;
  while (low <= high) {
    const middle = (low + high) >>> 1;
    const mapping = mappings[middle]!;
    if (address < mapping.start) high = middle - 1;
    else if (address >= mapping.end) low = middle + 1;
    else return middle;
  }
  return -1;
}

/**
 * The load bias of a mapping (process address - ELF virtual address), through the PT_LOAD segment that
 * holds the mapping's file offset; null when none does.
 */
export function mappingBias(mapping: ProcMapping, segments: readonly LoadSegment[]): number | null {
  for (const segment of segments) {
    // A segment is mapped from the page holding its first byte.
    const pageStart = segment.offset - (segment.offset % 4096);
    if (
      mapping.fileOffset >= pageStart && mapping.fileOffset < segment.offset + Math.max(segment.filesz, 1)
    ) {
      return mapping.start - (mapping.fileOffset - segment.offset + segment.vaddr);
    }
  }
  return null;
}

/**
 * The one way omniprof opens a file because a process maps it (for unwind tables, symbols, build IDs,
 * runtime detection). The path in `/proc/PID/maps` is only a name: since the process mapped the file,
 * another file, a FIFO (opening it would wait forever) or a device may have taken that name, and in a
 * container the name means the container's file, not the host's. So the file is reached through the
 * process: `/proc/PID/map_files/START-END`, a link to the very file of the mapping (deleted files too),
 * else the path resolved inside the process's root (`/proc/PID/root`, links kept inside it). Either is
 * opened with {@linkcode RegularFile.open}: only a regular file whose device and inode are the ones the
 * maps line gives is opened at all. Anything else is refused with a {@linkcode FileRefusal} reason, and
 * the caller leaves the file's frames unsymbolized.
 *
 * @example
 * ```ts ignore
 * import { openMappedFile } from "./mapped_file_opener.ts";
 * import { parseProcMaps } from "./proc_maps.ts";
 * const [mapping] = parseProcMaps(Deno.readTextFileSync(`/proc/${pid}/maps`));
 * using file = openMappedFile(pid, mapping!);
 * ```
 *
 * @module
 */
import { type FileIdentity, type FileRefusal, FileRefusedError, RegularFile } from "../sys/regular_file.ts";
import { RootDirectory } from "../sys/root_directory.ts";
import type { Pid } from "../types.ts";
import type { ProcMapping } from "./proc_maps.ts";

/** Where to find the process. */
export interface MappedFileOpenerOptions {
  /** Where procfs is mounted. Default "/proc". */
  procRoot?: string;
  /** The process's root, already open (saves opening `/proc/PID/root` once per file). */
  root?: RootDirectory | null;
}

/** Which refusal tells most about why a file was not read, when both ways failed. */
const RANK: Record<FileRefusal, number> = { replaced: 4, "not-regular": 3, denied: 2, failed: 1, missing: 0 };

/**
 * The identity a maps line gives its file: device "major:minor" in hex and the inode; null for
 * anonymous memory and pseudo files (inode 0) or a malformed device.
 */
export function mappingIdentity(mapping: ProcMapping): FileIdentity | null {
  const match = /^([0-9a-f]+):([0-9a-f]+)$/.exec(mapping.device);
  if (match === null || mapping.inode === 0) return null;
  return { major: parseInt(match[1]!, 16), minor: parseInt(match[2]!, 16), inode: mapping.inode };
}

/**
 * Opens the file that `mapping` of process `pid` maps, as the module describes.
 *
 * @throws {FileRefusedError} naming the mapping's path, with the most telling reason of the two ways.
 */
export function openMappedFile(
  pid: Pid,
  mapping: ProcMapping,
  options: MappedFileOpenerOptions = {},
): RegularFile {
  const procRoot = options.procRoot ?? "/proc";
  const expect = mappingIdentity(mapping);
  if (expect === null || !mapping.path.startsWith("/")) {
    throw new FileRefusedError(mapping.path, "not-regular", "the mapping is not of a file");
  }
  const range = `${mapping.start.toString(16)}-${mapping.end.toString(16)}`;
  const failures: FileRefusedError[] = [];
  try {
    return RegularFile.open(`${procRoot}/${pid}/map_files/${range}`, { expect });
  } catch (error) {
    if (!(error instanceof FileRefusedError)) throw error;
    failures.push(error);
  }
  let root = options.root ?? null;
  let ownRoot: RootDirectory | null = null;
  try {
    if (root === null) root = ownRoot = RootDirectory.open(`${procRoot}/${pid}/root`);
    return root.openFile(mapping.path, expect);
  } catch (error) {
    if (!(error instanceof FileRefusedError)) throw error;
    failures.push(error);
  } finally {
    ownRoot?.close();
  }
  const reason = failures.reduce(
    (best, failure) => RANK[failure.reason] > RANK[best] ? failure.reason : best,
    "missing" as FileRefusal,
  );
  throw new FileRefusedError(
    `${mapping.path} of process ${pid}`,
    reason,
    failures.map((failure) => failure.message.replace(/^Cannot open /, "")).join("; "),
  );
}

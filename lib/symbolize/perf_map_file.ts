/**
 * Finds and opens the perf map of a process: `/tmp/perf-PID.map`, where PID is the process's PID in its
 * own PID namespace (the last field of `NSpid` in /proc/PID/status) and `/tmp` is the process's, in its
 * root and mount namespace (reached through `/proc/PID/root`): a process in a container writes its map in
 * the container's `/tmp`, named by the PID it sees.
 *
 * `/tmp` is a folder every user writes to, and omniprof runs as root, so the name proves nothing: a user
 * may put a link there to any file, a FIFO (opening it would wait for a writer), or a map of their own
 * for another user's process. So the path is resolved inside the root with links kept inside it, a link
 * as the last part is refused, only a regular file is opened (checked before it is opened, see
 * {@linkcode RegularFile.open}), and it must belong to the process's effective or file-system user, or to
 * root, and have no other name (a hard link to someone else's file would pass as theirs). The process's
 * start time is read before and after: a PID that changed hands meanwhile gives no map. Jitdumps are
 * opened the same way ({@linkcode openProcessOwnFile}).
 *
 * @example
 * ```ts ignore
 * import { openPerfMapFile } from "./perf_map_file.ts";
 * const opening = openPerfMapFile(pid);
 * if (opening.kind === "opened") using file = opening.file;
 * ```
 *
 * @module
 */
import { readProcessKey, sameProcess } from "../process/process_key.ts";
import { FileRefusedError, RegularFile } from "../sys/regular_file.ts";
import { RootDirectory } from "../sys/root_directory.ts";
import type { Pid } from "../types.ts";

/** Why a process's perf map was not read though there is something at its path. */
export type PerfMapRefusal =
  /** A link, FIFO, device, socket or folder. */
  | "not-regular"
  /** A file of another user than the process's (or root), or one with other names (hard links). */
  | "owner"
  /** The kernel refused access. */
  | "denied"
  /** Any other error. */
  | "failed";

/** What looking for a process's perf map found. */
export type PerfMapOpening =
  | { readonly kind: "opened"; readonly file: RegularFile }
  /** No map (yet), or the process is gone. */
  | { readonly kind: "absent" }
  | { readonly kind: "refused"; readonly reason: PerfMapRefusal; readonly detail: string };

/** What /proc/PID/status says that matters here. */
export interface PerfMapOwnerInfo {
  /** The PID in the process's own PID namespace (innermost), or null when the kernel gives no NSpid. */
  readonly namespacePid: number | null;
  /** Users whose files are the process's own: its effective and file-system user ids. */
  readonly uids: readonly number[];
}

/**
 * Reads `NSpid` (last field) and `Uid` (effective and file-system ids, the 2nd and 4th) from the text of
 * /proc/PID/status; null when `Uid` is missing or malformed.
 */
export function parseProcessStatus(text: string): PerfMapOwnerInfo | null {
  let namespacePid: number | null = null;
  let uids: number[] | null = null;
  for (const line of text.split("\n")) {
    const colon = line.indexOf(":");
    if (colon < 0) continue;
    const key = line.slice(0, colon);
    if (key !== "NSpid" && key !== "Uid") continue;
    const fields = line.slice(colon + 1).trim().split(/\s+/).map(Number);
    if (fields.length === 0 || !fields.every((field) => Number.isSafeInteger(field) && field >= 0)) continue;
    if (key === "NSpid" && fields[fields.length - 1]! > 0) namespacePid = fields[fields.length - 1]!;
    if (key === "Uid" && fields.length === 4) uids = [fields[1]!, fields[3]!];
  }
  return uids === null ? null : { namespacePid, uids };
}

/** The path of the map of a process whose PID in its own namespace is `namespacePid`. */
export function perfMapPath(namespacePid: number): string {
  return `/tmp/perf-${namespacePid}.map`;
}

/** Finds and opens the perf map of process `pid`, as the module describes. Never throws. */
export function openPerfMapFile(pid: Pid, procRoot = "/proc"): PerfMapOpening {
  return openProcessOwnFile(pid, (info) => [perfMapPath(info.namespacePid ?? pid)], procRoot);
}

/**
 * Opens the first of the files `candidates` names (paths in the process's root, given what its status
 * says) that is there, checked as the module describes: a candidate that is refused ends the search (a
 * planted file is not passed over for the next). Never throws.
 */
export function openProcessOwnFile(
  pid: Pid,
  candidates: (info: PerfMapOwnerInfo) => readonly string[],
  procRoot = "/proc",
): PerfMapOpening {
  const before = readProcessKey(pid, procRoot);
  if (before === null) return { kind: "absent" };
  let info: PerfMapOwnerInfo | null;
  try {
    info = parseProcessStatus(Deno.readTextFileSync(`${procRoot}/${pid}/status`));
  } catch {
    return { kind: "absent" };
  }
  if (info === null) {
    return { kind: "refused", reason: "failed", detail: `no user ids in /proc/${pid}/status` };
  }
  let file: RegularFile | null = null;
  try {
    using root = RootDirectory.open(`${procRoot}/${pid}/root`);
    for (const path of candidates(info)) {
      try {
        file = RegularFile.open(path, { root, noFollow: true });
        break;
      } catch (error) {
        if (!(error instanceof FileRefusedError) || error.reason !== "missing") throw error;
      }
    }
  } catch (error) {
    if (!(error instanceof FileRefusedError)) {
      return { kind: "refused", reason: "failed", detail: String(error) };
    }
    if (error.reason === "missing") return { kind: "absent" };
    const reason = error.reason === "replaced" ? "failed" : error.reason;
    return { kind: "refused", reason, detail: error.message };
  }
  if (file === null) return { kind: "absent" };
  try {
    const status = file.status();
    if (status.uid !== 0 && !info.uids.includes(status.uid)) {
      file.close();
      return {
        kind: "refused",
        reason: "owner",
        detail: `${file.name} belongs to user ${status.uid}, not to the process's (${
          info.uids.join(", ")
        }) or root`,
      };
    }
    if (status.links > 1) {
      file.close();
      return {
        kind: "refused",
        reason: "owner",
        detail: `${file.name} has ${status.links} names (hard links)`,
      };
    }
  } catch (error) {
    file.close();
    return { kind: "refused", reason: "failed", detail: String(error) };
  }
  if (!sameProcess(before, readProcessKey(pid, procRoot))) {
    file.close();
    return { kind: "absent" };
  }
  return { kind: "opened", file };
}

/**
 * Writing a profile: checked before sampling starts (so a bad path fails fast and loses nothing), then
 * written where the user pointed. A regular file is replaced atomically (a temporary file beside it,
 * then rename), so a reader never sees half a profile and an old profile is only replaced by a complete
 * new one. Anything else is written in place and nothing is created beside it: `-` (standard output),
 * `/dev/stdout` and the other paths under /dev and /proc, a FIFO. (A rename there would put a regular
 * file where the device or link was: `-o /dev/stdout` would replace the system's /dev/stdout link.)
 *
 * @example
 * ```ts ignore
 * import { checkWritable, writeOutput } from "./output_file.ts";
 * checkWritable("profile.pb.gz");
 * writeOutput("profile.pb.gz", bytes);
 * ```
 *
 * @module
 */
import { absolutePath, baseName, parentDir } from "../sys/path.ts";

/** The path that means standard output. */
export const STDOUT_PATH = "-";

/** How a path is written: replaced atomically, written in place, or standard output. */
export type OutputKind = "file" | "in place" | "stdout";

/** Trees of device nodes and kernel links, where the profiler never creates a file of its own. */
const SPECIAL_TREES = ["/dev/", "/proc/"];

/**
 * How `path` will be written, and the path to write (a symbolic link to a regular file is followed, so
 * that the file is replaced and the link kept).
 *
 * @throws {Error} when `path` is a directory.
 */
export function outputKind(path: string): { kind: OutputKind; path: string } {
  if (path === STDOUT_PATH) return { kind: "stdout", path };
  let absolute = absolutePath(path);
  // Twice at most: the path, then (for a link) the file it finally resolves to.
  for (let resolved = false;; resolved = true) {
    if (SPECIAL_TREES.some((tree) => absolute.startsWith(tree))) return { kind: "in place", path: absolute };
    let info: Deno.FileInfo;
    try {
      info = Deno.lstatSync(absolute);
    } catch {
      // Missing (or its folder unreadable): a new file, and the check says what is wrong, if anything.
      return { kind: "file", path: absolute };
    }
    if (info.isDirectory) throw new Error(`Cannot write the profile to ${path}: it is a directory`);
    if (info.isFile) return { kind: "file", path: absolute };
    if (!info.isSymlink || resolved) return { kind: "in place", path: absolute };
    try {
      absolute = Deno.realPathSync(absolute);
    } catch {
      // A dangling link: writing through it creates its target.
      return { kind: "in place", path: absolute };
    }
  }
}

function temporaryPath(absolute: string): string {
  return `${parentDir(absolute)}/.${baseName(absolute)}.${Deno.pid}.tmp`;
}

/**
 * Throws an Error that names the problem when `path` cannot be written: missing folder, no permission,
 * a folder in the way. For a regular file, creates and removes the temporary file that the final write
 * will use; a path written in place is opened for writing (a FIFO is not: that waits for a reader).
 */
export function checkWritable(path: string): void {
  const target = outputKind(path);
  if (target.kind === "stdout") return;
  try {
    if (target.kind === "in place") {
      let fifo = false;
      try {
        fifo = Deno.statSync(target.path).isFifo === true;
      } catch {
        // missing: the open below creates nothing and says why
      }
      if (!fifo) Deno.openSync(target.path, { write: true }).close();
      return;
    }
    const temporary = temporaryPath(target.path);
    Deno.writeFileSync(temporary, new Uint8Array(0), { createNew: true, mode: 0o644 });
    Deno.removeSync(temporary);
  } catch (error) {
    throw writeError(path, target, error);
  }
}

/** An Error whose message says, for the user, why `path` could not be written. */
function writeError(path: string, target: { kind: OutputKind; path: string }, error: unknown): Error {
  const folder = parentDir(target.path);
  const reason = error instanceof Deno.errors.NotFound
    ? target.kind === "file" ? `folder ${folder} does not exist` : "it does not exist"
    : error instanceof Deno.errors.PermissionDenied
    ? target.kind === "file" ? `no permission to write in ${folder}` : "no permission to write it"
    : error instanceof Error
    ? error.message
    : String(error);
  return new Error(`Cannot write the profile to ${path}: ${reason}`, { cause: error });
}

/**
 * Writes `data` to `path` as {@linkcode outputKind} says: a regular file holds either the old or the new.
 *
 * @throws {Error} "Cannot write the profile to PATH: reason" (the folder was removed while recording, the
 *   disk is full, ...).
 */
export function writeOutput(path: string, data: Uint8Array | string): void {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  const target = outputKind(path);
  try {
    if (target.kind === "stdout") {
      for (let written = 0; written < bytes.length;) {
        written += Deno.stdout.writeSync(bytes.subarray(written));
      }
    } else if (target.kind === "in place") {
      Deno.writeFileSync(target.path, bytes);
    } else {
      writeReplacing(target.path, bytes);
    }
  } catch (error) {
    throw writeError(path, target, error);
  }
}

/** Writes a temporary file beside `absolute` and renames it over `absolute`. */
function writeReplacing(absolute: string, bytes: Uint8Array): void {
  const temporary = temporaryPath(absolute);
  try {
    Deno.writeFileSync(temporary, bytes, { mode: 0o644 });
    Deno.renameSync(temporary, absolute);
  } catch (error) {
    try {
      Deno.removeSync(temporary);
    } catch {
      // nothing to clean up
    }
    throw error;
  }
}

/**
 * Writing the profile: checked before sampling starts (so a bad path fails fast and loses nothing), and
 * written atomically (a temporary file beside the target, then rename), so a reader never sees half a
 * profile and an old profile is only replaced by a complete new one.
 *
 * @example
 * ```ts ignore
 * import { checkWritable, writeAtomically } from "./output_file.ts";
 * checkWritable("profile.pb.gz");
 * writeAtomically("profile.pb.gz", bytes);
 * ```
 *
 * @module
 */
import { absolutePath, baseName, parentDir } from "../sys/path.ts";

function temporaryPath(path: string): string {
  const absolute = absolutePath(path);
  return `${parentDir(absolute)}/.${baseName(absolute)}.${Deno.pid}.tmp`;
}

/**
 * Throws an Error that names the problem when `path` cannot be written: missing folder, no permission,
 * a folder in the way. Creates and removes the temporary file that the final write will use.
 */
export function checkWritable(path: string): void {
  const absolute = absolutePath(path);
  try {
    if (Deno.statSync(absolute).isDirectory) {
      throw new Error(`Cannot write the profile to ${path}: it is a directory`);
    }
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  const temporary = temporaryPath(path);
  try {
    Deno.writeFileSync(temporary, new Uint8Array(0), { createNew: true, mode: 0o644 });
    Deno.removeSync(temporary);
  } catch (error) {
    const reason = error instanceof Deno.errors.NotFound
      ? `folder ${parentDir(absolute)} does not exist`
      : error instanceof Deno.errors.PermissionDenied
      ? `no permission to write in ${parentDir(absolute)}`
      : error instanceof Error
      ? error.message
      : String(error);
    throw new Error(`Cannot write the profile to ${path}: ${reason}`);
  }
}

/** Writes `data` to `path` so that `path` holds either the old or the complete new content. */
export function writeAtomically(path: string, data: Uint8Array | string): void {
  const temporary = temporaryPath(path);
  try {
    if (typeof data === "string") Deno.writeTextFileSync(temporary, data, { mode: 0o644 });
    else Deno.writeFileSync(temporary, data, { mode: 0o644 });
    Deno.renameSync(temporary, absolutePath(path));
  } catch (error) {
    try {
      Deno.removeSync(temporary);
    } catch {
      // nothing to clean up
    }
    throw error;
  }
}

/**
 * Questions about files on disk that callers ask without caring why the answer is no.
 *
 * @example
 * ```ts
 * import { isFile } from "./files.ts";
 * isFile("/etc/os-release"); // true on most Linux systems
 * ```
 *
 * @module
 */

/** Whether `path` names a regular file (after symlinks); false when it is missing or unreadable. */
export function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

/** Whether anything is at `path` (after symlinks); false when it is missing or cannot be looked at. */
export function pathExists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

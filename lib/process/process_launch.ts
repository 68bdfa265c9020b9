/**
 * How a process was started: its arguments (`/proc/PID/cmdline`) and initial environment
 * (`/proc/PID/environ`), each read up to a bound. A runtime that names its frames only when started with
 * flags tells from these whether a process has them.
 *
 * @example
 * ```ts
 * import { readProcessLaunch } from "./process_launch.ts";
 * import { asPid } from "../types.ts";
 * const launch = readProcessLaunch(asPid(Deno.pid));
 * console.log(launch?.argv[0], launch?.environ.get("PATH"));
 * ```
 *
 * @module
 */
import type { ProcessLaunch } from "../interpreter/interpreter.ts";
import type { Pid } from "../types.ts";

/** Bytes read of each file at most: Linux bounds both by ARG_MAX (2 MiB), far more than flags need. */
export const MAX_LAUNCH_BYTES = 256 * 1024;
const decoder = new TextDecoder();

/**
 * The arguments and environment of process `pid`, or null when it is gone or they cannot be read. Each
 * file is cut at {@linkcode MAX_LAUNCH_BYTES}; a string cut there is dropped.
 */
export function readProcessLaunch(pid: Pid, procRoot = "/proc"): ProcessLaunch | null {
  const argv = readNulList(`${procRoot}/${pid}/cmdline`);
  const environ = readNulList(`${procRoot}/${pid}/environ`);
  if (argv === null || environ === null) return null;
  const variables = new Map<string, string>();
  for (const entry of environ) {
    const equals = entry.indexOf("=");
    if (equals > 0 && !variables.has(entry.slice(0, equals))) {
      variables.set(entry.slice(0, equals), entry.slice(equals + 1));
    }
  }
  return { argv, environ: variables };
}

/** A /proc file of NUL-terminated strings, up to the bound; null when unreadable. */
function readNulList(path: string): string[] | null {
  let file: Deno.FsFile;
  try {
    file = Deno.openSync(path);
  } catch {
    return null;
  }
  try {
    const bytes = new Uint8Array(MAX_LAUNCH_BYTES);
    let length = 0;
    while (length < bytes.length) {
      const read = file.readSync(bytes.subarray(length));
      if (read === null || read === 0) break;
      length += read;
    }
    const strings = decoder.decode(bytes.subarray(0, length)).split("\0");
    // The last piece follows the last NUL: empty, or a string the bound cut.
    strings.pop();
    return strings;
  } catch {
    return null;
  } finally {
    file.close();
  }
}

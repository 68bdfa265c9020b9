/**
 * The few path operations omniprof's recording path needs, on POSIX paths. `node:path` does the same,
 * but importing any `node:` module costs a run about 15 ms of CPU (Deno's Node compatibility layer).
 *
 * @example
 * ```ts
 * import { absolutePath, baseName, parentDir } from "./path.ts";
 * absolutePath("out//a/../profile.pb.gz"); // `${Deno.cwd()}/out/profile.pb.gz`
 * parentDir("/tmp/profile.pb.gz"); // "/tmp"
 * baseName("/tmp/profile.pb.gz"); // "profile.pb.gz"
 * ```
 *
 * @module
 */

/** `path` made absolute against the working directory, with `.`, `..` and repeated slashes resolved. */
export function absolutePath(path: string, cwd: string = Deno.cwd()): string {
  const parts: string[] = [];
  for (const part of `${path.startsWith("/") ? "" : cwd}/${path}`.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") parts.pop();
    else parts.push(part);
  }
  return `/${parts.join("/")}`;
}

/** The folder holding `path` ("/" for a top-level entry, "." for a bare name). */
export function parentDir(path: string): string {
  const trimmed = path.replace(/\/+$/, "");
  if (trimmed === "") return path === "" ? "." : "/";
  const slash = trimmed.lastIndexOf("/");
  if (slash < 0) return ".";
  const parent = trimmed.slice(0, slash).replace(/\/+$/, "");
  return parent === "" ? "/" : parent;
}

/** The last component of `path`. */
export function baseName(path: string): string {
  const trimmed = path.replace(/\/+$/, "");
  return trimmed.slice(trimmed.lastIndexOf("/") + 1);
}

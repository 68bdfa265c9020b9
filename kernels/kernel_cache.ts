/**
 * Where the kernel images for the qemu tests live, and how a version names one. The cache is
 * `kernels/cache/` (git-ignored) unless `KERN_DIR` names another folder; each image is a folder named for
 * its version line with the bootable ELF `vmlinux` inside (plus the original `vmlinuz` and `info.json`
 * saying where it came from). A folder of images made by other means may also hold them as flat files
 * (`vmlinux-VERSION`, `vmlinuz-VERSION`, `linux-VERSION.bz`; the last is how the OpenTelemetry eBPF
 * profiler's kernel tests find Cilium's ci-kernels images in their `KERN_DIR`).
 *
 * @example
 * ```ts ignore
 * import { findKernel, kernelDir, missingKernelMessage } from "./kernel_cache.ts";
 * const image = findKernel(kernelDir(), "6.1");
 * if (!image) console.error(missingKernelMessage(kernelDir(), "6.1"));
 * ```
 *
 * @module
 */
import { isFile } from "../lib/sys/files.ts";

const repoRoot = new URL("..", import.meta.url).pathname;

/** The default image cache, `kernels/cache/`, with a trailing slash. */
export const DEFAULT_KERNEL_DIR = `${repoRoot}kernels/cache/`;

/** Private apt state for fetching (always under the default cache, whatever KERN_DIR says). */
export const APT_DIR = `${DEFAULT_KERNEL_DIR}apt/`;

/** Folders of the cache that are not kernel versions. */
const NOT_VERSIONS = new Set(["apt", "build", "sources"]);

/** Where images are looked up and stored: `KERN_DIR`, or `kernels/cache/`. Ends with a slash. */
export function kernelDir(env: (name: string) => string | undefined = (name) => Deno.env.get(name)): string {
  const dir = env("KERN_DIR");
  if (!dir) return DEFAULT_KERNEL_DIR;
  return dir.endsWith("/") ? dir : `${dir}/`;
}

/** How an image boots: an ELF `vmlinux` through its PVH entry, or a bzImage through qemu's Linux loader. */
export type ImageKind = "elf" | "bzImage";

/** A kernel image found in a folder. */
export interface KernelImage {
  /** The version as asked for (the folder or file name part). */
  version: string;
  path: string;
  kind: ImageKind;
  /** What info.json says about its origin, when there is one. */
  info: KernelInfo | null;
}

/** Where an image came from; written as info.json next to it. */
export interface KernelInfo {
  /** The version line it was stored under, e.g. "6.1". */
  line: string;
  /** The kernel release, e.g. "6.1.0-50-amd64". */
  release: string;
  /** "debian" (downloaded package) or "built" (compiled from a linux-source package). */
  origin: "debian" | "built";
  /** The package the image came from, e.g. linux-image-6.1.0-50-amd64-unsigned. */
  package: string;
  /** The package version, e.g. 6.1.158-1. */
  packageVersion: string;
  /** ISO date of the download or build. */
  date: string;
}

/** A version name as the user types it: digits and dots, optionally a suffix such as `-tiny`. */
export function isVersionName(text: string): boolean {
  return /^\d+\.\d+(\.\d+)?([-+~][A-Za-z0-9.+~-]*)?$/.test(text);
}

/** Sorts version names numerically (5.10 before 6.1 before 6.12). */
export function compareVersions(a: string, b: string): number {
  const pa = a.match(/\d+/g)?.map(Number) ?? [];
  const pb = b.match(/\d+/g)?.map(Number) ?? [];
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i] ?? -1;
    const y = pb[i] ?? -1;
    if (x !== y) return x - y;
  }
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The first bytes of a file, or null when it cannot be read. */
function head(path: string, length: number): Uint8Array | null {
  let file: Deno.FsFile | undefined;
  try {
    file = Deno.openSync(path, { read: true });
    const buffer = new Uint8Array(length);
    let filled = 0;
    while (filled < length) {
      const n = file.readSync(buffer.subarray(filled));
      if (n === null || n === 0) break;
      filled += n;
    }
    return buffer.subarray(0, filled);
  } catch {
    return null;
  } finally {
    file?.close();
  }
}

/** Tells an ELF kernel from a bzImage by their magic numbers; null for anything else. */
export function imageKind(path: string): ImageKind | null {
  const bytes = head(path, 0x210);
  if (bytes === null) return null;
  if (bytes.length >= 4 && bytes[0] === 0x7f && bytes[1] === 0x45 && bytes[2] === 0x4c && bytes[3] === 0x46) {
    return "elf";
  }
  // The boot protocol's "HdrS" signature at 0x202.
  if (bytes.length >= 0x206 && new TextDecoder().decode(bytes.subarray(0x202, 0x206)) === "HdrS") {
    return "bzImage";
  }
  return null;
}

function readInfo(path: string): KernelInfo | null {
  try {
    return JSON.parse(Deno.readTextFileSync(path)) as KernelInfo;
  } catch {
    return null;
  }
}

/** The bootable image for `version` in `dir`, preferring the ELF vmlinux, or null. */
export function findKernel(dir: string, version: string): KernelImage | null {
  if (!isVersionName(version)) return null;
  const folder = `${dir}${version}/`;
  const candidates = [
    `${folder}vmlinux`,
    `${folder}vmlinuz`,
    `${folder}bzImage`,
    `${dir}vmlinux-${version}`,
    `${dir}vmlinuz-${version}`,
    `${dir}linux-${version}.bz`,
  ];
  for (const path of candidates) {
    if (!isFile(path)) continue;
    const kind = imageKind(path);
    if (kind === null) continue;
    const info = path.startsWith(folder) ? readInfo(`${folder}info.json`) : null;
    return { version, path, kind, info };
  }
  return null;
}

/** Every version with a bootable image in `dir`, sorted. */
export function listKernels(dir: string): string[] {
  const versions = new Set<string>();
  let entries: Deno.DirEntry[];
  try {
    entries = [...Deno.readDirSync(dir)];
  } catch {
    return [];
  }
  for (const entry of entries) {
    let version: string | undefined;
    if (entry.isDirectory && !NOT_VERSIONS.has(entry.name)) version = entry.name;
    else if (entry.isFile) {
      version = entry.name.match(/^(?:vmlinu[xz]-(.+)|linux-(.+)\.bz)$/)?.slice(1).find(Boolean);
    }
    if (version && isVersionName(version) && findKernel(dir, version)) versions.add(version);
  }
  return [...versions].sort(compareVersions);
}

/**
 * The message for a version that is not in `dir`: what is there, and the exact commands that would fetch
 * or build it.
 */
export function missingKernelMessage(dir: string, version: string, present = listKernels(dir)): string {
  const shown = dir === DEFAULT_KERNEL_DIR ? "kernels/cache/" : `${dir} (KERN_DIR)`;
  const lines = [
    `No kernel image for ${version} in ${shown}.`,
    present.length > 0 ? `Present: ${present.join(", ")}` : "Present: none",
  ];
  if (!isVersionName(version)) {
    lines.push("A version is a kernel line such as 5.10, 6.1 or 6.12.");
  } else {
    const line = version.match(/^\d+\.\d+/)?.[0] ?? version;
    lines.push(
      "Get it with one of:",
      `  deno task fetch-kernel ${line}    # a Debian kernel image of that line (lists the lines Debian has)`,
      `  deno task build-kernel ${line}    # built from Debian's linux-source-${line} package (~20 min)`,
    );
  }
  return lines.join("\n");
}

/** Writes info.json for an image folder. */
export function writeInfo(folder: string, info: KernelInfo): void {
  Deno.writeTextFileSync(`${folder}info.json`, JSON.stringify(info, null, 2) + "\n");
}

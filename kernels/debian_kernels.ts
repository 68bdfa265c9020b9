/**
 * Debian's kernel package names, read into what they hold: which kernel version, whether the package is
 * the image itself (signed or unsigned) or only a meta package, and which of several packages of one
 * version to try first. Up to 6.18 the image is in `linux-image-RELEASE[-unsigned]` (`/boot/vmlinuz-*`);
 * from 6.19 on it moved to `linux-binary[-unsigned]-RELEASE` (`/usr/lib/modules/RELEASE/vmlinuz*`) and
 * `linux-image-RELEASE` became a small package that depends on it.
 *
 * @example
 * ```ts
 * import { parseKernelPackage } from "./debian_kernels.ts";
 * const pkg = parseKernelPackage("linux-image-6.1.0-50-amd64-unsigned");
 * console.log(pkg?.line, pkg?.release); // "6.1" "6.1.0-50-amd64"
 * ```
 *
 * @module
 */
import { compareVersions } from "./kernel_cache.ts";

/** What a kernel package name says. */
export interface KernelPackage {
  name: string;
  /** The version line, e.g. "6.12". */
  line: string;
  /** The version part of the name, e.g. "6.12.117+deb13" or "5.10.0-46". */
  version: string;
  /** The kernel release the package installs, e.g. "6.12.117+deb13-amd64". */
  release: string;
  /** linux-binary (6.19+) or linux-image. */
  family: "binary" | "image";
  /** Unsigned packages carry the image as built; signed ones add a Secure Boot signature. */
  unsigned: boolean;
}

const PACKAGE = /^linux-(image|binary)-(unsigned-)?(\d+\.\d+(?:[.+~-][0-9a-z.+~-]*?)?)-amd64(-unsigned)?$/;

/**
 * Reads a kernel image package name for the generic amd64 flavour; null for anything else (other
 * flavours such as cloud or rt, debug symbols, meta packages without a version).
 */
export function parseKernelPackage(name: string): KernelPackage | null {
  const match = name.match(PACKAGE);
  if (!match) return null;
  const [, family, unsignedPrefix, version] = match;
  if (!version || /-(cloud|rt)$/.test(version) || /dbg/.test(name)) return null;
  const line = version.match(/^\d+\.\d+/)![0];
  return {
    name,
    line,
    version,
    release: `${version}-amd64`,
    family: family as "binary" | "image",
    unsigned: unsignedPrefix !== undefined || match[4] !== undefined,
  };
}

/** Whether `version` belongs to `line` ("6.1.0-50" to "6.1", not to "6.12"). */
export function inLine(version: string, line: string): boolean {
  return version === line || (version.startsWith(line) && /^[.+~-]/.test(version.slice(line.length)));
}

/** The version lines present among package names, sorted. */
export function kernelLines(names: string[]): string[] {
  const lines = new Set<string>();
  for (const name of names) {
    const parsed = parseKernelPackage(name);
    if (parsed) lines.add(parsed.line);
  }
  return [...lines].sort(compareVersions);
}

/** Order of preference among packages of one version: the image as built first, meta packages last. */
function preference(pkg: KernelPackage): number {
  return (pkg.family === "binary" ? 0 : 1) + (pkg.unsigned ? 0 : 2);
}

/**
 * The packages to try for a version line, best first: newest version first and, within a version, the
 * unsigned image before the signed one (the newer `linux-binary` before `linux-image`, which is only a
 * meta package from 6.19 on). The caller tries them in order until one holds a vmlinuz.
 */
export function kernelCandidates(names: string[], line: string): KernelPackage[] {
  return names.map(parseKernelPackage)
    .filter((pkg): pkg is KernelPackage => pkg !== null && inLine(pkg.version, line))
    .sort((a, b) => compareVersions(b.version, a.version) || preference(a) - preference(b));
}

/** The path of the kernel image inside a package's file list (from `dpkg-deb -c`), or null. */
export function vmlinuzMember(listing: string): { member: string; release: string } | null {
  for (const line of listing.split("\n")) {
    if (!line.startsWith("-")) continue; // regular files only, not links or folders
    const path = line.split(/\s+/).at(-1) ?? "";
    const boot = path.match(/^\.?\/?boot\/vmlinuz-(.+)$/);
    if (boot) return { member: path, release: boot[1]! };
    const modules = path.match(/^\.?\/?usr\/lib\/modules\/([^/]+)\/vmlinuz(\.unsigned)?$/);
    if (modules) return { member: path, release: modules[1]! };
  }
  return null;
}

/** The path of the kernel's config inside a package's file list, or null. */
export function configMember(listing: string): string | null {
  for (const line of listing.split("\n")) {
    if (!line.startsWith("-")) continue;
    const path = line.split(/\s+/).at(-1) ?? "";
    if (/^\.?\/?(boot\/config-[^/]+|usr\/lib\/modules\/[^/]+\/config)$/.test(path)) return path;
  }
  return null;
}

/** The version lines of `linux-source-X.Y` packages. */
export function sourceLines(names: string[]): string[] {
  return names.map((name) => name.match(/^linux-source-(\d+\.\d+)$/)?.[1])
    .filter((line): line is string => line !== undefined)
    .sort(compareVersions);
}

/**
 * The initramfs the qemu guest boots into: a static busybox, deno with the shared libraries it and
 * libbpf need, and the program under test (bundles, workloads, /init). It is two gzip'd cpio archives
 * concatenated, which the kernel unpacks one after the other: a large base (busybox, deno, libraries)
 * that changes only when those files do, and a small top (init script, bundles, workloads) rebuilt for
 * each run. Both are cached by the SHA-256 of their contents, so an unchanged tree boots the very same
 * file and a changed bundle costs no recompression of 100 MB of deno.
 *
 * @example
 * ```ts ignore
 * import { buildInitramfs } from "./guest_initramfs.ts";
 * const image = await buildInitramfs(".build/test-kernel/", { files: [...], init: "#!/bin/busybox sh\n..." });
 * console.log(image.path, image.bytes);
 * ```
 *
 * @module
 */
import { createHash } from "node:crypto";
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import { CpioWriter } from "./cpio_newc.ts";
import { isFile } from "../lib/sys/files.ts";

const gzipAsync = promisify(gzip);

/** A file to put into the guest. */
export interface GuestFile {
  /** Path inside the guest. */
  path: string;
  data: Uint8Array;
  mode: number;
}

/** The per-run part of the guest. */
export interface GuestTop {
  /** The /init script. */
  init: string;
  files: GuestFile[];
}

/** A built initramfs. */
export interface Initramfs {
  path: string;
  /** Size of the (compressed) file. */
  bytes: number;
  /** Uncompressed size of both archives. */
  rawBytes: number;
  /** Whether the base archive had to be built (false: taken from the cache). */
  baseBuilt: boolean;
}

/** Folders every guest has (parents first). */
const GUEST_DIRS = [
  "/bin",
  "/sbin",
  "/usr",
  "/usr/bin",
  "/usr/sbin",
  "/dev",
  "/proc",
  "/sys",
  "/tmp",
  "/root",
  "/etc",
  "/omniprof",
  "/omniprof/workloads",
];

function sha256(...parts: (Uint8Array | string)[]): string {
  const hash = createHash("sha256");
  for (const part of parts) hash.update(part);
  return hash.digest("hex");
}

/** Whether an ELF file asks for a dynamic loader (has a PT_INTERP segment). */
export function isDynamicElf(data: Uint8Array): boolean {
  if (data.length < 64 || data[0] !== 0x7f || data[1] !== 0x45) return false;
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const phoff = Number(view.getBigUint64(32, true));
  const phentsize = view.getUint16(54, true);
  const phnum = view.getUint16(56, true);
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    if (at + 4 > data.length) break;
    if (view.getUint32(at, true) === 3) return true; // PT_INTERP
  }
  return false;
}

/**
 * The shared libraries `binaries` load, as `ldd` resolves them on this machine (the guest gets them at
 * the same paths), the dynamic loader included.
 */
export async function sharedLibraries(binaries: string[]): Promise<string[]> {
  const libraries = new Set<string>();
  for (const binary of binaries) {
    const output = await new Deno.Command("ldd", { args: [binary], stdout: "piped", stderr: "piped" })
      .output();
    const text = new TextDecoder().decode(output.stdout);
    if (!output.success) {
      if (/not a dynamic executable/.test(text + new TextDecoder().decode(output.stderr))) continue;
      throw new Error(`Cannot list the libraries of ${binary}: ldd failed`);
    }
    for (const line of text.split("\n")) {
      const match = line.match(/=>\s+(\/\S+)\s+\(/) ?? line.match(/^\s*(\/\S+)\s+\(/);
      if (match) libraries.add(match[1]!);
      else if (/not found/.test(line)) throw new Error(`Cannot put ${binary} into the guest: ${line.trim()}`);
    }
  }
  return [...libraries].sort();
}

/** The path of a library as the dynamic loader finds it by soname (`ldconfig -p`). */
export async function findLibrary(soname: string): Promise<string> {
  const output = await new Deno.Command("ldconfig", { args: ["-p"], stdout: "piped", stderr: "null" })
    .output()
    .catch(() => null);
  const text = output ? new TextDecoder().decode(output.stdout) : "";
  for (const line of text.split("\n")) {
    const match = line.match(/^\s*(\S+) \((.*)\) => (\S+)$/);
    if (match && match[1] === soname && /x86-64/.test(match[2]!)) return match[3]!;
  }
  const found = ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/usr/local/lib"]
    .map((dir) => `${dir}/${soname}`).find(isFile);
  if (found !== undefined) return found;
  throw new Error(`Cannot find ${soname} on this machine (apt-get install libbpf1)`);
}

/** A static busybox (the guest has no libraries of its own for a dynamic one to be sure of). */
export function findStaticBusybox(): string {
  for (const path of ["/bin/busybox", "/usr/bin/busybox"]) {
    let data: Uint8Array;
    try {
      data = Deno.readFileSync(path);
    } catch {
      continue;
    }
    if (!isDynamicElf(data)) return path;
  }
  throw new Error("Cannot find a static busybox: apt-get install busybox-static");
}

/**
 * The base files: busybox, deno, the `libraries` loaded at run time (libbpf, which deno opens by name)
 * and every library deno, those and the `binaries` (workloads) link with.
 */
export async function baseFiles(libraries: string[], binaries: string[]): Promise<GuestFile[]> {
  const deno = Deno.realPathSync(Deno.execPath());
  const files: GuestFile[] = [
    { path: "/bin/busybox", data: Deno.readFileSync(findStaticBusybox()), mode: 0o755 },
    { path: "/bin/deno", data: Deno.readFileSync(deno), mode: 0o755 },
  ];
  const all = new Set([...libraries, ...await sharedLibraries([deno, ...libraries, ...binaries])]);
  for (const library of [...all].sort()) {
    files.push({ path: library, data: Deno.readFileSync(Deno.realPathSync(library)), mode: 0o755 });
  }
  files.push({
    path: "/etc/passwd",
    data: new TextEncoder().encode("root:x:0:0:root:/root:/bin/sh\n"),
    mode: 0o644,
  });
  return files;
}

function archive(files: GuestFile[], withBaseDirs: boolean): Uint8Array {
  const cpio = new CpioWriter();
  if (withBaseDirs) {
    for (const dir of GUEST_DIRS) cpio.directory(dir);
    // The kernel opens /dev/console for init before devtmpfs is mounted.
    cpio.charDevice("/dev/console", 5, 1);
  }
  for (const file of files) {
    const parts = file.path.split("/").filter(Boolean);
    for (let i = 1; i < parts.length; i++) {
      const dir = `/${parts.slice(0, i).join("/")}`;
      if (!cpio.has(dir) && !(GUEST_DIRS.includes(dir) && !withBaseDirs)) cpio.directory(dir);
    }
    cpio.file(file.path, file.data, file.mode);
  }
  return cpio.finish();
}

function contentHash(files: GuestFile[], extra = ""): string {
  const manifest = files.map((file) => `${file.path} ${file.mode.toString(8)} ${sha256(file.data)}`).join(
    "\n",
  );
  return sha256(manifest, extra).slice(0, 16);
}

/** Writes `data` to `path` through a temporary file, so that a parallel run never reads half a file. */
function writeAtomically(path: string, data: Uint8Array): void {
  const temporary = `${path}.${Deno.pid}.tmp`;
  Deno.writeFileSync(temporary, data);
  Deno.renameSync(temporary, path);
}

/** Cached archives unused for this long are removed (a parallel run may still be about to boot one). */
const PRUNE_AFTER_MS = 30 * 60_000;

/** Removes cached archives of a kind other than `keep` that were not written recently. */
function prune(dir: string, prefix: string, keep: string): void {
  for (const entry of Deno.readDirSync(dir)) {
    if (!entry.name.startsWith(prefix) || !entry.name.endsWith(".cpio.gz") || entry.name === keep) continue;
    try {
      const path = `${dir}${entry.name}`;
      if (Date.now() - (Deno.statSync(path).mtime?.getTime() ?? 0) > PRUNE_AFTER_MS) Deno.removeSync(path);
    } catch {
      // a parallel run removed it first
    }
  }
}

/**
 * Builds (or finds in `cacheDir`) the initramfs of `base` files plus `top`. Returns its path and sizes.
 */
export async function buildInitramfs(cacheDir: string, base: GuestFile[], top: GuestTop): Promise<Initramfs> {
  Deno.mkdirSync(cacheDir, { recursive: true });
  // The top archive holds no folders of the base, which the kernel already created from the first one.
  const topFiles = [{ path: "/init", data: new TextEncoder().encode(top.init), mode: 0o755 }, ...top.files];
  const baseHash = contentHash(base, "base-v1");
  const topHash = contentHash(topFiles, "top-v1");
  const basePath = `${cacheDir}base-${baseHash}.cpio.gz`;
  const finalName = `initramfs-${baseHash}-${topHash}.cpio.gz`;
  const finalPath = `${cacheDir}${finalName}`;
  const rawBase = base.reduce((sum, file) => sum + file.data.length, 0);
  const rawTop = topFiles.reduce((sum, file) => sum + file.data.length, 0);
  let baseBuilt = false;
  if (!isFile(finalPath)) {
    if (!isFile(basePath)) {
      writeAtomically(basePath, await gzipAsync(archive(base, true), { level: 6 }));
      baseBuilt = true;
      prune(cacheDir, "base-", `base-${baseHash}.cpio.gz`);
    }
    const baseGz = Deno.readFileSync(basePath);
    const topGz = await gzipAsync(archive(topFiles, false), { level: 6 });
    const joined = new Uint8Array(baseGz.length + topGz.length);
    joined.set(baseGz);
    joined.set(topGz, baseGz.length);
    writeAtomically(finalPath, joined);
    prune(cacheDir, "initramfs-", finalName);
  }
  return { path: finalPath, bytes: Deno.statSync(finalPath).size, rawBytes: rawBase + rawTop, baseBuilt };
}

/**
 * Writes cpio archives in the "newc" format, the one the Linux kernel unpacks as an initramfs. Written
 * here rather than with the cpio tool so that device nodes (/dev/console) need no root and no staging
 * folder, and so that the same inputs always give the same bytes (mtime 0, inodes by position), which
 * keeps content hashes of archives stable.
 *
 * @example
 * ```ts
 * import { CpioWriter } from "./cpio_newc.ts";
 * const cpio = new CpioWriter();
 * cpio.directory("/bin");
 * cpio.file("/init", new TextEncoder().encode("#!/bin/sh\n"), 0o755);
 * const bytes = cpio.finish();
 * ```
 *
 * @module
 */

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;
const S_IFCHR = 0o020000;
/** newc stores sizes in 8 hex digits. */
const MAX_FILE_BYTES = 0xffffffff;

/** Builds one archive in memory; entries are written in the order they are added. */
export class CpioWriter {
  #chunks: Uint8Array[] = [];
  #size = 0;
  #inode = 1;
  #paths = new Set<string>();
  #finished = false;

  /** A directory (parents are not implied: add them first). */
  directory(path: string, mode = 0o755): void {
    this.#entry(path, S_IFDIR | mode, new Uint8Array(0), 2);
  }

  /** A regular file. */
  file(path: string, data: Uint8Array, mode = 0o644): void {
    this.#entry(path, S_IFREG | mode, data, 1);
  }

  /** A symbolic link to `target`. */
  symlink(path: string, target: string): void {
    this.#entry(path, S_IFLNK | 0o777, new TextEncoder().encode(target), 1);
  }

  /** A character device node. */
  charDevice(path: string, major: number, minor: number, mode = 0o600): void {
    this.#entry(path, S_IFCHR | mode, new Uint8Array(0), 1, major, minor);
  }

  /** Whether `path` was added. */
  has(path: string): boolean {
    return this.#paths.has(normalize(path));
  }

  /** Appends the trailer and returns the archive. */
  finish(): Uint8Array {
    if (!this.#finished) {
      this.#entry("TRAILER!!!", 0, new Uint8Array(0), 1, 0, 0, true);
      this.#finished = true;
    }
    const out = new Uint8Array(this.#size);
    let at = 0;
    for (const chunk of this.#chunks) {
      out.set(chunk, at);
      at += chunk.length;
    }
    return out;
  }

  #entry(
    path: string,
    mode: number,
    data: Uint8Array,
    nlink: number,
    rmajor = 0,
    rminor = 0,
    trailer = false,
  ) {
    if (this.#finished) throw new Error("Cannot add to a cpio archive: it is finished");
    const name = trailer ? path : normalize(path);
    if (!trailer) {
      if (this.#paths.has(name)) throw new Error(`Cannot add ${path} to a cpio archive: it is already there`);
      this.#paths.add(name);
    }
    if (data.length > MAX_FILE_BYTES) throw new RangeError(`Cannot add ${path} to a cpio archive: too large`);
    const nameBytes = new TextEncoder().encode(`${name}\0`);
    const fields = [
      trailer ? 0 : this.#inode++,
      mode,
      0, // uid
      0, // gid
      nlink,
      0, // mtime
      data.length,
      0, // devmajor
      0, // devminor
      rmajor,
      rminor,
      nameBytes.length,
      0, // check
    ];
    const header = new TextEncoder().encode(`070701${fields.map(hex8).join("")}`);
    this.#push(header);
    this.#push(nameBytes);
    this.#pad();
    if (data.length > 0) {
      this.#push(data);
      this.#pad();
    }
  }

  #push(chunk: Uint8Array): void {
    this.#chunks.push(chunk);
    this.#size += chunk.length;
  }

  #pad(): void {
    const padding = (4 - (this.#size % 4)) % 4;
    if (padding > 0) this.#push(new Uint8Array(padding));
  }
}

function hex8(value: number): string {
  return value.toString(16).padStart(8, "0");
}

/** Archive paths are relative ("bin/busybox"), as the kernel and cpio expect. */
function normalize(path: string): string {
  const trimmed = path.replace(/^\/+/, "").replace(/\/+$/, "");
  if (trimmed === "" || trimmed.split("/").some((part) => part === ".." || part === "")) {
    throw new RangeError(`Cannot add ${JSON.stringify(path)} to a cpio archive: not a clean path`);
  }
  return trimmed;
}

/**
 * Reads a file the user named as input (a profile, a header file, a CA certificate) without trusting
 * what is at that path: it is opened non-blocking, so a FIFO with no writer cannot hang the open, and
 * `fstat` on the open descriptor decides how to read it. A regular file is refused when it is larger than
 * the caller's bound; a pipe or socket (`report <(zcat a.pb.gz)`, `/dev/stdin`) is read until the bound
 * and refused past it; a device or a directory is refused at once (`/dev/zero` would never end).
 *
 * @example
 * ```ts
 * import { readInputFile } from "./input_file.ts";
 * const bytes = await readInputFile("/etc/os-release", { maxBytes: 1 << 20, kind: "text file" });
 * ```
 *
 * @module
 */
import fs from "node:fs";

/** Why an input file was not read; the message names the file: "Cannot read PATH: reason". */
export class InputFileError extends Error {
  /** The path the user gave. */
  readonly path: string;
  constructor(path: string, reason: string) {
    super(`Cannot read ${path}: ${reason}`);
    this.name = "InputFileError";
    this.path = path;
  }
}

/** Bounds and wording of {@linkcode readInputFile}. */
export interface InputFileOptions {
  /** The most bytes read; a larger file is refused. */
  maxBytes: number;
  /** What the file should be, for messages ("pprof profile"). */
  kind: string;
}

/** Bytes asked of the kernel per read of a pipe or socket. */
const CHUNK_BYTES = 1 << 16;
/** How long to wait before reading a pipe again when its writer has not written yet. */
const PIPE_POLL_MS = 10;

/**
 * The contents of `path`, at most `options.maxBytes` of them. Throws {@linkcode InputFileError} for a
 * missing or unreadable file, a device or directory, and a file or stream larger than the bound.
 */
export async function readInputFile(path: string, options: InputFileOptions): Promise<Uint8Array> {
  let fd: number;
  try {
    // O_NONBLOCK: opening a FIFO waits for a writer otherwise. O_NOCTTY: root opening a terminal device
    // must not make it its controlling terminal.
    fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOCTTY);
  } catch (error) {
    throw new InputFileError(path, systemReason(error));
  }
  try {
    const stat = fs.fstatSync(fd);
    if (stat.isFile()) return readRegular(fd, path, stat.size, options);
    if (stat.isFIFO() || stat.isSocket()) return await readStream(fd, path, options);
    throw new InputFileError(path, `${kindOf(stat)}, not a ${options.kind}`);
  } finally {
    fs.closeSync(fd);
  }
}

function readRegular(fd: number, path: string, size: number, options: InputFileOptions): Uint8Array {
  if (size > options.maxBytes) throw tooLarge(path, size, options);
  // One byte more than fstat said: a file that grows while it is read is noticed instead of cut short.
  const buffer = new Uint8Array(size + 1);
  let filled = 0;
  while (filled < buffer.length) {
    // A regular file never answers "would block"; null is taken as the end all the same.
    const count = readSome(fd, path, buffer.subarray(filled));
    if (count === null || count === 0) break;
    filled += count;
  }
  if (filled > size) {
    throw new InputFileError(path, "it grew while being read; try again when it is complete");
  }
  return buffer.subarray(0, filled);
}

async function readStream(fd: number, path: string, options: InputFileOptions): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const chunk = new Uint8Array(Math.min(CHUNK_BYTES, options.maxBytes - total + 1));
    const count = readSome(fd, path, chunk);
    if (count === null) {
      // The writer is alive but has nothing yet: wait without blocking the event loop, so Ctrl-C works.
      await new Promise((resolve) => setTimeout(resolve, PIPE_POLL_MS));
      continue;
    }
    if (count === 0) break;
    total += count;
    if (total > options.maxBytes) throw tooLarge(path, null, options);
    chunks.push(chunk.subarray(0, count));
  }
  const out = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return out;
}

/** Reads into `buffer`; the byte count (0 at the end), or null when a non-blocking read would wait. */
function readSome(fd: number, path: string, buffer: Uint8Array): number | null {
  try {
    return fs.readSync(fd, buffer, 0, buffer.length, null);
  } catch (error) {
    if ((error as { code?: string }).code === "EAGAIN") return null;
    throw new InputFileError(path, systemReason(error));
  }
}

/** The error for a file of `size` bytes (null: a stream that went on) over the bound. */
function tooLarge(path: string, size: number | null, options: InputFileOptions): InputFileError {
  const what = size === null ? "the stream holds more" : `${size} bytes, more`;
  return new InputFileError(
    path,
    `${what} than the ${formatLimit(options.maxBytes)} omniprof reads as a ${options.kind}`,
  );
}

function formatLimit(bytes: number): string {
  if (bytes >= 1 << 20 && bytes % (1 << 20) === 0) return `${bytes / (1 << 20)} MiB`;
  if (bytes >= 1 << 10 && bytes % (1 << 10) === 0) return `${bytes / (1 << 10)} KiB`;
  return `${bytes} bytes`;
}

function kindOf(stat: fs.Stats): string {
  if (stat.isDirectory()) return "a directory";
  if (stat.isCharacterDevice()) return "a character device";
  if (stat.isBlockDevice()) return "a block device";
  return "not a regular file";
}

/** The reason of a failed system call in words, without node's "ENOENT: ..., open 'path'" decoration. */
function systemReason(error: unknown): string {
  const code = (error as { code?: string }).code;
  switch (code) {
    case "ENOENT":
      return "no such file";
    case "EACCES":
    case "EPERM":
      return "permission denied";
    case "ENOTDIR":
      return "a part of the path is not a folder";
    case "ELOOP":
      return "too many levels of symbolic links";
    case "EISDIR":
      return "a directory";
  }
  return error instanceof Error ? error.message : String(error);
}

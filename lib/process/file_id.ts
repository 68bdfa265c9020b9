/**
 * File identity: equal files get equal ids wherever they are (another path, another container), and a
 * replaced file gets a new one. Like the OpenTelemetry profiler: SHA-256 over the first 4 KiB, the last
 * 4 KiB and the length, so that hashing a 100 MB binary costs two small reads.
 *
 * @example
 * ```ts
 * import { fileIdOf } from "./file_id.ts";
 * import { RegularFile } from "../sys/regular_file.ts";
 * using file = RegularFile.open("/bin/true");
 * console.log(fileIdOf(file)); // 32 hex digits
 * ```
 *
 * @module
 */
import { Sha256 } from "../hash/sha256.ts";
import type { RegularFile } from "../sys/regular_file.ts";
import type { FileId } from "../types.ts";

const CHUNK = 4096;

/** Computes the {@linkcode FileId} of an open file. */
export function fileIdOf(file: RegularFile): FileId {
  const length = file.size;
  const hash = new Sha256();
  const buffer = new Uint8Array(CHUNK);
  hash.update(readAt(file, 0, buffer));
  hash.update(readAt(file, Math.max(0, length - CHUNK), buffer));
  const lengthBytes = new Uint8Array(8);
  new DataView(lengthBytes.buffer).setBigUint64(0, BigInt(length), true);
  hash.update(lengthBytes);
  return hash.hex().slice(0, 32) as FileId;
}

/** Up to `buffer.length` bytes at `position`, fewer where the file ends. */
function readAt(file: RegularFile, position: number, buffer: Uint8Array): Uint8Array {
  let filled = 0;
  while (filled < buffer.length) {
    const count = file.readInto(position + filled, buffer.subarray(filled));
    if (count === 0) break;
    filled += count;
  }
  return buffer.subarray(0, filled);
}

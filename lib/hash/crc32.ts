/**
 * CRC-32 with zlib's polynomial (0xEDB88320, reflected), the checksum `.gnu_debuglink` records for a
 * separate debug file. Here rather than from `node:zlib`, whose import loads Deno's Node compatibility
 * layer for zlib and streams on every start (see sha256.ts).
 *
 * @example
 * ```ts
 * import { crc32 } from "./crc32.ts";
 * crc32(new TextEncoder().encode("123456789")); // 0xcbf43926
 * ```
 *
 * @module
 */

const TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** The CRC-32 of `bytes`, continuing from `crc` (the result for the bytes before them; 0 to start). */
export function crc32(bytes: Uint8Array, crc = 0): number {
  let c = ~crc;
  for (let i = 0; i < bytes.length; i++) c = TABLE[(c ^ bytes[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}

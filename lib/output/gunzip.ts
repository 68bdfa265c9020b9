/**
 * gzip decompression with a bound on the output: a few kilobytes of gzip can hold gigabytes of zeros,
 * and every gzip omniprof reads (pprof files, collector responses) comes from outside. `node:zlib` stops
 * as soon as the output passes the bound, so a bomb costs the bound, not its full size.
 *
 * @example
 * ```ts
 * import { gunzipBounded, isGzip } from "./gunzip.ts";
 * import { gzipSync } from "node:zlib";
 * const packed = gzipSync(new TextEncoder().encode("hello"));
 * isGzip(packed); // true
 * gunzipBounded(packed, 1024, "greeting"); // the 5 bytes of "hello"
 * ```
 *
 * @module
 */
import { gunzipSync } from "node:zlib";

/** Whether `bytes` starts with the gzip magic number (1f 8b). */
export function isGzip(bytes: Uint8Array): boolean {
  return bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b;
}

/**
 * `bytes` decompressed, at most `maxBytes` of output. Throws a `RangeError` "Cannot decode WHAT: ..." when
 * the output would be larger, or the data is not valid gzip (truncated, corrupt).
 */
export function gunzipBounded(bytes: Uint8Array, maxBytes: number, what: string): Uint8Array {
  try {
    const out = gunzipSync(bytes, { maxOutputLength: maxBytes });
    return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
  } catch (error) {
    // node:zlib reports the bound as a RangeError ("Cannot create a Buffer larger than ..."), and damaged
    // data as a plain Error with a zlib code.
    if (error instanceof RangeError) {
      throw new RangeError(`Cannot decode ${what}: decompresses to more than ${maxBytes} bytes`);
    }
    throw new RangeError(
      `Cannot decode ${what}: corrupt gzip data (${error instanceof Error ? error.message : error})`,
    );
  }
}

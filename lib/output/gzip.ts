/**
 * gzip compression through the web platform's CompressionStream. `node:zlib` does the same, but the
 * first `node:` import of a run costs about 15 ms of CPU (Deno starts its Node compatibility layer),
 * which a `record` writing the default pprof output would pay only for this.
 *
 * @example
 * ```ts
 * import { gzip } from "./gzip.ts";
 * const compressed = await gzip(new TextEncoder().encode("hello"));
 * compressed[0] === 0x1f && compressed[1] === 0x8b; // true
 * ```
 *
 * @module
 */

/** `data` gzip-compressed (deflate at zlib's default level, with the gzip header and trailer). */
export async function gzip(data: Uint8Array): Promise<Uint8Array> {
  const stream = new Blob([data as Uint8Array<ArrayBuffer>]).stream().pipeThrough(
    new CompressionStream("gzip"),
  );
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

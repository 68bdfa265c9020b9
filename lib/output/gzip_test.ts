import assert from "node:assert/strict";
import { gunzipSync } from "node:zlib";
import { gzip } from "./gzip.ts";

Deno.test("gzip() output is gzip that node:zlib decompresses to the input", async () => {
  const random = new Uint8Array(300_000);
  for (let i = 0; i < random.length; i += 65536) crypto.getRandomValues(random.subarray(i, i + 65536));
  const inputs = [new Uint8Array(0), new TextEncoder().encode("omniprof ".repeat(10_000)), random];
  for (const input of inputs) {
    const compressed = await gzip(input);
    assert.deepEqual([compressed[0], compressed[1]], [0x1f, 0x8b]);
    assert.deepEqual(new Uint8Array(gunzipSync(compressed)), input);
  }
  // Repetitive input shrinks: it is compressed, not only framed.
  assert.ok((await gzip(inputs[1]!)).length < inputs[1]!.length / 20);
});

Deno.test("gzip() writes the very bytes of a Blob's stream piped through CompressionStream", async () => {
  const piped = async (data: Uint8Array<ArrayBuffer>) =>
    new Uint8Array(
      await new Response(new Blob([data]).stream().pipeThrough(new CompressionStream("gzip"))).arrayBuffer(),
    );
  // Empty (a Blob streams no chunk at all), small, and over a Blob's 64 KiB chunks.
  const text = new TextEncoder().encode("omniprof ".repeat(30_000));
  for (const input of [new Uint8Array(0), text.subarray(0, 100), text]) {
    assert.deepEqual(await gzip(input), await piped(input));
  }
});

// Both hashes against node's (OpenSSL's SHA-256, zlib's CRC-32) on random messages of every length
// around the block boundaries, fed whole and in pieces.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { crc32 as zlibCrc32 } from "node:zlib";
import { crc32 } from "./crc32.ts";
import { Sha256 } from "./sha256.ts";

function randomBytes(length: number): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let at = 0; at < length; at += 65536) crypto.getRandomValues(bytes.subarray(at, at + 65536));
  return bytes;
}

Deno.test("Sha256 matches node:crypto on lengths 0..300 and 1 MiB, whole and in pieces", () => {
  const lengths = [...Array(301).keys(), 4096, 8200, 1 << 20];
  for (const length of lengths) {
    const message = randomBytes(length);
    const expected = createHash("sha256").update(message).digest("hex");
    assert.equal(new Sha256().update(message).hex(), expected, `length ${length}`);
    const pieces = new Sha256();
    for (let at = 0; at < length; at += 37) pieces.update(message.subarray(at, at + 37));
    assert.equal(pieces.hex(), expected, `length ${length} in pieces`);
  }
  assert.equal(
    new Sha256().update(new TextEncoder().encode("abc")).hex(),
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
  );
});

Deno.test("crc32 matches node:zlib, whole and continued", () => {
  assert.equal(crc32(new TextEncoder().encode("123456789")), 0xcbf43926);
  for (const length of [0, 1, 7, 255, 4096, 100_001]) {
    const bytes = randomBytes(length);
    assert.equal(crc32(bytes), zlibCrc32(bytes), `length ${length}`);
    const half = length >> 1;
    assert.equal(crc32(bytes.subarray(half), crc32(bytes.subarray(0, half))), zlibCrc32(bytes));
  }
});

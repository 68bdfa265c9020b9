/**
 * The `bias_and_unwind_program` field of `struct pid_page_mapping_info`: a 56-bit bias in the low bits and
 * the unwind program (enum unwind_program) in the top byte, as in the OpenTelemetry eBPF profiler's
 * `EncodeBiasAndUnwindProgram`. Works on two 32-bit halves so no BigInt is needed.
 *
 * @example
 * ```ts
 * import { decodeBiasAndUnwindProgram, encodeBiasAndUnwindProgram } from "./bias_and_unwind_program.ts";
 * import assert from "node:assert/strict";
 * const bytes = encodeBiasAndUnwindProgram(0x7f0000001000, 1);
 * assert.deepEqual(decodeBiasAndUnwindProgram(bytes), { bias: 0x7f0000001000, unwindProgram: 1 });
 * ```
 *
 * @module
 */

const TWO_POW_32 = 0x100000000;
/** Biases must fit 56 bits; JS numbers are exact to 2^53, which user-space addresses never reach. */
const MAX_BIAS = Number.MAX_SAFE_INTEGER;

/** Encodes into 8 little-endian bytes. Throws a RangeError for a negative or oversized bias. */
export function encodeBiasAndUnwindProgram(bias: number, unwindProgram: number): Uint8Array<ArrayBuffer> {
  if (!Number.isInteger(bias) || bias < 0 || bias > MAX_BIAS) {
    throw new RangeError(`Cannot encode bias ${bias}: it must be a non-negative integer below 2^53`);
  }
  if (!Number.isInteger(unwindProgram) || unwindProgram < 0 || unwindProgram > 0xff) {
    throw new RangeError(`Cannot encode unwind program ${unwindProgram}: it must fit a byte`);
  }
  const bytes = new Uint8Array(8);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, bias % TWO_POW_32, true);
  view.setUint32(4, (Math.floor(bias / TWO_POW_32) & 0xffffff) | (unwindProgram << 24) >>> 0, true);
  return bytes;
}

/** Decodes 8 little-endian bytes (at `offset`). */
export function decodeBiasAndUnwindProgram(
  bytes: Uint8Array,
  offset = 0,
): { bias: number; unwindProgram: number } {
  const view = new DataView(bytes.buffer, bytes.byteOffset + offset, 8);
  const high = view.getUint32(4, true);
  return { bias: (high & 0xffffff) * TWO_POW_32 + view.getUint32(0, true), unwindProgram: high >>> 24 };
}

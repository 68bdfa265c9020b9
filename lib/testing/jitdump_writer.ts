/**
 * Jitdumps built field by field from perf's jitdump specification
 * (tools/perf/Documentation/jitdump-specification.txt), for tests of their readers: written here, not
 * with the code under test. Test-only.
 *
 * @example
 * ```ts
 * import { concat, header, load } from "./jitdump_writer.ts";
 * const bytes = concat(header(), load(0x7f0000001000, 0x40, "work", 1));
 * console.log(bytes.length); // 40 + 16 + 40 + 5 + 0x40
 * ```
 *
 * @module
 */
import type { JitDumpSource } from "../symbolize/jitdump.ts";

const encoder = new TextEncoder();

/** Bytes written the way a writer with byte order `little` writes them. */
export class Writer {
  #bytes: number[] = [];
  constructor(readonly little = true) {}

  u32(value: number): this {
    const view = new DataView(new ArrayBuffer(4));
    view.setUint32(0, value, this.little);
    this.#bytes.push(...new Uint8Array(view.buffer));
    return this;
  }

  u64(value: number | bigint): this {
    const view = new DataView(new ArrayBuffer(8));
    view.setBigUint64(0, BigInt(value), this.little);
    this.#bytes.push(...new Uint8Array(view.buffer));
    return this;
  }

  string(text: string): this {
    this.#bytes.push(...encoder.encode(text), 0);
    return this;
  }

  raw(bytes: ArrayLike<number>): this {
    this.#bytes.push(...Array.from(bytes));
    return this;
  }

  get bytes(): Uint8Array {
    return new Uint8Array(this.#bytes);
  }
}

/** The file header: magic, version, total_size, elf_mach, pad1, pid, timestamp, flags. */
export function header(
  little = true,
  fields: { magic?: number; version?: number; size?: number } = {},
): Uint8Array {
  return new Writer(little).u32(fields.magic ?? 0x4a695444).u32(fields.version ?? 1).u32(fields.size ?? 40)
    .u32(62).u32(0).u32(4242).u64(123456789n).u64(0n).bytes;
}

/** A record: id, total_size, timestamp, then `body`. */
export function record(id: number, body: Uint8Array, little = true, timestamp = 1000): Uint8Array {
  return new Writer(little).u32(id).u32(16 + body.length).u64(timestamp).raw(body).bytes;
}

/** JIT_CODE_LOAD: pid, tid, vma, code_addr, code_size, code_index, name, then the code itself. */
export function load(address: number, size: number, name: string, index: number, little = true): Uint8Array {
  const body = new Writer(little).u32(4242).u32(4243).u64(address).u64(address).u64(size).u64(index)
    .string(name).raw(new Uint8Array(size).fill(0xcc)).bytes;
  return record(0, body, little);
}

/** JIT_CODE_MOVE: pid, tid, vma, old_code_addr, new_code_addr, code_size, code_index. */
export function move(from: number, to: number, size: number, index: number): Uint8Array {
  return record(1, new Writer().u32(4242).u32(4243).u64(to).u64(from).u64(to).u64(size).u64(index).bytes);
}

/**
 * JIT_CODE_DEBUG_INFO: code_addr, nr_entry, then per entry addr, line, discrim, file name ("\xff" =
 * same; bytes are written as they are, then a NUL).
 */
export function debugInfo(
  address: number,
  entries: { address: number; line: number; file: string | null | Uint8Array }[],
): Uint8Array {
  const writer = new Writer().u64(address).u64(entries.length);
  for (const entry of entries) {
    writer.u64(entry.address).u32(entry.line).u32(0);
    if (entry.file === null) writer.raw([0xff, 0]);
    else if (typeof entry.file === "string") writer.string(entry.file);
    else writer.raw([...entry.file, 0]);
  }
  return record(2, writer.bytes);
}

export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** A file that its writer appends to: `visible` bytes of `bytes` can be read. */
export class GrowingFile implements JitDumpSource {
  readonly name = "jit-4242.dump";
  visible: number;
  closed = false;
  constructor(public bytes: Uint8Array, visible = bytes.length) {
    this.visible = visible;
  }
  size(): number {
    return this.visible;
  }
  readInto(offset: number, buffer: Uint8Array): number {
    const part = this.bytes.subarray(offset, Math.min(this.visible, offset + buffer.length));
    buffer.set(part);
    return part.length;
  }
  close(): void {
    this.closed = true;
  }
}

/**
 * Turns a bzImage (what distributions ship as `vmlinuz`) into the ELF `vmlinux` inside it, so that qemu
 * boots the kernel through its PVH entry point: faster than running the bzImage's own decompressor under
 * software emulation. The boot protocol header says exactly where the compressed payload lies; its format
 * is told by its magic number, and the build appends the uncompressed size as the payload's last 4 bytes,
 * which the result is checked against.
 *
 * @example
 * ```ts ignore
 * import { extractVmlinux } from "./bzimage.ts";
 * const vmlinux = await extractVmlinux(Deno.readFileSync("vmlinuz"));
 * Deno.writeFileSync("vmlinux", vmlinux);
 * ```
 *
 * @module
 */

/** Compression formats the kernel build can use for its payload. */
export type PayloadFormat = "gzip" | "xz" | "zstd" | "lzma" | "bzip2" | "lz4" | "lzo";

/** The compressed kernel found in a bzImage. */
export interface BzImagePayload {
  format: PayloadFormat;
  /** The compressed stream without the appended size (a view into the image). */
  compressed: Uint8Array;
  /** The size of the ELF it decompresses to. */
  uncompressedSize: number;
  /** The boot protocol version, e.g. "2.15". */
  protocol: string;
}

const MAGICS: [PayloadFormat, number[]][] = [
  ["gzip", [0x1f, 0x8b]],
  ["xz", [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]],
  ["zstd", [0x28, 0xb5, 0x2f, 0xfd]],
  ["lzma", [0x5d, 0x00, 0x00]],
  ["bzip2", [0x42, 0x5a, 0x68]],
  ["lz4", [0x02, 0x21, 0x4c, 0x18]],
  ["lzo", [0x89, 0x4c, 0x5a, 0x4f]],
];

/** The decompressor command for each format, and the Debian package that has it. */
const DECOMPRESSORS: Record<PayloadFormat, { command: string; args: string[]; pkg: string }> = {
  gzip: { command: "gzip", args: ["-dc"], pkg: "gzip" },
  xz: { command: "xz", args: ["-dc", "--single-stream"], pkg: "xz-utils" },
  zstd: { command: "zstd", args: ["-dcq"], pkg: "zstd" },
  lzma: { command: "xz", args: ["-dc", "--format=lzma"], pkg: "xz-utils" },
  bzip2: { command: "bzip2", args: ["-dc"], pkg: "bzip2" },
  lz4: { command: "lz4", args: ["-dc"], pkg: "lz4" },
  lzo: { command: "lzop", args: ["-dc"], pkg: "lzop" },
};

/** Largest kernel ELF accepted: far above any real one, low enough to refuse nonsense sizes. */
const MAX_VMLINUX_BYTES = 1 << 30;

function fail(state: string): never {
  throw new RangeError(`Cannot parse bzImage: ${state}`);
}

/**
 * Finds the compressed kernel in a bzImage using the boot protocol header (version 2.08 or newer has
 * payload_offset and payload_length).
 *
 * @throws {RangeError} when the bytes are not such a bzImage or the payload lies outside them.
 */
export function bzImagePayload(image: Uint8Array): BzImagePayload {
  if (image.length < 0x250) fail(`${image.length} bytes is too short for a boot header`);
  const view = new DataView(image.buffer, image.byteOffset, image.byteLength);
  if (view.getUint32(0x202, true) !== 0x53726448) fail("no HdrS signature at 0x202");
  const version = view.getUint16(0x206, true);
  const protocol = `${version >> 8}.${version & 0xff}`;
  if (version < 0x208) fail(`boot protocol ${protocol} has no payload fields (needs 2.08)`);
  const setupSectors = image[0x1f1] || 4;
  const payloadOffset = view.getUint32(0x248, true);
  const payloadLength = view.getUint32(0x24c, true);
  const start = (setupSectors + 1) * 512 + payloadOffset;
  if (payloadLength < 8 || start + payloadLength > image.length) {
    fail(`payload of ${payloadLength} bytes at ${start} lies outside the ${image.length}-byte image`);
  }
  const payload = image.subarray(start, start + payloadLength);
  const found = MAGICS.find(([, magic]) => magic.every((byte, i) => payload[i] === byte));
  if (!found) {
    const hex = [...payload.subarray(0, 6)].map((b) => b.toString(16).padStart(2, "0")).join(" ");
    fail(`unknown payload format (starts ${hex})`);
  }
  const format = found[0];
  const uncompressedSize = view.getUint32(start + payloadLength - 4, true);
  if (uncompressedSize === 0 || uncompressedSize > MAX_VMLINUX_BYTES) {
    fail(`implausible uncompressed size ${uncompressedSize}`);
  }
  // gzip's own trailer ends with the size; every other format has it appended after the stream.
  const compressed = format === "gzip" ? payload : payload.subarray(0, payloadLength - 4);
  return { format, compressed, uncompressedSize, protocol };
}

/** Decompresses with the format's command-line tool. */
async function decompress(format: PayloadFormat, data: Uint8Array): Promise<Uint8Array> {
  const tool = DECOMPRESSORS[format];
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(tool.command, {
      args: tool.args,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      throw new Error(
        `Cannot decompress the ${format} kernel: ${tool.command} is not installed (apt-get install ${tool.pkg})`,
      );
    }
    throw error;
  }
  const writer = child.stdin.getWriter();
  const written = writer.write(data).then(() => writer.close()).catch(() => {});
  const output = await child.output();
  await written;
  if (!output.success) {
    const message = new TextDecoder().decode(output.stderr).trim();
    throw new Error(`Cannot decompress the ${format} kernel: ${tool.command} failed: ${message}`);
  }
  return output.stdout;
}

/** Checks that `bytes` is a complete x86-64 ELF executable: every segment lies inside it. */
export function checkKernelElf(bytes: Uint8Array): void {
  const bad = (state: string): never => {
    throw new RangeError(`Cannot use the decompressed kernel: ${state}`);
  };
  if (bytes.length < 64) bad("shorter than an ELF header");
  if (bytes[0] !== 0x7f || bytes[1] !== 0x45 || bytes[2] !== 0x4c || bytes[3] !== 0x46) bad("no ELF magic");
  if (bytes[4] !== 2 || bytes[5] !== 1) bad("not ELF64 little-endian");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint16(16, true) !== 2) bad("not an executable");
  if (view.getUint16(18, true) !== 62) bad("not x86-64");
  const phoff = Number(view.getBigUint64(32, true));
  const phentsize = view.getUint16(54, true);
  const phnum = view.getUint16(56, true);
  if (phnum === 0 || phnum > 64 || phentsize < 56 || phoff + phnum * phentsize > bytes.length) {
    bad("bad program header table");
  }
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    const offset = Number(view.getBigUint64(at + 8, true));
    const size = Number(view.getBigUint64(at + 32, true));
    if (offset + size > bytes.length) bad(`segment ${i} ends at ${offset + size}, past ${bytes.length}`);
  }
}

/**
 * Decompresses the ELF kernel out of a bzImage and checks it (size as recorded by the build, a
 * well-formed x86-64 ELF).
 *
 * @throws {RangeError} for a malformed image or result; Error when the decompressor is missing or fails.
 */
export async function extractVmlinux(image: Uint8Array): Promise<Uint8Array> {
  const payload = bzImagePayload(image);
  const vmlinux = await decompress(payload.format, payload.compressed);
  if (vmlinux.length !== payload.uncompressedSize) {
    throw new RangeError(
      `Cannot use the decompressed kernel: ${vmlinux.length} bytes, the image says ${payload.uncompressedSize}`,
    );
  }
  checkKernelElf(vmlinux);
  return vmlinux;
}

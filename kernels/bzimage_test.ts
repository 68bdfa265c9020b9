import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import { bzImagePayload, checkKernelElf, extractVmlinux } from "./bzimage.ts";
import { kernelDir, listKernels } from "./kernel_cache.ts";
import { optional, programs, requiring } from "../lib/testing/requirements.ts";

/** A static, non-PIE x86-64 executable (ET_EXEC like a kernel), compiled for the test. */
async function staticExecutable(): Promise<Uint8Array> {
  const dir = Deno.makeTempDirSync({ prefix: "omniprof-bzimage-" });
  try {
    Deno.writeTextFileSync(`${dir}/k.c`, "int main(void) { return 0; }\n");
    const output = await new Deno.Command("gcc", {
      args: ["-static", "-no-pie", "-O2", `${dir}/k.c`, "-o", `${dir}/k`],
      stderr: "piped",
    }).output();
    assert.ok(output.success, new TextDecoder().decode(output.stderr));
    return Deno.readFileSync(`${dir}/k`);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

/** Compresses with a command-line tool, as the kernel build does. */
async function compress(command: string, args: string[], data: Uint8Array): Promise<Uint8Array> {
  const child = new Deno.Command(command, { args, stdin: "piped", stdout: "piped" }).spawn();
  // Read while writing: the output fills the pipe before all input is in.
  const result = child.output();
  const writer = child.stdin.getWriter();
  await writer.write(data);
  await writer.close();
  const output = await result;
  assert.ok(output.success);
  return output.stdout;
}

/**
 * A bzImage as the kernel's build lays it out: boot sector and setup (1 sector) with the 2.15 header,
 * then the protected-mode part, in which the payload starts at payload_offset. All formats but gzip have
 * the uncompressed size appended (gzip's own trailer ends with it).
 */
function bzImage(payload: Uint8Array, uncompressedSize: number, appendSize: boolean): Uint8Array {
  const setupSectors = 1;
  const payloadOffset = 0x40;
  const stream = appendSize ? new Uint8Array(payload.length + 4) : payload;
  if (appendSize) {
    stream.set(payload);
    new DataView(stream.buffer).setUint32(payload.length, uncompressedSize, true);
  }
  const start = (setupSectors + 1) * 512 + payloadOffset;
  const image = new Uint8Array(start + stream.length + 100);
  const view = new DataView(image.buffer);
  image[0x1f1] = setupSectors;
  view.setUint32(0x202, 0x53726448, true); // "HdrS"
  view.setUint16(0x206, 0x020f, true);
  view.setUint32(0x248, payloadOffset, true);
  view.setUint32(0x24c, stream.length, true);
  image.set(stream, start);
  return image;
}

Deno.test("extractVmlinux() decompresses a gzip payload to the ELF that went in", async () => {
  const elf = await staticExecutable();
  const image = bzImage(gzipSync(elf), elf.length, false);
  assert.equal(bzImagePayload(image).format, "gzip");
  assert.equal(bzImagePayload(image).protocol, "2.15");
  assert.deepEqual(await extractVmlinux(image), elf);
});

// xz (xz-utils, which bootstrap installs for the tests) compresses as the kernel build does.
const xz = programs("xz");

Deno.test(requiring([xz], {
  name: "extractVmlinux() decompresses an xz payload with the size appended",
  fn: async () => {
    const elf = await staticExecutable();
    const xz = await compress("xz", ["-c", "--check=crc32"], elf);
    const image = bzImage(xz, elf.length, true);
    const payload = bzImagePayload(image);
    assert.equal(payload.format, "xz");
    assert.equal(payload.uncompressedSize, elf.length);
    assert.deepEqual(await extractVmlinux(image), elf);
  },
}));

Deno.test(requiring([xz], {
  name: "bzImagePayload() rejects what is not a bzImage with a RangeError",
  fn: async () => {
    const elf = await staticExecutable();
    assert.throws(() => bzImagePayload(elf), /Cannot parse bzImage: no HdrS signature/);
    assert.throws(() => bzImagePayload(new Uint8Array(10)), /Cannot parse bzImage: 10 bytes is too short/);
    const image = bzImage(gzipSync(elf), elf.length, false);
    assert.throws(
      () => bzImagePayload(image.subarray(0, 2000)),
      /Cannot parse bzImage: payload of \d+ bytes/,
    );
    const unknown = bzImage(new Uint8Array(64).fill(0x42), 64, true);
    assert.throws(() => bzImagePayload(unknown), /unknown payload format \(starts 42 42/);
    // A wrong size makes the result be refused rather than booted.
    const lying = bzImage(await compress("xz", ["-c"], elf), elf.length + 1, true);
    await assert.rejects(() => extractVmlinux(lying), /the image says/);
    assert.throws(() => checkKernelElf(elf.subarray(0, 1000)), /segment \d+ ends at/);
  },
}));

// A real Debian kernel, when one has been fetched: the extraction must give back the stored vmlinux.
const fetched = listKernels(kernelDir()).findLast((version) => {
  try {
    return Deno.statSync(`${kernelDir()}${version}/vmlinuz`).isFile;
  } catch {
    return false;
  }
});
const fetchedKernel = optional(fetched ? null : "no kernel fetched (deno task fetch-kernel 6.1 fetches one)");
Deno.test(requiring([fetchedKernel], {
  name: "extractVmlinux() turns a fetched Debian vmlinuz into the ELF vmlinux stored beside it",
  async fn() {
    const folder = `${kernelDir()}${fetched}/`;
    const vmlinux = await extractVmlinux(Deno.readFileSync(`${folder}vmlinuz`));
    checkKernelElf(vmlinux);
    const digest = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
    assert.equal(digest(vmlinux), digest(Deno.readFileSync(`${folder}vmlinux`)));
  },
}));

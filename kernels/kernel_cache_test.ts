import assert from "node:assert/strict";
import { findKernel, imageKind, kernelDir, listKernels, missingKernelMessage } from "./kernel_cache.ts";

const repoRoot = new URL("..", import.meta.url).pathname;

/** A folder of images: "5.10" and "6.12" as cache folders, "4.9" as a flat bzImage-like file. */
function imageFolder(): string {
  const dir = Deno.makeTempDirSync({ prefix: "omniprof-kernels-" }) + "/";
  // Real ELF and boot-header bytes: imageKind() goes by the magic numbers only.
  const elf = Deno.readFileSync("/bin/true");
  const bzImage = new Uint8Array(0x400);
  bzImage.set(new TextEncoder().encode("HdrS"), 0x202);
  for (const version of ["6.12", "5.10"]) {
    Deno.mkdirSync(`${dir}${version}`);
    Deno.writeFileSync(`${dir}${version}/vmlinux`, elf);
  }
  Deno.writeFileSync(`${dir}linux-4.9.198.bz`, bzImage);
  Deno.mkdirSync(`${dir}apt`);
  Deno.mkdirSync(`${dir}7.0`); // an empty folder is no image
  return dir;
}

Deno.test("listKernels() finds cache folders and flat image files, sorted by version", () => {
  const dir = imageFolder();
  try {
    assert.deepEqual(listKernels(dir), ["4.9.198", "5.10", "6.12"]);
    assert.equal(findKernel(dir, "5.10")?.kind, "elf");
    assert.equal(findKernel(dir, "4.9.198")?.kind, "bzImage");
    assert.equal(findKernel(dir, "7.0"), null);
    assert.equal(findKernel(dir, "../etc"), null);
    assert.equal(imageKind("/etc/hostname"), null);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("missingKernelMessage() lists what is present and the commands that get the version", () => {
  const dir = imageFolder();
  try {
    const message = missingKernelMessage(dir, "4.19");
    assert.match(message, /No kernel image for 4\.19 in .*\(KERN_DIR\)/);
    assert.match(message, /Present: 4\.9\.198, 5\.10, 6\.12/);
    assert.match(message, /deno task fetch-kernel 4\.19\b/);
    assert.match(message, /deno task build-kernel 4\.19\b/);
    assert.match(missingKernelMessage(`${dir}none/`, "6.1"), /Present: none/);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("kernelDir() is KERN_DIR when set, kernels/cache/ otherwise", () => {
  assert.equal(kernelDir(() => "/srv/kernels"), "/srv/kernels/");
  assert.equal(kernelDir(() => undefined), `${repoRoot}kernels/cache/`);
});

Deno.test("test-kernel with a version that is not in the cache fails fast with the message", async () => {
  const dir = imageFolder();
  try {
    const started = performance.now();
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", `${repoRoot}kernels/test_kernel.ts`, "4.19"],
      env: { KERN_DIR: dir },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const seconds = (performance.now() - started) / 1000;
    const stderr = new TextDecoder().decode(output.stderr);
    assert.equal(output.code, 2, stderr);
    assert.match(stderr, /No kernel image for 4\.19/);
    assert.match(stderr, /Present: 4\.9\.198, 5\.10, 6\.12/);
    assert.match(stderr, /deno task fetch-kernel 4\.19/);
    // Nothing was built or booted: only deno's start-up.
    assert.ok(seconds < 15, `took ${seconds.toFixed(1)} s`);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

import assert from "node:assert/strict";
import {
  configMember,
  kernelCandidates,
  kernelLines,
  parseKernelPackage,
  sourceLines,
  vmlinuzMember,
} from "./debian_kernels.ts";

// Package names as Debian's archive lists them (apt-cache search) for bullseye to experimental.
const NAMES = [
  "linux-image-5.10.0-45-amd64",
  "linux-image-5.10.0-46-amd64-unsigned",
  "linux-image-5.10.0-46-cloud-amd64-unsigned",
  "linux-image-5.10.0-46-rt-amd64",
  "linux-image-6.1-amd64",
  "linux-image-6.1.0-0.deb11.52-amd64-unsigned",
  "linux-image-6.1.0-57-amd64",
  "linux-image-6.1.0-57-amd64-unsigned",
  "linux-image-6.12.117+deb12-amd64-unsigned",
  "linux-image-6.12.118+deb13-amd64",
  "linux-image-6.12.118+deb13-amd64-unsigned",
  "linux-image-6.18.15+deb13-amd64",
  "linux-image-7.3.4+deb13-amd64",
  "linux-binary-7.3.4+deb13-amd64",
  "linux-binary-unsigned-7.3.4+deb13-amd64",
  "linux-binary-unsigned-7.3-amd64",
  "linux-image-amd64",
  "linux-source-6.1",
  "linux-source-7.3",
];

Deno.test("parseKernelPackage() reads line, release and kind from Debian's package names", () => {
  assert.deepEqual(parseKernelPackage("linux-image-6.1.0-57-amd64-unsigned"), {
    name: "linux-image-6.1.0-57-amd64-unsigned",
    line: "6.1",
    version: "6.1.0-57",
    release: "6.1.0-57-amd64",
    family: "image",
    unsigned: true,
  });
  const binary = parseKernelPackage("linux-binary-unsigned-7.3.4+deb13-amd64");
  assert.deepEqual([binary?.line, binary?.release, binary?.family, binary?.unsigned], [
    "7.3",
    "7.3.4+deb13-amd64",
    "binary",
    true,
  ]);
  assert.equal(parseKernelPackage("linux-image-5.10.0-46-cloud-amd64-unsigned"), null);
  assert.equal(parseKernelPackage("linux-image-5.10.0-46-rt-amd64"), null);
  assert.equal(parseKernelPackage("linux-image-amd64"), null);
  assert.equal(parseKernelPackage("linux-image-6.1.0-57-amd64-dbg"), null);
});

Deno.test("kernelCandidates() puts the newest version first, its unsigned image before the signed one", () => {
  assert.deepEqual(kernelCandidates(NAMES, "6.1").map((p) => p.name), [
    "linux-image-6.1.0-57-amd64-unsigned",
    "linux-image-6.1.0-57-amd64",
    "linux-image-6.1.0-0.deb11.52-amd64-unsigned",
    "linux-image-6.1-amd64",
  ]);
  // 6.1 is not a prefix of 6.12 and the other way round.
  assert.ok(kernelCandidates(NAMES, "6.12").every((p) => p.version.startsWith("6.12.")));
  assert.equal(kernelCandidates(NAMES, "6.12")[0]!.name, "linux-image-6.12.118+deb13-amd64-unsigned");
  assert.deepEqual(kernelCandidates(NAMES, "7.3").slice(0, 3).map((p) => p.name), [
    "linux-binary-unsigned-7.3.4+deb13-amd64",
    "linux-binary-7.3.4+deb13-amd64",
    "linux-image-7.3.4+deb13-amd64",
  ]);
  assert.deepEqual(kernelCandidates(NAMES, "4.19"), []);
  assert.deepEqual(kernelLines(NAMES), ["5.10", "6.1", "6.12", "6.18", "7.3"]);
  assert.deepEqual(sourceLines(NAMES), ["6.1", "7.3"]);
});

Deno.test("vmlinuzMember() finds the image in dpkg-deb listings of both layouts", () => {
  const image = [
    "drwxr-xr-x root/root         0 2025-07-31 09:44 ./boot/",
    "-rw-r--r-- root/root    236476 2025-07-31 09:44 ./boot/config-5.10.0-46-amd64",
    "-rw-r--r-- root/root   7100352 2025-07-31 09:44 ./boot/vmlinuz-5.10.0-46-amd64",
  ].join("\n");
  assert.deepEqual(vmlinuzMember(image), {
    member: "./boot/vmlinuz-5.10.0-46-amd64",
    release: "5.10.0-46-amd64",
  });
  assert.equal(configMember(image), "./boot/config-5.10.0-46-amd64");
  const binary = [
    "-rw-r--r-- root/root  14504448 2026-11-15 22:30 ./usr/lib/modules/7.3.4+deb13-amd64/vmlinuz.unsigned",
    "lrwxrwxrwx root/root         0 2026-11-15 22:30 ./usr/share/doc/x -> linux-base",
  ].join("\n");
  assert.deepEqual(vmlinuzMember(binary), {
    member: "./usr/lib/modules/7.3.4+deb13-amd64/vmlinuz.unsigned",
    release: "7.3.4+deb13-amd64",
  });
  assert.equal(vmlinuzMember("-rw-r--r-- root/root 10 2026-01-01 00:00 ./usr/share/doc/changelog.gz"), null);
});

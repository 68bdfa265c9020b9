import assert from "node:assert/strict";
import { bindSlave, mountsBelow, parseMountinfo, topMounts, unmountAllBelow } from "./mounts.ts";
import { bootstrapped, requiring } from "../../lib/testing/requirements.ts";

const MOUNTINFO = [
  "22 27 0:21 / /proc rw,relatime - proc proc rw",
  "23 27 0:22 / /sys rw,relatime shared:7 - sysfs sysfs rw",
  "90 80 0:21 / /tmp/fresh/root/proc rw,relatime - proc proc rw",
  "91 80 0:22 / /tmp/fresh/root/sys rw,relatime master:7 - sysfs sysfs rw",
  "92 91 0:12 / /tmp/fresh/root/sys/kernel/tracing rw,relatime - tracefs tracefs rw",
  "93 80 0:30 / /tmp/fresh/root/with\\040space rw - tmpfs tmpfs rw",
  "94 80 0:31 / /tmp/fresh/rootless rw - tmpfs tmpfs rw",
].join("\n");

Deno.test("parseMountinfo() reads ids and mount points, octal escapes decoded", () => {
  const entries = parseMountinfo(MOUNTINFO);
  assert.equal(entries.length, 7);
  assert.deepEqual(entries[4], { id: 92, parentId: 91, point: "/tmp/fresh/root/sys/kernel/tracing" });
  assert.equal(entries[5]!.point, "/tmp/fresh/root/with space");
});

Deno.test("mountsBelow() takes the folder and what is inside it, not a sibling sharing its prefix", () => {
  assert.deepEqual(mountsBelow("/tmp/fresh/root", MOUNTINFO), [
    "/tmp/fresh/root/proc",
    "/tmp/fresh/root/sys",
    "/tmp/fresh/root/sys/kernel/tracing",
    "/tmp/fresh/root/with space",
  ]);
  assert.deepEqual(mountsBelow("/tmp/other", MOUNTINFO), []);
});

Deno.test("topMounts() keeps the mounts no other one holds", () => {
  assert.deepEqual(topMounts(mountsBelow("/tmp/fresh/root", MOUNTINFO)), [
    "/tmp/fresh/root/proc",
    "/tmp/fresh/root/sys",
    "/tmp/fresh/root/with space",
  ]);
});

const notRoot = Deno.uid() === 0 ? null : "needs root to mount";

Deno.test(requiring([bootstrapped(notRoot)], {
  name: "bindSlave() binds /sys with its submounts, and unmountAllBelow() takes them down, not the host's",
  async fn() {
    const hostBefore = mountsBelow("/sys");
    const dir = Deno.realPathSync(Deno.makeTempDirSync({ prefix: "omniprof-mounts-" }));
    try {
      Deno.mkdirSync(`${dir}/sys`);
      await bindSlave("/sys", `${dir}/sys`);
      const bound = mountsBelow(dir);
      assert.deepEqual(
        bound,
        hostBefore.map((point) => `${dir}${point}`),
        "every submount of /sys came along",
      );
      assert.ok(Deno.statSync(`${dir}/sys/kernel`).isDirectory);
      const { remaining, errors } = await unmountAllBelow(dir);
      assert.deepEqual({ remaining, errors }, { remaining: [], errors: [] });
      assert.deepEqual(mountsBelow("/sys"), hostBefore, "the host's /sys mounts are all still there");
    } finally {
      await unmountAllBelow(dir);
      if (mountsBelow(dir).length === 0) Deno.removeSync(dir, { recursive: true });
    }
  },
}));

async function mount(...args: string[]): Promise<void> {
  const output = await new Deno.Command("mount", { args, stderr: "piped" }).output();
  assert.ok(output.success, `mount ${args.join(" ")}: ${new TextDecoder().decode(output.stderr)}`);
}

Deno.test(requiring([bootstrapped(notRoot)], {
  name: "unmountAllBelow() leaves the submounts of a shared source mounted, binds by others included",
  async fn() {
    // A source shared with its binds as the host's /sys is on systemd machines, with a submount as
    // tracefs is: a plain `umount -R` of a bind of it unmounts the source's submount too.
    const dir = Deno.realPathSync(Deno.makeTempDirSync({ prefix: "omniprof-mounts-" }));
    const source = `${dir}/source`;
    const root = `${dir}/root`;
    try {
      for (const path of [source, `${root}/ours`, `${root}/theirs`]) {
        Deno.mkdirSync(path, { recursive: true });
      }
      await mount("-t", "tmpfs", "omniprof-test", source);
      await mount("--make-shared", source);
      Deno.mkdirSync(`${source}/sub`);
      await mount("-t", "tmpfs", "omniprof-test-sub", `${source}/sub`);
      await bindSlave(source, `${root}/ours`);
      await mount("--rbind", source, `${root}/theirs`); // left shared, as another tool might leave it
      assert.equal(mountsBelow(root).length, 4);
      const { remaining, errors } = await unmountAllBelow(root);
      assert.deepEqual({ remaining, errors }, { remaining: [], errors: [] });
      assert.deepEqual(mountsBelow(source), [source, `${source}/sub`]);
    } finally {
      await unmountAllBelow(dir);
      if (mountsBelow(dir).length === 0) Deno.removeSync(dir, { recursive: true });
    }
  },
}));

import assert from "node:assert/strict";
import { containerIdFromCgroup, containerIdFromPath, readContainerId } from "./container_id.ts";
import { bootstrapped, optional, requiring } from "../testing/requirements.ts";

const ID = "3f1c2a9d8e7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d";
const OTHER = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

Deno.test("containerIdFromCgroup() reads Docker's cgroup v1 and v2 layouts", () => {
  const v1 = [
    "12:pids:/docker/" + ID,
    "11:memory:/docker/" + ID,
    "1:name=systemd:/docker/" + ID,
    "0::/",
    "",
  ].join("\n");
  assert.equal(containerIdFromCgroup(v1), ID);
  assert.equal(containerIdFromCgroup(`0::/system.slice/docker-${ID}.scope\n`), ID);
});

Deno.test("containerIdFromCgroup() reads containerd/CRI pods with the cgroupfs and systemd drivers", () => {
  const cgroupfs = `11:cpu,cpuacct:/kubepods/burstable/pod1c2d3e4f-5a6b-7c8d-9e0f-a1b2c3d4e5f6/${ID}\n`;
  assert.equal(containerIdFromCgroup(cgroupfs), ID);
  const systemd = "0::/kubepods.slice/kubepods-burstable.slice/" +
    `kubepods-burstable-pod1c2d3e4f_5a6b_7c8d_9e0f_a1b2c3d4e5f6.slice/cri-containerd-${ID}.scope\n`;
  assert.equal(containerIdFromCgroup(systemd), ID);
  const crio = "0::/kubepods.slice/kubepods-besteffort.slice/" +
    `kubepods-besteffort-pod1c2d3e4f_5a6b.slice/crio-${ID}.scope\n`;
  assert.equal(containerIdFromCgroup(crio), ID);
});

Deno.test("containerIdFromCgroup() reads Podman containers and skips their conmon monitors", () => {
  const rootless = `0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-${ID}.scope\n`;
  assert.equal(containerIdFromCgroup(rootless), ID);
  assert.equal(containerIdFromCgroup(`0::/machine.slice/libpod-${ID}.scope/container\n`), ID);
  assert.equal(containerIdFromCgroup(`0::/machine.slice/libpod-conmon-${ID}.scope\n`), null);
  assert.equal(containerIdFromCgroup(`0::/kubepods.slice/crio-conmon-${ID}.scope\n`), null);
});

Deno.test("containerIdFromCgroup() finds no container in plain systemd slices, scopes and the root", () => {
  assert.equal(containerIdFromCgroup("0::/\n"), null);
  assert.equal(containerIdFromCgroup("0::/system.slice/sshd.service\n"), null);
  assert.equal(containerIdFromCgroup("0::/user.slice/user-1000.slice/session-2.scope\n"), null);
  assert.equal(containerIdFromCgroup("0::/init.scope\n"), null);
  // A 32-digit id is a systemd/unit hash, not a container id.
  assert.equal(containerIdFromCgroup("4:memory:/system.slice/95309becaa7ee7d97c3050c2957670e8\n"), null);
  assert.equal(containerIdFromCgroup(""), null);
  assert.equal(containerIdFromCgroup("garbage without colons\n"), null);
});

Deno.test("containerIdFromCgroup() prefers the innermost container and the unified hierarchy", () => {
  assert.equal(containerIdFromPath(`/docker/${OTHER}/docker/${ID}`), ID);
  const mixed = `4:memory:/docker/${OTHER}\n0::/system.slice/docker-${ID}.scope\n`;
  assert.equal(containerIdFromCgroup(mixed), ID);
  assert.equal(
    containerIdFromCgroup(
      "0::/ecs/8a0f1b2c3d4e4f5a6b7c8d9e0f1a2b3c/8a0f1b2c3d4e4f5a6b7c8d9e0f1a2b3c-1234567890\n",
    ),
    "8a0f1b2c3d4e4f5a6b7c8d9e0f1a2b3c-1234567890",
  );
});

// A real cgroup named like a containerd container, with a real process in it: what /proc shows is what the
// parser reads. Needs root and a writable cgroup v2 hierarchy.
function unifiedCgroupRoot(): string | null {
  for (const path of ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]) {
    try {
      Deno.statSync(`${path}/cgroup.procs`);
      if (
        Deno.readTextFileSync("/proc/mounts").split("\n").some((line) =>
          line.split(" ")[1] === path &&
          line.split(" ")[2] === "cgroup2"
        )
      ) return path;
    } catch {
      // not here
    }
  }
  return null;
}

const cgroupRoot = unifiedCgroupRoot();
const cgroupNeeds = [
  bootstrapped(Deno.uid() !== 0 ? "needs root" : null),
  optional(cgroupRoot === null ? "no cgroup v2 hierarchy" : null),
];

Deno.test(requiring(cgroupNeeds, {
  name: "readContainerId() reads the id of a process moved into a container-like cgroup",
  fn: async () => {
    const base = `${cgroupRoot}/omniprof-test-${Deno.pid}`;
    const leaf = `${base}/kubepods.slice/cri-containerd-${ID}.scope`;
    const child = new Deno.Command("sleep", { args: ["30"] }).spawn();
    try {
      Deno.mkdirSync(leaf, { recursive: true });
      Deno.writeTextFileSync(`${leaf}/cgroup.procs`, `${child.pid}\n`);
      assert.equal(readContainerId(child.pid), ID);
      assert.equal(
        readContainerId(Deno.pid),
        containerIdFromCgroup(Deno.readTextFileSync("/proc/self/cgroup")),
      );
    } finally {
      child.kill();
      await child.status;
      for (const dir of [leaf, `${base}/kubepods.slice`, base]) {
        try {
          Deno.removeSync(dir);
        } catch {
          // already gone
        }
      }
    }
    assert.equal(readContainerId(child.pid), null, "a process that is gone has no container");
  },
}));

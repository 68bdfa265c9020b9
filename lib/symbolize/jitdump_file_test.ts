import assert from "node:assert/strict";
import type { ProcMapping } from "../process/proc_maps.ts";
import { privateMountNamespaces } from "../testing/mount_namespaces.ts";
import { bootstrapped, programs, requiring } from "../testing/requirements.ts";
import type { Address, Pid } from "../types.ts";
import { jitDumpPaths, openJitDumpFile } from "./jitdump_file.ts";

function mapping(path: string, deleted = false): ProcMapping {
  return {
    start: 0x1000 as Address,
    end: 0x2000 as Address,
    fileOffset: 0,
    device: "fe:00",
    inode: 1,
    path,
    deleted,
  };
}

Deno.test("jitDumpPaths() takes the mapped jit-PID.dump files first, then the names in /tmp", () => {
  assert.deepEqual(
    jitDumpPaths(17, [
      mapping("/usr/bin/node"),
      mapping("/srv/app/jit-17.dump"),
      mapping("/srv/app/jit-17.dump"),
      mapping("/srv/old/jit-17.dump", true),
      mapping("/srv/app/jit-170.dump"),
      mapping("/srv/app/notjit-17.dump"),
      mapping(""),
    ]),
    ["/srv/app/jit-17.dump", "/tmp/jit-17.dump", "/tmp/perf-17.dump"],
  );
  assert.deepEqual(jitDumpPaths(5, [mapping("/tmp/jit-5.dump")]), ["/tmp/jit-5.dump", "/tmp/perf-5.dump"]);
});

/** A process that waits to be killed. */
function startSleeper(): { pid: Pid; stop(): Promise<void> } {
  const child = new Deno.Command("sleep", { args: ["60"], stdout: "null", stderr: "null" }).spawn();
  return {
    pid: child.pid as Pid,
    async stop() {
      child.kill("SIGKILL");
      await child.status;
    },
  };
}

Deno.test("openJitDumpFile() finds none where there is none, and refuses a link planted in /tmp", async () => {
  const sleeper = startSleeper();
  const path = `/tmp/jit-${sleeper.pid}.dump`;
  const target = Deno.makeTempFileSync({ prefix: "omniprof_jitdump_target_" });
  try {
    assert.equal(openJitDumpFile(sleeper.pid).kind, "absent");
    Deno.symlinkSync(target, path);
    const opening = openJitDumpFile(sleeper.pid);
    assert.equal(opening.kind === "refused" ? opening.reason : opening.kind, "not-regular");
    Deno.removeSync(path);
    Deno.writeTextFileSync(`/tmp/perf-${sleeper.pid}.dump`, "JiTD");
    const found = openJitDumpFile(sleeper.pid);
    assert.equal(found.kind, "opened");
    if (found.kind === "opened") {
      assert.match(found.file.name, new RegExp(`/tmp/perf-${sleeper.pid}\\.dump$`));
      found.file.close();
    }
  } finally {
    await sleeper.stop();
    for (const file of [path, `/tmp/perf-${sleeper.pid}.dump`, target]) {
      try {
        Deno.removeSync(file);
      } catch {
        // not there
      }
    }
  }
});

Deno.test(requiring([programs("node")], {
  name: "openJitDumpFile() finds the dump node --perf-prof writes in its working directory, by its mapping",
  async fn() {
    const dir = Deno.makeTempDirSync({ prefix: "omniprof_jitdump_file_test_" });
    const child = new Deno.Command("node", {
      args: ["--perf-prof", "-e", "console.log('ready'); setInterval(() => {}, 1000)"],
      cwd: dir,
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    try {
      let text = "";
      while (!text.includes("ready")) {
        const { value, done } = await lines.read();
        if (done) throw new Error("node exited before it was ready");
        text += value;
      }
      const expected = `${dir}/jit-${child.pid}.dump`;
      assert.ok(
        Deno.readTextFileSync(`/proc/${child.pid}/maps`).includes(expected),
        "node maps its dump (the test's own reading of its maps)",
      );
      const opening = openJitDumpFile(child.pid as Pid);
      assert.equal(opening.kind, "opened", JSON.stringify(opening));
      if (opening.kind === "opened") {
        assert.ok(opening.file.name.endsWith(expected), opening.file.name);
        assert.equal(
          new TextDecoder().decode(opening.file.read(0, 4)),
          "DTiJ",
          "JiTD as a little-endian u32",
        );
        opening.file.close();
      }
    } finally {
      child.kill("SIGKILL");
      await lines.cancel();
      await child.status;
      Deno.removeSync(dir, { recursive: true });
    }
  },
}));

const asRoot = bootstrapped(Deno.uid() !== 0 ? "needs root (namespaces)" : null);

Deno.test(requiring([asRoot, privateMountNamespaces(), programs("unshare", "node")], {
  name:
    "openJitDumpFile() opens the dump a node in its own PID and mount namespace maps from a folder only it sees",
  fn: async () => {
    // PID 1 in its namespace, its working directory a tmpfs of its own: jit-1.dump is there.
    const script = "mount -t tmpfs omniprof-test /mnt && cd /mnt && exec node --perf-prof -e " +
      `"require('fs').writeFileSync('/mnt/ready', ''); setInterval(() => {}, 1000)"`;
    const unshare = new Deno.Command("unshare", {
      // --kill-child: node, PID 1 of the namespace, goes with unshare (it would run on).
      args: ["--pid", "--fork", "--kill-child", "--mount", "--propagation", "private", "sh", "-c", script],
      stdout: "null",
      stderr: "null",
    }).spawn();
    // What the process would find in /tmp if the mapped path were not resolved in its root.
    const decoy = "/tmp/jit-1.dump";
    let planted = false;
    try {
      let pid = 0;
      for (let waited = 0; pid === 0 && waited < 20_000; waited += 20) {
        try {
          const children = Deno.readTextFileSync(`/proc/${unshare.pid}/task/${unshare.pid}/children`).trim();
          if (children !== "") {
            const candidate = Number(children.split(" ")[0]);
            Deno.statSync(`/proc/${candidate}/root/mnt/ready`);
            pid = candidate;
          }
        } catch {
          // not yet
        }
        if (pid === 0) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.ok(pid > 0, "the namespace's node started");
      assert.ok(
        Deno.readTextFileSync(`/proc/${pid}/maps`).includes(" /mnt/jit-1.dump"),
        "maps show its path",
      );
      try {
        Deno.statSync(decoy);
      } catch {
        Deno.writeTextFileSync(decoy, "decoy");
        planted = true;
      }
      const opening = openJitDumpFile(pid as Pid);
      assert.equal(opening.kind, "opened", JSON.stringify(opening));
      if (opening.kind === "opened") {
        assert.ok(opening.file.name.endsWith("/mnt/jit-1.dump"), opening.file.name);
        assert.equal(new TextDecoder().decode(opening.file.read(0, 4)), "DTiJ");
        opening.file.close();
      }
    } finally {
      unshare.kill("SIGKILL");
      await unshare.status;
      if (planted) Deno.removeSync(decoy);
    }
  },
  sanitizeResources: false,
  sanitizeOps: false,
}));

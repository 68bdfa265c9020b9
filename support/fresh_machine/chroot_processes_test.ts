import assert from "node:assert/strict";
import { processesRootedIn, stopProcessesIn } from "./chroot_processes.ts";
import { bootstrapped, requiring } from "../../lib/testing/requirements.ts";
import { isFile } from "../../lib/sys/files.ts";

Deno.test("processesRootedIn() finds this process under / and nothing under a folder no process uses", () => {
  assert.ok(processesRootedIn("/").includes(Deno.pid));
  const dir = Deno.makeTempDirSync({ prefix: "omniprof-chroot-" });
  try {
    assert.deepEqual(processesRootedIn(Deno.realPathSync(dir)), []);
  } finally {
    Deno.removeSync(dir);
  }
});

const notRoot = Deno.uid() === 0 ? null : "needs root to chroot";

Deno.test(requiring([bootstrapped(notRoot)], {
  name: "stopProcessesIn() ends a process that ignores SIGTERM in a chroot, and only it",
  async fn() {
    // A root holding just a shell: /bin/sh with the libraries it links, found by ldd.
    const root = Deno.realPathSync(Deno.makeTempDirSync({ prefix: "omniprof-chroot-" }));
    const outside = new Deno.Command("sleep", { args: ["30"] }).spawn();
    try {
      const shell = Deno.realPathSync("/bin/sh");
      const ldd = new TextDecoder().decode(
        new Deno.Command("ldd", { args: [shell], stdout: "piped" }).outputSync().stdout,
      );
      const files = [shell, ...[...ldd.matchAll(/(\/\S+) \(0x/g)].map((match) => match[1]!)];
      for (const file of files) {
        Deno.mkdirSync(`${root}${file.replace(/\/[^/]+$/, "")}`, { recursive: true });
        Deno.copyFileSync(file, `${root}${file}`);
      }
      Deno.mkdirSync(`${root}/bin`, { recursive: true });
      if (shell !== "/bin/sh") Deno.copyFileSync(shell, `${root}/bin/sh`);
      Deno.chmodSync(`${root}/bin/sh`, 0o755);
      // It says when it ignores SIGTERM: a SIGTERM sent before the trap is set would end it, and the
      // test would pass for the wrong reason or fail on a busy machine.
      const child = new Deno.Command("chroot", {
        args: [root, "/bin/sh", "-c", "trap '' TERM; : > /ignoring; while :; do :; done"],
      }).spawn();
      const deadline = performance.now() + 30_000;
      while (!isFile(`${root}/ignoring`)) {
        assert.ok(performance.now() < deadline, "the shell in the root never set its trap");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.deepEqual(processesRootedIn(root), [child.pid]);
      assert.deepEqual(await stopProcessesIn(root, 500), []);
      assert.equal((await child.status).signal, "SIGKILL");
      assert.ok(processesRootedIn("/").includes(outside.pid), "a process outside the root keeps running");
    } finally {
      outside.kill();
      await outside.status;
      Deno.removeSync(root, { recursive: true });
    }
  },
}));

import assert from "node:assert/strict";
import type { ProcMapping } from "../process/proc_maps.ts";
import { programs, requiring } from "../testing/requirements.ts";
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

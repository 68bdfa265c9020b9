import assert from "node:assert/strict";
import { bootstrapped, programs, requiring } from "../testing/requirements.ts";
import { run } from "../testing/commands.ts";
import type { Pid } from "../types.ts";
import { openPerfMapFile, parseProcessStatus, type PerfMapOpening, perfMapPath } from "./perf_map_file.ts";
import { privateMountNamespaces } from "../testing/mount_namespaces.ts";

const NOBODY = 65534;
const asRoot = bootstrapped(Deno.uid() !== 0 ? "needs root (files of other users, namespaces)" : null);
const mountNamespaces = privateMountNamespaces();

Deno.test("parseProcessStatus() takes the innermost NSpid and the effective and file-system user ids", () => {
  const status = "Name:\tsleep\nTgid:\t4242\nPid:\t4242\nUid:\t1000\t1001\t1002\t1003\n" +
    "Gid:\t100\t100\t100\t100\nNSpid:\t4242\t17\t1\n";
  assert.deepEqual(parseProcessStatus(status), { namespacePid: 1, uids: [1001, 1003] });
  assert.deepEqual(parseProcessStatus("Uid:\t0\t0\t0\t0\n"), { namespacePid: null, uids: [0, 0] });
  assert.equal(parseProcessStatus("NSpid:\t5\n"), null, "without user ids, no owner can be checked");
  assert.equal(parseProcessStatus("Uid:\t0\tx\t0\t0\n"), null);
  assert.equal(perfMapPath(17), "/tmp/perf-17.map");
});

/** A process that waits to be killed, with what it was started as. */
interface Sleeper {
  pid: Pid;
  stop(): Promise<void>;
}

function startSleeper(prefix: string[] = []): Sleeper {
  const child = new Deno.Command(prefix[0] ?? "sleep", {
    args: [...prefix.slice(1), ...(prefix.length > 0 ? ["sleep"] : []), "60"],
    stdout: "null",
    stderr: "null",
  }).spawn();
  return {
    pid: child.pid as Pid,
    async stop() {
      try {
        child.kill("SIGKILL");
      } catch {
        // gone already
      }
      await child.status;
    },
  };
}

/** Runs `body` with a process and whatever the test put at its map's path removed afterwards. */
async function withSleeper(
  body: (sleeper: Sleeper, path: string) => void,
  prefix: string[] = [],
): Promise<void> {
  const sleeper = startSleeper(prefix);
  const path = perfMapPath(sleeper.pid);
  try {
    // A map left by an earlier process that had this PID is no one's now.
    try {
      Deno.removeSync(path);
    } catch {
      // none
    }
    // Until it runs sleep, it may still be what starts it, as another user.
    for (let waited = 0; commOf(sleeper.pid) !== "sleep" && waited < 10_000; waited += 10) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    body(sleeper, path);
  } finally {
    await sleeper.stop();
    try {
      Deno.removeSync(path);
    } catch {
      // not planted
    }
  }
}

function commOf(pid: number): string {
  try {
    return Deno.readTextFileSync(`/proc/${pid}/comm`).trim();
  } catch {
    return "";
  }
}

function refusal(opening: PerfMapOpening): string {
  if (opening.kind === "opened") opening.file.close();
  assert.equal(opening.kind, "refused", `expected a refusal, got ${opening.kind}`);
  return opening.kind === "refused" ? opening.reason : "";
}

function opened(opening: PerfMapOpening): string {
  assert.equal(opening.kind, "opened", opening.kind === "refused" ? opening.detail : opening.kind);
  if (opening.kind !== "opened") return "";
  using file = opening.file;
  return new TextDecoder().decode(file.read(0, file.status().size));
}

Deno.test("openPerfMapFile() opens the process's own map, and finds none where there is none", async () => {
  await withSleeper(({ pid }, path) => {
    assert.equal(openPerfMapFile(pid).kind, "absent");
    Deno.writeTextFileSync(path, "1000 10 f\n");
    assert.equal(opened(openPerfMapFile(pid)), "1000 10 f\n");
  });
});

Deno.test("openPerfMapFile() refuses a link planted at the map's path, whatever it points to", async () => {
  await withSleeper(({ pid }, path) => {
    const target = Deno.makeTempFileSync({ prefix: "omniprof_perf_map_target_" });
    try {
      Deno.writeTextFileSync(target, "1000 10 not the map\n");
      Deno.symlinkSync(target, path);
      assert.equal(refusal(openPerfMapFile(pid)), "not-regular");
    } finally {
      Deno.removeSync(target);
    }
  });
});

Deno.test("openPerfMapFile() refuses a FIFO at the map's path at once, without waiting for a writer", async () => {
  await withSleeper(({ pid }, path) => {
    run("mkfifo", path);
    const started = performance.now();
    assert.equal(refusal(openPerfMapFile(pid)), "not-regular");
    assert.ok(performance.now() - started < 1000);
  });
});

Deno.test("openPerfMapFile() finds no map of a process that has exited", async () => {
  const sleeper = startSleeper();
  await sleeper.stop();
  const path = perfMapPath(sleeper.pid);
  try {
    Deno.writeTextFileSync(path, "1000 10 f\n");
    assert.equal(openPerfMapFile(sleeper.pid).kind, "absent");
  } finally {
    Deno.removeSync(path);
  }
});

Deno.test(requiring([asRoot, programs("setpriv")], {
  name: "openPerfMapFile() refuses another user's map, and a hard link; takes the process's user's map",
  fn: async () => {
    // A root process: a map of another user is planted, not written by the process.
    await withSleeper(({ pid }, path) => {
      Deno.writeTextFileSync(path, "1000 10 planted\n");
      Deno.chownSync(path, NOBODY, NOBODY);
      assert.equal(refusal(openPerfMapFile(pid)), "owner");
    });
    // A root-owned file under a second name: a hard link to a file of root's passes no owner check.
    await withSleeper(({ pid }, path) => {
      const other = Deno.makeTempFileSync({ prefix: "omniprof_perf_map_hardlink_" });
      try {
        Deno.writeTextFileSync(other, "1000 10 linked\n");
        Deno.linkSync(other, path);
        assert.equal(refusal(openPerfMapFile(pid)), "owner");
      } finally {
        Deno.removeSync(other);
      }
    });
    // A process of user nobody: its own map belongs to nobody, and is read.
    await withSleeper(({ pid }, path) => {
      Deno.writeTextFileSync(path, "1000 10 nobody's\n");
      Deno.chownSync(path, NOBODY, NOBODY);
      assert.equal(opened(openPerfMapFile(pid)), "1000 10 nobody's\n");
    }, ["setpriv", `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups"]);
  },
  sanitizeResources: false,
  sanitizeOps: false,
}));

Deno.test(requiring([asRoot, mountNamespaces, programs("unshare")], {
  name: "openPerfMapFile() reads the map a process in its own PID and mount namespace wrote in its /tmp",
  fn: async () => {
    // PID 1 in its namespace, with a /tmp of its own that holds perf-1.map.
    const script = "mount -t tmpfs omniprof-test /tmp && printf '1000 10 inside\\n' > /tmp/perf-1.map && " +
      "touch /tmp/ready && exec sleep 60";
    const unshare = new Deno.Command("unshare", {
      args: ["--pid", "--fork", "--mount", "--propagation", "private", "sh", "-c", script],
      stdout: "null",
      stderr: "null",
    }).spawn();
    let hostPath: string | null = null;
    try {
      let pid = 0;
      for (let waited = 0; pid === 0 && waited < 10_000; waited += 20) {
        try {
          const children = Deno.readTextFileSync(`/proc/${unshare.pid}/task/${unshare.pid}/children`).trim();
          if (children !== "") {
            const candidate = Number(children.split(" ")[0]);
            Deno.statSync(`/proc/${candidate}/root/tmp/ready`);
            pid = candidate;
          }
        } catch {
          // not yet
        }
        if (pid === 0) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.ok(pid > 0, "the namespace's process started");
      // The host's /tmp has a map under the host's PID: not the process's.
      hostPath = perfMapPath(pid);
      Deno.writeTextFileSync(hostPath, "1000 10 host\n");
      assert.equal(opened(openPerfMapFile(pid as Pid)), "1000 10 inside\n");
    } finally {
      unshare.kill("SIGKILL");
      await unshare.status;
      if (hostPath !== null) Deno.removeSync(hostPath);
    }
  },
  sanitizeResources: false,
  sanitizeOps: false,
}));

import assert from "node:assert/strict";
import { asPid } from "../types.ts";
import { readProcessLaunch } from "./process_launch.ts";

Deno.test("readProcessLaunch() reads a process's arguments and environment as it was started", async () => {
  // A shell that waits on its input: its arguments stay as they were.
  const args = ["-c", "read line", "name", "--not-a-flag=a,b"];
  const child = new Deno.Command("/bin/sh", {
    args,
    stdin: "piped",
    env: { OMNIPROF_LAUNCH_TEST: "x=y", EMPTY: "" },
    clearEnv: true,
    stdout: "null",
  }).spawn();
  try {
    // The arguments are the exec's: wait until the child is the shell, not the forked runtime.
    let launch = null;
    for (let tries = 0; tries < 100; tries++) {
      launch = readProcessLaunch(asPid(child.pid));
      if (launch?.argv[0] === "/bin/sh") break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.deepEqual(launch?.argv, ["/bin/sh", ...args]);
    assert.equal(launch?.environ.get("OMNIPROF_LAUNCH_TEST"), "x=y");
    assert.equal(launch?.environ.get("EMPTY"), "");
    assert.equal(launch?.environ.size, 2);
  } finally {
    await child.stdin.close();
    await child.status;
  }
});

Deno.test("readProcessLaunch() of a PID nobody holds is null", () => {
  assert.equal(readProcessLaunch(asPid(0x3fffffff)), null);
});

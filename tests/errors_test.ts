// What a user sees when `record` cannot run: a clear message, a non-zero exit code, and no file written.
// These run the real CLI; the privilege test drops the tracing capabilities with setpriv.
import assert from "node:assert/strict";
import { CAP_SETPCAP, currentCapabilities } from "../lib/sys/capabilities.ts";
import { runCli, tempDir, tracingTest, unusedPid } from "./helpers.ts";
import { bootstrapped, requiring } from "../lib/testing/requirements.ts";

function isEmpty(dir: string): boolean {
  return [...Deno.readDirSync(dir)].length === 0;
}

function capabilityDropTest(name: string, fn: () => Promise<void>): Deno.TestDefinition {
  const reason = currentCapabilities().has(CAP_SETPCAP)
    ? null
    : "needs CAP_SETPCAP (root) to drop capabilities";
  return requiring([bootstrapped(reason)], { name, fn });
}

// The same user without the capabilities that record checks, rather than another user: another user may
// not be able to read the checkout at all (a clone in root's home, mode 0700), and would then fail before
// the check this test is about.
Deno.test(capabilityDropTest("record without CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN names them", async () => {
  const dir = tempDir();
  try {
    const result = await runCli(["record", "-d", "1", "-o", `${dir}/out.pb.gz`], {
      withoutCapabilities: ["bpf", "perfmon", "sys_admin"],
    });
    assert.equal(result.code, 1, result.stderr);
    assert.match(result.stderr, /omniprof needs CAP_BPF and CAP_PERFMON \(or CAP_SYS_ADMIN\)/);
    assert.match(result.stderr, /run it as root/);
    assert.ok(isEmpty(dir), "nothing written");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}));

Deno.test(tracingTest("record -p with a PID that does not exist fails before sampling", async () => {
  const dir = tempDir();
  try {
    const pid = unusedPid();
    const result = await runCli(["record", "-p", String(pid), "-d", "1", "-o", `${dir}/out.pb.gz`]);
    assert.equal(result.code, 1);
    assert.match(result.stderr, new RegExp(`No process with PID ${pid}`));
    assert.ok(isEmpty(dir), "nothing written");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}));

Deno.test(tracingTest("record -- COMMAND that cannot start says why and writes nothing", async () => {
  const dir = tempDir();
  try {
    const missing = await runCli(["record", "-o", `${dir}/out.pb.gz`, "--", "omniprof-no-such-command"]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /Cannot start omniprof-no-such-command: no such command/);
    const script = Deno.makeTempFileSync({ prefix: "omniprof-not-executable-" });
    try {
      const notExecutable = await runCli(["record", "-o", `${dir}/out.pb.gz`, "--", script]);
      assert.equal(notExecutable.code, 1);
      assert.match(notExecutable.stderr, /Cannot start .*: permission denied/);
    } finally {
      Deno.removeSync(script);
    }
    assert.ok(isEmpty(dir), "nothing written");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}));

Deno.test(tracingTest("record to an unwritable path fails before sampling", async () => {
  const dir = tempDir();
  try {
    const started = performance.now();
    const missing = await runCli(["record", "-d", "30", "-o", `${dir}/no/such/folder/out.pb.gz`]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /Cannot write the profile to .*does not exist/);
    Deno.mkdirSync(`${dir}/taken.pb.gz`);
    const folder = await runCli(["record", "-d", "30", "-o", `${dir}/taken.pb.gz`]);
    assert.equal(folder.code, 1);
    assert.match(folder.stderr, /is a directory/);
    // -d 30 was never started: the checks come first.
    assert.ok(performance.now() - started < 20_000, "failed fast");
    assert.deepEqual(
      [...Deno.readDirSync(dir)].map((entry) => entry.name),
      ["taken.pb.gz"],
      "nothing written",
    );
    assert.ok(isEmpty(`${dir}/taken.pb.gz`), "nothing written");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}));

Deno.test("record without libbpf names the package to install", async () => {
  const dir = tempDir();
  try {
    const result = await runCli(["check"], { env: { OMNIPROF_LIBBPF: "/nonexistent/libbpf.so.1" } });
    assert.notEqual(result.code, 0);
    assert.match(result.stdout, /apt-get install libbpf1/);
    if (Deno.uid() === 0) {
      const record = await runCli(["record", "-d", "1", "-o", `${dir}/out.pb.gz`], {
        env: { OMNIPROF_LIBBPF: "/nonexistent/libbpf.so.1" },
      });
      assert.equal(record.code, 1);
      assert.match(record.stderr, /Cannot load libbpf .*apt-get install libbpf1/);
      assert.ok(isEmpty(dir), "nothing written");
    }
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("record rejects bad arguments with usage", async () => {
  const bad = [
    ["-F", "0"],
    ["-d", "soon"],
    ["-o", "out.xyz"],
    ["-p", "1", "--", "true"],
    ["--"],
    // Number() reads these as PID 16, 1000 s and 2^32 ms (which a timer fires at once).
    ["-p", "0x10"],
    ["-d", "1e3"],
    ["-d", "4294967.296"],
  ];
  for (const args of bad) {
    const result = await runCli(["record", ...args]);
    assert.equal(result.code, 2, args.join(" "));
    assert.match(result.stderr, /Usage: omniprof record/);
  }
});

Deno.test(tracingTest("check reports every essential capability as working here", async () => {
  const result = await runCli(["check"]);
  assert.equal(result.code, 0, result.stdout + result.stderr);
  for (const name of ["privileges", "libbpf", "BTF", "perf events", "BPF tracer"]) {
    assert.match(result.stdout, new RegExp(`^ok\\s+${name}\\s`, "m"));
  }
  assert.match(result.stdout, /omniprof can record here/);
}));

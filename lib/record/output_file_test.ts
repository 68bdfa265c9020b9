import assert from "node:assert/strict";
import { checkWritable, outputKind, writeOutput } from "./output_file.ts";

function inTempDir(fn: (dir: string) => void): void {
  const dir = Deno.makeTempDirSync();
  try {
    fn(dir);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

Deno.test("writeOutput() replaces a regular file atomically and leaves no temporary behind", () => {
  inTempDir((dir) => {
    const path = `${dir}/profile.folded`;
    Deno.writeTextFileSync(path, "old");
    checkWritable(path);
    writeOutput(path, "new");
    assert.equal(Deno.readTextFileSync(path), "new");
    assert.deepEqual([...Deno.readDirSync(dir)].map((entry) => entry.name), ["profile.folded"]);
  });
});

Deno.test("writeOutput() through a link to a regular file replaces the file and keeps the link", () => {
  inTempDir((dir) => {
    Deno.writeTextFileSync(`${dir}/real.folded`, "old");
    Deno.symlinkSync(`${dir}/real.folded`, `${dir}/link.folded`);
    assert.deepEqual(outputKind(`${dir}/link.folded`), { kind: "file", path: `${dir}/real.folded` });
    writeOutput(`${dir}/link.folded`, "new");
    assert.ok(Deno.lstatSync(`${dir}/link.folded`).isSymlink);
    assert.equal(Deno.readTextFileSync(`${dir}/real.folded`), "new");
  });
});

Deno.test("device nodes, /proc links and their links are written in place, never replaced", () => {
  inTempDir((dir) => {
    assert.deepEqual(outputKind("-"), { kind: "stdout", path: "-" });
    assert.equal(outputKind("/dev/stdout").kind, "in place");
    assert.equal(outputKind("/proc/self/fd/1").kind, "in place");
    Deno.symlinkSync("/dev/null", `${dir}/null`);
    for (const path of ["/dev/null", `${dir}/null`]) {
      assert.equal(outputKind(path).kind, "in place", path);
      checkWritable(path);
      writeOutput(path, "discarded");
    }
    assert.ok(Deno.statSync("/dev/null").isCharDevice, "/dev/null is still the device");
    assert.ok(Deno.lstatSync(`${dir}/null`).isSymlink);
    assert.deepEqual([...Deno.readDirSync(dir)].map((entry) => entry.name), ["null"]);
    assert.throws(() => checkWritable("/dev/omniprof-no-such-device"), /it does not exist/);
  });
});

Deno.test("a FIFO is checked without waiting for a reader, then written in place", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    const fifo = `${dir}/profile.fifo`;
    const made = new Deno.Command("mkfifo", { args: [fifo] }).outputSync();
    assert.ok(made.success);
    assert.equal(outputKind(fifo).kind, "in place");
    checkWritable(fifo);
    const reader = new Deno.Command("cat", { args: [fifo], stdout: "piped" }).spawn();
    writeOutput(fifo, "main;a;b;c 1\n");
    const { stdout } = await reader.output();
    assert.equal(new TextDecoder().decode(stdout), "main;a;b;c 1\n");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("checkWritable() names the problem", () => {
  inTempDir((dir) => {
    assert.throws(() => checkWritable(`${dir}/missing/x.pb.gz`), /does not exist/);
    assert.throws(() => checkWritable(dir), /is a directory/);
    assert.deepEqual([...Deno.readDirSync(dir)], []);
  });
});

Deno.test("writeOutput() says why it could not write, and leaves nothing behind", () => {
  inTempDir((dir) => {
    const path = `${dir}/gone/profile.folded`;
    Deno.mkdirSync(`${dir}/gone`);
    checkWritable(path);
    // The folder is removed while the profile is being recorded.
    Deno.removeSync(`${dir}/gone`);
    assert.throws(
      () => writeOutput(path, "main 1\n"),
      /^Error: Cannot write the profile to .*: folder .* does not exist/,
    );
    assert.deepEqual([...Deno.readDirSync(dir)], []);
  });
});

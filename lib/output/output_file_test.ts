import assert from "node:assert/strict";
import { bootstrapped, requiring } from "../testing/requirements.ts";
import { OutputFile } from "./output_file.ts";

/** Whether `a` and `b` hold the same bytes (assert's diff of two large arrays would take minutes). */
function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}

const NOBODY = 65534;
const isRoot = Deno.uid() === 0;

function inTempDir(fn: (dir: string) => void | Promise<void>): () => Promise<void> {
  return async () => {
    const dir = Deno.makeTempDirSync();
    try {
      await fn(dir);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  };
}

function names(dir: string): string[] {
  return [...Deno.readDirSync(dir)].map((entry) => entry.name).sort();
}

/** The permission bits a new file of `mode` gets under this process's umask. */
function created(mode: number): number {
  const mask = Deno.umask();
  return mode & ~mask;
}

/** Makes a symbolic link that belongs to `uid`, as another user planting it would leave it. */
function symlinkOf(uid: number, target: string, path: string): void {
  Deno.symlinkSync(target, path);
  const chown = new Deno.Command("chown", { args: ["-h", `${uid}:${uid}`, path] }).outputSync();
  assert.ok(chown.success, new TextDecoder().decode(chown.stderr));
}

Deno.test(
  "OutputFile replaces a regular file atomically, 0644 or 0600 when private, and leaves no temporary",
  inTempDir(async (dir) => {
    const path = `${dir}/profile.folded`;
    Deno.writeTextFileSync(path, "old");
    using output = OutputFile.open(path);
    assert.equal(output.kind, "file");
    assert.deepEqual(names(dir), ["profile.folded"], "the check leaves nothing behind");
    await output.write("new");
    assert.equal(Deno.readTextFileSync(path), "new");
    assert.equal(Deno.statSync(path).mode! & 0o7777, created(0o644));
    assert.deepEqual(names(dir), ["profile.folded"]);

    using secret = OutputFile.open(`${dir}/kernel.pb.gz`);
    await secret.write("addresses", { private: true });
    assert.equal(Deno.statSync(`${dir}/kernel.pb.gz`).mode! & 0o7777, 0o600);
  }),
);

Deno.test(
  "OutputFile with named temporaries (file systems without unnamed files) leaves none behind",
  inTempDir(async (dir) => {
    const path = `${dir}/profile.folded`;
    Deno.writeTextFileSync(path, "old");
    using replacing = OutputFile.open(path, { unnamedTemporary: false });
    await replacing.write("new");
    using creating = OutputFile.open(`${dir}/second.folded`, { unnamedTemporary: false });
    await creating.write("second", { private: true });
    assert.equal(Deno.readTextFileSync(path), "new");
    assert.equal(Deno.readTextFileSync(`${dir}/second.folded`), "second");
    assert.equal(Deno.statSync(`${dir}/second.folded`).mode! & 0o7777, 0o600);
    assert.deepEqual(names(dir), ["profile.folded", "second.folded"]);
  }),
);

Deno.test(
  "OutputFile through your own link to a regular file replaces the file and keeps the link",
  inTempDir(async (dir) => {
    Deno.writeTextFileSync(`${dir}/real.folded`, "old");
    Deno.symlinkSync("real.folded", `${dir}/link.folded`);
    using output = OutputFile.open(`${dir}/link.folded`);
    assert.equal(output.kind, "file");
    await output.write("new");
    assert.ok(Deno.lstatSync(`${dir}/link.folded`).isSymlink);
    assert.equal(Deno.readTextFileSync(`${dir}/real.folded`), "new");
    // A dangling link of yours names the file to create.
    Deno.symlinkSync(`${dir}/created.folded`, `${dir}/dangling.folded`);
    using dangling = OutputFile.open(`${dir}/dangling.folded`);
    await dangling.write("created");
    assert.equal(Deno.readTextFileSync(`${dir}/created.folded`), "created");
  }),
);

Deno.test(requiring([bootstrapped(isRoot ? null : "needs root (files of another user)")], {
  name: "OutputFile refuses a link that belongs to another user, before anything is recorded",
  fn: inTempDir((dir) => {
    Deno.writeTextFileSync(`${dir}/victim`, "precious");
    symlinkOf(NOBODY, `${dir}/victim`, `${dir}/out.pb.gz`);
    assert.throws(
      () => OutputFile.open(`${dir}/out.pb.gz`),
      /Cannot write the profile to .*out\.pb\.gz: .* is a symbolic link of user 65534: omniprof follows a link only when it belongs to you or root/,
    );
    assert.equal(Deno.readTextFileSync(`${dir}/victim`), "precious");
  }),
}));
if (!isRoot) console.log("SKIP OutputFile refuses a link of another user: needs root to make one");

Deno.test(
  "a link planted at the path after the start leaves its target byte for byte, and the profile is kept",
  inTempDir(async (dir) => {
    const victim = `${dir}/victim`;
    const secret = crypto.getRandomValues(new Uint8Array(4096));
    Deno.writeFileSync(victim, secret, { mode: 0o600 });
    for (const existedBefore of [false, true]) {
      const path = `${dir}/out${existedBefore ? "-existing" : "-new"}.pb.gz`;
      if (existedBefore) Deno.writeTextFileSync(path, "earlier profile");
      using output = OutputFile.open(path);
      // While recording: the name is replaced by a link to a file the user must not lose.
      if (existedBefore) Deno.removeSync(path);
      Deno.symlinkSync(victim, path);
      const error = await output.write("the profile").then(() => null, (e: Error) => e);
      assert.ok(error instanceof Error, "the write is refused");
      const kept = error.message.match(/the profile is in (\S+)$/)?.[1];
      assert.match(
        error.message,
        existedBefore
          ? /^Cannot write the profile to .*: it is now a symbolic link, so it was left alone; the profile is in /
          : /^Cannot write the profile to .*: it did not exist when omniprof started and is now a symbolic link, so it was left alone; the profile is in /,
      );
      assert.ok(kept !== undefined && kept.startsWith(`${dir}/omniprof-kept-`), error.message);
      assert.equal(Deno.readTextFileSync(kept), "the profile");
      assert.ok(sameBytes(Deno.readFileSync(victim), secret), "the link's target is unchanged");
      assert.equal(Deno.statSync(victim).mode! & 0o7777, 0o600);
      assert.equal(Deno.readLinkSync(path), victim, "the link is left alone");
    }
  }),
);

Deno.test(
  "a regular file put at the path after the start is left alone, and the profile kept beside it",
  inTempDir(async (dir) => {
    const path = `${dir}/out.folded`;
    Deno.writeTextFileSync(path, "at the start");
    using output = OutputFile.open(path, { unnamedTemporary: false });
    Deno.writeTextFileSync(`${dir}/other`, "someone else's");
    Deno.renameSync(`${dir}/other`, path);
    await assert.rejects(
      () => output.write("the profile"),
      /it is now another file than when omniprof started, so it was left alone; the profile is in .*omniprof-kept-[0-9a-f]{8}-out\.folded$/,
    );
    assert.equal(Deno.readTextFileSync(path), "someone else's");
    const kept = names(dir).filter((name) => name.startsWith("omniprof-kept-"));
    assert.equal(kept.length, 1);
    assert.equal(Deno.readTextFileSync(`${dir}/${kept[0]}`), "the profile");
    assert.deepEqual(names(dir), ["out.folded", kept[0]!].sort(), "no temporary left");
  }),
);

Deno.test(requiring([bootstrapped(isRoot ? null : "needs root (files of another user)")], {
  name: "OutputFile gives a new file to the user who ran sudo",
  fn: inTempDir(async (dir) => {
    using output = OutputFile.open(`${dir}/mine.folded`, { owner: { uid: NOBODY, gid: NOBODY } });
    await output.write("main 1\n");
    const info = Deno.statSync(`${dir}/mine.folded`);
    assert.equal(info.uid, NOBODY);
    assert.equal(info.gid, NOBODY);
    // Its link is trusted: it belongs to the user omniprof writes for.
    Deno.writeTextFileSync(`${dir}/target.folded`, "old");
    symlinkOf(NOBODY, `${dir}/target.folded`, `${dir}/their-link.folded`);
    using through = OutputFile.open(`${dir}/their-link.folded`, { owner: { uid: NOBODY, gid: NOBODY } });
    await through.write("new");
    assert.equal(Deno.readTextFileSync(`${dir}/target.folded`), "new");
  }),
}));

Deno.test(
  "device nodes and /proc links are written in place, never replaced; standard output's names are stdout",
  inTempDir(async (dir) => {
    for (const path of ["-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"]) {
      using output = OutputFile.open(path);
      assert.equal(output.kind, "stdout", path);
    }
    Deno.symlinkSync("/dev/null", `${dir}/null`);
    for (const path of ["/dev/null", `${dir}/null`]) {
      using output = OutputFile.open(path);
      assert.equal(output.kind, "in place", path);
      await output.write("discarded");
    }
    assert.ok(Deno.statSync("/dev/null").isCharDevice, "/dev/null is still the device");
    assert.ok(Deno.lstatSync(`${dir}/null`).isSymlink);
    assert.deepEqual(names(dir), ["null"]);

    using _file = Deno.openSync(`${dir}/via-fd`, { write: true, create: true });
    // Deno numbers its resources as it opens descriptors: find this file's descriptor by its link.
    const fd = [...Deno.readDirSync("/proc/self/fd")].map((entry) => entry.name).find((name) => {
      try {
        return Deno.readLinkSync(`/proc/self/fd/${name}`) === `${dir}/via-fd`;
      } catch {
        return false;
      }
    });
    assert.ok(fd !== undefined);
    using viaProc = OutputFile.open(`/proc/self/fd/${fd}`);
    assert.equal(viaProc.kind, "in place");
    await viaProc.write("through /proc");
    assert.equal(Deno.readTextFileSync(`${dir}/via-fd`), "through /proc");
  }),
);

Deno.test("OutputFile refuses what it must not write: other /proc files, missing /dev names, block devices", () => {
  assert.throws(() => OutputFile.open("/proc/sys/kernel/core_pattern"), /under \/proc, omniprof writes only/);
  assert.throws(
    () => OutputFile.open("/dev/omniprof-no-such-device"),
    /does not exist \(omniprof creates no files under \/dev\)/,
  );
  const block = [...Deno.readDirSync("/dev")].find((entry) => {
    try {
      return Deno.statSync(`/dev/${entry.name}`).isBlockDevice === true && !entry.isSymlink;
    } catch {
      return false;
    }
  });
  if (block === undefined) {
    console.log("SKIP the block device case: no block device under /dev");
  } else {
    assert.throws(
      () => OutputFile.open(`/dev/${block.name}`),
      /is a block device: omniprof writes only files/,
    );
  }
});

Deno.test(
  "a FIFO is checked without waiting for a reader, then written in place once one comes",
  inTempDir(async (dir) => {
    const fifo = `${dir}/profile.fifo`;
    assert.ok(new Deno.Command("mkfifo", { args: [fifo] }).outputSync().success);
    using output = OutputFile.open(fifo);
    assert.equal(output.kind, "in place");
    // The write starts first: it waits for the reader without blocking the event loop. 4 MiB is more than
    // a pipe holds: the writer waits for room as the reader drains it.
    const data = crypto.getRandomValues(new Uint8Array(65536)).map((byte) => byte);
    const payload = new Uint8Array(4 << 20).map((_, i) => data[i % data.length]! ^ (i >> 16));
    const writing = output.write(payload);
    const reader = new Deno.Command("cat", { args: [fifo], stdout: "piped" }).output();
    await writing;
    const { stdout } = await reader;
    assert.equal(stdout.length, payload.length);
    assert.ok(stdout.every((byte, i) => byte === payload[i]), "every byte arrived, in order");
  }),
);

Deno.test(
  "a FIFO that no program reads fails after the wait, and the profile is kept beside it",
  inTempDir(async (dir) => {
    const fifo = `${dir}/profile.fifo`;
    assert.ok(new Deno.Command("mkfifo", { args: [fifo] }).outputSync().success);
    using output = OutputFile.open(fifo, { readerWaitMs: 300 });
    const started = performance.now();
    await assert.rejects(
      () => output.write("main 1\n"),
      /no program opened the FIFO for reading within 0.3 s; the profile is in .*omniprof-kept-[0-9a-f]{8}-profile\.fifo$/,
    );
    assert.ok(performance.now() - started < 5000, "it did not wait for good");
    const kept = names(dir).find((name) => name.startsWith("omniprof-kept-"))!;
    assert.equal(Deno.readTextFileSync(`${dir}/${kept}`), "main 1\n");
  }),
);

Deno.test(
  "abort() ends a write that waits for a FIFO's reader at once",
  inTempDir(async (dir) => {
    const fifo = `${dir}/profile.fifo`;
    assert.ok(new Deno.Command("mkfifo", { args: [fifo] }).outputSync().success);
    const output = OutputFile.open(fifo);
    const started = performance.now();
    const writing = output.write("main 1\n");
    setTimeout(() => output.abort(), 200);
    await assert.rejects(() => writing, /interrupted/);
    assert.ok(performance.now() - started < 3000, "aborted well before the 10 s wait");
    assert.deepEqual(names(dir), ["profile.fifo"]);
  }),
);

Deno.test(
  "OutputFile.open() names the problem and leaves nothing behind",
  inTempDir((dir) => {
    assert.throws(() => OutputFile.open(`${dir}/missing/x.pb.gz`), /folder .*missing does not exist/);
    assert.throws(() => OutputFile.open(dir), /is a directory/);
    assert.throws(() => OutputFile.open(`${dir}/`), /is a directory/);
    Deno.writeTextFileSync(`${dir}/file`, "");
    assert.throws(() => OutputFile.open(`${dir}/file/x.pb.gz`), /is not a folder/);
    assert.deepEqual(names(dir), ["file"]);
  }),
);

Deno.test(
  "OutputFile says why it could not write when the folder was removed meanwhile, and leaves nothing behind",
  inTempDir(async (dir) => {
    const path = `${dir}/gone/profile.folded`;
    Deno.mkdirSync(`${dir}/gone`);
    using output = OutputFile.open(path);
    // The folder is removed while the profile is being recorded.
    Deno.removeSync(`${dir}/gone`);
    await assert.rejects(
      () => output.write("main 1\n"),
      /Cannot write the profile to .*: folder .*gone does not exist \(removed since omniprof started\)/,
    );
    assert.deepEqual(names(dir), []);
  }),
);

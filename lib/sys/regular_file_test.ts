import assert from "node:assert/strict";
import { FileRefusedError, formatIdentity, RegularFile } from "./regular_file.ts";
import { RootDirectory } from "./root_directory.ts";
import { run } from "../testing/commands.ts";

function withDir(body: (dir: string) => void): void {
  const dir = Deno.makeTempDirSync({ prefix: "omniprof_regular_file_test_" });
  try {
    body(dir);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

function refusal(body: () => unknown): FileRefusedError {
  try {
    body();
  } catch (error) {
    if (error instanceof FileRefusedError) return error;
    throw error;
  }
  assert.fail("expected a FileRefusedError");
}

Deno.test("RegularFile.open() reads by position what Deno reads, with the file's device and inode", () => {
  withDir((dir) => {
    const bytes = new Uint8Array(10_000).map((_, i) => (i * 7) & 0xff);
    Deno.writeFileSync(`${dir}/f`, bytes);
    using file = RegularFile.open(`${dir}/f`);
    const stat = Deno.statSync(`${dir}/f`);
    assert.equal(file.size, 10_000);
    assert.equal(file.identity.inode, stat.ino);
    const [major, minor] = run("stat", "-c", "%Hd %Ld", `${dir}/f`).trim().split(" ").map(Number);
    assert.deepEqual(file.identity, { major, minor, inode: stat.ino });
    assert.deepEqual(file.read(9_990, 10), bytes.subarray(9_990));
    assert.deepEqual(file.read(0, 10_000), bytes);
    assert.throws(() => file.read(9_995, 10), RangeError);
  });
});

Deno.test("RegularFile.open() refuses a FIFO at once, without waiting for a writer", () => {
  withDir((dir) => {
    run("mkfifo", `${dir}/fifo`);
    Deno.symlinkSync(`${dir}/fifo`, `${dir}/link`);
    const started = performance.now();
    assert.equal(refusal(() => RegularFile.open(`${dir}/fifo`)).reason, "not-regular");
    assert.match(refusal(() => RegularFile.open(`${dir}/link`)).message, /a FIFO/);
    assert.ok(performance.now() - started < 1000);
  });
});

Deno.test("RegularFile.open() refuses devices, folders and missing paths with their reason", () => {
  withDir((dir) => {
    assert.equal(refusal(() => RegularFile.open("/dev/null")).reason, "not-regular");
    assert.match(refusal(() => RegularFile.open("/dev/null")).message, /character device/);
    assert.equal(refusal(() => RegularFile.open(dir)).reason, "not-regular");
    assert.equal(refusal(() => RegularFile.open(`${dir}/missing`)).reason, "missing");
  });
});

Deno.test("RegularFile.open() with an expected identity refuses another file at the path", () => {
  withDir((dir) => {
    Deno.writeTextFileSync(`${dir}/f`, "first");
    const first = RegularFile.open(`${dir}/f`);
    const expected = first.identity;
    first.close();
    // Replaced the way an upgrade or an attacker does: a new inode under the old name.
    Deno.writeTextFileSync(`${dir}/g`, "second");
    Deno.renameSync(`${dir}/g`, `${dir}/f`);
    const error = refusal(() => RegularFile.open(`${dir}/f`, { expect: expected }));
    assert.equal(error.reason, "replaced");
    assert.match(error.message, new RegExp(`not the expected ${formatIdentity(expected)}`));
  });
});

Deno.test("RegularFile.duplicate() reads on after the original is closed", () => {
  withDir((dir) => {
    Deno.writeTextFileSync(`${dir}/f`, "abcdef");
    const original = RegularFile.open(`${dir}/f`);
    using copy = original.duplicate();
    original.close();
    assert.throws(() => original.read(0, 1), /closed/);
    assert.equal(new TextDecoder().decode(copy.read(2, 3)), "cde");
    assert.deepEqual(copy.identity, original.identity);
  });
});

Deno.test("RootDirectory.openFile() keeps absolute links and .. inside the root", () => {
  withDir((dir) => {
    Deno.mkdirSync(`${dir}/root/etc`, { recursive: true });
    Deno.writeTextFileSync(`${dir}/root/etc/inside`, "inside");
    Deno.writeTextFileSync(`${dir}/outside`, "outside");
    // Absolute, as a container's links are: they mean the container's /etc, not the host's.
    Deno.symlinkSync("/etc/inside", `${dir}/root/link`);
    Deno.symlinkSync(`${dir}/outside`, `${dir}/root/escape`);
    using root = RootDirectory.open(`${dir}/root`);
    using inside = root.openFile("/link");
    assert.equal(new TextDecoder().decode(inside.read(0, inside.size)), "inside");
    assert.equal(refusal(() => root.openFile("/escape")).reason, "missing");
    assert.equal(refusal(() => root.openFile("/../outside")).reason, "missing");
  });
});

Deno.test("RegularFile.open() with noFollow refuses a link as the last part, and follows links before it", () => {
  withDir((dir) => {
    Deno.mkdirSync(`${dir}/real`);
    Deno.writeTextFileSync(`${dir}/real/f`, "file");
    Deno.symlinkSync(`${dir}/real/f`, `${dir}/link`);
    Deno.symlinkSync(`${dir}/real`, `${dir}/folder`);
    const error = refusal(() => RegularFile.open(`${dir}/link`, { noFollow: true }));
    assert.equal(error.reason, "not-regular");
    assert.match(error.message, /a symbolic link/);
    using through = RegularFile.open(`${dir}/folder/f`, { noFollow: true });
    assert.equal(through.size, 4);
    using root = RootDirectory.open(dir);
    assert.equal(refusal(() => RegularFile.open("/link", { root, noFollow: true })).reason, "not-regular");
  });
});

Deno.test("RegularFile.status() says what the open file is now: its owner, links and growing size", () => {
  withDir((dir) => {
    Deno.writeTextFileSync(`${dir}/f`, "abc");
    using file = RegularFile.open(`${dir}/f`);
    Deno.writeTextFileSync(`${dir}/f`, "def", { append: true });
    Deno.linkSync(`${dir}/f`, `${dir}/g`);
    const status = file.status();
    assert.equal(status.size, 6);
    assert.equal(status.links, 2);
    assert.equal(status.uid, Deno.uid());
    assert.equal(file.size, 3, "size stays what it was at the open");
    file.close();
    assert.throws(() => file.status(), /closed/);
  });
});

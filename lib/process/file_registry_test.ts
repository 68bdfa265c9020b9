import assert from "node:assert/strict";
import { FileRegistry } from "./file_registry.ts";
import type { Address, Pid } from "../types.ts";

/** Two copies of /bin/true (two inodes, one content) and a file of other content, in a temp directory. */
function copies(): { dir: string; first: string; second: string; other: string } {
  const dir = Deno.makeTempDirSync();
  const first = `${dir}/true-1`;
  const second = `${dir}/true-2`;
  const other = `${dir}/false`;
  Deno.copyFileSync("/bin/true", first);
  Deno.copyFileSync("/bin/true", second);
  Deno.copyFileSync("/bin/false", other);
  return { dir, first, second, other };
}

Deno.test("FileRegistry knows equal files under two paths as one file, and other content as another", () => {
  const { dir, first, second, other } = copies();
  try {
    using files = new FileRegistry();
    const a = files.openPath(first)!;
    const b = files.openPath(second)!;
    const c = files.openPath(other)!;
    assert.ok(a.readable && a.fileId !== null);
    assert.equal(b, a, "the same object: one identity for one content");
    assert.notEqual(c.fileId, a.fileId);
    assert.equal(files.stats.filesOpened, 2);
    assert.equal([...files.files()].length, 2);
    assert.equal(files.openPath(`${dir}/missing`), null);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("FileRegistry keeps a file nobody maps for the grace period, then unloads it; its BPF id stays", () => {
  const { dir, first } = copies();
  try {
    using files = new FileRegistry({ graceMs: 1000 });
    const file = files.openPath(first)!;
    const use = files.acquire(file)!;
    assert.ok(use.bpfId > 0 && use.segments.length > 0, "its program headers are read");
    assert.equal(files.fileByBpfId(use.bpfId), file);
    assert.equal(files.bpfIdOf(file.fileId!), use.bpfId);
    files.acquire(file);
    files.release(file);
    files.sweep(performance.now() + 5000);
    assert.equal(files.stats.filesMapped, 1, "one mapping still holds it");

    files.release(file);
    const released = performance.now();
    files.sweep(released + 500);
    assert.equal(files.stats.filesMapped, 1, "within the grace period");
    files.sweep(released + 1500);
    assert.equal(files.stats.filesMapped, 0, "unloaded after it");
    assert.equal(files.fileByBpfId(use.bpfId), file, "traces drained before still name it");

    // Mapped again, it loads again under the same id; a reference taken in the grace period keeps it.
    assert.equal(files.acquire(file)!.bpfId, use.bpfId);
    files.release(file);
    files.acquire(file);
    files.sweep(performance.now() + 5000);
    assert.equal(files.stats.filesMapped, 1);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("FileRegistry gives anonymous memory and unreadable files no state", () => {
  const root = Deno.makeTempDirSync();
  try {
    Deno.mkdirSync(`${root}/7`);
    using files = new FileRegistry({ procRoot: root });
    using read = files.readRoot(7 as Pid);
    const anonymous = files.fileOf(read, {
      start: 0x1000 as Address,
      end: 0x2000 as Address,
      fileOffset: 0,
      device: "00:00",
      inode: 0,
      path: "",
      deleted: false,
    });
    assert.equal(anonymous.kind, "anonymous");
    assert.equal(files.acquire(anonymous), null);
    // A file that the fake process cannot show (no map_files, no root here) is refused, by reason.
    const refused = files.fileOf(read, {
      start: 0x3000 as Address,
      end: 0x4000 as Address,
      fileOffset: 0,
      device: "08:01",
      inode: 1234,
      path: "/usr/lib/libgone.so",
      deleted: false,
    });
    assert.equal(refused.readable, false);
    assert.equal(files.acquire(refused), null);
    const refusals = Object.values(files.stats.filesRefused).reduce((sum, count) => sum + count, 0);
    assert.equal(refusals, 1);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});

import assert from "node:assert/strict";
import { parseProcMaps } from "../process/proc_maps.ts";
import { type Address, asPid, type Pid } from "../types.ts";
import { RemoteMemory, RemoteMemoryError } from "./remote_memory.ts";

const self = asPid(Deno.pid);

/** The address of a typed array's first byte in this process. */
function addressOf(bytes: Uint8Array): Address {
  return Number(Deno.UnsafePointer.value(Deno.UnsafePointer.of(bytes))) as Address;
}

function startSleeper(): Deno.ChildProcess {
  return new Deno.Command("sleep", { args: ["30"], stdout: "null", stderr: "null" }).spawn();
}

async function settle(pid: Pid): Promise<void> {
  // The child's image is in place once its maps name its executable.
  for (let i = 0; i < 500; i++) {
    try {
      if (Deno.readTextFileSync(`/proc/${pid}/maps`).includes("sleep")) return;
    } catch {
      // not yet
    }
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

Deno.test("u8/u16/u32/i32/u64/i64/pointer read the bytes this process wrote", () => {
  const bytes = new Uint8Array(64);
  const view = new DataView(bytes.buffer);
  view.setUint8(0, 0xab);
  view.setUint16(2, 0xbeef, true);
  view.setUint32(4, 0xdeadbeef, true);
  view.setInt32(8, -42, true);
  view.setBigUint64(16, 0x1234_5678_9abcn, true);
  view.setBigInt64(24, -0x1234_5678n, true);
  view.setBigUint64(32, 0x7fff_1234_5678n, true);
  const at = addressOf(bytes);
  using memory = RemoteMemory.open(self, { cachePages: 0 });
  assert.equal(memory.u8(at), 0xab);
  assert.equal(memory.u16(at + 2), 0xbeef);
  assert.equal(memory.u32(at + 4), 0xdeadbeef);
  assert.equal(memory.i32(at + 8), -42);
  assert.equal(memory.u64(at + 16), 0x1234_5678_9abc);
  assert.equal(memory.i64(at + 24), -0x1234_5678);
  assert.equal(memory.pointer(at + 32), 0x7fff_1234_5678);
  assert.deepEqual(memory.read(at, 4), bytes.subarray(0, 4));
});

Deno.test("u64() refuses values from 2^53 on; pointer() refuses non-user-space values", () => {
  const bytes = new Uint8Array(16);
  const view = new DataView(bytes.buffer);
  view.setBigUint64(0, 2n ** 53n, true);
  view.setBigUint64(8, 0xffff_8000_0000_0000n, true);
  const at = addressOf(bytes);
  using memory = RemoteMemory.open(self);
  assert.throws(() => memory.u64(at), (e) => e instanceof RemoteMemoryError && e.failure === "invalid");
  assert.deepEqual(memory.u64Halves(at), [0x200000, 0]);
  assert.throws(
    () => memory.pointer(at + 8),
    (e) => e instanceof RemoteMemoryError && e.failure === "invalid",
  );
});

Deno.test("cString() stops at NUL, cuts at maxLength and decodes UTF-8", () => {
  const text = new TextEncoder().encode("héllo wörld\0tail");
  const bytes = new Uint8Array(text.length);
  bytes.set(text);
  const at = addressOf(bytes);
  using memory = RemoteMemory.open(self);
  assert.equal(memory.cString(at, 256), "héllo wörld");
  assert.equal(memory.cString(at, 5), "héll");
});

Deno.test("the page cache serves repeated reads until clearCache()", () => {
  const bytes = new Uint8Array(16);
  const at = addressOf(bytes);
  using memory = RemoteMemory.open(self, { cachePages: 4 });
  bytes[0] = 1;
  assert.equal(memory.u8(at), 1);
  bytes[0] = 2;
  const syscalls = memory.stats.syscalls;
  assert.equal(memory.u8(at), 1, "a cached page keeps the old value");
  assert.equal(memory.stats.syscalls, syscalls);
  assert.ok(memory.stats.cacheHits >= 1);
  memory.clearCache();
  assert.equal(memory.u8(at), 2);
});

Deno.test("a read of unmapped memory is an 'unmapped' RemoteMemoryError", () => {
  using memory = RemoteMemory.open(self);
  // The first page is never mapped (mmap_min_addr).
  assert.throws(() => memory.u64(0x1000), (e) => e instanceof RemoteMemoryError && e.failure === "unmapped");
});

Deno.test("bad requests are 'invalid' RemoteMemoryErrors", () => {
  using memory = RemoteMemory.open(self, { maxReadBytes: 1024 });
  const invalid = (e: unknown) => e instanceof RemoteMemoryError && e.failure === "invalid";
  assert.throws(() => memory.read(0x10000, 2048), invalid);
  assert.throws(() => memory.read(0, 8), invalid);
  assert.throws(() => memory.read(0x800000000000 - 4, 8), invalid);
  assert.throws(() => memory.read(0x10000, -1), invalid);
  assert.throws(() => memory.u32(1.5), invalid);
});

Deno.test("open() of a process that does not exist is a 'gone' RemoteMemoryError", () => {
  // pid_max is at most 2^22, so this pid never exists.
  assert.throws(
    () => RemoteMemory.open(asPid(0x3ffffff0)),
    (e) => e instanceof RemoteMemoryError && e.failure === "gone",
  );
});

Deno.test("reads of a process that exits mid-read are 'gone' RemoteMemoryErrors, never other errors", async () => {
  const child = startSleeper();
  const pid = asPid(child.pid);
  await settle(pid);
  const first = parseProcMaps(Deno.readTextFileSync(`/proc/${pid}/maps`))[0];
  assert.ok(first !== undefined);
  using memory = RemoteMemory.open(pid, { cachePages: 0 });
  using file = Deno.openSync(first.path);
  file.seekSync(first.fileOffset, Deno.SeekMode.Start);
  const expected = new Uint8Array(16);
  assert.equal(file.readSync(expected), 16);
  assert.deepEqual(memory.read(first.start, 16), expected, "the mapping holds the file's bytes");

  // Kill it while reading in a loop: every read succeeds or fails with a RemoteMemoryError.
  const killer = setTimeout(() => child.kill("SIGKILL"), 20);
  const failures = new Set<string>();
  const deadline = performance.now() + 5000;
  let errors = 0;
  while (performance.now() < deadline && errors < 50) {
    try {
      memory.u32(first.start + 8);
    } catch (error) {
      assert.ok(error instanceof RemoteMemoryError, `unexpected ${error}`);
      failures.add(error.failure);
      errors++;
    }
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  clearTimeout(killer);
  assert.ok(errors > 0, "reads kept succeeding after SIGKILL");
  await child.status;
  assert.deepEqual([...failures], ["gone"]);
  assert.throws(
    () => memory.cString(first.start, 64),
    (e) => e instanceof RemoteMemoryError && e.failure === "gone",
  );
  assert.equal(memory.alive, false);
});

Deno.test("close() is idempotent and later reads are 'gone'", () => {
  const memory = RemoteMemory.open(self);
  memory.close();
  memory.close();
  assert.throws(() => memory.u8(0x10000), (e) => e instanceof RemoteMemoryError && e.failure === "gone");
});

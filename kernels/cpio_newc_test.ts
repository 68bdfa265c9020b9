import assert from "node:assert/strict";
import { CpioWriter } from "./cpio_newc.ts";
import { programs, requiring } from "../lib/testing/requirements.ts";

// cpio reads back what the writer wrote; bootstrap installs it for the tests.
const cpio = programs("cpio");

Deno.test(requiring([cpio], {
  name: "CpioWriter writes a newc archive that cpio extracts to the same files, links and modes",
  async fn() {
    const dir = Deno.makeTempDirSync({ prefix: "omniprof-cpio-" });
    try {
      const cpio = new CpioWriter();
      const busybox = Deno.readFileSync("/bin/true"); // a real binary, odd length
      cpio.directory("/bin");
      cpio.file("/bin/tool", busybox, 0o755);
      cpio.symlink("/bin/sh", "tool");
      cpio.file("/init", new TextEncoder().encode("#!/bin/sh\necho hi\n"), 0o700);
      cpio.file("/empty", new Uint8Array(0));
      const archive = cpio.finish();
      assert.equal(archive.length % 4, 0);
      const child = new Deno.Command("cpio", {
        args: ["-id", "--quiet", "--no-absolute-filenames"],
        cwd: dir,
        stdin: "piped",
        stderr: "piped",
      }).spawn();
      const result = child.output();
      const writer = child.stdin.getWriter();
      await writer.write(archive);
      await writer.close();
      const status = await result;
      assert.ok(status.success, new TextDecoder().decode(status.stderr));
      assert.deepEqual(Deno.readFileSync(`${dir}/bin/tool`), busybox);
      assert.equal(Deno.statSync(`${dir}/bin/tool`).mode! & 0o777, 0o755);
      assert.equal(Deno.readLinkSync(`${dir}/bin/sh`), "tool");
      assert.equal(Deno.readTextFileSync(`${dir}/init`), "#!/bin/sh\necho hi\n");
      assert.equal(Deno.statSync(`${dir}/init`).mode! & 0o777, 0o700);
      assert.equal(Deno.statSync(`${dir}/empty`).size, 0);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
}));

Deno.test("CpioWriter refuses duplicate and unclean paths", () => {
  const cpio = new CpioWriter();
  cpio.directory("/etc");
  assert.throws(() => cpio.directory("etc/"), /already there/);
  assert.throws(() => cpio.file("/../x", new Uint8Array(1)), RangeError);
  assert.throws(() => cpio.file("/a//b", new Uint8Array(1)), RangeError);
  // Same inputs, same bytes: what the initramfs cache relies on.
  const a = new CpioWriter();
  const b = new CpioWriter();
  for (const w of [a, b]) w.file("/f", new Uint8Array([1, 2, 3]));
  assert.deepEqual(a.finish(), b.finish());
});

import assert from "node:assert/strict";
import { InputFileError, readInputFile } from "./input_file.ts";

const OPTIONS = { maxBytes: 1000, kind: "test file" };

async function assertRefused(path: string, expected: RegExp, maxBytes = OPTIONS.maxBytes): Promise<void> {
  await assert.rejects(readInputFile(path, { ...OPTIONS, maxBytes }), (error: unknown) => {
    assert.ok(error instanceof InputFileError, String(error));
    assert.ok(error.message.startsWith(`Cannot read ${path}: `), error.message);
    assert.match(error.message, expected);
    return true;
  });
}

function withDir(fn: (dir: string) => Promise<void>): () => Promise<void> {
  return async () => {
    const dir = Deno.makeTempDirSync({ prefix: "omniprof-input-" });
    try {
      await fn(dir);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  };
}

Deno.test(
  "readInputFile() reads a regular file up to its bound and refuses a larger one before reading it",
  withDir(async (dir) => {
    const bytes = Uint8Array.from({ length: 1000 }, (_, i) => i & 0xff);
    Deno.writeFileSync(`${dir}/exact`, bytes);
    assert.deepEqual(await readInputFile(`${dir}/exact`, OPTIONS), bytes);
    Deno.writeFileSync(`${dir}/empty`, new Uint8Array(0));
    assert.equal((await readInputFile(`${dir}/empty`, OPTIONS)).length, 0);
    Deno.writeFileSync(`${dir}/large`, new Uint8Array(1001));
    await assertRefused(
      `${dir}/large`,
      /^Cannot read .*: 1001 bytes, more than the 1000 bytes omniprof reads as a test file$/,
    );
    // A file the reader may not open says so (root may open anything: then the file is simply read).
    Deno.writeFileSync(`${dir}/secret`, bytes, { mode: 0o000 });
    if (Deno.uid() !== 0) await assertRefused(`${dir}/secret`, /permission denied/);
    await assertRefused(`${dir}/missing`, /: no such file$/);
  }),
);

Deno.test("readInputFile() refuses devices and directories at once: /dev/zero never ends", async () => {
  const started = performance.now();
  await assertRefused("/dev/zero", /a character device, not a test file/);
  await assertRefused("/dev/urandom", /a character device/);
  await assertRefused("/", /a directory, not a test file/);
  assert.ok(performance.now() - started < 1000, "refused without reading");
});

Deno.test(
  "readInputFile() does not wait for the writer of a FIFO that has none",
  withDir(async (dir) => {
    const fifo = `${dir}/fifo`;
    new Deno.Command("mkfifo", { args: [fifo] }).outputSync();
    const started = performance.now();
    assert.equal((await readInputFile(fifo, OPTIONS)).length, 0);
    assert.ok(performance.now() - started < 1000, "no wait for a writer");
  }),
);

/** Runs readInputFile("/dev/stdin") in a fresh Deno fed by the shell pipeline `writer`. */
async function readPipe(writer: string, maxBytes: number): Promise<{ stdout: string; stderr: string }> {
  const module = new URL("./input_file.ts", import.meta.url).href;
  const script = `import { readInputFile } from "${module}";
try {
  const bytes = await readInputFile("/dev/stdin", { maxBytes: ${maxBytes}, kind: "test file" });
  console.log(new TextDecoder().decode(bytes));
} catch (error) {
  console.error(error.message);
}`;
  const deno = `"${Deno.execPath()}" eval --quiet '${script.replaceAll("'", "'\\''")}'`;
  const output = await new Deno.Command("sh", {
    args: ["-c", `${writer} | ${deno}`],
    env: { DENO_NO_UPDATE_CHECK: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  return { stdout: decoder.decode(output.stdout).trim(), stderr: decoder.decode(output.stderr).trim() };
}

Deno.test("readInputFile() reads a pipe whose writer pauses, to the end", async () => {
  const { stdout, stderr } = await readPipe("{ printf abc; sleep 0.3; printf def; }", 1000);
  assert.equal(stderr, "");
  assert.equal(stdout, "abcdef");
});

Deno.test("readInputFile() stops reading an endless pipe at its bound", async () => {
  const { stdout, stderr } = await readPipe("yes", 1 << 16);
  assert.equal(stdout, "");
  assert.equal(
    stderr,
    "Cannot read /dev/stdin: the stream holds more than the 64 KiB omniprof reads as a test file",
  );
});

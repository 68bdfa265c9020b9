import assert from "node:assert/strict";
import { Directory } from "../sys/directory.ts";
import { OutputChangedError, replaceFile, temporaryName } from "./replace_file.ts";

/** Whether `a` and `b` hold the same bytes (assert's diff of two large arrays would take minutes). */
function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}

function names(dir: string): string[] {
  return [...Deno.readDirSync(dir)].map((entry) => entry.name).sort();
}

function hex(bytes: Uint8Array): string {
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test("temporaryName() is hidden, 64 random bits, and tells nothing of the process", () => {
  const seen = new Set<string>();
  for (let i = 0; i < 2000; i++) {
    const name = temporaryName();
    assert.match(name, /^\.omniprof-[0-9a-f]{16}\.tmp$/);
    seen.add(name);
  }
  assert.equal(seen.size, 2000, "no name came twice");
  // Each hex digit position takes many values: not a counter, not a clock.
  for (let position = 10; position < 26; position++) {
    const digits = new Set([...seen].map((name) => name[position]));
    assert.ok(digits.size >= 12, `digit ${position} takes ${digits.size} values`);
  }
});

Deno.test("a file or link planted at a temporary name cannot be used: the write picks another name", async (t) => {
  const original = crypto.getRandomValues.bind(crypto);
  for (const unnamedTemporary of [false, true]) {
    await t.step(unnamedTemporary ? "unnamed, replacing a file" : "named temporaries", () => {
      const dir = Deno.makeTempDirSync();
      const victimDir = Deno.makeTempDirSync();
      // The attacker knows the next random values: the first temporary names are planted.
      const planted = [new Uint8Array(8).fill(0xaa), new Uint8Array(8).fill(0xbb)];
      let calls = 0;
      crypto.getRandomValues = ((array: Uint8Array) => {
        const next = planted[calls++];
        if (next !== undefined && array.length === next.length) {
          array.set(next);
          return array;
        }
        return original(array);
      }) as typeof crypto.getRandomValues;
      try {
        const victim = `${victimDir}/victim`;
        const secret = crypto.getRandomValues(new Uint8Array(1000));
        Deno.writeFileSync(victim, secret, { mode: 0o600 });
        calls = 0;
        const first = `.omniprof-${hex(planted[0]!)}.tmp`;
        const second = `.omniprof-${hex(planted[1]!)}.tmp`;
        Deno.symlinkSync(victim, `${dir}/${first}`);
        Deno.writeTextFileSync(`${dir}/${second}`, "planted file");
        // The name the profiler used before: the output's name and its process id.
        Deno.symlinkSync(victim, `${dir}/.out.${Deno.pid}.tmp`);
        Deno.writeTextFileSync(`${dir}/out`, "old");

        using folder = Directory.open(dir);
        const before = folder.status("out")!.identity;
        replaceFile(folder, "out", before, new TextEncoder().encode("new"), {
          mode: 0o644,
          unnamedTemporary,
        });

        assert.equal(Deno.readTextFileSync(`${dir}/out`), "new");
        assert.ok(sameBytes(Deno.readFileSync(victim), secret), "the link's target is unchanged");
        assert.equal(Deno.readLinkSync(`${dir}/${first}`), victim);
        assert.equal(Deno.readTextFileSync(`${dir}/${second}`), "planted file");
        assert.deepEqual(
          names(dir),
          [first, second, `.out.${Deno.pid}.tmp`, "out"].sort(),
          "nothing else left",
        );
        assert.ok(calls >= 2, "the planted names were tried");
      } finally {
        crypto.getRandomValues = original;
        Deno.removeSync(dir, { recursive: true });
        Deno.removeSync(victimDir, { recursive: true });
      }
    });
  }
});

Deno.test("replaceFile() never replaces a name that appeared after the start", () => {
  const dir = Deno.makeTempDirSync();
  try {
    using folder = Directory.open(dir);
    Deno.writeTextFileSync(`${dir}/out`, "appeared meanwhile");
    const error = (() => {
      try {
        replaceFile(folder, "out", null, new TextEncoder().encode("data"), { mode: 0o644 });
      } catch (error) {
        return error;
      }
    })();
    assert.ok(error instanceof OutputChangedError);
    assert.equal(error.reason, "it did not exist when omniprof started and is now a file");
    assert.match(error.keptName, /^omniprof-kept-[0-9a-f]{8}-out$/);
    assert.equal(Deno.readTextFileSync(`${dir}/out`), "appeared meanwhile");
    assert.equal(Deno.readTextFileSync(`${dir}/${error.keptName}`), "data");
    assert.deepEqual(names(dir), [error.keptName, "out"].sort());
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("a writer killed at any moment leaves only complete files, and no temporary", async () => {
  const dir = Deno.makeTempDirSync();
  const size = 8 << 20;
  const script = `
    import { Directory } from "${new URL("../sys/directory.ts", import.meta.url)}";
    import { replaceFile } from "${new URL("./replace_file.ts", import.meta.url)}";
    const folder = Directory.open(${JSON.stringify(dir)});
    const bytes = new Uint8Array(${size}).fill(7);
    for (let i = 0; ; i++) replaceFile(folder, "out-" + i, null, bytes, { mode: 0o644 });
  `;
  const child = new Deno.Command(Deno.execPath(), { args: ["eval", script], stderr: "piped" }).spawn();
  try {
    // Kill it while it holds a file being written (an unnamed one shows in /proc as "DIR/#N (deleted)").
    const deadline = performance.now() + 20_000;
    let writing = false;
    while (!writing && performance.now() < deadline) {
      for (const entry of safeReadDir(`/proc/${child.pid}/fd`)) {
        const link = safeReadLink(`/proc/${child.pid}/fd/${entry}`);
        if (link !== null && link.startsWith(`${dir}/`) && link.endsWith("(deleted)")) writing = true;
      }
    }
    child.kill("SIGKILL");
    await child.status;
    assert.ok(writing, "caught the writer in the middle of a file");
    const left = names(dir);
    for (const name of left) {
      assert.match(name, /^out-\d+$/, "no temporary");
      assert.equal(Deno.statSync(`${dir}/${name}`).size, size, `${name} is complete`);
    }
  } finally {
    try {
      child.kill("SIGKILL");
    } catch {
      // already gone
    }
    await child.stderr.cancel();
    Deno.removeSync(dir, { recursive: true });
  }
});

function safeReadDir(path: string): string[] {
  try {
    return [...Deno.readDirSync(path)].map((entry) => entry.name);
  } catch {
    return [];
  }
}

function safeReadLink(path: string): string | null {
  try {
    return Deno.readLinkSync(path);
  } catch {
    return null;
  }
}

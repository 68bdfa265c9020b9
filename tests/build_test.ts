// The packaging path: everything `deno compile` needs, checked where no denort runtime can be had. The
// bundle holds the BPF object and the demo workload; run from an empty folder it must work on its own.
import assert from "node:assert/strict";
import { REPO_ROOT, tempDir, tracingUnavailable, V8_FLAGS } from "./helpers.ts";
import { dynamicImportTargets } from "../build.ts";

async function run(args: string[], cwd: string, env?: Record<string, string>) {
  const output = await new Deno.Command(Deno.execPath(), { args, cwd, env, stdout: "piped", stderr: "piped" })
    .output();
  const decoder = new TextDecoder();
  return { code: output.code, stdout: decoder.decode(output.stdout), stderr: decoder.decode(output.stderr) };
}

let bundled: Promise<string> | null = null;

/** Bundles omniprof once for this file's tests into a folder of its own; returns the folder. */
function bundle(): Promise<string> {
  bundled ??= (async () => {
    const dir = tempDir();
    globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
    const built = await run(
      ["run", "-A", `${REPO_ROOT}build.ts`, "--bundle", `${dir}/omniprof.js`],
      REPO_ROOT,
    );
    assert.equal(built.code, 0, built.stderr);
    return dir;
  })();
  return bundled;
}

Deno.test("build.ts --bundle makes a single file that runs outside the repository", async () => {
  const dir = await bundle();
  const help = await run(["run", "-A", "omniprof.js", "record", "--help"], dir);
  assert.equal(help.code, 0, help.stderr);
  assert.match(help.stderr, /Usage: omniprof record/);
});

const recordName = "the bundle records the demo workload from a folder of its own";
const recordSkip = tracingUnavailable();
if (recordSkip) console.log(`SKIP ${recordName}: ${recordSkip}`);
Deno.test({ name: recordName, ignore: recordSkip !== null }, async () => {
  const dir = await bundle();
  const recorded = await run([
    "run",
    "-A",
    "omniprof.js",
    "record",
    "--demo",
    "-d",
    "1",
    "-o",
    "demo.folded",
  ], dir);
  assert.equal(recorded.code, 0, recorded.stderr);
  assert.match(Deno.readTextFileSync(`${dir}/demo.folded`), /^omniprof-demo;main;compute;/m);
});

Deno.test("build.ts --compile without DENORT_BIN says why it skips", async () => {
  const output = await run(["run", "-A", `${REPO_ROOT}build.ts`, "--compile"], REPO_ROOT, { DENORT_BIN: "" });
  assert.equal(output.code, 0);
  assert.match(output.stderr, /skipped `deno compile`.*DENORT_BIN/s);
});

Deno.test("build.ts --compile embeds every module the program imports dynamically", async () => {
  // deno.json's lazy-dynamic-imports makes `deno compile` leave out modules loaded with import() unless
  // build.ts names them. No denort can be had here, but `deno compile` only appends its payload to the
  // runtime binary: with deno itself in denort's place, the output holds the same payload, though it
  // does not run as omniprof.
  const dir = tempDir();
  try {
    const built = await run(
      ["run", "-A", `${REPO_ROOT}build.ts`, "--quiet", "--compile", "--output", `${dir}/omniprof`],
      REPO_ROOT,
      { DENORT_BIN: Deno.execPath() },
    );
    assert.equal(built.code, 0, built.stderr);
    const payload = new TextDecoder("latin1").decode(Deno.readFileSync(`${dir}/omniprof`));
    const targets = dynamicImportTargets();
    assert.ok(targets.includes("lib/cli/record_command.ts") && targets.includes("lib/output/pprof.ts"));
    for (const target of targets) {
      // Each module's first exported function, as the payload's copy of the module spells it.
      const source = Deno.readTextFileSync(`${REPO_ROOT}${target}`);
      const name = source.match(/^export (?:async )?function (\w+)/m)?.[1];
      assert.ok(name, `${target} exports no function to look for`);
      assert.ok(
        payload.includes(`function ${name}`),
        `${target} (function ${name}) is not in the executable`,
      );
    }
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("deno.json's record task and the README run omniprof with the V8 flags of support/v8_flags.ts", () => {
  const config = JSON.parse(Deno.readTextFileSync(`${REPO_ROOT}deno.json`)) as {
    tasks: Record<string, string>;
  };
  assert.ok(
    config.tasks.record?.includes(`--v8-flags=${V8_FLAGS} main.ts`),
    `deno.json task record: ${config.tasks.record}`,
  );
  const readme = Deno.readTextFileSync(`${REPO_ROOT}README.md`);
  assert.ok(readme.includes(`deno run -A --v8-flags=${V8_FLAGS} main.ts`), "README's omniprof alias");
});

// The packaging path: everything `deno compile` needs, checked where no denort runtime can be had. The
// bundle holds the BPF object and the demo workload; run from an empty folder it must work on its own.
import assert from "node:assert/strict";
import { REPO_ROOT, tempDir, tracingTest, V8_FLAGS } from "./helpers.ts";
import { dynamicImportTargets } from "../build.ts";
import { PROGRAM_ENTRY } from "../support/program_bundle.ts";

async function run(args: string[], cwd: string, env?: Record<string, string>) {
  const output = await new Deno.Command(Deno.execPath(), { args, cwd, env, stdout: "piped", stderr: "piped" })
    .output();
  const decoder = new TextDecoder();
  return { code: output.code, stdout: decoder.decode(output.stdout), stderr: decoder.decode(output.stderr) };
}

/** Writes the bundle to DIR/omniprof.js. */
async function bundle(dir: string): Promise<void> {
  const built = await run(["run", "-A", `${REPO_ROOT}build.ts`, "--bundle", `${dir}/omniprof.js`], REPO_ROOT);
  assert.equal(built.code, 0, built.stderr);
}

Deno.test("build.ts --bundle makes a single file that runs outside the repository", async () => {
  const dir = tempDir();
  try {
    await bundle(dir);
    const help = await run(["run", "-A", "omniprof.js", "record", "--help"], dir);
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stderr, /Usage: omniprof record/);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test(tracingTest("the bundle records the demo workload from a folder of its own", async () => {
  const dir = tempDir();
  try {
    await bundle(dir);
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
    assert.match(Deno.readTextFileSync(`${dir}/demo.folded`), /^omniprof-demo;(?:[^;\n]+;)*main;compute;/m);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}));

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

Deno.test("deno.json's record and omniprof tasks run the bundle with the V8 flags of support/v8_flags.ts", () => {
  const config = JSON.parse(Deno.readTextFileSync(`${REPO_ROOT}deno.json`)) as {
    tasks: Record<string, string>;
  };
  for (const task of ["record", "omniprof"]) {
    assert.ok(
      config.tasks[task]?.includes(`build.ts --quiet && deno run -A --v8-flags=${V8_FLAGS} ${PROGRAM_ENTRY}`),
      `deno.json task ${task}: ${config.tasks[task]}`,
    );
  }
  const readme = Deno.readTextFileSync(`${REPO_ROOT}README.md`);
  assert.ok(readme.includes("alias omniprof='support/bootstrap.sh deno task -q omniprof'"), "README's alias");
});

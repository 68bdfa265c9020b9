import assert from "node:assert/strict";
import { DENO_RUN_ENV, REPO_ROOT } from "../tests/helpers.ts";

/** The repository's tools that take options. */
const TOOLS = [
  "build.ts",
  "support/fresh_machine.ts",
  "kernels/test_kernel.ts",
  "kernels/fetch_kernel.ts",
  "kernels/build_kernel.ts",
];

function run(tool: string, args: string[]): { code: number; stdout: string; stderr: string } {
  const output = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${REPO_ROOT}${tool}`, ...args],
    env: DENO_RUN_ENV,
    stdout: "piped",
    stderr: "piped",
  }).outputSync();
  const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return { code: output.code, stdout: text(output.stdout), stderr: text(output.stderr) };
}

for (const tool of TOOLS) {
  Deno.test(`${tool}: an unknown option is a usage error, --help the usage`, () => {
    const bad = run(tool, ["--no-such-option"]);
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /Unknown option '--no-such-option'[^]*\nUsage: /);
    assert.doesNotMatch(bad.stderr, /Uncaught|at file:/, "no stack trace");
    const help = run(tool, ["--help"]);
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /^Usage: /);
  });
}

import assert from "node:assert/strict";
import { scanPrograms } from "./program_calls.ts";

/** Scans the given modules, written to a temporary folder. */
function scan(files: Record<string, string>) {
  const root = `${Deno.makeTempDirSync({ prefix: "omniprof-program-calls-" })}/`;
  try {
    for (const [path, source] of Object.entries(files)) {
      Deno.mkdirSync(`${root}${path}`.replace(/\/[^/]+$/, ""), { recursive: true });
      Deno.writeTextFileSync(`${root}${path}`, source);
    }
    return scanPrograms(root, Object.keys(files));
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
}

const names = (result: ReturnType<typeof scan>) =>
  result.named.map((use) => `${use.file}:${use.line} ${use.name}`);

Deno.test("scanPrograms() finds literal programs and libraries with their lines", () => {
  const result = scan({
    "a.ts": 'const x = 1;\nnew Deno.Command("gcc", { args: [] });\nDeno.dlopen("libc.so.6", {});\n',
  });
  assert.deepEqual(names(result), ["a.ts:2 gcc", "a.ts:3 libc.so.6"]);
  assert.deepEqual(result.named.map((use) => use.kind), ["program", "library"]);
  assert.deepEqual(result.dynamic, []);
});

Deno.test("scanPrograms() follows a helper's parameter to its callers across imports", () => {
  const result = scan({
    "lib/run.ts": "export function run(cmd: string, ...args: string[]) {\n" +
      "  return new Deno.Command(cmd, { args }).outputSync();\n}\n",
    "lib/use_test.ts": 'import { run } from "./run.ts";\nrun("readelf", "-h");\nrun("nm");\n',
    "other.ts": 'function run(x: string) { return x; }\nrun("not-a-program");\n',
  });
  assert.deepEqual(names(result), ["lib/use_test.ts:2 readelf", "lib/use_test.ts:3 nm"]);
  assert.deepEqual(result.imports.get("lib/use_test.ts"), ["lib/run.ts"]);
});

Deno.test("scanPrograms() reads command -v probes, PATH lookups, rest parameters, filter callbacks and for-of lists", () => {
  const result = scan({
    "t.ts": [
      "function missing(...tools: string[]) {",
      '  return tools.filter((tool) => !new Deno.Command("sh", { args: ["-c", `command -v ${tool}`] }));',
      "}",
      'missing("gcc", "ldd");',
      'for (const tool of ["cpio"]) new Deno.Command(tool);',
      'const TOOL = "tmux";',
      "function onPath(tool: string) {",
      '  return Deno.env.get("PATH")!.split(":").find((dir) => Deno.statSync(`${dir}/${tool}`));',
      "}",
      'onPath("node");',
      "class A { #go(p: string) { return new Deno.Command(p); } b() { return this.#go(TOOL); } }",
    ].join("\n"),
  });
  assert.deepEqual(names(result), [
    "t.ts:2 sh",
    "t.ts:4 gcc",
    "t.ts:4 ldd",
    "t.ts:5 cpio",
    "t.ts:6 tmux",
    "t.ts:10 node",
  ]);
});

Deno.test("scanPrograms() reads a constant another module exports, also through a re-export", () => {
  const result = scan({
    "paths.ts": 'export const PYTHON = "/usr/bin/python3";\n',
    "mod.ts": 'export { PYTHON } from "./paths.ts";\n',
    "use_test.ts": 'import { PYTHON } from "./mod.ts";\nnew Deno.Command(PYTHON);\n',
  });
  assert.deepEqual(names(result), ["paths.ts:1 /usr/bin/python3"]);
  assert.deepEqual(result.dynamic, []);
});

Deno.test("scanPrograms() returns what the source does not spell as dynamic, Deno itself excepted", () => {
  const result = scan({
    "d.ts": "const path = await build();\nnew Deno.Command(path);\nnew Deno.Command(Deno.execPath());\n" +
      "export function lonely(p: string) { return new Deno.Command(p); }\n",
  });
  assert.deepEqual(result.named, []);
  assert.deepEqual(result.dynamic.map((use) => `${use.line} ${use.expression}`), [
    "1 await build()",
    "4 p (no caller found)",
  ]);
});

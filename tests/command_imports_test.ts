// Each command loads only its own modules (main.ts dispatches with import()): a command that records
// nothing must not load the recorder, libbpf or the embedded BPF object, whose loading costs every run of
// `omniprof report` CPU time. Checked on the module graph `deno info --json` gives, which is the graph Deno
// loads: with lazy-dynamic-imports, a module's static imports load with it and an import() when it runs.
import assert from "node:assert/strict";
import { DENO_RUN_ENV, REPO_ROOT } from "./helpers.ts";

/** One module of `deno info --json`: its imports, dynamic ones marked, type-only ones under `type`. */
interface InfoModule {
  specifier: string;
  dependencies?: { code?: { specifier: string }; isDynamic?: boolean }[];
}

/**
 * The repository's modules that loading `path` loads, as paths from the repository root: its static
 * imports, and with `dynamic` also every module its import() calls name.
 */
async function moduleGraph(path: string, { dynamic }: { dynamic: boolean }): Promise<Set<string>> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", `${REPO_ROOT}${path}`],
    cwd: REPO_ROOT,
    env: DENO_RUN_ENV,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
  const info: { roots: string[]; modules: InfoModule[] } = JSON.parse(
    new TextDecoder().decode(output.stdout),
  );
  const modules = new Map(info.modules.map((module) => [module.specifier, module]));
  const rootUrl = new URL(`file://${REPO_ROOT}`).href;
  const seen = new Set<string>();
  const pending = [...info.roots];
  for (let specifier = pending.pop(); specifier !== undefined; specifier = pending.pop()) {
    if (seen.has(specifier)) continue;
    seen.add(specifier);
    for (const dependency of modules.get(specifier)?.dependencies ?? []) {
      if (dependency.code !== undefined && (dynamic || !dependency.isDynamic)) {
        pending.push(dependency.code.specifier);
      }
    }
  }
  return new Set([...seen].filter((url) => url.startsWith(rootUrl)).map((url) => url.slice(rootUrl.length)));
}

/** The modules only recording needs. */
function recordingModules(graph: Set<string>): string[] {
  return [...graph].filter((path) =>
    path.startsWith("lib/record/") || path.startsWith("lib/bpf/") || path === "support/embedded/bpf_object.ts"
  );
}

Deno.test("the record command's graph holds the recorder and the BPF object (the check below sees them)", async () => {
  const graph = await moduleGraph("lib/cli/record_command.ts", { dynamic: false });
  for (const path of ["lib/record/recorder.ts", "lib/bpf/libbpf.ts", "support/embedded/bpf_object.ts"]) {
    assert.ok(graph.has(path), `${path} is not in the graph of lib/cli/record_command.ts`);
  }
});

Deno.test("main.ts loads no command and nothing of the recorder before it picks a command", async () => {
  const graph = await moduleGraph("main.ts", { dynamic: false });
  assert.ok(graph.has("lib/cli/command_error.ts"), [...graph].join(", "));
  assert.deepEqual(recordingModules(graph), []);
  assert.deepEqual([...graph].filter((path) => path.endsWith("_command.ts")), []);
});

for (const command of ["report", "diff"]) {
  Deno.test(`omniprof ${command} loads nothing of the recorder, libbpf or the BPF object`, async () => {
    const graph = await moduleGraph(`lib/cli/${command}_command.ts`, { dynamic: true });
    assert.ok(graph.has("lib/output/pprof_reader.ts"), [...graph].join(", "));
    assert.deepEqual(recordingModules(graph), []);
  });
}

for (const command of ["report", "diff", "top", "agent", "check"]) {
  Deno.test(`omniprof ${command} does not load the record command`, async () => {
    const graph = await moduleGraph(`lib/cli/${command}_command.ts`, { dynamic: true });
    assert.ok(graph.has(`lib/cli/${command}_command.ts`), [...graph].join(", "));
    assert.ok(!graph.has("lib/cli/record_command.ts"));
    assert.ok(!graph.has("lib/record/session.ts"));
  });
}

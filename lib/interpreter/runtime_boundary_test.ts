// The checklist of README.md ends with the files outside a runtime's own that may name it; the profiler's
// files are read here and every file naming a runtime of the list is compared with that list. The generated
// files on it must owe every mention to the runtime's own BPF files.
import assert from "node:assert/strict";
import type { Runtime } from "./runtime.ts";
import { RUNTIMES } from "./runtimes.ts";

const ROOT = new URL("../../", import.meta.url);
const CHECKLIST = new URL("README.md", import.meta.url);
/** Where the profiler's files are, as the checklist says: these folders and files of the repository. */
const FOLDERS = ["lib/", "bpf/", "support/"];
const TOP_FILES = ["main.ts", "build.ts"];

/** The list under the checklist's heading, each path with `<name>` left as it is written. */
function checklistPaths(): string[] {
  const text = Deno.readTextFileSync(CHECKLIST);
  const start = text.indexOf("### The files outside a runtime's own that name it");
  assert.ok(start >= 0, "README.md has no list of the files outside a runtime's own");
  const end = text.indexOf("\n#", start + 1);
  const section = text.slice(start, end < 0 ? text.length : end);
  return [...section.matchAll(/^- `([^`]+)`/gm)].map((match) => match[1]!);
}

/** Every file of the profiler (tests and test fixtures aside), by its path from the repository root. */
function profilerFiles(): string[] {
  const files: string[] = [...TOP_FILES];
  const walk = (path: string) => {
    for (const entry of Deno.readDirSync(new URL(path, ROOT))) {
      const child = `${path}${entry.name}`;
      if (entry.isDirectory && entry.name !== "testdata") walk(`${child}/`);
      else if (entry.isFile && !entry.name.endsWith("_test.ts")) files.push(child);
    }
  };
  for (const folder of FOLDERS) walk(folder);
  return files.sort();
}

Deno.test("the checklist lists the runtime list, the runtime's header and the generated files", () => {
  const paths = checklistPaths();
  for (const path of ["lib/interpreter/runtimes.ts", "bpf/<name>_tracer.h", "support/types.ts"]) {
    assert.ok(paths.includes(path), `${path} is not in README.md's list: ${paths.join(", ")}`);
  }
});

// A runtime whose frames are native (Go: its program only reads goroutine labels) is left out: its frames'
// names and unwinding belong to the native symbolizer and unwinder (lib/symbolize/go/, the cgo stack
// switch), and its name is a word of English.
const RUNTIMES_WITH_FRAMES = RUNTIMES.filter((runtime) => runtime.frameKind !== null);

/**
 * What names a runtime in the profiler's code: its name as a string (its frame kind, its records), its
 * folder or BPF files, the types generated from its header, its maps and its program. (A word in a comment
 * is not a dependency: "V8" is also the engine this profiler runs on.)
 */
function namesOf(runtime: Runtime): string[] {
  const pascal = runtime.name.charAt(0).toUpperCase() + runtime.name.slice(1);
  return [
    `"${runtime.name}"`,
    `interpreter/${runtime.name}/`,
    `${runtime.name}Runtime`,
    `${runtime.name}_tracer`,
    `${pascal}FrameMarker`,
    `${pascal}UnwindProgram`,
    `${pascal}MetricId`,
    ...(runtime.processMap === null ? [] : [runtime.processMap]),
    ...(runtime.unwinder === null ? [] : [runtime.unwinder.program]),
  ];
}

for (const runtime of RUNTIMES_WITH_FRAMES) {
  Deno.test(`only the files the checklist lists name ${runtime.name} outside its folder and BPF program`, () => {
    const own = (path: string) =>
      path.startsWith(`lib/interpreter/${runtime.name}/`) || path === `bpf/${runtime.name}_tracer.bpf.c`;
    const files = profilerFiles();
    assert.ok(files.length > 100 && files.includes("bpf/types.h"), `${files.length} files read`);
    const names = namesOf(runtime);
    const naming = files.filter((path) => {
      if (own(path)) return false;
      const text = Deno.readTextFileSync(new URL(path, ROOT));
      return names.some((name) => text.includes(name));
    });
    const allowed = checklistPaths().map((path) => path.replaceAll("<name>", runtime.name));
    assert.deepEqual(naming.filter((path) => !allowed.includes(path)), [], `allowed: ${allowed.join(", ")}`);
    for (const path of ["lib/interpreter/runtimes.ts", `bpf/${runtime.name}_tracer.h`, "support/types.ts"]) {
      assert.ok(naming.includes(path), `${path} does not name ${runtime.name}`);
    }
  });
}

/** The text of a file of the repository. */
function read(path: string): string {
  return Deno.readTextFileSync(new URL(path, ROOT));
}

for (const runtime of RUNTIMES_WITH_FRAMES) {
  const named = (text: string) => text.toLowerCase().includes(runtime.name.toLowerCase());

  Deno.test(`support/types.ts names ${runtime.name} only in the types of bpf/${runtime.name}_tracer.h`, () => {
    const header = read(`bpf/${runtime.name}_tracer.h`);
    // One block per struct or enum, each opened by a comment naming its C type.
    const blocks = read("support/types.ts").split("\n\n").filter(named);
    assert.ok(blocks.length > 0, `no block of support/types.ts names ${runtime.name}`);
    for (const block of blocks) {
      const type = /^\/\*\* (?:Layout|Values) of C `((?:struct|enum) \w+)`/.exec(block)?.[1];
      assert.ok(type !== undefined, `a block of support/types.ts that is no C type's:\n${block}`);
      assert.ok(header.includes(`\n${type} {`), `${type} is not declared in bpf/${runtime.name}_tracer.h`);
    }
  });

  Deno.test(`support/bpf_catalogue.ts names ${runtime.name} only in maps and programs of its BPF file`, () => {
    const source = read(`bpf/${runtime.name}_tracer.bpf.c`);
    const lines = read("support/bpf_catalogue.ts").split("\n").filter(named);
    assert.ok(lines.length > 0, `no line of support/bpf_catalogue.ts names ${runtime.name}`);
    for (const line of lines) {
      const name = /^ {2}(\w+): \{/.exec(line)?.[1];
      assert.ok(
        name !== undefined,
        `a line of support/bpf_catalogue.ts that is no map's or program's: ${line}`,
      );
      assert.ok(
        source.includes(`} ${name} SEC(".maps");`) || source.includes(`int ${name}(`),
        `${name} is not defined in bpf/${runtime.name}_tracer.bpf.c`,
      );
    }
  });
}

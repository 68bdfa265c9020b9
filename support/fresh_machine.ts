/**
 * `deno task fresh-machine`: runs the README's two commands on a fresh Debian machine, so that a step
 * bootstrap forgot cannot hide behind a machine that already has it. It builds a minimal Debian root
 * (support/fresh_machine/debian_root.ts: minbase, git and sudo, from the archive the host's apt uses,
 * nothing cached), clones this repository at the commit checked out here into /root, binds the host's
 * /proc, /sys and /dev in (the BPF programs load into the host's kernel), and runs each command as written
 * in a chroot, with a clean environment; the test command with CI=true, under which a test whose
 * requirement bootstrap installs fails rather than skips. It prints each command's result and wall time.
 *
 * Whatever happens (a failed command, Ctrl-C, SIGTERM), it stops what still runs in the root, unmounts
 * everything mounted there, and deletes the root only when nothing is mounted below it, with
 * `rm --one-file-system`.
 *
 * Usage: deno task fresh-machine [--suite bookworm|trixie] [--keep-root]
 *   --suite      the Debian release: bookworm (Debian 12, the default) or trixie (Debian 13)
 *   --keep-root  leave the root (unmounted) for a look around; its path is printed
 *
 * Exit code 0 when every command passed, 1 when one failed or the root could not be built, 2 for a usage
 * error, 128 + the signal's number when interrupted. Needs root, git and mmdebstrap.
 *
 * @module
 */
import { parseToolArgs } from "./tool_args.ts";
import { REPO_ROOT } from "../tests/helpers.ts";
import { stopProcessesIn } from "./fresh_machine/chroot_processes.ts";
import { buildDebianRoot, DEBIAN_RELEASES, prepareDebianRoot } from "./fresh_machine/debian_root.ts";
import { bindSlave, mountsBelow, unmountAllBelow } from "./fresh_machine/mounts.ts";
import { readmeCommands } from "./fresh_machine/readme_commands.ts";
import { checkoutState, cloneAt } from "./fresh_machine/repository_clone.ts";

const CLONE_DIR = "/root/omniprof";
/** root's PATH on Debian (login.defs' ENV_SUPATH). */
const ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const SIGNAL_NUMBERS: Record<string, number> = { SIGINT: 2, SIGTERM: 15 };

function say(message: string): void {
  console.error(`fresh-machine: ${message}`);
}

function seconds(since: number): string {
  return `${((performance.now() - since) / 1000).toFixed(1)} s`;
}

/** One README command's outcome. */
interface CommandResult {
  command: string;
  code: number;
  seconds: number;
}

/** Runs `command` with sh in the chroot at `root`, from the clone, with a login's environment and `extraEnv`. */
async function runInRoot(
  root: string,
  command: string,
  extraEnv: Record<string, string>,
  signal: AbortSignal,
): Promise<CommandResult> {
  const started = performance.now();
  const child = new Deno.Command("chroot", {
    args: [root, "/bin/sh", "-c", `cd ${CLONE_DIR} && ${command}`],
    clearEnv: true,
    env: { HOME: "/root", PATH: ROOT_PATH, TERM: Deno.env.get("TERM") ?? "dumb", ...extraEnv },
    stdin: "null",
    stdout: "inherit",
    stderr: "inherit",
    signal,
  }).spawn();
  const status = await child.status;
  return { command, code: status.code, seconds: (performance.now() - started) / 1000 };
}

/** Deletes the work folder, unless something is still mounted below it. */
function removeWorkDir(work: string): void {
  const mounted = mountsBelow(work);
  if (mounted.length > 0) {
    say(`left ${work} in place: still mounted there: ${mounted.join(", ")}`);
    return;
  }
  const output = new Deno.Command("rm", { args: ["-rf", "--one-file-system", "--", work], stderr: "piped" })
    .outputSync();
  if (!output.success) say(`could not delete ${work}: ${new TextDecoder().decode(output.stderr).trim()}`);
}

const USAGE = `Usage: deno task fresh-machine [--suite bookworm|trixie] [--keep-root]
  --suite      the Debian release: bookworm (Debian 12, the default) or trixie (Debian 13)
  --keep-root  leave the root (unmounted) for a look around; its path is printed`;

async function main(): Promise<number> {
  const { values } = parseToolArgs("fresh-machine", USAGE, {
    args: Deno.args,
    options: {
      suite: { type: "string", default: "bookworm" },
      "keep-root": { type: "boolean", default: false },
    },
  });
  const suite = values.suite;
  const release = DEBIAN_RELEASES[suite];
  if (release === undefined) {
    say(`--suite ${suite}: expected ${Object.keys(DEBIAN_RELEASES).join(" or ")}`);
    return 2;
  }
  if (Deno.uid() !== 0) {
    say("needs root (it builds a root file system, mounts and chroots)");
    return 2;
  }
  const commands = readmeCommands(Deno.readTextFileSync(`${REPO_ROOT}README.md`));
  const checkout = await checkoutState(REPO_ROOT);
  if (checkout.dirty) {
    say(`the checkout has uncommitted changes: the clone tests commit ${checkout.commit} only`);
  }

  // As /proc/PID/root shows it: without links.
  const work = Deno.realPathSync(Deno.makeTempDirSync({ prefix: "omniprof-fresh-" }));
  const root = `${work}/root`;
  const abort = new AbortController();
  let interrupted: string | null = null;
  const onSignal = (signal: Deno.Signal) => () => {
    if (interrupted !== null) return;
    interrupted = signal;
    say(`${signal}: stopping, then cleaning up`);
    abort.abort();
    // The chroot's own children (tests, workloads, servers) are not the direct child's to stop.
    stopProcessesIn(root).catch(() => {});
  };
  const listeners = (["SIGINT", "SIGTERM"] as const).map((signal) => [signal, onSignal(signal)] as const);
  for (const [signal, listener] of listeners) Deno.addSignalListener(signal, listener);

  const results: CommandResult[] = [];
  let failure: string | null = null;
  try {
    say(`${release} (${suite}) root in ${root}, clone of ${checkout.commit.slice(0, 12)}`);
    let started = performance.now();
    await buildDebianRoot(suite, root, abort.signal);
    say(`built the root with mmdebstrap in ${seconds(started)}`);
    started = performance.now();
    const certificates = prepareDebianRoot(root);
    await cloneAt(REPO_ROOT, checkout.commit, `${root}${CLONE_DIR}`);
    say(
      `cloned into ${CLONE_DIR}, copied ${certificates} of the host's CA certificates (${seconds(started)})`,
    );
    for (const dir of ["/proc", "/sys", "/dev"]) await bindSlave(dir, `${root}${dir}`);
    for (const command of commands) {
      if (interrupted !== null) break;
      say(`running \`${command}\``);
      const env: Record<string, string> = / deno task test\b/.test(command) ? { CI: "true" } : {};
      const result = await runInRoot(root, command, env, abort.signal);
      results.push(result);
      say(
        `${result.code === 0 ? "ok" : `FAILED (exit ${result.code})`}: \`${command}\` in ${
          result.seconds.toFixed(1)
        } s`,
      );
    }
  } catch (error) {
    failure = error instanceof Error ? error.message : String(error);
  } finally {
    const stuck = await stopProcessesIn(root);
    if (stuck.length > 0) say(`processes still running in the root: ${stuck.join(", ")}`);
    const { remaining, errors } = await unmountAllBelow(work);
    for (const error of errors) say(error);
    if (remaining.length > 0) say(`still mounted: ${remaining.join(", ")}`);
    if (values["keep-root"]) say(`kept the root: ${root}`);
    else removeWorkDir(work);
    for (const [signal, listener] of listeners) Deno.removeSignalListener(signal, listener);
  }

  if (interrupted !== null) return 128 + SIGNAL_NUMBERS[interrupted]!;
  if (failure !== null) say(`FAILED: ${failure}`);
  say(`${release} (${suite}), commit ${checkout.commit.slice(0, 12)}:`);
  for (const result of results) {
    say(
      `  ${result.code === 0 ? "ok    " : "FAILED"}  ${
        result.seconds.toFixed(1).padStart(7)
      } s  ${result.command}`,
    );
  }
  const passed = failure === null && results.length === commands.length && results.every((r) => r.code === 0);
  return passed ? 0 : 1;
}

if (import.meta.main) Deno.exit(await main());

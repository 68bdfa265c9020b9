// Drives `omniprof top -p PID` in a real terminal (a detached tmux session on a private tmux server): the
// chain workload's hottest function must show within 3 s of the start of sampling, and quitting (q,
// Ctrl-C, SIGTERM) must exit 0 and give the terminal back: main screen, visible cursor, the tty modes it
// had. Needs root, BTF and tmux (support/bootstrap.sh installs it); says so when it skips.
import assert from "node:assert/strict";
import { buildWorkload, REPO_ROOT, runCli, tempDir, tracingUnavailable } from "./helpers.ts";

const FP_FLAGS = ["-O2", "-fno-omit-frame-pointer"];

function tmuxUnavailable(): string | null {
  try {
    const result = new Deno.Command("tmux", { args: ["-V"], stdout: "null", stderr: "null" }).outputSync();
    return result.success ? null : "tmux -V failed";
  } catch {
    return "tmux is not installed (support/bootstrap.sh installs it)";
  }
}

const skip = tracingUnavailable() ?? tmuxUnavailable();

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A private tmux server with one session running `command`, 120x8. */
class TmuxSession {
  readonly socket = `omniprof-test-${Deno.pid}-${Math.random().toString(36).slice(2, 8)}`;
  readonly name = "top";

  constructor(command: string) {
    // Few rows: the frame fills the pane, so a frame that scrolled the screen would lose its first line.
    this.#tmux("new-session", "-d", "-s", this.name, "-x", "120", "-y", "8", command);
  }

  #tmux(...args: string[]): string {
    const result = new Deno.Command("tmux", {
      args: ["-L", this.socket, ...args],
      stdout: "piped",
      stderr: "piped",
    })
      .outputSync();
    if (!result.success) throw new Error(`tmux ${args[0]}: ${new TextDecoder().decode(result.stderr)}`);
    return new TextDecoder().decode(result.stdout);
  }

  /** The visible text of the pane. */
  capture(): string {
    return this.#tmux("capture-pane", "-p", "-t", this.name);
  }

  /** A tmux format variable of the pane (`alternate_on`, `cursor_flag`, `pane_pid`). */
  show(variable: string): string {
    return this.#tmux("display-message", "-p", "-t", this.name, `#{${variable}}`).trim();
  }

  sendKeys(...keys: string[]): void {
    this.#tmux("send-keys", "-t", this.name, ...keys);
  }

  kill(): void {
    try {
      this.#tmux("kill-server");
    } catch {
      // already gone
    }
  }
}

/** The children of `pid` (threads' children included). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const tid of Deno.readDirSync(`/proc/${pid}/task`)) {
    const text = Deno.readTextFileSync(`/proc/${pid}/task/${tid.name}/children`).trim();
    if (text !== "") out.push(...text.split(" ").map(Number));
  }
  return out;
}

const HOT_ROW = /^\s*\d+\.\d+%\s+\d+\.\d+%\s+c(\s|$)/m;

for (const quit of ["q", "Ctrl-C", "SIGTERM"] as const) {
  const name = `top -p PID in tmux shows the workload's hottest function within 3 s and quits on ${quit}`;
  if (skip) console.log(`SKIP ${name}: ${skip}`);
  Deno.test({
    name,
    ignore: skip !== null,
    sanitizeResources: false,
    sanitizeOps: false,
    fn: async () => {
      const chain = await buildWorkload("chain", FP_FLAGS, "-fp");
      const workload = new Deno.Command(chain, { args: ["60"], stdout: "null" }).spawn();
      const dir = tempDir();
      // The shell records the tty modes before and after, and the exit code; then keeps the pane open.
      Deno.writeTextFileSync(
        `${dir}/run.sh`,
        [
          `stty -g > ${dir}/stty.before`,
          `"${Deno.execPath()}" run -A "${REPO_ROOT}main.ts" top -p ${workload.pid} -i 0.5`,
          `echo $? > ${dir}/code`,
          `stty -g > ${dir}/stty.after`,
          "exec sleep 600",
          "",
        ].join("\n"),
      );
      const launched = performance.now();
      const tmux = new TmuxSession(`sh ${dir}/run.sh`);
      try {
        let sampling: number | null = null;
        let hot: number | null = null;
        let screen = "";
        while (hot === null && performance.now() - launched < 30_000) {
          screen = tmux.capture();
          // The header leaves "starting" once the recorder runs: sampling has begun.
          if (sampling === null && /omniprof top:/.test(screen) && !/- starting/.test(screen)) {
            sampling = performance.now();
          }
          if (HOT_ROW.test(screen)) hot = performance.now();
          else await sleep(25);
        }
        assert.ok(hot !== null && sampling !== null, `c never showed:\n${screen}`);
        const fromSampling = hot - sampling;
        console.log(
          `c shown ${(fromSampling / 1000).toFixed(2)} s after sampling started, ` +
            `${((hot - launched) / 1000).toFixed(2)} s after launch`,
        );
        assert.ok(fromSampling <= 3000, `c showed ${fromSampling.toFixed(0)} ms after sampling started`);
        assert.match(screen.split("\n")[0]!, new RegExp(`^omniprof top: PID ${workload.pid} at 99 Hz`));
        assert.match(screen, /self%\s+total%\s+function\s+command/);
        assert.match(screen.split("\n").find((line) => HOT_ROW.test(line))!, /chain-fp\s*$/);
        assert.equal(tmux.show("alternate_on"), "1", "top runs on the alternate screen");
        assert.equal(tmux.show("cursor_flag"), "0", "with the cursor hidden");

        if (quit === "q") tmux.sendKeys("q");
        else if (quit === "Ctrl-C") tmux.sendKeys("C-c");
        else {
          const shell = Number(tmux.show("pane_pid"));
          const [deno] = childrenOf(shell);
          assert.ok(deno, "the shell runs deno");
          Deno.kill(deno, "SIGTERM");
        }
        const quitAt = performance.now();
        let code: string | null = null;
        while (code === null && performance.now() - quitAt < 10_000) {
          try {
            code = Deno.readTextFileSync(`${dir}/code`).trim();
            Deno.readTextFileSync(`${dir}/stty.after`);
          } catch {
            code = null;
            await sleep(25);
          }
        }
        assert.equal(code, "0", `exit code after ${quit}:\n${tmux.capture()}`);
        console.log(`exited ${((performance.now() - quitAt) / 1000).toFixed(2)} s after ${quit}`);
        assert.equal(tmux.show("alternate_on"), "0", "the alternate screen was left");
        assert.equal(tmux.show("cursor_flag"), "1", "the cursor is visible again");
        assert.equal(
          Deno.readTextFileSync(`${dir}/stty.after`),
          Deno.readTextFileSync(`${dir}/stty.before`),
          "the tty modes are as before (raw mode undone)",
        );
        assert.doesNotMatch(tmux.capture(), /self%\s+total%/, "the table is gone with the alternate screen");
      } finally {
        tmux.kill();
        workload.kill();
        await workload.status;
        Deno.removeSync(dir, { recursive: true });
      }
    },
  });
}

const snapshotName = "top without a terminal prints plain snapshots of the workload's hottest functions";
const snapshotSkip = tracingUnavailable();
if (snapshotSkip) console.log(`SKIP ${snapshotName}: ${snapshotSkip}`);
Deno.test({
  name: snapshotName,
  ignore: snapshotSkip !== null,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const chain = await buildWorkload("chain", FP_FLAGS, "-fp");
    const workload = new Deno.Command(chain, { args: ["30"], stdout: "null" }).spawn();
    try {
      const result = await runCli(["top", "-p", String(workload.pid), "-i", "0.5", "-c", "3", "-n", "5"]);
      assert.equal(result.code, 0, result.stderr);
      assert.ok(!result.stdout.includes("\x1b"), "no escape sequences in snapshots");
      const snapshots = result.stdout.trim().split(/\n+(?=omniprof top:)/);
      assert.equal(snapshots.length, 3, result.stdout);
      for (const snapshot of snapshots) {
        const lines = snapshot.split("\n");
        assert.match(lines[0]!, new RegExp(`^omniprof top: PID ${workload.pid} at 99 Hz, \\d+\\.\\d s`));
        assert.ok(lines.length <= 4 + 5);
      }
      assert.match(snapshots[2]!.split("\n")[4]!, /^\s*\d+\.\d+%\s+\d+\.\d+%\s+c\s+chain-fp$/, snapshots[2]);
    } finally {
      workload.kill();
      await workload.status;
    }
  },
});

const refusalName = "top refuses a process that does not exist, before touching the terminal";
if (snapshotSkip) console.log(`SKIP ${refusalName}: ${snapshotSkip}`);
Deno.test({ name: refusalName, ignore: snapshotSkip !== null }, async () => {
  const result = await runCli(["top", "-p", "1073741823"]);
  assert.equal(result.code, 1);
  assert.match(result.stderr, /No process with PID 1073741823/);
  const usage = await runCli(["top", "-i", "0"]);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /-i 0: the interval must be at least 0.1 s/);
});

// End-to-end tests of what `omniprof record` does with the processes it is given, as a user runs it: the
// command of `-- COMMAND` (stopped with everything it started, whatever stops the recording; its exit
// status passed on), stop signals in every phase, and a `-p` PID that another process takes over. They
// need root and BTF, and say so when they skip.
import assert from "node:assert/strict";
import { DENO_RUN_ENV, omniprofArgs, parseFolded, REPO_ROOT, tempDir, tracingTest } from "./helpers.ts";
import { STOP_GRACE_MS } from "../lib/process/command_group.ts";
import { decodePprof } from "../lib/output/pprof_reader.ts";
import { delay } from "../lib/sys/timer.ts";
import {
  cpuSeconds,
  killLeftovers,
  pidChoice,
  type SeenProcess,
  spawnWithPid,
  stillRunning,
  waitForPidFiles,
} from "../lib/testing/processes.ts";

const STUBBORN = `${REPO_ROOT}tests/workloads/stubborn_command.sh`;

/** `omniprof record ARGS` running, its standard error collected as it comes. */
class RecordProcess {
  readonly child: Deno.ChildProcess;
  stderr = "";
  #reading: Promise<void>;

  constructor(args: string[], env: Record<string, string> = {}) {
    this.child = new Deno.Command(Deno.execPath(), {
      args: omniprofArgs(["record", ...args]),
      cwd: REPO_ROOT,
      env: { ...DENO_RUN_ENV, ...env },
      stdout: "null",
      stderr: "piped",
    }).spawn();
    const stderr = this.child.stderr.pipeThrough(new TextDecoderStream());
    this.#reading = (async () => {
      for await (const text of stderr) this.stderr += text;
    })();
  }

  /** Waits until standard error matches `pattern`. */
  async waitFor(pattern: RegExp, timeoutMs = 30_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (!pattern.test(this.stderr)) {
      assert.ok(performance.now() < deadline, `no ${pattern} within ${timeoutMs} ms:\n${this.stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  /**
   * Its exit code, once it has exited. The rest of standard error is waited for a moment only: a process
   * it left behind would hold the pipe open for ever.
   */
  async exit(): Promise<number> {
    const status = await this.child.status;
    await Promise.race([this.#reading, delay(2000)]);
    return status.code;
  }
}

/** The names of the files in `dir`. */
function filesIn(dir: string): string[] {
  return [...Deno.readDirSync(dir)].map((entry) => entry.name).sort();
}

Deno.test(
  tracingTest(
    "record -- COMMAND on SIGTERM: the command, its child and its daemon are gone in seconds, the profile written",
    async () => {
      const dir = tempDir();
      const work = `${dir}/work`;
      const out = `${dir}/out`;
      Deno.mkdirSync(work);
      Deno.mkdirSync(out);
      let processes: SeenProcess[] = [];
      try {
        const record = new RecordProcess(["-o", `${out}/profile.folded`, "--", "sh", STUBBORN, work]);
        processes = await waitForPidFiles(work, ["command", "child", "daemon"]);
        // Let it be sampled a while: the command and its child each spin a CPU.
        await new Promise((resolve) => setTimeout(resolve, 1500));
        const spun = (cpuSeconds(processes[0]!) ?? 0) + (cpuSeconds(processes[1]!) ?? 0);
        const signalled = performance.now();
        record.child.kill("SIGTERM");
        const code = await record.exit();
        const seconds = (performance.now() - signalled) / 1000;
        console.log(
          `omniprof exited ${seconds.toFixed(2)} s after SIGTERM (grace ${STOP_GRACE_MS / 1000} s)`,
        );
        assert.deepEqual(processes.filter(stillRunning), [], "nothing of the command outlives omniprof");
        // The grace period, a kill round and writing the profile: "a few seconds".
        assert.ok(seconds < STOP_GRACE_MS / 1000 + 3, `${seconds} s`);
        // The command ignored the SIGTERM passed on to it, so SIGKILL ended it: 128 + 9, as a shell says.
        assert.equal(code, 137, record.stderr);
        assert.match(record.stderr, /the command was ended by SIGKILL/);
        const stacks = parseFolded(Deno.readTextFileSync(`${out}/profile.folded`));
        const samples = stacks.filter((stack) => stack.comm === "sh").reduce(
          (sum, stack) => sum + stack.count,
          0,
        );
        // Both started once sampling was on: their CPU time until SIGTERM was all sampled at 99 Hz.
        const expected = spun * 99;
        console.log(
          `${samples} samples of the spinning shells, for ${spun.toFixed(2)} s of CPU (${expected} expected)`,
        );
        assert.ok(samples >= expected * 0.8, `${samples} samples for ${spun} CPU seconds`);
        assert.deepEqual(filesIn(out), ["profile.folded"], "no temporary file left");
      } finally {
        killLeftovers(processes);
        Deno.removeSync(dir, { recursive: true });
      }
    },
  ),
);

/** The processes whose command line ends with `word` (the guard names itself in its `$0`). */
function processesNamed(word: string): number[] {
  const found: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^[0-9]+$/.test(entry.name)) continue;
    try {
      const argv = Deno.readTextFileSync(`/proc/${entry.name}/cmdline`).split("\0").filter(Boolean);
      if (argv.at(-1) === word) found.push(Number(entry.name));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

Deno.test(
  tracingTest(
    "record -- COMMAND killed with SIGKILL: the command's session is gone within a second, the guard too",
    async () => {
      const dir = tempDir();
      let processes: SeenProcess[] = [];
      try {
        const record = new RecordProcess(["-o", `${dir}/profile.pb.gz`, "--", "sh", STUBBORN, dir]);
        processes = await waitForPidFiles(dir, ["command", "child", "daemon"]);
        const [command, child, daemon] = processes;
        assert.equal(processesNamed("omniprof-guard").length, 1, "one guard while the command runs");
        const killed = performance.now();
        record.child.kill("SIGKILL");
        await record.child.status;
        // None of omniprof's code runs after SIGKILL: only the guard can end them.
        const deadline = killed + 1000;
        while ((stillRunning(command!) || stillRunning(child!)) && performance.now() < deadline) {
          await delay(10);
        }
        const seconds = (performance.now() - killed) / 1000;
        console.log(`the command and its child ended ${seconds.toFixed(2)} s after omniprof's SIGKILL`);
        assert.ok(!stillRunning(command!), "the command outlived omniprof");
        assert.ok(!stillRunning(child!), "the command's child outlived omniprof");
        // The daemon left the session: out of the guard's reach (its module says so); not asserted.
        console.log(`the daemon that left the session: ${stillRunning(daemon!) ? "still runs" : "gone"}`);
        await delay(200);
        assert.deepEqual(processesNamed("omniprof-guard"), [], "the guard exits once it has done its work");
        await record.exit();
      } finally {
        killLeftovers(processes);
        Deno.removeSync(dir, { recursive: true });
      }
    },
  ),
);

Deno.test(
  tracingTest("record -d 2 -- COMMAND that runs forever stops it at the end, and exits 0", async () => {
    const dir = tempDir();
    const work = `${dir}/work`;
    Deno.mkdirSync(work);
    let processes: SeenProcess[] = [];
    try {
      const record = new RecordProcess([
        "-d",
        "2",
        "-o",
        `${dir}/profile.pb.gz`,
        "--",
        "sh",
        STUBBORN,
        work,
      ]);
      const started = performance.now();
      const exited = record.exit();
      processes = await waitForPidFiles(work, ["command", "child", "daemon"]);
      const code = await exited;
      const seconds = (performance.now() - started) / 1000;
      console.log(`record -d 2 ended ${seconds.toFixed(1)} s after it was started`);
      assert.equal(code, 0, record.stderr);
      assert.deepEqual(processes.filter(stillRunning), [], "the command was stopped at -d's end");
      await delay(200);
      assert.deepEqual(processesNamed("omniprof-guard"), [], "the guard was disarmed and exited");
      const profile = decodePprof(Deno.readFileSync(`${dir}/profile.pb.gz`));
      assert.ok(profile.samples.length > 0, "the profile");
      // Sampling ends at -d's end: the grace the stubborn command is then given was not sampled.
      const durationMs = profile.durationNs / 1e6;
      assert.ok(durationMs >= 2000 && durationMs < 2000 + STOP_GRACE_MS, `duration ${durationMs} ms`);
    } finally {
      killLeftovers(processes);
      Deno.removeSync(dir, { recursive: true });
    }
  }),
);

Deno.test(tracingTest("record -- COMMAND that fails with 3 writes the profile, then exits 3", async () => {
  const dir = tempDir();
  try {
    const record = new RecordProcess([
      "-o",
      `${dir}/profile.folded`,
      "--",
      "sh",
      "-c",
      "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; exit 3",
    ]);
    assert.equal(await record.exit(), 3, record.stderr);
    assert.match(record.stderr, /wrote .*profile\.folded[\s\S]*the command exited with code 3/);
    const stacks = parseFolded(Deno.readTextFileSync(`${dir}/profile.folded`));
    assert.ok(stacks.some((stack) => stack.comm === "sh"), "the command's samples");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}));

Deno.test(
  tracingTest("Ctrl-C before sampling starts: nothing started, nothing written, exit 130", async () => {
    // The "recording" note comes just before the BPF programs load (a few hundred ms), and a Ctrl-C sent
    // then mostly lands in it. One that comes after (the last tens of ms before the command starts) stops
    // the recording as any Ctrl-C does: that attempt must end cleanly too, and another is made.
    for (let attempt = 1;; attempt++) {
      const dir = tempDir();
      const out = `${dir}/out`;
      Deno.mkdirSync(out);
      try {
        const record = new RecordProcess([
          "-o",
          `${out}/profile.pb.gz`,
          "--",
          "sh",
          "-c",
          `touch ${dir}/started`,
        ]);
        await record.waitFor(/recording /);
        record.child.kill("SIGINT");
        const code = await record.exit();
        if (/wrote /.test(record.stderr)) {
          assert.ok(code === 0 || code === 130, record.stderr);
          assert.deepEqual(filesIn(out), ["profile.pb.gz"], "the profile, and no temporary file");
          assert.ok(attempt < 8, "the Ctrl-C never came before sampling started");
          console.log(`attempt ${attempt}: the Ctrl-C came once sampling had started; again`);
          continue;
        }
        assert.equal(code, 130, record.stderr);
        assert.match(record.stderr, /Interrupted before sampling started: nothing was recorded/);
        assert.deepEqual(filesIn(out), [], "no profile, no temporary file");
        assert.deepEqual(filesIn(dir), ["out"], "the command never started");
        return;
      } finally {
        Deno.removeSync(dir, { recursive: true });
      }
    }
  }),
);

Deno.test(
  tracingTest("a Ctrl-C while symbolizing writes the profile at once, the rest as addresses", async () => {
    // Busy processes in large programs, so that the whole-system profile takes a while to name.
    const until = "const end = Date.now() + 4000; let x = 0; while (Date.now() < end)";
    const bystanders = [
      `${until} x += Math.sqrt(x + 1);`,
      `${until} x += JSON.stringify({ x, text: String(x).repeat(20) }).replace(/[0-9]+/g, "n").length;`,
    ];
    for (let attempt = 1;; attempt++) {
      const dir = tempDir();
      const busy = bystanders.map((code) =>
        new Deno.Command(Deno.execPath(), { args: ["eval", code], env: DENO_RUN_ENV }).spawn()
      );
      try {
        // 499 Hz: more distinct stacks, so that symbolizing has work left when the Ctrl-C lands.
        const record = new RecordProcess(["-F", "499", "-d", "2", "-o", `${dir}/profile.folded`], {
          OMNIPROF_LOG: "debug",
        });
        await record.waitFor(/Symbolizing \d+ samples/);
        // On a quiet machine symbolizing lasts tens of milliseconds, less than it takes this test to see the
        // line and answer. Holding omniprof where it is puts the Ctrl-C inside that window, as a user's
        // Ctrl-C lands inside a long one; the time held also makes it look at its signals at once.
        record.child.kill("SIGSTOP");
        await delay(300);
        const alreadyDone = /Symbolized \d+ locations/.test(record.stderr);
        record.child.kill("SIGINT");
        record.child.kill("SIGCONT");
        const resumed = performance.now();
        const code = await record.exit();
        // Held after its last look at the signals (its last stack, or the end of its loop): the Ctrl-C came
        // too late to cut anything, which says nothing of what this test checks.
        const tooLate = /Symbolized \d+ locations in \d+ ms\n/.test(record.stderr);
        if (alreadyDone || tooLate) {
          assert.deepEqual(filesIn(dir).filter((name) => name !== "profile.folded"), [], "no temporary file");
          assert.ok(
            attempt < 5,
            `symbolizing had always ended before the Ctrl-C:\n${record.stderr.slice(-2000)}`,
          );
          console.log(`attempt ${attempt}: the Ctrl-C came once symbolizing had no more to cut; again`);
          continue;
        }
        console.log(
          `${/Symbolized \d+ locations in \d+ ms.*/.exec(record.stderr)?.[0]}; exited ` +
            `${(performance.now() - resumed).toFixed(0)} ms after the Ctrl-C`,
        );
        assert.equal(code, 0, record.stderr.slice(-2000));
        assert.match(
          record.stderr,
          /Symbolized \d+ locations in \d+ ms \(interrupted: the rest are addresses\)/,
        );
        assert.match(record.stderr, /symbolizing was interrupted/);
        assert.ok(parseFolded(Deno.readTextFileSync(`${dir}/profile.folded`)).length > 0, "the profile");
        assert.deepEqual(filesIn(dir), ["profile.folded"], "no temporary file left");
        return;
      } finally {
        for (const child of busy) {
          try {
            child.kill("SIGKILL");
          } catch {
            // done already
          }
          await child.status;
        }
        Deno.removeSync(dir, { recursive: true });
      }
    }
  }),
);

Deno.test(
  tracingTest(
    "record -p PID stops when the process exits, even if another process takes its PID",
    async () => {
      const dir = tempDir();
      const first = new Deno.Command("sleep", { args: ["1000"] }).spawn();
      let second: Deno.ChildProcess | null = null;
      try {
        // -d 60 only bounds the test: the record must end by itself once its process has gone.
        const record = new RecordProcess([
          "-p",
          String(first.pid),
          "-d",
          "60",
          "-o",
          `${dir}/profile.folded`,
        ]);
        await record.waitFor(/recording PID/);
        await new Promise((resolve) => setTimeout(resolve, 1500));
        first.kill("SIGKILL");
        await first.status;
        const replaced = performance.now();
        second = await spawnWithPid(first.pid, "sleep", ["1000"]);
        assert.ok(second !== null, `PID ${first.pid} kept being taken by other processes`);
        const code = await record.exit();
        const seconds = (performance.now() - replaced) / 1000;
        console.log(`record ended ${seconds.toFixed(1)} s after PID ${first.pid} changed hands`);
        assert.equal(code, 0, record.stderr);
        assert.match(record.stderr, new RegExp(`PID ${first.pid} exited: stopped`));
        // It checks every 500 ms; symbolizing and writing an idle process's profile take a moment more.
        assert.ok(seconds < 10, `${seconds} s: the new process on the PID kept the recording going`);
      } finally {
        try {
          first.kill("SIGKILL");
        } catch {
          // gone already
        }
        second?.kill("SIGKILL");
        await second?.status;
        Deno.removeSync(dir, { recursive: true });
      }
    },
    pidChoice(),
  ),
);

Deno.test(
  tracingTest("record whose standard error has gone away still records and writes the profile", async () => {
    // What a closed terminal (SIGHUP, then EIO on every write) or a closed pipe does to the messages.
    const dir = tempDir();
    try {
      const child = new Deno.Command(Deno.execPath(), {
        args: omniprofArgs([
          "record",
          "-o",
          `${dir}/profile.folded`,
          "--",
          "sh",
          "-c",
          "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done",
        ]),
        cwd: REPO_ROOT,
        env: DENO_RUN_ENV,
        stdout: "null",
        stderr: "piped",
      }).spawn();
      await child.stderr.cancel();
      const status = await child.status;
      assert.equal(status.code, 0);
      assert.ok(
        parseFolded(Deno.readTextFileSync(`${dir}/profile.folded`)).some((stack) => stack.comm === "sh"),
      );
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  }),
);

// End-to-end tests of `omniprof record` on the real kernel path: the CLI loads the BPF programs, samples
// real workloads and writes profiles, which are checked here. They need root and BTF, and say so when
// they skip.
import assert from "node:assert/strict";
import {
  buildWorkload,
  countWhere,
  DENO_RUN_ENV,
  hasChain,
  omniprofArgs,
  parseFolded,
  pprofStacksOf,
  REPO_ROOT,
  runCli,
  tempDir,
  tracingTest,
  V8_FLAGS,
} from "./helpers.ts";
import { cpuBetween, recordWatchingCpu } from "./recording_window.ts";
import { PROGRAM_DIR } from "../support/program_bundle.ts";
import { parseReadelfFrames, runReadelf } from "../lib/unwind/testdata/readelf_frames.ts";
import { assertSampleCount, reportedCpuSeconds, reportedLost, StealMeter } from "./sample_bounds.ts";

const FP_FLAGS = ["-O2", "-fno-omit-frame-pointer"];

/** Ends a workload that may already have finished. */
function stop(child: Deno.ChildProcess): void {
  try {
    child.kill();
  } catch {
    // already exited
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The values of every `KEY=VALUE` line the workloads printed (one per process). */
function reportedValues(stdout: string, key: string): number[] {
  return [...stdout.matchAll(new RegExp(`^${key}=([\\d.]+)$`, "gm"))].map((m) => Number(m[1]));
}

Deno.test(
  tracingTest("record -p PID shows main;a;b;c in at least 95% of the workload's samples", async () => {
    const chain = await buildWorkload("chain", FP_FLAGS, "-fp");
    const dir = tempDir();
    // The recording lasts until the workload has had 4 s of CPU, and the workload outlives it.
    const workload = new Deno.Command(chain, { args: ["30"], stdout: "null" }).spawn();
    try {
      await sleep(300);
      const { result, start, end, steal } = await recordWatchingCpu(
        ["record", "-p", String(workload.pid), "-o", `${dir}/out.folded`],
        [{ pid: workload.pid }],
        { interruptAfterCpuSeconds: 4 },
      );
      assert.equal(result.code, 0, result.stderr);
      const stacks = parseFolded(Deno.readTextFileSync(`${dir}/out.folded`));
      assert.ok(stacks.every((stack) => stack.comm === "chain-fp"), "only the -p process is sampled");
      const total = countWhere(stacks, () => true);
      const complete = countWhere(stacks, (stack) => hasChain(stack.frames, ["main", "a", "b", "c"]));
      console.log(`record -p: ${complete}/${total} samples with main;a;b;c`);
      assert.ok(end[0], "the workload outlived the recording");
      assertSampleCount(total, cpuBetween(start[0]!, end[0]), 99, steal, "record -p");
      assert.ok(complete / total >= 0.95, `${complete}/${total} complete`);
    } finally {
      stop(workload);
      await workload.status;
      Deno.removeSync(dir, { recursive: true });
    }
  }),
);

Deno.test(
  tracingTest("whole-system record shows main;a;b;c in at least 95% of the workload's samples", async () => {
    const chain = await buildWorkload("chain", FP_FLAGS, "-fp");
    const dir = tempDir();
    // The recording lasts until the workload has had 3 s of CPU, and the workload outlives it.
    const workload = new Deno.Command(chain, { args: ["30"], stdout: "null" }).spawn();
    // A process the record is not told about: on an idle machine the workload may be the only other
    // thing running, and "whole system" must still be seen to reach beyond it.
    const bystander = new Deno.Command("sh", { args: ["-c", "while :; do :; done"] }).spawn();
    try {
      await sleep(300);
      const output = `${dir}/out.pb.gz`;
      const { result, start, end, steal } = await recordWatchingCpu(
        ["record", "-o", output],
        [{ pid: workload.pid }, { pid: bystander.pid }],
        { interruptAfterCpuSeconds: 3 },
      );
      assert.equal(result.code, 0, result.stderr);
      const ours = pprofStacksOf(output, workload.pid);
      const total = countWhere(ours, () => true);
      const complete = countWhere(ours, (stack) => hasChain(stack.frames, ["main", "a", "b", "c"]));
      console.log(`whole system: ${complete}/${total} samples of chain-fp with main;a;b;c`);
      assert.ok(end[0] && end[1], "the workload and the shell outlived the recording");
      // A recorder starved on a busy machine may overflow its ring buffer: then it must say so.
      const lost = reportedLost(result.stderr);
      const cpu = cpuBetween(start[0]!, end[0]);
      assertSampleCount(total, cpu, 99, steal, "whole system, the workload", lost);
      assert.ok(complete / total >= 0.95, `${complete}/${total} complete`);
      const bystanderSamples = countWhere(pprofStacksOf(output, bystander.pid), () => true);
      const bystanderCpu = cpuBetween(start[1]!, end[1]);
      assertSampleCount(bystanderSamples, bystanderCpu, 99, steal, "the busy shell beside it", lost);
    } finally {
      stop(workload);
      stop(bystander);
      await workload.status;
      await bystander.status;
      Deno.removeSync(dir, { recursive: true });
    }
  }),
);

Deno.test(tracingTest("a syscall-heavy workload shows kernel frames beneath its user frames", async () => {
  const syscalls = await buildWorkload("syscalls", FP_FLAGS);
  const dir = tempDir();
  try {
    const steal = new StealMeter();
    const result = await runCli(["record", "-o", `${dir}/out.folded`, "--", syscalls, "3"]);
    assert.equal(result.code, 0, result.stderr);
    const stacks = parseFolded(Deno.readTextFileSync(`${dir}/out.folded`)).filter((s) =>
      s.comm === "syscalls"
    );
    const total = countWhere(stacks, () => true);
    assertSampleCount(total, reportedCpuSeconds(result.stdout), 99, steal.fraction(), "syscalls");
    const isKernel = (frame: string) => frame.endsWith("_[k]");
    // Root first: user frames, then (once the kernel is entered) only kernel frames.
    const wellOrdered = countWhere(stacks, (stack) => {
      const firstKernel = stack.frames.findIndex(isKernel);
      return firstKernel < 0 || stack.frames.slice(firstKernel).every(isKernel);
    });
    // main, copy_loop, libc's read/write wrapper, then the kernel path beneath it. Since glibc 2.41 the
    // wrapper reaches the system call through cancellation helpers that libc does not export
    // (__syscall_cancel): they are the user leaf, by address.
    const inKernelUnderMain = countWhere(stacks, (stack) => {
      const firstKernel = stack.frames.findIndex(isKernel);
      const user = stack.frames.slice(0, firstKernel);
      const wrapper = user.findLastIndex((frame) => /^(__libc_)?(read|write)$/.test(frame));
      return firstKernel > 0 && hasChain(user, ["main", "copy_loop"]) &&
        wrapper > user.indexOf("copy_loop") &&
        user.slice(wrapper + 1).every((frame) => /^\[libc\.so\.6\+0x[0-9a-f]+\]$/.test(frame)) &&
        stack.frames.some((frame) => /^(ksys_read|ksys_write|vfs_read|vfs_write)_\[k\]$/.test(frame));
    });
    console.log(`syscalls: ${inKernelUnderMain}/${total} samples in the kernel's read/write under main`);
    assert.equal(wellOrdered, total, "kernel frames always come after (beneath) user frames");
    assert.ok(inKernelUnderMain / total >= 0.5, `${inKernelUnderMain}/${total}`);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}));

Deno.test(
  tracingTest(
    "a process burning D s of CPU at F Hz gets D*F samples, within four standard deviations",
    async () => {
      const chain = await buildWorkload("chain", FP_FLAGS, "-fp");
      const dir = tempDir();
      // Enough samples that the bounds of sample_bounds.ts are narrow: a recorder that loses a tenth fails.
      const seconds = 2;
      const hz = 999;
      try {
        const steal = new StealMeter();
        const result = await runCli([
          "record",
          "-F",
          String(hz),
          "-o",
          `${dir}/out.folded`,
          "--",
          chain,
          `${seconds}`,
        ]);
        assert.equal(result.code, 0, result.stderr);
        // The ring buffer keeps up at this rate: a loss would make the count wrong for another reason.
        assert.match(result.stderr, /\b0 lost\b/);
        const stacks = parseFolded(Deno.readTextFileSync(`${dir}/out.folded`));
        const samples = countWhere(stacks, (stack) => stack.comm === "chain-fp");
        // D is the CPU time the workload itself reports: it burns `seconds` of CPU however busy the machine is.
        const cpuSeconds = reportedCpuSeconds(result.stdout);
        assert.ok(cpuSeconds >= seconds, `the workload ran (${cpuSeconds} s of CPU)`);
        assertSampleCount(samples, cpuSeconds, hz, steal.fraction(), "burn");
      } finally {
        Deno.removeSync(dir, { recursive: true });
      }
    },
  ),
);

Deno.test(
  tracingTest("200 short-lived processes are symbolized in 98% of their samples in main", async () => {
    const shortLived = await buildWorkload("short_lived", FP_FLAGS);
    const dir = tempDir();
    try {
      const script = `for i in $(seq 200); do ${shortLived} 20; done`;
      const hz = 499;
      const steal = new StealMeter();
      const result = await runCli([
        "record",
        "-F",
        String(hz),
        "-o",
        `${dir}/out.folded`,
        "--",
        "sh",
        "-c",
        script,
      ]);
      assert.equal(result.code, 0, result.stderr);
      const stacks = parseFolded(Deno.readTextFileSync(`${dir}/out.folded`)).filter((s) =>
        s.comm === "short_lived"
      );
      const total = countWhere(stacks, () => true);
      // Each process prints the CPU time it used, and how much of it ran in main: their samples must add
      // up to all of it, and those in main name it. The rest (the exec call, the dynamic loader, exit) is
      // a few percent of a 20 ms process, and no sample of it can have main on its stack.
      const reports = reportedValues(result.stdout, "cpu_seconds");
      const inMain = reportedValues(result.stdout, "main_cpu_seconds");
      assert.equal(reports.length, 200, "every process ran");
      assert.equal(inMain.length, 200, "every process said how long it ran in main");
      const cpu = reports.reduce((sum, seconds) => sum + seconds, 0);
      const mainShare = inMain.reduce((sum, seconds) => sum + seconds, 0) / cpu;
      const named = countWhere(
        stacks,
        (stack) => stack.frames.some((frame) => frame === "short_lived_work" || frame === "main"),
      );
      console.log(
        `short-lived: ${named}/${total} samples name a function of the executable; ` +
          `${(100 * mainShare).toFixed(1)}% of the processes' CPU time was in main`,
      );
      assertSampleCount(total, cpu, hz, steal.fraction(), "short-lived");
      assert.ok(named / total >= 0.98 * mainShare, `${named}/${total}, ${mainShare.toFixed(3)} in main`);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  }),
);

Deno.test(
  tracingTest("short-lived processes of a stripped binary have their leaves named from it", async () => {
    const shortLived = await buildWorkload("short_lived", FP_FLAGS);
    const dir = tempDir();
    try {
      // Without symbols, its functions are named by their start (from its unwind entries); nm of the
      // unstripped binary says where each starts.
      const stripped = `${dir}/stripped_sl`;
      const strip = await new Deno.Command("strip", { args: ["--strip-all", "-o", stripped, shortLived] })
        .output();
      assert.ok(strip.success, new TextDecoder().decode(strip.stderr));
      const nm = await new Deno.Command("nm", { args: [shortLived] }).output();
      const starts = new Map<string, string>();
      for (const m of new TextDecoder().decode(nm.stdout).matchAll(/^0*([0-9a-f]+) [tT] (\w+)$/gm)) {
        starts.set(m[2]!, m[1]!);
      }
      assert.ok(starts.has("short_lived_work"), "nm names short_lived_work");
      // Code no FDE covers (crt's frame_dummy and friends) has no known start: its leaves keep their exact
      // address. The PLT has one FDE and no symbol: its stubs are named after its start. readelf says
      // what the FDEs cover.
      const fdes = parseReadelfFrames(runReadelf(stripped, "--debug-dump=frames"), stripped)
        .flatMap((section) => section.entries.filter((entry) => entry.kind === "FDE"));
      assert.ok(fdes.length > 0, "readelf lists the FDEs");
      const names = new Set(
        [...starts.values(), ...fdes.map((fde) => fde.start.toString(16))].map((start) =>
          `[stripped_sl+0x${start}]`
        ),
      );
      const outsideEveryFde = (leaf: string) => {
        const address = parseInt(/^\[stripped_sl\+0x([0-9a-f]+)\]$/.exec(leaf)?.[1] ?? "", 16);
        return Number.isFinite(address) && fdes.every((fde) => address < fde.start || address >= fde.end);
      };
      const work = `[stripped_sl+0x${starts.get("short_lived_work")}]`;
      // 1,000 processes of 2 ms of CPU each, started one after another by a shell: most have exited
      // before the host handles anything of them.
      const script = `for i in $(seq 1000); do ${stripped} 2; done`;
      const steal = new StealMeter();
      const output = `${dir}/out.folded`;
      const result = await runCli(["record", "-F", "499", "-o", output, "--", "sh", "-c", script]);
      assert.equal(result.code, 0, result.stderr);
      const stacks = parseFolded(Deno.readTextFileSync(output)).filter((s) => s.comm === "stripped_sl");
      const reports = reportedValues(result.stdout, "cpu_seconds");
      const inMain = reportedValues(result.stdout, "main_cpu_seconds");
      assert.equal(reports.length, 1000, "every process ran");
      assert.equal(inMain.length, 1000, "every process said how long it ran in main");
      const cpu = reports.reduce((sum, seconds) => sum + seconds, 0);
      const mainShare = inMain.reduce((sum, seconds) => sum + seconds, 0) / cpu;
      const total = countWhere(stacks, () => true);
      assertSampleCount(total, cpu, 499, steal.fraction(), "stripped short-lived");
      // Every user leaf in the binary is named after the start of the function it is in, where an FDE says.
      const leaves = stacks.map((stack) => stack.frames.findLast((frame) => !frame.endsWith("_[k]")) ?? "");
      const inBinary = leaves.filter((leaf) => leaf.startsWith("[stripped_sl"));
      const others = new Set(inBinary.filter((leaf) => !names.has(leaf) && !outsideEveryFde(leaf)));
      const unnamed = stacks.filter((_, i) => /^(\[unknown\]|0x)/.test(leaves[i]!) || leaves[i] === "");
      const named = total - countWhere(unnamed, () => true);
      const inWork = countWhere(stacks, (stack) => stack.frames.includes(work));
      // main runs the work function and nothing else: the samples in it are a binomial count of all of
      // them, with the share of their CPU time the processes spent in main (about half of a 2 ms process:
      // the rest is exec, the dynamic loader and exit). Four standard deviations below is not chance.
      const expected = mainShare * total;
      const floor = expected - 4 * Math.sqrt(total * mainShare * (1 - mainShare));
      console.log(
        `stripped short-lived: ${named}/${total} samples with a named leaf, ${inWork} in ${work} ` +
          `(${expected.toFixed(0)} expected from ${
            (100 * mainShare).toFixed(1)
          }% of their CPU time in main, ` +
          `at least ${floor.toFixed(0)}); other names of the binary's leaves: ${
            [...others].join(" ") || "none"
          }`,
      );
      assert.ok(inBinary.length > 0, "leaves in the binary");
      assert.deepEqual([...others], []);
      assert.ok(named / total >= 0.95, `${named}/${total}`);
      assert.ok(inWork >= floor, `${inWork}/${total} in ${work}, at least ${floor.toFixed(0)}`);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  }),
);

Deno.test(tracingTest("record stops on SIGINT and still writes the profile", async () => {
  const dir = tempDir();
  // Something to record, whose samples the profile must hold however quiet the machine is.
  const bystander = new Deno.Command("sh", { args: ["-c", "while :; do :; done"] }).spawn();
  try {
    // Ctrl-C once the recorder has sampled for 2 s (on a busy machine its start-up alone can take that).
    const { result, start, end, steal } = await recordWatchingCpu(
      ["record", "-o", `${dir}/out.pb.gz`],
      [{ pid: bystander.pid }],
      { interruptAfterMs: 2000 },
    );
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /wrote .*out\.pb\.gz/);
    const bytes = Deno.readFileSync(`${dir}/out.pb.gz`);
    assert.deepEqual([...bytes.subarray(0, 2)], [0x1f, 0x8b], "a gzip'd pprof file");
    assert.deepEqual(
      [...Deno.readDirSync(dir)].map((entry) => entry.name),
      ["out.pb.gz"],
      "no temporary left",
    );
    assert.ok(end[0], "the busy shell outlived the recording");
    const samples = countWhere(pprofStacksOf(`${dir}/out.pb.gz`, bystander.pid), () => true);
    const cpu = cpuBetween(start[0]!, end[0]);
    assertSampleCount(samples, cpu, 99, steal, "the busy shell, until SIGINT", reportedLost(result.stderr));
  } finally {
    stop(bystander);
    await bystander.status;
    Deno.removeSync(dir, { recursive: true });
  }
}));

Deno.test(tracingTest("record of a C++ command loads none of Deno's Node compatibility layer", async () => {
  // Loading that layer (a `node:` import, or a touch of globalThis.setTimeout, which Deno implements with
  // node:timers) costs every run 10-20 ms of CPU. V8's function log names every script the run compiled.
  const cpp = await buildWorkload("cpp_workload", ["-O2"]);
  const dir = tempDir();
  try {
    const log = `${dir}/v8.log`;
    const args = omniprofArgs(["record", "-o", `${dir}/out.folded`, "--", cpp, "1"], [
      "--log-function-events",
      `--logfile=${log}`,
      "--no-logfile-per-isolate",
    ]);
    assert.ok(
      args.includes(`--v8-flags=${V8_FLAGS},--log-function-events,--logfile=${log},--no-logfile-per-isolate`),
    );
    const output = await new Deno.Command(Deno.execPath(), { args, env: DENO_RUN_ENV, stderr: "piped" })
      .output();
    assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
    const stacks = parseFolded(Deno.readTextFileSync(`${dir}/out.folded`));
    assert.ok(
      stacks.some((stack) => stack.frames.some((frame) => frame.includes("::"))),
      "demangled C++ frames",
    );
    const scripts = Deno.readTextFileSync(log).split("\n").filter((line) =>
      line.startsWith("script-details,")
    );
    assert.ok(
      scripts.some((line) => line.includes(`${REPO_ROOT}${PROGRAM_DIR}`)),
      "the log names the scripts run (the bundle's chunks)",
    );
    const node = scripts.filter((line) => /,node:|ext:deno_node\/(?!02_register_cloneable)/.test(line));
    assert.deepEqual(node, []);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}));

Deno.test(
  tracingTest("a stripped binary's functions are each one frame, named after their start", async () => {
    const chain = await buildWorkload("chain", FP_FLAGS, "-fp");
    const dir = tempDir();
    try {
      // The same program without symbols: its functions can only be told apart by their unwind entries.
      const stripped = `${dir}/chain_stripped`;
      const strip = await new Deno.Command("strip", { args: ["--strip-all", "-o", stripped, chain] })
        .output();
      assert.ok(strip.success, new TextDecoder().decode(strip.stderr));
      const nm = new TextDecoder().decode((await new Deno.Command("nm", { args: [chain] }).output()).stdout);
      const starts = new Map<string, string>();
      for (const m of nm.matchAll(/^0*([0-9a-f]+) [tT] (main|a|b|c)$/gm)) starts.set(m[2]!, m[1]!);
      assert.equal(starts.size, 4, nm);
      const steal = new StealMeter();
      const result = await runCli(["record", "-o", `${dir}/out.folded`, "--", stripped, "2"]);
      assert.equal(result.code, 0, result.stderr);
      const stacks = parseFolded(Deno.readTextFileSync(`${dir}/out.folded`));
      const names = ["main", "a", "b", "c"].map((name) => `[chain_stripped+0x${starts.get(name)}]`);
      const total = countWhere(stacks, () => true);
      const complete = countWhere(stacks, (stack) => hasChain(stack.frames, names));
      console.log(`${complete}/${total} samples show ${names.join(";")}`);
      assertSampleCount(total, reportedCpuSeconds(result.stdout), 99, steal.fraction(), "stripped chain");
      assert.ok(complete / total >= 0.9, `${complete}/${total}`);
      // Every sample in c, wherever in c, is the one frame: no frame of the file is named otherwise.
      const leaves = new Set(
        stacks.map((stack) => stack.frames.at(-1)!).filter((f) => f.startsWith("[chain")),
      );
      assert.ok(leaves.size <= 4, [...leaves].join(" "));
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  }),
);

Deno.test(
  tracingTest(
    "record -o - and -o /dev/stdout write folded stacks to a pipe and leave /dev alone",
    async () => {
      const chain = await buildWorkload("chain", FP_FLAGS, "-fp");
      const before = Deno.lstatSync("/dev/stdout");
      for (const output of ["-", "/dev/stdout"]) {
        const args = [
          "record",
          "-o",
          output,
          ...(output === "-" ? [] : ["--format", "folded"]),
          "--",
          chain,
          "1",
        ];
        const steal = new StealMeter();
        const result = await runCli(args);
        assert.equal(result.code, 0, result.stderr);
        // Standard output holds the profile and, from the workload, the CPU time it used.
        const stacks = parseFolded(result.stdout).filter((stack) => stack.comm === "chain-fp");
        const total = countWhere(stacks, () => true);
        const complete = countWhere(stacks, (stack) => hasChain(stack.frames, ["main", "a", "b", "c"]));
        console.log(`-o ${output}: ${complete}/${total} samples with main;a;b;c on standard output`);
        const cpu = reportedCpuSeconds(result.stdout);
        assertSampleCount(total, cpu, 99, steal.fraction(), `-o ${output}`);
        assert.ok(complete / total >= 0.95, result.stdout.slice(0, 500));
      }
      assert.ok(Deno.lstatSync("/dev/stdout").isSymlink, "/dev/stdout is still a link");
      assert.equal(Deno.lstatSync("/dev/stdout").ino, before.ino);
    },
  ),
);

Deno.test(tracingTest("record -p PID stops once the process has exited", async () => {
  const chain = await buildWorkload("chain", FP_FLAGS, "-fp");
  const dir = tempDir();
  // 4 s of CPU: still running once the recorder, started after it, samples.
  const workload = new Deno.Command(chain, { args: ["4"], stdout: "piped" }).spawn();
  const workloadOutput = workload.output();
  try {
    // -d 60 only bounds the test: the record must end by itself, and say why, once the workload exits.
    const started = performance.now();
    const { result, start, steal } = await recordWatchingCpu([
      "record",
      "-p",
      String(workload.pid),
      "-d",
      "60",
      "-o",
      `${dir}/out.folded`,
    ], [{ pid: workload.pid }]);
    const seconds = (performance.now() - started) / 1000;
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, new RegExp(`PID ${workload.pid} exited: stopped`));
    console.log(`record ended ${seconds.toFixed(1)} s after it started, for a workload of 4 CPU s`);
    const stacks = parseFolded(Deno.readTextFileSync(`${dir}/out.folded`));
    // Sampled from the start of sampling to its exit, when it printed the CPU time it used in all.
    const reported = reportedCpuSeconds(new TextDecoder().decode((await workloadOutput).stdout));
    const cpu = cpuBetween(start[0]!, { low: reported, high: reported });
    assertSampleCount(countWhere(stacks, () => true), cpu, 99, steal, "the workload's samples were written");
  } finally {
    stop(workload);
    await workloadOutput;
    Deno.removeSync(dir, { recursive: true });
  }
}));

// Native unwinding without frame pointers, end to end: the BPF unwinder follows the stack deltas that
// the host extracted from each file's .eh_frame. Each workload runs under `record -- COMMAND` and the
// written profile is checked for complete stacks. Needs root and BTF.
import assert from "node:assert/strict";
import {
  buildWorkload,
  countWhere,
  type FoldedStack,
  hasChain,
  parseFolded,
  runCli,
  tempDir,
  tracingTest,
} from "./helpers.ts";
import { SYSTEM_PYTHON, systemPython } from "../lib/interpreter/python/test_processes.ts";
import { Recorder } from "../lib/record/recorder.ts";
import { processCpuSeconds } from "./bench/system_cpu.ts";
import { assertSampleCount, reportedCpuSeconds, StealMeter } from "./sample_bounds.ts";

/**
 * Records `command` and returns the stacks of its processes named `comm`, after checking that they
 * account for all the CPU time the workload reports (every workload prints it as it ends).
 */
async function recordFolded(command: string[], comm: RegExp): Promise<FoldedStack[]> {
  const dir = tempDir();
  try {
    const steal = new StealMeter();
    const result = await runCli(["record", "-o", `${dir}/out.folded`, "--", ...command]);
    assert.equal(result.code, 0, result.stderr);
    const stacks = parseFolded(Deno.readTextFileSync(`${dir}/out.folded`)).filter((s) => comm.test(s.comm));
    const total = countWhere(stacks, () => true);
    assertSampleCount(total, reportedCpuSeconds(result.stdout), 99, steal.fraction(), comm.source);
    return stacks;
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

/** The share of `stacks`' samples that satisfy `predicate`, printed; a share of a few is no share. */
function share(stacks: FoldedStack[], predicate: (stack: FoldedStack) => boolean, label: string): number {
  const total = countWhere(stacks, () => true);
  const matching = countWhere(stacks, predicate);
  console.log(`${label}: ${matching}/${total} samples`);
  assert.ok(total >= 20, `${label}: too few samples (${total})`);
  return matching / total;
}

/** Frames are root first; the chain must appear in order, each frame right below the previous. */
function startsAtRoot(stack: FoldedStack): boolean {
  return stack.frames[0] === "_start" || stack.frames[0] === "__libc_start_main" ||
    stack.frames[0] === "__libc_start_call_main";
}

Deno.test(
  tracingTest("main;a;b;c is complete in >= 95% of samples of -fomit-frame-pointer code", async () => {
    const chain = await buildWorkload("chain", ["-O2", "-fomit-frame-pointer"], "-nofp");
    const stacks = await recordFolded([chain, "3"], /^chain-nofp$/);
    const complete = share(
      stacks,
      (s) => hasChain(s.frames, ["main", "a", "b", "c"]),
      "omit-frame-pointer chain",
    );
    assert.ok(complete >= 0.95);
    const rooted = share(stacks, startsAtRoot, "omit-frame-pointer chain rooted at _start");
    assert.ok(rooted >= 0.9);
  }),
);

Deno.test(tracingTest("a frameless leaf keeps its caller: main;a;b;c in >= 95% of samples", async () => {
  const leaf = await buildWorkload(
    "leaf",
    ["-O2", "-fno-omit-frame-pointer", "-momit-leaf-frame-pointer"],
    "-fp",
  );
  const stacks = await recordFolded([leaf, "3"], /^leaf-fp$/);
  assert.ok(share(stacks, (s) => hasChain(s.frames, ["main", "a", "b", "c"]), "frameless leaf") >= 0.95);
}));

Deno.test(tracingTest("a callback through libc's qsort is complete in >= 90% of samples", async () => {
  const qsort = await buildWorkload("qsort_callback", ["-O2", "-fomit-frame-pointer"]);
  const stacks = await recordFolded([qsort, "3"], /^qsort_callback$/);
  assert.ok(share(stacks, throughQsort, "qsort callback main;sort_rounds;...qsort...;compare") >= 0.9);
}));

/** main, sort_rounds, a qsort frame of libc and the compare callback, in that order. */
function throughQsort(stack: FoldedStack): boolean {
  const main = stack.frames.indexOf("main");
  const sortRounds = stack.frames.indexOf("sort_rounds");
  const qsortFrame = stack.frames.findIndex((frame) => /qsort/.test(frame));
  const compare = stack.frames.lastIndexOf("compare");
  return main >= 0 && main < sortRounds && sortRounds < qsortFrame && qsortFrame < compare;
}

/** Waits until process `pid` has used `seconds` of CPU time more than `from`; gives up after a minute. */
async function cpuReaches(pid: number, from: number, seconds: number): Promise<void> {
  const giveUp = performance.now() + 60_000;
  while ((processCpuSeconds(pid) ?? Infinity) - from < seconds) {
    assert.ok(performance.now() < giveUp, `process ${pid} got no ${seconds} s of CPU in a minute`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

Deno.test(
  tracingTest("a whole-system recording loads libc a page at a time and unwinds through it", async () => {
    // Not a command of the record's own (whose files load whole): libc is large, so its tables are
    // loaded page by page as the unwinder meets its code, qsort's page among them. Until the host has
    // read the process and loaded those pages, which on a busy machine takes a while, its samples cannot
    // unwind through libc: the recorder runs here, so that its profile of that first second of the
    // workload's CPU is set aside, and the next 3 s must unwind.
    const qsort = await buildWorkload("qsort_callback", ["-O2", "-fomit-frame-pointer"]);
    const workload = new Deno.Command(qsort, { args: ["60"], stdout: "null" }).spawn();
    try {
      using recorder = Recorder.start({ frequencyHz: 99 });
      const started = processCpuSeconds(workload.pid)!;
      await cpuReaches(workload.pid, started, 1);
      const steal = new StealMeter();
      const before = processCpuSeconds(workload.pid)!;
      recorder.takeProfile({ reset: true });
      const after = processCpuSeconds(workload.pid)!;
      await cpuReaches(workload.pid, after, 3);
      const end = processCpuSeconds(workload.pid)!;
      const profile = recorder.takeProfile();
      const last = processCpuSeconds(workload.pid)!;
      console.log(`pages of large files loaded alone: ${recorder.unwindStats().pagesLoaded}`);
      assert.ok(recorder.unwindStats().pagesLoaded >= 1);
      const stacks = profile.samples.filter((sample) => sample.pid === workload.pid).map((sample) => ({
        comm: sample.comm,
        frames: sample.locations.map((index) => profile.locations[index]!.functionName).reverse(),
        count: sample.count,
      }));
      // From the reset's drain to the last profile's: each read on either side (plus /proc's rounding).
      const cpu = { low: Math.max(0, end - (after + 0.02)), high: last + 0.02 - before };
      const lost = recorder.progress().lost;
      assertSampleCount(countWhere(stacks, () => true), cpu, 99, steal.fraction(), "whole system", lost);
      assert.ok(share(stacks, throughQsort, "whole-system qsort callback") >= 0.9);
    } finally {
      workload.kill();
      await workload.status;
    }
  }),
);

Deno.test(
  tracingTest("a signal handler shows the handler, the trampoline and the interrupted frames", async () => {
    const signal = await buildWorkload("signal_handler", ["-O2", "-fomit-frame-pointer"]);
    const stacks = await recordFolded([signal, "3"], /^signal_handler$/);
    const inHandler = stacks.filter((stack) => stack.frames.includes("handler_work"));
    const through = share(inHandler, (s) => {
      const spin = s.frames.indexOf("spin");
      // glibc's trampoline has no symbol in Debian's stripped libc; the unwinder marks it.
      const trampoline = s.frames.findIndex((frame) =>
        frame === "__restore_rt" || frame === "[signal trampoline]"
      );
      const handler = s.frames.indexOf("on_signal");
      return s.frames[spin - 1] === "main" && spin < trampoline && trampoline < handler &&
        s.frames[handler + 1] === "handler_work";
    }, "signal handler main;spin;__restore_rt;on_signal;handler_work");
    assert.ok(through >= 0.8);
  }),
);

Deno.test(
  tracingTest("a thread whose stack ends right above its first frames unwinds completely", async () => {
    // The unwinder reads user stack in windows of several frames; here a window from the outermost
    // frames would cross the end of the stack's mapping, and must shrink instead of failing.
    const stackEnd = await buildWorkload("stack_end", ["-O2", "-fomit-frame-pointer"]);
    const stacks = await recordFolded([stackEnd, "3"], /^stack_end$/);
    assert.ok(share(stacks, (s) => hasChain(s.frames, ["entry", "a", "b", "c"]), "stack end") >= 0.95);
  }),
);

Deno.test(
  tracingTest("a library loaded with dlopen during the recording is unwound and symbolized", async () => {
    const main = await buildWorkload("dlopen_main", ["-O2", "-fomit-frame-pointer"]);
    const plugin = await buildWorkload(
      "dlopen_plugin",
      ["-O2", "-fomit-frame-pointer", "-shared", "-fPIC"],
      ".so",
    );
    const stacks = await recordFolded([main, plugin, "0.5", "2.5"], /^dlopen_main$/);
    const inPlugin = stacks.filter((stack) => stack.frames.some((frame) => /^plugin_/.test(frame)));
    assert.ok(
      share(inPlugin, (s) => hasChain(s.frames, ["main", "run_plugin", "plugin_work"]), "dlopen") >= 0.9,
    );
  }),
);

Deno.test(
  tracingTest("a C++ program built with default flags unwinds to main in >= 90% of samples", async () => {
    const cpp = await buildWorkload("cpp_workload", ["-O2"]);
    const stacks = await recordFolded([cpp, "3"], /^cpp_workload$/);
    assert.ok(share(stacks, (s) => startsAtRoot(s) && s.frames.includes("main"), "C++ to main") >= 0.9);
    assert.ok(
      stacks.some((s) => s.frames.some((frame) => /workload::sorted_sum/.test(frame))),
      "demangled names",
    );
  }),
);

Deno.test(
  tracingTest("Debian's python3 (no frame pointers) unwinds to _start in >= 90% of samples", async () => {
    // As the native workloads do: 3 s of CPU, and the CPU time used printed at the end.
    const script = [
      "import time",
      "end = time.process_time() + 3",
      "x = 0",
      "while time.process_time() < end:",
      "    x = (x * 31 + 7) % 1000003",
      'print("cpu_seconds=%.3f" % time.process_time())',
    ].join("\n");
    const stacks = await recordFolded([SYSTEM_PYTHON, "-c", script], /^python3/);
    // python3's main jumps to Py_BytesMain (a tail call), so Py_BytesMain is the frame below libc's.
    const rooted = share(
      stacks,
      (s) => startsAtRoot(s) && s.frames.includes("Py_BytesMain"),
      "python3 to _start",
    );
    assert.ok(rooted >= 0.9);
    assert.ok(stacks.some((s) => s.frames.some((frame) => /_PyEval_EvalFrameDefault/.test(frame))));
  }, systemPython()),
);

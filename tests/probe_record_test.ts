// End-to-end tests of `record -e` on the real kernel path: a program that calls a function and makes a
// system call exactly COUNT times (tests/workloads/calls.c, no frame pointers) is recorded at a uprobe, a
// uretprobe and a tracepoint, and each must count exactly COUNT hits, each with the caller chain. Bad
// events are refused before anything is loaded.
import assert from "node:assert/strict";
import { buildWorkload, countWhere, hasChain, parseFolded, runCli, tempDir, tracingTest } from "./helpers.ts";
import { decodePprof } from "../lib/output/pprof_reader.ts";
import { kprobesSupported } from "../lib/probe/probe_spec.ts";

const NO_FP_FLAGS = ["-O2", "-fomit-frame-pointer"];
const COUNT = 2500;
/** The workload waits this long before its calls: omniprof has read it by then, as a running program. */
const DELAY_MS = "300";
const CHAIN = ["main", "caller_a", "caller_b"];

/**
 * Whether `frames` (root first) hold the callers of the workload's calls, from its entry point `_start`:
 * the stack is complete. What lies between `_start` and main is libc's, whose static functions only a
 * debug package names.
 */
function underCallers(frames: string[], then: string[] = []): boolean {
  return frames[0] === "_start" && hasChain(frames, [...CHAIN, ...then]);
}

/** Records `calls COUNT` started by omniprof at `events`; returns the folded stacks and the CLI's output. */
async function recordCalls(events: string[], format: "folded" | "pprof" = "folded") {
  const calls = await buildWorkload("calls", NO_FP_FLAGS, "-nofp");
  const dir = tempDir();
  try {
    const output = `${dir}/out.${format === "folded" ? "folded" : "pb.gz"}`;
    const result = await runCli([
      "record",
      ...events.flatMap((event) => ["-e", event]),
      "-o",
      output,
      "--",
      calls,
      String(COUNT),
      DELAY_MS,
    ]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, new RegExp(`^calls=${COUNT}$`, "m"));
    return { calls, result, bytes: Deno.readFileSync(output) };
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

Deno.test(
  tracingTest(
    `record -e uprobe:BIN:target -- BIN counts exactly ${COUNT} calls, each under its callers`,
    async () => {
      const calls = await buildWorkload("calls", NO_FP_FLAGS, "-nofp");
      const { bytes } = await recordCalls([`uprobe:${calls}:target`]);
      const stacks = parseFolded(new TextDecoder().decode(bytes));
      const total = countWhere(stacks, () => true);
      const chained = countWhere(stacks, (stack) => underCallers(stack.frames, ["target"]));
      console.log(`uprobe: ${total} hits, ${chained} with _start;...;${CHAIN.join(";")};target`);
      assert.equal(total, COUNT);
      assert.equal(chained, COUNT);
    },
  ),
);

Deno.test(
  tracingTest(
    `record -e uretprobe:BIN:target counts exactly ${COUNT} returns, each in its caller`,
    async () => {
      const calls = await buildWorkload("calls", NO_FP_FLAGS, "-nofp");
      const { bytes } = await recordCalls([`uretprobe:${calls}:target`]);
      const stacks = parseFolded(new TextDecoder().decode(bytes));
      const total = countWhere(stacks, () => true);
      // After the return, the leaf is the caller.
      const chained = countWhere(
        stacks,
        (stack) => underCallers(stack.frames) && stack.frames.at(-1) === "caller_b",
      );
      console.log(`uretprobe: ${total} hits, ${chained} with _start;...;${CHAIN.join(";")} as the leaf`);
      assert.equal(total, COUNT);
      assert.equal(chained, COUNT);
    },
  ),
);

Deno.test(
  tracingTest(
    `record -e tracepoint:syscalls:sys_enter_getpgid counts exactly ${COUNT} system calls, user callers and kernel frames`,
    async () => {
      const { bytes } = await recordCalls(["tracepoint:syscalls:sys_enter_getpgid"]);
      const stacks = parseFolded(new TextDecoder().decode(bytes));
      const total = countWhere(stacks, () => true);
      const chained = countWhere(
        stacks,
        (stack) => underCallers(stack.frames) && stack.frames.some((frame) => frame.endsWith("_[k]")),
      );
      console.log(
        `tracepoint: ${total} hits, ${chained} with _start;...;${CHAIN.join(";")} and kernel frames`,
      );
      assert.equal(total, COUNT);
      assert.equal(chained, COUNT);
    },
  ),
);

Deno.test(
  tracingTest("several -e in one session: pprof counts each event apart, exactly", async () => {
    const calls = await buildWorkload("calls", NO_FP_FLAGS, "-nofp");
    const events = [
      `uprobe:${calls}:target`,
      `uretprobe:${calls}:target`,
      "tracepoint:syscalls:sys_enter_getpgid",
    ];
    const { bytes } = await recordCalls(events, "pprof");
    const profile = decodePprof(bytes);
    assert.deepEqual(profile.events, events);
    const ofWorkload = profile.samples.filter((sample) => sample.comm === "calls-nofp");
    for (let index = 0; index < events.length; index++) {
      const hits = ofWorkload.filter((sample) => sample.event === index).reduce((sum, s) => sum + s.count, 0);
      console.log(`${events[index]}: ${hits} hits`);
      assert.equal(hits, COUNT, events[index]);
    }
  }),
);

Deno.test(
  tracingTest("record -e ... -p PID counts the hits of that process only", async () => {
    const calls = await buildWorkload("calls", NO_FP_FLAGS, "-nofp");
    // Both wait 1.5 s before their calls: long enough to start recording the first.
    const named = new Deno.Command(calls, { args: [String(COUNT), "1500"], stdout: "piped" }).spawn();
    const other = new Deno.Command(calls, { args: [String(COUNT + 77), "1500"], stdout: "null" }).spawn();
    const dir = tempDir();
    try {
      const result = await runCli([
        "record",
        "-e",
        `uprobe:${calls}:target`,
        "-p",
        String(named.pid),
        "-o",
        `${dir}/out.pb.gz`,
      ]);
      assert.equal(result.code, 0, result.stderr);
      const profile = decodePprof(Deno.readFileSync(`${dir}/out.pb.gz`));
      const pids = new Set(profile.samples.map((sample) => sample.pid));
      const hits = profile.samples.reduce((sum, sample) => sum + sample.count, 0);
      console.log(`-p ${named.pid}: ${hits} hits of PIDs ${[...pids].join(", ")}`);
      assert.deepEqual([...pids], [named.pid]);
      assert.equal(hits, COUNT);
    } finally {
      await named.output();
      await other.status;
      Deno.removeSync(dir, { recursive: true });
    }
  }),
);

Deno.test(
  tracingTest(
    "an unknown function, file or tracepoint is refused with a clear error, before anything runs",
    async () => {
      const calls = await buildWorkload("calls", NO_FP_FLAGS, "-nofp");
      const dir = tempDir();
      try {
        const cases: [string, RegExp][] = [
          [`uprobe:${calls}:no_such_function`, /has no function no_such_function/],
          ["uprobe:/no/such/file:main", /no file \/no\/such\/file/],
          ["tracepoint:syscalls:sys_enter_no_such_call", /no such tracepoint/],
          ["uprobe:/etc/hostname:main", /not an ELF file/],
          ["probe:what", /unknown kind of event "probe"/],
        ];
        for (const [event, message] of cases) {
          const output = `${dir}/out.folded`;
          const result = await runCli(["record", "-e", event, "-o", output, "--", calls, "1"]);
          assert.equal(result.code, 2, `${event}: ${result.stderr}`);
          assert.match(result.stderr, message, event);
          assert.doesNotMatch(result.stdout, /calls=/, `${event}: the command did not run`);
          assert.throws(() => Deno.statSync(output), Deno.errors.NotFound, `${event}: nothing written`);
        }
      } finally {
        Deno.removeSync(dir, { recursive: true });
      }
    },
  ),
);

Deno.test(
  tracingTest(
    "kprobe: counts a kernel function's calls exactly, or says the kernel has no kprobes",
    async () => {
      const calls = await buildWorkload("calls", NO_FP_FLAGS, "-nofp");
      if (!kprobesSupported()) {
        const result = await runCli([
          "record",
          "-e",
          "kprobe:__x64_sys_getpgid",
          "-o",
          "-",
          "--",
          calls,
          "1",
        ]);
        assert.equal(result.code, 2, result.stderr);
        assert.match(result.stderr, /this kernel cannot attach kprobes/);
        return;
      }
      const { bytes } = await recordCalls(["kprobe:__x64_sys_getpgid"]);
      const stacks = parseFolded(new TextDecoder().decode(bytes));
      assert.equal(countWhere(stacks, () => true), COUNT);
      assert.equal(countWhere(stacks, (stack) => underCallers(stack.frames)), COUNT);
    },
  ),
);

// End-to-end tests of `record --off-cpu` on the real kernel path: threads switched out (sleeping) are
// charged the time they were away, to the whole stack they waited in, user frames unwound without frame
// pointers, Python's included. Expected values come from the workloads themselves: how long they ran, how
// much CPU they used, how long each sleep is.
import assert from "node:assert/strict";
import {
  buildWorkload,
  countWhere,
  type FoldedStack,
  hasChain,
  parseFolded,
  REPO_ROOT,
  runCli,
  startReadyProcess,
  tempDir,
  tracingTest,
} from "./helpers.ts";
import { decodePprof } from "../lib/output/pprof_reader.ts";
import { SYSTEM_PYTHON, systemPython } from "../lib/interpreter/python/test_processes.ts";
import { assertSampleCount } from "./sample_bounds.ts";
import type { TracerMetrics } from "../lib/record/tracer.ts";

/** Built without frame pointers: the off-CPU stacks are unwound from .eh_frame as samples are. */
const NO_FP_FLAGS = ["-O2", "-fomit-frame-pointer"];
const CHAIN = ["main", "wait_a", "wait_b", "wait_c"];
/** The workload's sleep: clock_nanosleep of 10 ms. */
const SLEEP_US = 10_000;

function sumOf(stacks: FoldedStack[]): number {
  return countWhere(stacks, () => true);
}

/** The value of the `KEY=VALUE` line the workload printed. */
function reported(stdout: string, key: string): number {
  const match = stdout.match(new RegExp(`^${key}=([\\d.]+)$`, "m"));
  assert.ok(match, `the workload printed ${key}: ${stdout}`);
  return Number(match[1]);
}

/** What these tests read of `--stats`. */
interface OffCpuStats {
  offCpu: { waits: number; ns: number };
  bpf: TracerMetrics;
}

/** `record --off-cpu -p PID -d SECONDS` (and `extra` options) into `dir`: its folded stacks and its --stats. */
async function recordOffCpu(
  pid: number,
  seconds: number,
  dir: string,
  name: string,
  extra: string[] = [],
): Promise<{ stacks: FoldedStack[]; stats: OffCpuStats }> {
  const folded = `${dir}/${name}.folded`;
  const stats = `${dir}/${name}.json`;
  const result = await runCli(
    [
      "record",
      "--off-cpu",
      ...extra,
      "-p",
      String(pid),
      "-d",
      String(seconds),
      "-o",
      folded,
      "--stats",
      stats,
    ],
  );
  assert.equal(result.code, 0, result.stderr);
  return {
    stacks: parseFolded(Deno.readTextFileSync(folded)),
    stats: JSON.parse(Deno.readTextFileSync(stats)) as OffCpuStats,
  };
}

Deno.test(
  tracingTest(
    "record --off-cpu -p PID -d 5 of a C program sleeping 10 ms at a time: 5 s of waits within 10%, 90% under main;wait_a;wait_b;wait_c",
    async () => {
      const sleeper = await buildWorkload("sleeper", NO_FP_FLAGS, "-nofp");
      const dir = tempDir();
      const workload = await startReadyProcess(sleeper, ["30"]);
      try {
        const { stacks, stats } = await recordOffCpu(workload.pid, 5, dir, "out");
        const total = sumOf(stacks);
        const underChain = countWhere(stacks, (stack) => hasChain(stack.frames, CHAIN));
        console.log(`off-CPU: ${total} µs in all, ${underChain} µs under the chain`);
        assert.ok(Math.abs(total - 5_000_000) <= 500_000, `${total} µs is 5 s within 10%`);
        assert.ok(underChain >= 0.9 * total, `${underChain} of ${total} µs under ${CHAIN.join(";")}`);
        // The sleep itself is named, down to the kernel's scheduler.
        assert.ok(
          stacks.some((stack) =>
            hasChain(stack.frames, CHAIN) && stack.frames.includes("clock_nanosleep") &&
            stack.frames.at(-1) === "schedule_[k]"
          ),
          "a stack goes main;...;wait_c;clock_nanosleep;...;schedule",
        );
        // Each wait is one 10 ms sleep (the kernel's timer slack adds tens of µs): the count of waits
        // the recording reports matches the time.
        const waits: number = stats.offCpu.waits;
        assert.ok(
          waits >= 0.9 * 5_000_000 / SLEEP_US && waits <= 5_000_000 / SLEEP_US + 2,
          `${waits} waits of 10 ms in 5 s`,
        );
        assert.equal(stats.bpf.OffCpuStoreFull, 0);
        // Once the host has given the stack an id, within a drain of its first wait, the kernel adds up the
        // waits itself: only those before that come whole. Each wait is one or the other, but for the
        // thread still asleep at the end (charged by the host up to then).
        const { OffCpuSent: sent, OffCpuCounted: counted } = stats.bpf;
        console.log(`${waits} waits: ${counted} added up in the kernel, ${sent} sent whole`);
        assert.ok(
          waits - (sent + counted) >= 0 && waits - (sent + counted) <= 1,
          `${sent} + ${counted} of ${waits}`,
        );
        assert.ok(counted >= 0.9 * waits, `${counted} of ${waits} waits added up in the kernel`);
      } finally {
        await workload.stop();
        Deno.removeSync(dir, { recursive: true });
      }
    },
  ),
);

Deno.test(
  tracingTest(
    "record --off-cpu --off-cpu-min drops shorter waits in BPF, and keeps longer ones",
    async () => {
      const sleeper = await buildWorkload("sleeper", NO_FP_FLAGS, "-nofp");
      const dir = tempDir();
      const workload = await startReadyProcess(sleeper, ["30"]);
      try {
        // The sleeper's preemptions, counted by the kernel: a thread preempted waits for a CPU, often for
        // less than any minimum here, and is as much a wait as a sleep.
        const preemptions = () =>
          Number(
            /^nonvoluntary_ctxt_switches:\s+(\d+)$/m.exec(
              Deno.readTextFileSync(`/proc/${workload.pid}/status`),
            )?.[1],
          );
        const record = async (minUs: number) => {
          const before = preemptions();
          const { stats } = await recordOffCpu(workload.pid, 2, dir, `min-${minUs}`, [
            "--off-cpu-min",
            String(minUs),
          ]);
          return { ...stats, preempted: preemptions() - before };
        };
        // Twice the sleep: every wait is shorter, and BPF counts each one it drops.
        const above = await record(2 * SLEEP_US);
        console.log(
          `--off-cpu-min ${2 * SLEEP_US}: ${above.offCpu.waits} sent, ${above.bpf.OffCpuShort} dropped`,
        );
        assert.equal(above.offCpu.waits, 0);
        assert.ok(above.bpf.OffCpuShort >= 0.9 * 2_000_000 / SLEEP_US, `${above.bpf.OffCpuShort} dropped`);
        // Half the sleep: every wait is longer.
        const below = await record(SLEEP_US / 2);
        console.log(
          `--off-cpu-min ${SLEEP_US / 2}: ${below.offCpu.waits} sent, ${below.bpf.OffCpuShort} dropped, ` +
            `${below.preempted} preemptions`,
        );
        assert.ok(below.offCpu.waits >= 0.9 * 2_000_000 / SLEEP_US, `${below.offCpu.waits} sent`);
        // No sleep is dropped: only a preemption can be that short.
        assert.ok(below.bpf.OffCpuShort <= below.preempted, `${below.bpf.OffCpuShort} dropped`);
      } finally {
        await workload.stop();
        Deno.removeSync(dir, { recursive: true });
      }
    },
  ),
);

Deno.test(
  tracingTest(
    "record --off-cpu -- COMMAND of a program that burns 5 ms and sleeps 10 ms: pprof's cpu and off_cpu values add up to its wall time, each to what it measured",
    async () => {
      const sleeper = await buildWorkload("sleeper", NO_FP_FLAGS, "-nofp");
      const dir = tempDir();
      try {
        // At 999 Hz the CPU samples' count is within 4% of the workload's wall time at four standard
        // deviations, so that their sum with the off-CPU time can be held to 10%.
        const hz = 999;
        const result = await runCli(
          ["record", "--off-cpu", "-F", String(hz), "-o", `${dir}/out.pb.gz`, "--", sleeper, "3", "5"],
        );
        assert.equal(result.code, 0, result.stderr);
        const wallUs = reported(result.stdout, "wall_seconds") * 1e6;
        const cpuUs = reported(result.stdout, "cpu_seconds") * 1e6;
        const profile = decodePprof(Deno.readFileSync(`${dir}/out.pb.gz`));
        assert.equal(profile.offCpu, true);
        const ofWorkload = profile.samples.filter((sample) => sample.comm === "sleeper-nofp");
        const onUs = ofWorkload.reduce((sum, sample) => sum + sample.count * profile.periodNs / 1000, 0);
        const offUs = ofWorkload.reduce((sum, sample) => sum + (sample.offCpuNs ?? 0) / 1000, 0);
        console.log(
          `measured by the workload: wall ${wallUs.toFixed(0)} µs, cpu ${cpuUs.toFixed(0)} µs; ` +
            `recorded: on-CPU ${onUs.toFixed(0)} µs, off-CPU ${offUs.toFixed(0)} µs`,
        );
        assert.ok(ofWorkload.every((sample) => sample.count === 0 || sample.offCpuNs === undefined));
        assert.ok(Math.abs(onUs + offUs - wallUs) <= 0.1 * wallUs, "on + off is the wall time within 10%");
        const samples = ofWorkload.reduce((sum, sample) => sum + sample.count, 0);
        assertSampleCount(samples, cpuUs / 1e6, hz, 0, "the workload's CPU samples");
        const waitUs = wallUs - cpuUs;
        assert.ok(Math.abs(offUs - waitUs) <= 0.1 * waitUs, "off-CPU is the rest within 10%");
      } finally {
        Deno.removeSync(dir, { recursive: true });
      }
    },
  ),
);

Deno.test(
  tracingTest(
    "record --off-cpu of Python sleeping under a chain: the waits carry the Python frames",
    async () => {
      const dir = tempDir();
      const workload = await startReadyProcess(SYSTEM_PYTHON, [
        `${REPO_ROOT}tests/workloads/sleeper.py`,
        "30",
      ]);
      try {
        const { stacks } = await recordOffCpu(workload.pid, 3, dir, "out");
        const total = sumOf(stacks);
        const chain = ["<module>", "main", "wait_a", "wait_b", "wait_c"];
        // time.sleep's own function is static in a stripped python3 (Debian's): the sleep is named by
        // libc's clock_nanosleep, which its dynamic symbols name, and the kernel's scheduler under it.
        const underChain = countWhere(
          stacks,
          (stack) =>
            hasChain(stack.frames, chain) && stack.frames.includes("clock_nanosleep") &&
            stack.frames.at(-1) === "schedule_[k]",
        );
        console.log(`off-CPU: ${total} µs in all, ${underChain} µs under <module>;main;wait_a;wait_b;wait_c`);
        assert.ok(Math.abs(total - 3_000_000) <= 300_000, `${total} µs is 3 s within 10%`);
        assert.ok(underChain >= 0.9 * total, `${underChain} of ${total} µs`);
      } finally {
        await workload.stop();
        Deno.removeSync(dir, { recursive: true });
      }
    },
    systemPython(),
  ),
);

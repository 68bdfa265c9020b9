import assert from "node:assert/strict";
import {
  bpftraceOffCpuScript,
  formatOffCpuReport,
  lastMessage,
  notRunRound,
  type OffCpuRound,
  offCpuRows,
  offCpuTargets,
  omniprofCounters,
  parseSwitchesReports,
  perfOffCpuIgnored,
  perfOffCpuNs,
  perSwitchNs,
  timeUnder,
  windowFigures,
} from "./off_cpu.ts";
import { parseBpftraceMap } from "./peer_output.ts";

const REPORTS = `t_ns=1000000000 round_trips=0 switches=2 cpu_ns=1000
t_ns=1100000000 round_trips=1700 switches=3402 cpu_ns=97001000
t_ns=1200000000 round_trips=3400 switches=6802 cpu_ns=194001000
t_ns=1300000000 round_trips=5000 switches=10002 cpu_ns=291001000
round_trips=5000 seconds=0.300 rate=16667
`;

Deno.test("parseSwitchesReports() reads the progress lines and skips the summary", () => {
  const reports = parseSwitchesReports(REPORTS);
  assert.equal(reports.length, 4);
  assert.deepEqual(reports[1], { tNs: 1_100_000_000, roundTrips: 1700, switches: 3402, cpuNs: 97_001_000 });
});

Deno.test("windowFigures() takes the rates between the first and last lines inside the window", () => {
  const reports = parseSwitchesReports(REPORTS);
  // 1.05 s to 1.3 s holds the lines at 1.1, 1.2 and 1.3 s: 3,300 round trips and 6,600 switches in 0.2 s.
  const figures = windowFigures(reports, 1_050_000_000, 1_300_000_000)!;
  assert.equal(figures.seconds, 0.2);
  assert.equal(Math.round(figures.roundTripsPerSecond), 16500);
  assert.equal(Math.round(figures.switchesPerSecond), 33000);
  assert.equal(figures.cpuSeconds, 0.194);
  // One line in the window is no rate.
  assert.equal(windowFigures(reports, 1_150_000_000, 1_250_000_000), null);
});

Deno.test("perSwitchNs() divides all programs' run time by the busiest one's runs", () => {
  assert.equal(
    perSwitchNs([
      { runTimeNs: 150_000_000, runCount: 99_500 },
      { runTimeNs: 40_000_000, runCount: 100_000 },
      { runTimeNs: 1_000_000, runCount: 600 },
      { runTimeNs: 0, runCount: 0 },
    ]),
    // (150 + 40 + 1) ms over the busiest program's 100,000 runs.
    1910,
  );
  assert.equal(perSwitchNs([{ runTimeNs: 0, runCount: 0 }]), null);
  assert.equal(perSwitchNs([]), null);
});

Deno.test("bpftraceOffCpuScript() filters the process and the minimum in ns, and its map parses", () => {
  const script = bpftraceOffCpuScript(4242, 5);
  assert.match(script, /^software:context-switches:1 \{/);
  assert.match(script, /if \(pid == 4242\)/);
  assert.match(script, /\$in - \$out >= 5000\)/);
  // What bpftrace prints for it: the sum of ns under [comm, ustack, kstack].
  const printed = `Attaching 2 probes...


@[switches_bench, 
    __libc_read+76
    ping+37
    main+448
, 
    schedule+35
    anon_pipe_read+1274
]: 3857324275
`;
  assert.deepEqual(parseBpftraceMap(printed), [{
    comm: "switches_bench",
    frames: ["main", "ping", "__libc_read", "anon_pipe_read_[k]", "schedule_[k]"],
    count: 3857324275,
  }]);
});

Deno.test("perfOffCpuIgnored() finds Debian perf's warning; perfOffCpuNs() adds offcpu-time periods", () => {
  const stderr = "Warning: option `off-cpu' is being ignored because no BUILD_BPF_SKEL=1 " +
    "[ perf record: Woken up 1 times to write data ]\n[ perf record: Captured and wrote 0.069 MB x (818 samples) ]\n";
  assert.equal(
    perfOffCpuIgnored(stderr),
    "Warning: option `off-cpu' is being ignored because no BUILD_BPF_SKEL=1",
  );
  assert.equal(perfOffCpuIgnored("[ perf record: Woken up 1 times to write data ]\n"), null);
  assert.equal(
    perfOffCpuNs("     offcpu-time:    120000\n   cpu-clock:  1000\n  offcpu-time: 5000\n"),
    125000,
  );
  assert.equal(perfOffCpuNs("  30000 offcpu-time:\n"), 30000);
});

Deno.test("lastMessage() takes a traceback's exception, not its ^^^ markers", () => {
  const stderr = `Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/bcc/__init__.py", line 694, in get_kprobe_functions
    with open(blacklist_file, "rb") as blacklist_f:
         ^^^^^^^^^^^^^^^^^^^^^^^^^^
FileNotFoundError: [Errno 2] No such file or directory: '/sys/kernel/debug/kprobes/blacklist'
   ^^^
`;
  assert.equal(
    lastMessage(stderr),
    "FileNotFoundError: [Errno 2] No such file or directory: '/sys/kernel/debug/kprobes/blacklist'",
  );
  assert.equal(lastMessage(""), "(nothing on stderr)");
});

Deno.test("omniprofCounters() reads the off-CPU counters of --stats, ? for those missing", () => {
  assert.equal(
    omniprofCounters({
      offCpu: { waits: 93646, ns: 1789851772 },
      lost: 0,
      bpf: { OffCpuSwitches: 93652, OffCpuShort: 0, OffCpuStoreFull: 0, OffCpuCounted: 93640, OffCpuSent: 6 },
    }),
    "waits 93646 of 93652 switches out (93640 added up in the kernel, 6 sent whole; short 0, store full 0), lost 0",
  );
  assert.equal(
    omniprofCounters({ lost: 3 }),
    "waits ? of ? switches out (? added up in the kernel, ? sent whole; short ?, store full ?), lost 3",
  );
});

Deno.test("timeUnder() adds the time of the stacks that hold one of the functions", () => {
  const stacks = [
    { frames: ["main", "ping", "wait_ball", "read"], ns: 300 },
    { frames: ["pong_thread", "pong", "read"], ns: 200 },
    { frames: ["main", "printf"], ns: 7 },
  ];
  assert.equal(timeUnder(stacks, ["ping", "pong"]), 500);
});

function round(
  key: OffCpuRound["key"],
  cpuSeconds: number | null,
  rate: number,
  offCpuSeconds: number | null = null,
): OffCpuRound {
  return {
    ...notRunRound(key, key, "failed", ""),
    status: "ok",
    reason: null,
    cpuSeconds,
    maxRssMb: cpuSeconds === null ? null : 60,
    window: { seconds: 5, roundTripsPerSecond: rate, switchesPerSecond: rate * 2, cpuSeconds: 4.8 },
    offCpuSeconds,
  };
}

// Baseline rates 16,000, 17,000 and 15,000: the median is 16,000. omniprof's rounds at 0.30, 0.25 and
// 0.28 CPU s: the median round is 0.28 s at 15,200 round trips/s, 5% slower.
const ROUNDS = [
  round("baseline", null, 16000),
  round("omniprof", 0.30, 15000, 5.0),
  round("bcc", 3.5, 14000, 5.1),
  round("baseline", null, 17000),
  round("omniprof", 0.25, 15500, 5.0),
  round("bcc", 3.4, 14400, 5.1),
  round("baseline", null, 15000),
  round("omniprof", 0.28, 15200, 5.1),
  round("bcc", 3.6, 14800, 5.1),
];

Deno.test("offCpuRows() takes the baseline's median rate and each tool's median-CPU round", () => {
  const rows = offCpuRows(ROUNDS);
  assert.deepEqual(rows.map((row) => row.key), ["baseline", "omniprof", "bcc"]);
  assert.equal(rows[0]!.window!.roundTripsPerSecond, 16000);
  assert.equal(rows[0]!.slowdownPercent, null);
  assert.equal(rows[1]!.cpuSeconds, 0.28);
  assert.equal(rows[1]!.slowdownPercent!.toFixed(2), "5.00");
  // (5.1 s off-CPU + 4.8 s on) / (2 threads x 5 s).
  assert.equal(rows[1]!.accountedShare!.toFixed(2), "0.99");
  assert.equal(rows[2]!.cpuSeconds, 3.5);
  assert.equal(rows[2]!.slowdownPercent!.toFixed(2), "12.50");
  assert.deepEqual(rows[1]!.byRound.map((r) => r.cpuSeconds), [0.30, 0.25, 0.28]);
});

Deno.test("offCpuTargets() judges CPU and slowdown against bcc's, and says why it cannot", () => {
  const rows = offCpuRows(ROUNDS);
  assert.deepEqual(offCpuTargets(rows).map((target) => [target.value, target.verdict]), [
    ["0.28 vs 3.50 s", "PASS"],
    ["5.0% vs 12.5%", "PASS"],
  ]);
  const slower = offCpuRows(
    [...ROUNDS.slice(0, 3)].map((r) => r.key === "omniprof" ? { ...r, cpuSeconds: 4 } : r),
  );
  // One round each: omniprof 4 s against bcc's 3.5 s, 6.25% slower against 12.5%.
  assert.deepEqual(offCpuTargets(slower).map((target) => target.verdict), ["FAIL", "PASS"]);
  const failed = offCpuRows([
    ...ROUNDS.filter((r) => r.key !== "bcc"),
    notRunRound("bcc", "bcc offcputime", "failed", "offcputime-bpfcc exited with 1: FileNotFoundError"),
  ]);
  assert.deepEqual(offCpuTargets(failed).map((target) => [target.value, target.verdict]), [
    ["cannot be judged: bcc offcputime failed (its row says why)", "n/a"],
    ["cannot be judged: bcc offcputime failed (its row says why)", "n/a"],
  ]);
  assert.equal(
    offCpuTargets(offCpuRows(ROUNDS.filter((r) => r.key !== "bcc")))[0]!.value,
    "cannot be judged: bcc offcputime was not asked for (--tools)",
  );
});

Deno.test("formatOffCpuReport() prints each tool's figures, the reason a tool did not run and the ratios", () => {
  const rows = offCpuRows([
    ...ROUNDS,
    notRunRound("perf", "perf --off-cpu", "not available", "perf record --off-cpu: Warning: ignored"),
  ]);
  const text = formatOffCpuReport({
    description: "switches",
    durationSeconds: 5,
    minMicroseconds: 1,
    rows,
    targets: offCpuTargets(rows),
  });
  const lines = text.split("\n");
  const own = lines.find((line) => line.startsWith("omniprof "))!.split(/\s{2,}/);
  assert.deepEqual(own.slice(1, 6), ["0.28", "60.0", "15,200", "5.0%", "30,400"]);
  assert.ok(
    lines.some((line) =>
      /^perf --off-cpu\s+not available: perf record --off-cpu: Warning: ignored$/.test(line)
    ),
  );
  // omniprof / bcc: 0.28 / 3.5 s of CPU, 5% / 12.5% slowdown.
  assert.ok(lines.includes("omniprof / bcc: CPU 0.08x, slowdown 0.40x, BPF ns/switch -"), text);
  assert.ok(
    lines.some((line) => /^omniprof CPU <= bcc offcputime CPU\s+0\.28 vs 3\.50 s\s+PASS$/.test(line)),
    text,
  );
});

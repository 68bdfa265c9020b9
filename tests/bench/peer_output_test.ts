import assert from "node:assert/strict";
import { buildWorkload, tempDir } from "../helpers.ts";
import { baseName } from "../../lib/sys/path.ts";
import { monotonicNs } from "./monotonic_clock.ts";
import {
  completeShare,
  parseBpftraceMap,
  parseFoldedStacks,
  parseOffcputimeListing,
  parsePerfScript,
  parseTimeOutput,
  TIME_FORMAT,
} from "./peer_output.ts";
import { runs, TIME_PROGRAM } from "./peers.ts";
import { bootstrapped, optional, requiring } from "../../lib/testing/requirements.ts";

// Printed by bpftrace 0.17 for `@[comm, ustack, kstack] = count()`: both stacks, user only, neither,
// and kernel only, in that order.
const BPFTRACE_MAP = `Attaching 1 probe...


@[chain_bench, 
    c+71
    b+9
    a+9
    main+97
    __libc_start_call_main+122
, 
    handle_softirqs+114
    __irq_exit_rcu+142
    sysvec_apic_timer_interrupt+49
    asm_sysvec_apic_timer_interrupt+22
]: 1
@[chain_bench, 
    c+74
    b+9
    a+9
    main+97
    __libc_start_call_main+122
, ]: 206
@[V8 DefaultWorke, , ]: 2
@[deno, , 
    pte_offset_map_rw_nolock+6
    __handle_mm_fault+901
    asm_exc_page_fault+34
]: 1
`;

// Two samples as `perf script -F comm,pid,tid,time,ip,sym,dso --ns` prints them.
const PERF_SCRIPT = `bash 16043/16043  1079.909862527: 
\tffffffff81407fc5 finish_rcuwait ([kernel.kallsyms])
\tffffffff8225a6c1 do_syscall_64 ([kernel.kallsyms])
\t           d4353 _Fork (/usr/lib/x86_64-linux-gnu/libc.so.6)

chain_bench 16033/16033  1079.903449879: 
\t            1207 c (/tmp/bx/chain_bench)
\t            1269 b (/tmp/bx/chain_bench)
\t            1289 a (/tmp/bx/chain_bench)
\t            10c1 main (/tmp/bx/chain_bench)
\t           2724a __libc_start_call_main (/usr/lib/x86_64-linux-gnu/libc.so.6)

`;

Deno.test("parseBpftraceMap() reads user and kernel stacks root first, with counts", () => {
  const stacks = parseBpftraceMap(BPFTRACE_MAP);
  assert.deepEqual(stacks, [
    {
      comm: "chain_bench",
      frames: [
        "__libc_start_call_main",
        "main",
        "a",
        "b",
        "c",
        "asm_sysvec_apic_timer_interrupt_[k]",
        "sysvec_apic_timer_interrupt_[k]",
        "__irq_exit_rcu_[k]",
        "handle_softirqs_[k]",
      ],
      count: 1,
    },
    { comm: "chain_bench", frames: ["__libc_start_call_main", "main", "a", "b", "c"], count: 206 },
    { comm: "V8 DefaultWorke", frames: [], count: 2 },
    {
      comm: "deno",
      frames: ["asm_exc_page_fault_[k]", "__handle_mm_fault_[k]", "pte_offset_map_rw_nolock_[k]"],
      count: 1,
    },
  ]);
});

Deno.test("parsePerfScript() reads one stack per sample, root first, and the earliest time", () => {
  const { stacks, firstSampleNs } = parsePerfScript(PERF_SCRIPT);
  assert.deepEqual(stacks, [
    { comm: "bash", frames: ["_Fork", "do_syscall_64_[k]", "finish_rcuwait_[k]"], count: 1 },
    { comm: "chain_bench", frames: ["__libc_start_call_main", "main", "a", "b", "c"], count: 1 },
  ]);
  assert.equal(firstSampleNs, 1079.903449879e9);
});

Deno.test("parseFoldedStacks() keeps bcc's placeholders as frames", () => {
  const stacks = parseFoldedStacks("chain_bench;[Missed User Stack] 3\nchain_bench;main;a;b;c 40\n");
  assert.deepEqual(stacks, [
    { comm: "chain_bench", frames: ["[Missed User Stack]"], count: 3 },
    { comm: "chain_bench", frames: ["main", "a", "b", "c"], count: 40 },
  ]);
});

Deno.test("completeShare() counts samples of one thread name and those holding the chain in order", () => {
  const chain = ["main", "a", "b", "c"];
  const share = completeShare(
    [
      { comm: "chain_bench", frames: ["_start", "main", "a", "b", "c", "now"], count: 5 },
      { comm: "chain_bench", frames: ["main", "a", "c"], count: 2 },
      { comm: "chain_bench", frames: ["c", "b", "a", "main"], count: 1 },
      { comm: "other", frames: chain, count: 100 },
    ],
    "chain_bench",
    chain,
  );
  assert.deepEqual(share, { samples: 8, complete: 5 });
});

// GNU time and perf are peers' tools, which bootstrap installs only with OMNIPROF_PEERS=1.
const timeInstalled = optional(
  await runs(TIME_PROGRAM, ["-f", "%e", "true"]) ? null : `${TIME_PROGRAM} is not installed`,
);

Deno.test(requiring([timeInstalled], {
  name: "parseTimeOutput() reads the summary after a non-zero exit status line",
  fn: async () => {
    const dir = tempDir();
    try {
      const output = `${dir}/time.txt`;
      const status = await new Deno.Command(TIME_PROGRAM, {
        args: [
          "-f",
          TIME_FORMAT,
          "-o",
          output,
          "sh",
          "-c",
          "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exit 3",
        ],
      }).output();
      assert.equal(status.code, 3);
      const text = Deno.readTextFileSync(output);
      assert.match(text, /exited with non-zero status 3/);
      const usage = parseTimeOutput(text);
      assert.ok(usage.userSeconds + usage.systemSeconds > 0, JSON.stringify(usage));
      assert.ok(usage.elapsedSeconds >= usage.userSeconds);
      assert.ok(usage.maxRssKb > 100, JSON.stringify(usage));
      assert.throws(() => parseTimeOutput("Command terminated by signal 9\n"), RangeError);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
}));

const perfNeeds = [
  bootstrapped(Deno.uid() !== 0 ? "needs root" : null),
  optional(await runs("perf") ? null : "perf is not installed"),
];

Deno.test(requiring(perfNeeds, {
  name: "parsePerfScript() finds the chain and CLOCK_MONOTONIC times in a real perf recording",
  fn: async () => {
    const chain = await buildWorkload("chain", ["-O2", "-fno-omit-frame-pointer"], "-fp");
    const dir = tempDir();
    try {
      const before = monotonicNs();
      const record = await new Deno.Command("perf", {
        args: [
          "record",
          "-F",
          "499",
          "-g",
          "-k",
          "CLOCK_MONOTONIC",
          "-o",
          `${dir}/perf.data`,
          "--",
          chain,
          "0.5",
        ],
        stdout: "null",
        stderr: "piped",
      }).output();
      assert.ok(record.success, new TextDecoder().decode(record.stderr));
      const after = monotonicNs();
      const script = await new Deno.Command("perf", {
        args: ["script", "-F", "comm,pid,tid,time,ip,sym,dso", "--ns", "-i", `${dir}/perf.data`],
        stdout: "piped",
        stderr: "null",
      }).output();
      const { stacks, firstSampleNs } = parsePerfScript(new TextDecoder().decode(script.stdout));
      const comm = baseName(chain);
      const share = completeShare(stacks, comm, ["main", "a", "b", "c"]);
      assert.ok(share.samples >= 20, `only ${share.samples} samples`);
      assert.ok(share.complete / share.samples > 0.9, JSON.stringify(share));
      assert.ok(firstSampleNs !== null && firstSampleNs > before && firstSampleNs < after);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
}));

Deno.test("parseOffcputimeListing() reads bcc's libbpf offcputime: frames root first, microseconds", () => {
  const text = [
    "    schedule",
    "    do_nanosleep",
    "    clock_nanosleep",
    "    [unknown]",
    "    -                sleeper (8230)",
    "        986732",
    "",
    "    schedule",
    "    pipe_read",
    "    read",
    "    -                a b (17)",
    "        12",
    "",
  ].join("\n");
  assert.deepEqual(parseOffcputimeListing(text), [
    { comm: "sleeper", frames: ["[unknown]", "clock_nanosleep", "do_nanosleep", "schedule"], count: 986732 },
    { comm: "a b", frames: ["read", "pipe_read", "schedule"], count: 12 },
  ]);
});

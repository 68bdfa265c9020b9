import assert from "node:assert/strict";
import type { FrameKind, Profile, ProfileLocation } from "../profile/profile.ts";
import { formatFolded, sanitizeFoldedName } from "./folded.ts";

function frame(kind: FrameKind, functionName: string): ProfileLocation {
  return { kind, mapping: -1, address: 0, functionName, sourceFile: "", line: 0 };
}

// A read() system call as a kernel/user stack: user frames below, kernel frames on top.
const locations = [
  frame("kernel", "copy_user_enhanced_fast_string"), // 0
  frame("kernel", "vfs_read"), // 1
  frame("kernel", "do_syscall_64"), // 2
  frame("native", "__libc_read"), // 3
  frame("native", "main"), // 4
  frame("native", ""), // 5
  frame("python", "handler;v2"), // 6
  frame("native", "std::map<int, int>::find\n(const int&)"), // 7
  frame("native", "handler:v2"), // 8
];

function profile(samples: Profile["samples"]): Profile {
  return { startTimeNs: 0, durationNs: 0, periodNs: 1e7, mappings: [], locations, samples };
}

/** The line format flamegraph.pl reads: everything up to the last whitespace, then the count. */
const flamegraphLine = /^(.*)\s+?(\d+(?:\.\d*)?)$/;

Deno.test("formatFolded() writes comm;root;...;leaf with _[k] on kernel frames", () => {
  const text = formatFolded(profile([
    { locations: [0, 1, 2, 3, 4], count: 5, pid: 10, tid: 11, comm: "cat" },
  ]));
  assert.equal(
    text,
    "cat;main;__libc_read;do_syscall_64_[k];vfs_read_[k];copy_user_enhanced_fast_string_[k] 5\n",
  );
});

Deno.test("formatFolded() merges identical lines across threads and sorts by stack text", () => {
  const text = formatFolded(profile([
    { locations: [3, 4], count: 2, pid: 10, tid: 11, comm: "cat" },
    { locations: [4], count: 1, pid: 10, tid: 11, comm: "cat" },
    { locations: [3, 4], count: 3, pid: 20, tid: 21, comm: "cat" }, // another process, same comm and stack
    { locations: [2, 3, 4], count: 4, pid: 10, tid: 12, comm: "bash" },
    { locations: [4], count: 0, pid: 10, tid: 11, comm: "zero" },
  ]));
  const lines = text.split("\n");
  assert.equal(lines.pop(), "", "every line ends in a newline");
  assert.deepEqual(lines, [
    "bash;main;__libc_read;do_syscall_64_[k] 4",
    "cat;main 1",
    "cat;main;__libc_read 5",
  ]);
  assert.deepEqual([...lines].sort(), lines);
});

Deno.test("formatFolded() sanitizes names so every line splits the same way", () => {
  const text = formatFolded(profile([
    { locations: [5, 7, 6], count: 1, pid: 1, tid: 1, comm: "" },
    { locations: [8], count: 2, pid: 1, tid: 1, comm: "py;thon\n" },
  ]));
  const lines = text.trimEnd().split("\n");
  assert.deepEqual(lines, [
    "[unknown];handler:v2;std::map<int, int>::find (const int&);[unknown] 1",
    "py:thon ;handler:v2 2",
  ]);
  for (const line of lines) {
    const m = flamegraphLine.exec(line);
    assert.ok(m, line);
    assert.equal(m[1]!.split(";").length, line === lines[0] ? 4 : 2);
  }
  assert.equal(sanitizeFoldedName("a\r\nb\rc;d"), "a b c:d");
});

Deno.test("formatFolded() writes nothing for an empty profile and keeps samples without frames", () => {
  assert.equal(formatFolded(profile([])), "");
  assert.equal(
    formatFolded(profile([{ locations: [], count: 9, pid: 0, tid: 0, comm: "swapper/0" }])),
    "swapper/0 9\n",
  );
});

Deno.test("formatFolded() handles 100k distinct stacks of 30 frames", () => {
  const many: ProfileLocation[] = [];
  for (let i = 0; i < 5000; i++) many.push(frame(i % 5 === 0 ? "kernel" : "native", `function_${i}`));
  const samples: Profile["samples"] = [];
  let x = 1;
  for (let s = 0; s < 100_000; s++) {
    const stack: number[] = [];
    for (let d = 0; d < 30; d++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      stack.push((x >>> 0) % many.length);
    }
    samples.push({ locations: stack, count: 1 + (s % 3), pid: 1, tid: 1, comm: "load" });
  }
  const started = performance.now();
  const text = formatFolded({
    startTimeNs: 0,
    durationNs: 0,
    periodNs: 1,
    mappings: [],
    locations: many,
    samples,
  });
  const ms = performance.now() - started;
  console.log(
    `formatFolded: 100k stacks x 30 frames in ${ms.toFixed(0)} ms, ${(text.length / 1e6).toFixed(1)} MB`,
  );
  const lines = text.trimEnd().split("\n");
  assert.equal(lines.length, 100_000, "the stacks are distinct");
  assert.equal(lines.length, new Set(lines.map((l) => l.slice(0, l.lastIndexOf(" ")))).size);
  let total = 0;
  for (const line of lines) total += Number(line.slice(line.lastIndexOf(" ") + 1));
  assert.equal(total, samples.reduce((sum, s) => sum + s.count, 0));
});

Deno.test("formatFolded() of an off-CPU profile weighs lines in microseconds of wall time, rounded once merged", () => {
  const text = formatFolded({
    ...profile([
      // 2 samples of 10 ms on the CPU: 20000 us.
      { locations: [4], count: 2, pid: 10, tid: 10, comm: "cat" },
      // Switched out in read: 1.5 ms and 0.7 ms on two threads of one name, one line of 2200 us.
      { locations: [1, 2, 3, 4], count: 0, offCpuNs: 1_500_000, pid: 10, tid: 10, comm: "cat" },
      { locations: [1, 2, 3, 4], count: 0, offCpuNs: 700_000, pid: 10, tid: 11, comm: "cat" },
      // Three switches of 0.4 us each: 1 us once merged, where each alone would round to 0.
      { locations: [3, 4], count: 0, offCpuNs: 400, pid: 10, tid: 10, comm: "cat" },
      { locations: [3, 4], count: 0, offCpuNs: 400, pid: 10, tid: 10, comm: "cat" },
      { locations: [3, 4], count: 0, offCpuNs: 400, pid: 10, tid: 11, comm: "cat" },
      // 0.3 us in all: rounds to 0, left out.
      { locations: [0, 1, 2, 3, 4], count: 0, offCpuNs: 300, pid: 10, tid: 10, comm: "cat" },
    ]),
    offCpu: true,
  });
  assert.equal(
    text,
    "cat;main 20000\n" +
      "cat;main;__libc_read 1\n" +
      "cat;main;__libc_read;do_syscall_64_[k];vfs_read_[k] 2200\n",
  );
});

Deno.test("formatFolded() of an off-CPU profile without off-CPU samples still weighs in microseconds", () => {
  const text = formatFolded({
    ...profile([{ locations: [4], count: 3, pid: 10, tid: 10, comm: "cat" }]),
    offCpu: true,
  });
  assert.equal(text, "cat;main 30000\n");
});

Deno.test("formatFolded() of several probe events puts each line's event after the thread, so none merge", () => {
  const text = formatFolded({
    ...profile([
      { locations: [2, 3, 4], count: 4, event: 1, pid: 10, tid: 11, comm: "cat" },
      { locations: [2, 3, 4], count: 3, event: 0, pid: 10, tid: 11, comm: "cat" },
      { locations: [2, 3, 4], count: 2, event: 0, pid: 10, tid: 12, comm: "cat" }, // merges with the line above
      { locations: [4], count: 1, event: 7, pid: 10, tid: 11, comm: "cat" }, // no such event
      { locations: [4], count: 0, event: 0, pid: 10, tid: 11, comm: "cat" }, // no hits
    ]),
    periodNs: 0,
    events: ["tracepoint:syscalls:sys_enter_read", "uprobe:/usr/bin/cat;v2:main\n"],
  });
  assert.equal(
    text,
    "cat;[unknown event];main 1\n" +
      "cat;tracepoint:syscalls:sys_enter_read;main;__libc_read;do_syscall_64_[k] 5\n" +
      "cat;uprobe:/usr/bin/cat:v2:main ;main;__libc_read;do_syscall_64_[k] 4\n",
  );
});

Deno.test("formatFolded() of one probe event writes hit counts on the lines of a CPU profile", () => {
  const text = formatFolded({
    ...profile([
      { locations: [2, 3, 4], count: 3, event: 0, pid: 10, tid: 11, comm: "cat" },
      { locations: [3, 4], count: 2, event: 0, pid: 10, tid: 11, comm: "cat" },
    ]),
    periodNs: 0,
    offCpu: true, // ignored: an events profile has no wall time
    events: ["kprobe:do_sys_openat2"],
  });
  assert.equal(text, "cat;main;__libc_read 2\ncat;main;__libc_read;do_syscall_64_[k] 3\n");
});

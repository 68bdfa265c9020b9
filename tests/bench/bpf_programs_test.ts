import { openTracerObject } from "../../lib/record/tracer_object.ts";
import assert from "node:assert/strict";
import {
  type NamedProgram,
  parseProgramFdinfo,
  perSampleNs,
  processTree,
  PROG_TYPE_PERF_EVENT,
  programsOf,
  ProgramWatcher,
} from "./bpf_programs.ts";
import { programInfoById } from "../kernel/bpf_info.ts";
import { tracingTest } from "../helpers.ts";

// The fdinfo of a BPF program descriptor held by bpftrace while it sampled.
const PROGRAM_FDINFO = `pos:\t0
flags:\t02000002
mnt_id:\t17
ino:\t1038
prog_type:\t7
prog_jited:\t1
prog_tag:\tf156798e2f075b5c
memlock:\t4096
prog_id:\t348
run_time_ns:\t32829021
run_cnt:\t2003
recursion_misses:\t0
verified_insns:\t45
`;

Deno.test("parseProgramFdinfo() reads a program's id, type and run counters", () => {
  assert.deepEqual(parseProgramFdinfo(PROGRAM_FDINFO), {
    id: 348,
    type: PROG_TYPE_PERF_EVENT,
    tag: "f156798e2f075b5c",
    runTimeNs: 32829021,
    runCount: 2003,
  });
  assert.throws(
    () => parseProgramFdinfo(PROGRAM_FDINFO.replace("run_cnt:\t2003", "run_cnt:\t-1")),
    RangeError,
  );
});

Deno.test("parseProgramFdinfo() returns null for a descriptor that is not a BPF program", () => {
  // A regular file, and whatever else the test runner holds open (pipes, sockets, event fds).
  using _file = Deno.openSync(new URL(import.meta.url).pathname);
  let checked = 0;
  for (const entry of Deno.readDirSync("/proc/self/fdinfo")) {
    let text: string;
    try {
      text = Deno.readTextFileSync(`/proc/self/fdinfo/${entry.name}`);
    } catch {
      continue;
    }
    if (text.includes("prog_id:")) continue;
    assert.equal(parseProgramFdinfo(text), null, text);
    checked++;
  }
  assert.ok(checked >= 1);
});

Deno.test("processTree() lists a process's children and their children", async () => {
  const child = new Deno.Command("sh", { args: ["-c", "sleep 5 & sleep 5; wait"], stdout: "null" }).spawn();
  try {
    // The child's two sleeps, which must be in this process's tree as its grandchildren. Counted in the
    // child's own tree: a test runner that became a child subreaper adopts other tests' orphans too.
    // Waited for: on a busy machine the shell may take a while to fork them, and each is named sleep only
    // once it has exec'd.
    const sleepsOfChild = () =>
      processTree(child.pid).filter((pid) => {
        try {
          return Deno.readTextFileSync(`/proc/${pid}/comm`).trim() === "sleep";
        } catch {
          return false;
        }
      });
    const deadline = performance.now() + 30_000;
    let sleeps = sleepsOfChild();
    while (sleeps.length < 2 && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      sleeps = sleepsOfChild();
    }
    const tree = processTree(Deno.pid);
    assert.ok(tree.includes(Deno.pid));
    assert.ok(tree.includes(child.pid));
    assert.equal(sleeps.length, 2, `tree ${tree}`);
    for (const pid of sleeps) assert.ok(tree.includes(pid), `grandchild ${pid} in tree ${tree}`);
  } finally {
    for (const pid of processTree(child.pid).reverse()) Deno.kill(pid, "SIGKILL");
    await child.status;
  }
});

Deno.test("programsOf() finds no BPF programs in a process that loaded none", () => {
  assert.deepEqual(programsOf(Deno.pid), []);
  assert.deepEqual(programsOf(2 ** 22 + 1), []);
});

function program(name: string, type: number, runTimeNs: number, runCount: number): NamedProgram {
  return { id: runTimeNs, type, tag: "", runTimeNs, runCount, name };
}

Deno.test("perSampleNs() divides the chain's run time by the entry program's runs", () => {
  // Tail-called programs show no runs of their own; the raw tracepoint is not a sampling program.
  const programs = [
    program("unwind_native", PROG_TYPE_PERF_EVENT, 0, 0),
    program("sample_cpu", PROG_TYPE_PERF_EVENT, 9_000_000, 2000),
    program("unwind_stop", PROG_TYPE_PERF_EVENT, 1_000_000, 0),
    program("on_process_exec", 17, 5_000_000, 10),
  ];
  assert.equal(perSampleNs(programs, "sample_cpu"), 5000);
  assert.equal(perSampleNs(programs), 5000);
  assert.equal(perSampleNs([program("99", PROG_TYPE_PERF_EVENT, 32_000_000, 2000)]), 16000);
  assert.equal(perSampleNs([program("do_perf_event", PROG_TYPE_PERF_EVENT, 0, 0)]), null);
  assert.equal(perSampleNs([programs[3]!]), null);
});

Deno.test(tracingTest("ProgramWatcher names the programs a process holds, asking the kernel", () => {
  using object = openTracerObject();
  object.load();
  const watcher = new ProgramWatcher(Deno.pid);
  watcher.poll();
  watcher.nameNewPrograms();
  const programs = watcher.programs();
  const entry = programs.find((program) => program.name === "sample_cpu");
  assert.ok(entry, `programs: ${programs.map((program) => program.name).join(", ")}`);
  assert.equal(entry.type, PROG_TYPE_PERF_EVENT);
  assert.ok(programs.some((program) => program.name === "unwind_native"));
  // A program id no longer loaded has no name.
  assert.equal(programInfoById(0x7fffffff), null);
}));

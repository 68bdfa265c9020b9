// A session loads a runtime's BPF unwinder only when it meets the runtime: recording a Python process
// alone never verifies the Go program, and recording a Python and a Go process together loads both before
// sampling starts, so their first samples already have Python frames and Go labels. The table is read
// back from the kernel (the `progs` slots), not from the profiler's bookkeeping. Needs root and BTF.
import assert from "node:assert/strict";
import { u32Key, u64Key } from "../lib/bpf/map.ts";
import type { BpfObject } from "../lib/bpf/object.ts";
import type { Profile } from "../lib/profile/profile.ts";
import type { Data } from "../lib/interpreter/interpreter.ts";
import type { Runtime } from "../lib/interpreter/runtime.ts";
import { pythonRuntime } from "../lib/interpreter/python/runtime.ts";
import { SYSTEM_PYTHON, systemPython } from "../lib/interpreter/python/test_processes.ts";
import { RUNTIMES, runtimeUnwinders } from "../lib/interpreter/runtimes.ts";
import { FileRegistry } from "../lib/process/file_registry.ts";
import { ProcessManager } from "../lib/process/process_manager.ts";
import { Recorder } from "../lib/record/recorder.ts";
import { Tracer } from "../lib/record/tracer.ts";
import { programs, requiring } from "../lib/testing/requirements.ts";
import type { Pid } from "../lib/types.ts";
import { GoUnwindProgram, PythonUnwindProgram, UnwindProgram } from "../support/types.ts";
import { programInfoById } from "./kernel/bpf_info.ts";
import { buildGoWorkload, tracing, tracingTest } from "./helpers.ts";

/** A Python process that says it runs, then spins in `hot_loop` until killed. */
const PYTHON_SPIN = "import sys\ndef hot_loop():\n    while True:\n        sum(range(1000))\n" +
  "sys.stdout.write('ready\\n')\nsys.stdout.flush()\nhot_loop()\n";

/**
 * Starts the Python process and waits until it runs its script: a session started before would meet no
 * Python yet (under load the interpreter takes its time to start).
 */
async function startPython(): Promise<Deno.ChildProcess> {
  const child = new Deno.Command(SYSTEM_PYTHON, { args: ["-c", PYTHON_SPIN], stdout: "piped" }).spawn();
  const reader = child.stdout.getReader();
  const { value } = await reader.read();
  // It writes nothing more; a pipe left open would outlive the test.
  await reader.cancel();
  assert.equal(new TextDecoder().decode(value), "ready\n");
  return child;
}

/** The kernel's names of the programs in `object`'s tail-call table, by slot. */
function tableNames(object: BpfObject): Map<number, string> {
  const progs = object.map("progs");
  const id = new Uint32Array(1);
  const names = new Map<number, string>();
  for (let slot = 0; slot < progs.maxEntries; slot++) {
    // Read from user space, a slot of a program array holds its program's id.
    if (progs.lookup(u32Key(slot), new Uint8Array(id.buffer))) {
      names.set(slot, programInfoById(id[0]!)?.name ?? `id ${id[0]}`);
    }
  }
  return names;
}

/** Samples of `pid` in `profile`, with their function names, leaf first. */
function samplesOf(profile: Profile, pid: number) {
  return profile.samples.filter((sample) => sample.pid === pid).map((sample) => ({
    functions: sample.locations.map((location) => profile.locations[location]!.functionName),
    labels: sample.labels ?? [],
    count: sample.count,
  }));
}

async function stopProcess(child: Deno.ChildProcess): Promise<void> {
  try {
    child.kill("SIGKILL");
  } catch {
    // already exited
  }
  await child.status;
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

/** Samples of each process the second test waits for. */
const FIRST_SAMPLES = 20;

Deno.test(requiring([tracing(), systemPython()], {
  name: "a session of a Python process loads the Python unwinder and never the Go one",
  async fn() {
    const python = await startPython();
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      using recorder = Recorder.start({ frequencyHz: 99, pids: [python.pid as Pid] });
      await new Promise((resolve) => setTimeout(resolve, 1000));
      recorder.stop();
      const names = tableNames(recorder.tracer.object);
      // The kernel keeps 15 characters of a program's name.
      assert.deepEqual(
        [...names].sort(([a], [b]) => a - b),
        [
          [UnwindProgram.Stop, "unwind_stop"],
          [UnwindProgram.Native, "unwind_native"],
          [PythonUnwindProgram.Python, "unwind_python"],
        ].sort(([a], [b]) => Number(a) - Number(b)),
      );
      assert.ok(!names.has(GoUnwindProgram.Labels));
      const samples = samplesOf(recorder.takeProfile(), python.pid);
      const total = sum(samples.map(({ count }) => count));
      const inLoop = sum(
        samples.filter(({ functions }) => functions.includes("hot_loop")).map((s) => s.count),
      );
      assert.ok(total >= 20 && inLoop / total >= 0.9, `${inLoop}/${total} samples in hot_loop`);
      assert.equal(recorder.metrics().TailCallFailed, 0);
    } finally {
      await stopProcess(python);
    }
  },
}));

Deno.test(requiring([tracing(), systemPython(), programs("go")], {
  name: "a session of a Python and a Go process loads both unwinders before its first sample",
  async fn() {
    const binary = await buildGoWorkload("labels", { ldflags: "-s -w" }, "-stripped");
    const python = await startPython();
    const go = new Deno.Command(binary, { args: ["30"], stdout: "null" }).spawn();
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      using recorder = Recorder.start({ frequencyHz: 99, pids: [python.pid as Pid, go.pid as Pid] });
      // Recorder.start has read both processes and installed their trie entries, and sampling has begun:
      // the runtimes' programs must be in the table already.
      const names = tableNames(recorder.tracer.object);
      assert.equal(names.get(PythonUnwindProgram.Python), "unwind_python");
      assert.equal(names.get(GoUnwindProgram.Labels), "unwind_go_label");
      // The first samples: from the start until each process has some (the two share the CPUs with
      // whatever else runs here, so a fixed window may hold few).
      let profile = recorder.takeProfile();
      for (const deadline = Date.now() + 15_000; Date.now() < deadline;) {
        const enough = [python.pid, go.pid].every((pid) =>
          sum(samplesOf(profile, pid).map(({ count }) => count)) >= FIRST_SAMPLES
        );
        if (enough) break;
        await new Promise((resolve) => setTimeout(resolve, 200));
        profile = recorder.takeProfile();
      }
      recorder.stop();

      const pythonSamples = samplesOf(profile, python.pid);
      const pythonTotal = sum(pythonSamples.map(({ count }) => count));
      const inLoop = sum(
        pythonSamples.filter(({ functions }) => functions.includes("hot_loop")).map((s) => s.count),
      );
      assert.ok(
        pythonTotal >= FIRST_SAMPLES && inLoop / pythonTotal >= 0.9,
        `${inLoop}/${pythonTotal} samples in hot_loop`,
      );

      // The goroutines running main.a do so under pprof.Do labels (tests/workloads/labels.go).
      const goAll = samplesOf(profile, go.pid);
      const goSamples = goAll.filter(({ functions }) => functions.includes("main.a"));
      const goTotal = sum(goSamples.map(({ count }) => count));
      const labeled = sum(
        goSamples.filter(({ labels }) => labels.some(({ key }) => key === "worker")).map((s) => s.count),
      );
      assert.ok(
        goTotal >= FIRST_SAMPLES / 2 && labeled / goTotal >= 0.9,
        `${labeled}/${goTotal} samples of main.a labelled`,
      );
      console.log(
        `first samples: ${inLoop}/${pythonTotal} of Python in hot_loop, ${labeled}/${goTotal} of Go's main.a labelled`,
      );
      assert.equal(recorder.metrics().TailCallFailed, 0);
    } finally {
      await stopProcess(python);
      await stopProcess(go);
    }
  },
}));

Deno.test(tracingTest("the tracer of omniprof check loads every runtime's program at start", () => {
  using tracer = Tracer.start({ frequencyHz: 1, paused: true, allUnwinders: true });
  const names = tableNames(tracer.object);
  const runtimes = runtimeUnwinders(RUNTIMES);
  assert.ok(runtimes.length >= 2, `${runtimes.length} runtime unwinders`);
  for (const { slot, program } of runtimes) {
    // The kernel keeps 15 characters of a program's name.
    assert.equal(names.get(slot), program.slice(0, 15), `slot ${slot}`);
  }
}));

/** A runtime that claims the C library as the home of its interpreter loop, unwound by Python's program. */
const libcAsInterpreter: Runtime = {
  ...pythonRuntime,
  loader: (ebpf, info) => {
    if (!/\/libc\.so\.6$/.test(info.fileName)) return null;
    ebpf.updateInterpreterOffsets(PythonUnwindProgram.Python, info.fileId, [{ start: 0x1000, end: 0x2000 }]);
    const data: Data = {
      attach: () => {
        throw new Error("not attached in this test");
      },
    };
    return data;
  },
};

for (const refused of [false, true]) {
  Deno.test(tracingTest(
    refused
      ? "a file whose runtime's program the kernel refuses stays native: BPF never jumps to the empty slot"
      : "the first file of a runtime loads its program before the file's loop reaches BPF",
    () => {
      using tracer = Tracer.start({ frequencyHz: 99, paused: true });
      const asked: number[] = [];
      const unwinders = {
        require(slot: number) {
          asked.push(slot);
          if (refused) throw new Error("Cannot load BPF programs: Permission denied (a verifier's refusal)");
          tracer.unwinders.require(slot);
        },
      };
      using files = new FileRegistry({ object: tracer.object, unwinders, runtimes: [libcAsInterpreter] });
      const processes = new ProcessManager({ files });
      processes.onExec(Deno.pid as Pid);
      try {
        const libc = processes.mappingsOf(Deno.pid as Pid).find((mapping) =>
          /\/libc\.so\.6$/.test(mapping.path)
        );
        assert.ok(libc !== undefined, "this process maps libc.so.6");
        const use = files.acquire(libc.file)!;
        assert.deepEqual(asked, [PythonUnwindProgram.Python]);
        const names = tableNames(tracer.object);
        const offsets = tracer.object.map("interpreter_offsets");
        const declared = offsets.lookup(u64Key(use.bpfId), new Uint8Array(offsets.valueSize));
        if (refused) {
          assert.equal(use.program, UnwindProgram.Native);
          assert.ok(!names.has(PythonUnwindProgram.Python));
          assert.ok(!declared, "no loop declared to BPF");
        } else {
          assert.equal(use.program, PythonUnwindProgram.Python);
          assert.equal(names.get(PythonUnwindProgram.Python), "unwind_python");
          assert.ok(declared, "the loop is declared to BPF");
        }
        files.release(libc.file);
      } finally {
        processes.onExit(Deno.pid as Pid);
      }
    },
  ));
}

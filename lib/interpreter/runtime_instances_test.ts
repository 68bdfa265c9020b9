import assert from "node:assert/strict";
import { PythonFrameMarker, PythonUnwindProgram, UnwindProgram } from "../../support/types.ts";
import { FileRegistry } from "../process/file_registry.ts";
import { ProcessManager } from "../process/process_manager.ts";
import { MemoryEbpfHandler } from "./memory_ebpf_handler.ts";
import { RUNTIMES } from "./runtimes.ts";
import { encodePythonAddrOrLine } from "./python/symbolize.ts";
import {
  attachPython,
  chainScript,
  startPython,
  SYSTEM_PYTHON,
  systemPython,
  whileStopped,
} from "./python/test_processes.ts";
import { MemoryProcessBpf } from "../testing/memory_process_bpf.ts";
import { bootstrapped, requiring } from "../testing/requirements.ts";

const PYTHON = SYSTEM_PYTHON;
const needs = [
  bootstrapped(Deno.uid() !== 0 ? "needs root to read another process's memory" : null),
  systemPython(),
];

Deno.test(requiring(needs, {
  name:
    "a process mapping CPython gets its runtime: the file claimed, the trie naming its unwinder, frames named",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const script = chainScript();
    await using python = await startPython(PYTHON, script.source);
    const bpf = new MemoryProcessBpf();
    using files = new FileRegistry({ runtimes: RUNTIMES, graceMs: 0 });
    using processes = new ProcessManager({ files, bpf });
    processes.onExec(python.pid);

    const mapped = new Set(processes.mappingsOf(python.pid).map((mapping) => mapping.file));
    const claimed = [...mapped].filter((file) => files.claimOf(file) !== null);
    assert.equal(claimed.length, 1, "exactly one file holds the interpreter loop");
    const interpreter = claimed[0]!;
    assert.match(interpreter.path, /python3/);
    assert.equal(files.claimOf(interpreter)!.runtime.name, "python");
    // The interpreter file's trie entries name the Python unwinder, every other file's the native one.
    const bpfId = files.bpfIdOf(interpreter.fileId!)!;
    const entries = bpf.entries().filter((entry) => entry.pid === python.pid);
    assert.ok(entries.some((entry) => entry.bpfId === bpfId), "the interpreter file is installed");
    for (const entry of entries) {
      const expected = entry.bpfId === bpfId ? PythonUnwindProgram.Python : UnwindProgram.Native;
      assert.equal(entry.program, expected, `entry of file ${entry.bpfId} at 0x${entry.start.toString(16)}`);
    }
    assert.ok(bpf.ebpf.procDataOf("python", python.pid), "the process record is published");

    // The innermost frame, read the way BPF reads it, is named pc at its spinning line.
    using attached = attachPython(python.pid);
    const frames = await whileStopped(python.pid, () => {
      const [thread] = attached.instance.threadStates();
      return attached.instance.stack(thread!.address);
    });
    const leaf = frames[0]!;
    const named = processes.symbolize(python.pid, {
      kind: PythonFrameMarker.Python,
      fileId: leaf.code,
      addrOrLine: encodePythonAddrOrLine(leaf.firstLineStamp, leaf.byteOffset),
    });
    assert.deepEqual(named, [{
      kind: "python",
      functionName: "pc",
      sourceFile: python.scriptPath,
      line: script.lines.SPIN,
    }]);
    assert.equal(processes.runtimeStats.processes, 1);

    processes.onExit(python.pid);
    assert.equal(bpf.ebpf.procDataOf("python", python.pid), undefined, "the record is removed at exit");
    assert.equal(
      processes.symbolize(python.pid, { kind: PythonFrameMarker.Python, fileId: 1, addrOrLine: 0 }),
      null,
    );
    assert.equal(bpf.trieMap.entries.size, 0);

    // Unmapped for its grace period (none here), the file is unloaded; mapped again, it is claimed again
    // under the same BPF id.
    files.sweep();
    assert.equal(files.claimOf(interpreter), null);
    processes.onExec(python.pid);
    assert.notEqual(files.claimOf(interpreter), null);
    assert.equal(files.bpfIdOf(interpreter.fileId!), bpfId);
    assert.ok(
      bpf.entries().some((entry) => entry.bpfId === bpfId && entry.program === PythonUnwindProgram.Python),
    );
    assert.equal(files.stats.filesClaimed, 2);
  },
}));

/** A handler whose per-process map is full, as a BPF hash map refuses an update past max_entries. */
class FullProcMaps extends MemoryEbpfHandler {
  override updateProcData(): void {
    throw new Error("Cannot update map python_procs: No space left on device");
  }
}

/** Process state in memory, with a full per-process map. */
class FullProcessBpf extends MemoryProcessBpf {
  override readonly ebpf = new FullProcMaps();
}

Deno.test(requiring(needs, {
  name: "a full per-process map leaves the process counted, not attached",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    await using python = await startPython(PYTHON, chainScript().source);
    using files = new FileRegistry({ runtimes: RUNTIMES });
    using processes = new ProcessManager({ files, bpf: new FullProcessBpf() });
    processes.onExec(python.pid);
    processes.onExec(python.pid); // a retry fails the same way, without throwing
    assert.equal(files.stats.filesClaimed, 1);
    assert.equal(processes.runtimeStats.attachFailures, 2);
    assert.equal(processes.runtimeStats.processes, 0);
    assert.equal(
      processes.symbolize(python.pid, { kind: PythonFrameMarker.Python, fileId: 1, addrOrLine: 0 }),
      null,
    );
  },
}));

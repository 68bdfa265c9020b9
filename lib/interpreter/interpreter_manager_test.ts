import assert from "node:assert/strict";
import { FrameMarker, UnwindProgram } from "../../support/types.ts";
import type { MappedFile, ResolvedMapping } from "../process/process_manager.ts";
import { ProcessManager } from "../process/process_manager.ts";
import { InterpreterManager } from "./interpreter_manager.ts";
import { MemoryEbpfHandler } from "./memory_ebpf_handler.ts";
import { encodePythonAddrOrLine } from "./python/symbolize.ts";
import {
  attachPython,
  chainScript,
  startPython,
  SYSTEM_PYTHON,
  systemPython,
  whileStopped,
} from "./python/test_processes.ts";
import { bootstrapped, requiring } from "../testing/requirements.ts";

const PYTHON = SYSTEM_PYTHON;
const needs = [
  bootstrapped(Deno.uid() !== 0 ? "needs root to read another process's memory" : null),
  systemPython(),
];

/** File ids as the native unwinder hands them out; `forget` makes the next request get a new id. */
class Ids {
  #ids = new Map<string, number>();
  #next = 1;
  idOf(file: MappedFile): number {
    let id = this.#ids.get(file.key);
    if (id === undefined) this.#ids.set(file.key, id = this.#next++);
    return id;
  }
  forget(file: MappedFile): void {
    this.#ids.delete(file.key);
  }
}

Deno.test(requiring(needs, {
  name: "InterpreterManager claims the interpreter file, attaches the process and names its frames",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const script = chainScript();
    await using python = await startPython(PYTHON, script.source);
    const ebpf = new MemoryEbpfHandler();
    const ids = new Ids();
    const interpreters = new InterpreterManager(ebpf, ids);
    let seen: readonly ResolvedMapping[] = [];
    using processes = new ProcessManager({
      listener: {
        onMappings(pid, mappings) {
          seen = mappings;
          interpreters.prepare(mappings);
          interpreters.onMappings(pid, mappings);
        },
        onExit(pid) {
          interpreters.onExit(pid);
        },
      },
    });
    processes.onExec(python.pid);

    const claimed = seen.map((mapping) => mapping.file).filter((file) =>
      interpreters.unwindProgramOf(file) === UnwindProgram.Python
    );
    assert.equal(claimed.length, 1, "exactly one file holds the interpreter loop");
    const interpreter = claimed[0]!;
    assert.match(interpreter.path, /python3/);
    assert.equal(interpreters.bpfFileIdOf(interpreter.fileId!), ids.idOf(interpreter));
    assert.ok(ebpf.interpreterOffsets.get(interpreter.fileId!)!.ranges.length >= 1);
    assert.ok(ebpf.procDataOf("python", python.pid), "the process record is published");
    const libc = seen.find((mapping) => /libc\.so/.test(mapping.path));
    if (libc) assert.equal(interpreters.unwindProgramOf(libc.file), UnwindProgram.Native);

    // The innermost frame, read the way BPF reads it, is named pc at its spinning line.
    using attached = attachPython(python.pid);
    const frames = await whileStopped(python.pid, () => {
      const [thread] = attached.instance.threadStates();
      return attached.instance.stack(thread!.address);
    });
    const leaf = frames[0]!;
    const named = interpreters.symbolize(python.pid, {
      kind: FrameMarker.Python,
      fileId: leaf.code,
      addrOrLine: encodePythonAddrOrLine(leaf.firstLineStamp, leaf.byteOffset),
    });
    assert.deepEqual(named, {
      kind: "python",
      functionName: "pc",
      sourceFile: python.scriptPath,
      line: script.lines.SPIN,
    });
    assert.equal(interpreters.stats.processes, 1);

    // The native unwinder forgot the file (its last process exited) and knows it by a new id now.
    ids.forget(interpreter);
    interpreters.prepare(seen);
    assert.equal(interpreters.bpfFileIdOf(interpreter.fileId!), ids.idOf(interpreter));

    interpreters.onExit(python.pid);
    assert.equal(ebpf.procDataOf("python", python.pid), undefined, "the record is removed at exit");
    assert.equal(
      interpreters.symbolize(python.pid, { kind: FrameMarker.Python, fileId: 1, addrOrLine: 0 }),
      null,
    );
  },
}));

/** A handler whose per-process map is full, as a BPF hash map refuses an update past max_entries. */
class FullProcMaps extends MemoryEbpfHandler {
  override updateProcData(): void {
    throw new Error("Cannot update map python_procs: No space left on device");
  }
}

Deno.test(requiring(needs, {
  name: "InterpreterManager survives a full per-process map: the process is counted, not attached",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    await using python = await startPython(PYTHON, chainScript().source);
    const interpreters = new InterpreterManager(new FullProcMaps(), new Ids());
    using processes = new ProcessManager({
      listener: {
        onMappings(pid, mappings) {
          interpreters.prepare(mappings);
          interpreters.onMappings(pid, mappings);
        },
        onExit(pid) {
          interpreters.onExit(pid);
        },
      },
    });
    processes.onExec(python.pid);
    processes.onExec(python.pid); // a retry fails the same way, without throwing
    assert.equal(interpreters.stats.filesClaimed, 1);
    assert.equal(interpreters.stats.attachFailures, 2);
    assert.equal(interpreters.stats.processes, 0);
    assert.equal(
      interpreters.symbolize(python.pid, { kind: FrameMarker.Python, fileId: 1, addrOrLine: 0 }),
      null,
    );
  },
}));

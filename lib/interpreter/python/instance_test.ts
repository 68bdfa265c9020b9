import assert from "node:assert/strict";
import type { Address, Pid } from "../../types.ts";
import { PythonFrameMarker } from "../../../support/types.ts";
import { RemoteMemoryError } from "../remote_memory.ts";
import type { PythonFrame, PythonInstance, PythonThreadState } from "./instance.ts";
import { encodePythonProcInfo } from "./proc_info.ts";
import { encodePythonAddrOrLine } from "./symbolize.ts";
import {
  attachPython,
  chainScript,
  pythonInstalls,
  type PythonProcess,
  skipForMissingPythons,
  startPython,
  twoThreadScript,
  whileStopped,
} from "./test_processes.ts";

const installs = pythonInstalls();
const mainThreadTest = (label: string) =>
  `${label}: the main thread's frames read from memory are pc, pb, pa, main, <module>`;
const twoThreadsTest = (label: string) => `${label}: two threads' frames are each their own`;
const runningReadTest = (label: string) =>
  `${label}: reads of a running process agree with the stopped read once two agree`;
const exitMidReadTest = (label: string) =>
  `${label}: a process that exits mid-read gives RemoteMemoryError, never another error`;
skipForMissingPythons(installs, mainThreadTest, twoThreadsTest, runningReadTest, exitMidReadTest);

interface NamedFrame {
  name: string;
  file: string;
  line: number;
  entry: boolean;
}

interface ThreadView {
  thread: PythonThreadState;
  frames: NamedFrame[];
  /** The raw frames, as BPF would record them. */
  raw: PythonFrame[];
  byTsd: Address;
  byTls: Address | null;
}

/** Reads every thread's frames and names them (through the BPF frame encoding). */
function readThreads(instance: PythonInstance): ThreadView[] {
  return instance.threadStates().map((thread) => {
    const raw = instance.stack(thread.address);
    const frames = raw.map((frame) => {
      const [symbol] = instance.symbolize({
        kind: PythonFrameMarker.Python,
        fileId: frame.code,
        addrOrLine: encodePythonAddrOrLine(frame.firstLineStamp, frame.byteOffset),
      });
      assert.ok(symbol !== undefined);
      return { name: symbol.functionName, file: symbol.sourceFile, line: symbol.line, entry: frame.entry };
    });
    return {
      thread,
      frames,
      raw,
      byTsd: instance.threadStateByTsd(thread.threadPointer),
      byTls: instance.threadStateByTls(thread.threadPointer),
    };
  });
}

/**
 * Reads with the process stopped until `settled` holds (the threads reached their steady state: right
 * after "ready" a thread may still be in the print), at most 100 times.
 */
async function settledRead(pid: Pid, instance: PythonInstance, settled: (threads: ThreadView[]) => boolean) {
  let threads: ThreadView[] = [];
  for (let attempt = 0; attempt < 100; attempt++) {
    threads = await whileStopped(pid, () => readThreads(instance));
    if (settled(threads)) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return threads;
}

function leafLine(view: ThreadView | undefined): number {
  return view?.frames[0]?.line ?? -1;
}

function names(view: ThreadView | undefined): string[] {
  return view?.frames.map((f) => f.name) ?? [];
}

/** The minor version of the interpreter a process runs. */
function minorOf(instance: PythonInstance): number {
  return instance.version.minor;
}

for (const install of installs.found) {
  Deno.test(mainThreadTest(install.label), async () => {
    const script = chainScript();
    await using python = await startPython(install.executable, script.source);
    using attached = attachPython(python.pid);
    const instance = attached.instance;
    const [main] = await settledRead(
      python.pid,
      instance,
      (threads) => leafLine(threads[0]) === script.lines.SPIN,
    );
    assert.ok(main !== undefined);
    assert.equal(instance.threadStates().length, 1);
    assert.equal(main.thread.tid, python.pid, "the main thread's tid is the pid");
    assert.deepEqual(names(main), ["pc", "pb", "pa", "main", "<module>"]);
    assert.deepEqual(
      main.frames.map((f) => f.line),
      [
        script.lines.SPIN,
        script.lines.CALL_PC,
        script.lines.CALL_PB,
        script.lines.CALL_PA,
        script.lines.CALL_MAIN,
      ],
    );
    for (const frame of main.frames) assert.equal(frame.file, python.scriptPath);
    // The outermost frame was entered from C; before 3.11 every frame is its own eval loop call.
    assert.equal(main.frames[main.frames.length - 1]?.entry, true);
    if (minorOf(instance) < 11) assert.ok(main.frames.every((f) => f.entry));
    else {assert.ok(
        main.frames.slice(0, -1).every((f) => !f.entry),
        "3.11+ runs Python-to-Python calls inline",
      );}

    // BPF's ways to the thread state: TSD (every version), TLS (3.12+ builds with the symbol).
    assert.equal(main.byTsd, main.thread.address);
    if (minorOf(instance) >= 12 && attached.data.facts.tssTstateOffset !== null) {
      assert.equal(main.byTls, main.thread.address, "the spinning thread holds the GIL");
    } else {
      assert.equal(main.byTls, null);
    }
    assert.deepEqual(
      attached.ebpf.procDataOf("python", python.pid),
      encodePythonProcInfo(instance.procInfo()),
    );
  });

  Deno.test(twoThreadsTest(install.label), async () => {
    const script = twoThreadScript();
    await using python = await startPython(install.executable, script.source);
    const announced = new Map<string, { ident: number; tid: number }>();
    for (const line of python.output) {
      const [name, ident, tid] = line.split(" ");
      if (name === "A" || name === "B") announced.set(name, { ident: Number(ident), tid: Number(tid) });
    }
    using attached = attachPython(python.pid);
    const instance = attached.instance;
    const byPointer = (threads: ThreadView[], name: string) =>
      threads.find((t) => t.thread.threadPointer === announced.get(name)?.ident);
    const threads = await settledRead(
      python.pid,
      instance,
      (views) =>
        leafLine(byPointer(views, "A")) === script.lines.SPIN_A &&
        leafLine(byPointer(views, "B")) === script.lines.SPIN_B &&
        leafLine(views.find((t) => t.thread.tid === python.pid)) === script.lines.MAIN_WAIT,
    );
    assert.equal(threads.length, 3);
    const qualified = minorOf(instance) >= 11;
    for (
      const [name, spin, call, caller] of [["A", "SPIN_A", "CALL_A", "ta"], ["B", "SPIN_B", "CALL_B", "tb"]]
    ) {
      const view = byPointer(threads, name!);
      assert.ok(view !== undefined, `no thread state with thread_id ${announced.get(name!)?.ident}`);
      assert.equal(view.thread.tid, announced.get(name!)?.tid);
      const method = `spin_${name!.toLowerCase()}`;
      assert.deepEqual(names(view).slice(0, 2), [qualified ? `Worker.${method}` : method, caller]);
      assert.deepEqual(view.frames.slice(0, 2).map((f) => f.line), [
        script.lines[spin!],
        script.lines[call!],
      ]);
      assert.ok(names(view).some((n) => n.endsWith("_bootstrap")), `${names(view)}`);
      // Thread.run calls the target with *args: through C up to 3.11, inline from 3.12.
      assert.equal(view.frames[1]?.entry, minorOf(instance) < 12);
    }
    const main = threads.find((t) => t.thread.tid === python.pid);
    assert.deepEqual(names(main), ["main", "<module>"]);
    assert.deepEqual(main?.frames.map((f) => f.line), [script.lines.MAIN_WAIT, script.lines.CALL_MAIN]);
    for (const view of threads) {
      assert.equal(view.byTsd, view.thread.address, "TSD gives each thread its own state");
      // TLS holds the state only while the thread holds the GIL.
      if (view.byTls !== null) assert.ok(view.byTls === 0 || view.byTls === view.thread.address);
    }
  });

  Deno.test(runningReadTest(install.label), async () => {
    const script = chainScript();
    await using python = await startPython(install.executable, script.source);
    using attached = attachPython(python.pid);
    const instance = attached.instance;
    const read = () => readThreads(instance)[0]?.frames.map((f) => `${f.name}:${f.line}`).join(";") ?? "";
    let previous = "";
    let consistent = "";
    for (let attempt = 0; attempt < 200 && consistent === ""; attempt++) {
      try {
        const current = read();
        if (current === previous && current.startsWith(`pc:${script.lines.SPIN};`)) consistent = current;
        previous = current;
      } catch (error) {
        // A frame can vanish under a running reader; that is a RemoteMemoryError, and a retry.
        assert.ok(error instanceof RemoteMemoryError, String(error));
      }
    }
    assert.equal(consistent, await whileStopped(python.pid, read));
  });

  Deno.test(exitMidReadTest(install.label), async () => {
    const script = chainScript();
    const python: PythonProcess = await startPython(install.executable, script.source);
    using attached = attachPython(python.pid);
    const instance = attached.instance;
    setTimeout(() => python.child.kill("SIGKILL"), 30);
    let errors = 0;
    const deadline = performance.now() + 10_000;
    while (errors < 20 && performance.now() < deadline) {
      try {
        for (const thread of instance.threadStates()) instance.stack(thread.address);
        instance.tsdKey();
      } catch (error) {
        assert.ok(error instanceof RemoteMemoryError, String(error));
        errors++;
      }
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    await python.kill();
    assert.ok(errors > 0, "reads kept succeeding after the process was killed");
    assert.throws(
      () => instance.threadStates(),
      (e) => e instanceof RemoteMemoryError && e.failure === "gone",
    );
    // Symbolizing an uncached frame of a dead process names it unknown instead of failing.
    attached.memory.clearCache();
    const frame = { kind: PythonFrameMarker.Python, fileId: 0x10000, addrOrLine: 0 };
    assert.equal(instance.symbolize(frame)[0]?.functionName, "<unknown>");
  });
}

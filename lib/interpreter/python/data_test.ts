import assert from "node:assert/strict";
import type { Pid } from "../../types.ts";
import type { InterpreterType } from "../interpreter.ts";
import { MemoryEbpfHandler } from "../memory_ebpf_handler.ts";
import { applyDebugOffsets, DEBUG_COOKIE, pythonOffsets, readDebugOffsets, versionHex } from "./offsets.ts";
import { encodePythonProcInfo, PYTHON_PROC_INFO_LAYOUT } from "./proc_info.ts";
import {
  attachPython,
  chainScript,
  pythonInstalls,
  skipForMissingPythons,
  startPython,
} from "./test_processes.ts";

const installs = pythonInstalls();
const debugOffsetsTest = (label: string) =>
  `${label}: _PyRuntime carries debug offsets from 3.13 on, equal to the table`;
const attachTest = (label: string) =>
  `${label}: attach() publishes the record once, updates it on change, detach() removes it`;
skipForMissingPythons(installs, debugOffsetsTest, attachTest);

/** Counts the records written. */
class CountingHandler extends MemoryEbpfHandler {
  writes = 0;
  override updateProcData(type: InterpreterType, pid: Pid, data: Uint8Array): void {
    this.writes++;
    super.updateProcData(type, pid, data);
  }
}

for (const install of installs.found) {
  Deno.test(debugOffsetsTest(install.label), async () => {
    await using python = await startPython(install.executable, chainScript().source);
    using attached = attachPython(python.pid);
    const { instance, data } = attached;
    const debug = readDebugOffsets(attached.memory, instance.runtime);
    if (data.version.minor < 13) {
      assert.equal(debug, null, `no "${DEBUG_COOKIE}" before 3.13`);
      return;
    }
    assert.ok(debug !== null);
    assert.equal(debug.version >>> 8, versionHex(data.version) >>> 8, "the running version is the file's");
    assert.equal(debug.freeThreaded, false);
    const table = pythonOffsets(data.version);
    assert.deepEqual(applyDebugOffsets(table, debug), table);
    assert.deepEqual(instance.offsets, table);
  });

  Deno.test(attachTest(install.label), async () => {
    await using python = await startPython(install.executable, chainScript().source);
    using attached = attachPython(python.pid);
    const ebpf = new CountingHandler();
    const instance = attached.data.attach(
      ebpf,
      python.pid,
      attached.instance.bias,
      attached.memory,
      attached.mappings,
    );
    assert.equal(ebpf.writes, 1);
    const record = ebpf.procDataOf("python", python.pid);
    assert.deepEqual(record, encodePythonProcInfo(instance.procInfo()));
    assert.equal(record?.length, PYTHON_PROC_INFO_LAYOUT.sizeof);
    instance.synchronizeMappings(ebpf, python.pid, attached.mappings);
    assert.equal(ebpf.writes, 1, "an unchanged record is not rewritten");
    const glibc = instance.tsdInfo();
    assert.ok(glibc !== null);
    instance.updateTsdInfo(ebpf, python.pid, { ...glibc, offset: glibc.offset + 8 });
    assert.equal(ebpf.writes, 2);
    assert.equal(instance.procInfo().tsdOffset, glibc.offset + 8);
    instance.detach(ebpf, python.pid);
    instance.detach(ebpf, python.pid);
    assert.equal(ebpf.procDataOf("python", python.pid), undefined);
    instance.updateTsdInfo(ebpf, python.pid, glibc);
    assert.equal(ebpf.procDataOf("python", python.pid), undefined, "a detached instance writes nothing");
  });
}

import assert from "node:assert/strict";
import { kernelFields, writeKernelFields } from "./kernel_fields.ts";
import { kernelFieldsLayout } from "../../support/types.ts";
import {
  compileBtf,
  compileTools,
  kernelBtf,
  runHostProgram,
  withTempFile,
} from "../btf/testdata/compile.ts";
import { programs, requiring } from "../testing/requirements.ts";

const compiler = programs(...compileTools(), "gcc");
const vmlinux = kernelBtf();

async function withFixture<T>(source: string, body: (path: string) => T): Promise<T> {
  return withTempFile(await compileBtf([source]), body);
}

Deno.test(requiring([compiler], {
  name: "kernelFields() gives each setting the offset the C compiler gives the field",
  fn: async () => {
    const offsets = new Map<string, number>();
    for (const line of (await runHostProgram("kernel_fixture_host.c")).trim().split("\n")) {
      const [struct, path, offset] = line.split(" ");
      offsets.set(`${struct}.${path}`, Number(offset));
    }
    const fields = await withFixture("kernel_fixture.bpf.c", (path) => kernelFields(path));
    assert.deepEqual(fields, {
      task_flags: offsets.get("task_struct.flags"),
      task_stack: offsets.get("task_struct.stack"),
      task_pid: offsets.get("task_struct.pid"),
      task_tgid: offsets.get("task_struct.tgid"),
      task_signal: offsets.get("task_struct.signal"),
      task_fsbase: offsets.get("task_struct.thread.fsbase"),
      signal_live: offsets.get("signal_struct.live"),
    });
  },
}));

Deno.test(requiring([compiler], {
  name: "kernelFields() refuses a kernel whose field has another size than the programs read",
  fn: async () => {
    await withFixture("kernel_fixture_wide_pid.bpf.c", (path) => {
      assert.throws(
        () => kernelFields(path),
        /Cannot read struct task_struct's pid: it has 8 bytes in this kernel, and omniprof's programs read 4$/,
      );
    });
  },
}));

Deno.test(requiring([vmlinux], {
  name: "writeKernelFields() writes the running kernel's offsets where struct kernel_fields has them",
  fn: () => {
    const at = 8;
    const bytes = new Uint8Array(at + kernelFieldsLayout.sizeof + 8);
    writeKernelFields(bytes, at);
    const view = new DataView(bytes.buffer);
    for (const [name, offset] of Object.entries(kernelFields())) {
      const field = kernelFieldsLayout[name as Exclude<keyof typeof kernelFieldsLayout, "sizeof">];
      assert.equal(view.getUint32(at + field.offset, true), offset, name);
    }
    assert.deepEqual([...bytes.subarray(0, at)], new Array(at).fill(0));
    assert.deepEqual([...bytes.subarray(at + kernelFieldsLayout.sizeof)], new Array(8).fill(0));
  },
}));

import assert from "node:assert/strict";
import { BtfKind, type BtfTypeId, parseBtf } from "./btf.ts";
import { KernelBtf, VMLINUX_BTF_PATH } from "./kernel_btf.ts";
import { compileBtf, compileTools, kernelBtf, runHostProgram, withTempFile } from "./testdata/compile.ts";
import { programs, requiring } from "../testing/requirements.ts";

const compiler = programs(...compileTools(), "gcc");
const vmlinux = kernelBtf();

Deno.test(requiring([compiler], {
  name: "KernelBtf.field() finds what the C compiler lays out, through anonymous structs and unions",
  fn: async () => {
    const expected = (await runHostProgram("kernel_fixture_host.c")).trim().split("\n");
    assert.ok(expected.length >= 10);
    await withTempFile(await compileBtf(["kernel_fixture.bpf.c"]), (path) => {
      using btf = KernelBtf.open(path);
      for (const line of expected) {
        const [struct, fieldPath, offset, size] = line.split(" ");
        assert.deepEqual(
          btf.field(struct!, fieldPath!),
          { offset: Number(offset), size: Number(size) },
          line,
        );
      }
    });
  },
}));

Deno.test(requiring([compiler], {
  name: "KernelBtf.field() refuses bitfields and names what is missing",
  fn: async () => {
    await withTempFile(await compileBtf(["kernel_fixture.bpf.c"]), (path) => {
      using btf = KernelBtf.open(path);
      assert.throws(
        () => btf.field("task_struct", "in_execve"),
        /task_struct's in_execve .*: member in_execve is a bitfield/,
      );
      assert.throws(
        () => btf.field("task_struct", "mm"),
        /Cannot find struct task_struct's mm in the kernel's BTF at .*: it has no member mm/,
      );
      assert.throws(() => btf.field("task_struct", "thread.gsbase"), /it has no member gsbase/);
      assert.throws(() => btf.field("task_struct", "flags.x"), /is not a struct or union/);
      assert.throws(
        () => btf.field("mm_struct", "start_stack"),
        /struct mm_struct's start_stack .*: there is no such struct/,
      );
      // Errors leave the reader usable.
      assert.equal(btf.field("signal_struct", "live").size, 4);
    });
  },
}));

Deno.test(requiring([compiler], {
  name: "KernelBtf.open() explains a missing, foreign or truncated file",
  fn: async () => {
    assert.throws(() => KernelBtf.open("/nonexistent/vmlinux"), /CONFIG_DEBUG_INFO_BTF=y/);
    await withTempFile(new TextEncoder().encode("not BTF at all, but long enough for a header"), (path) => {
      assert.throws(
        () => KernelBtf.open(path),
        /Cannot read the kernel's BTF at .*: Cannot parse BTF: bad magic/,
      );
    });
    const bytes = await compileBtf(["kernel_fixture.bpf.c"]);
    await withTempFile(bytes.subarray(0, 20), (path) => {
      assert.throws(() => KernelBtf.open(path), /shorter than the 24-byte header/);
    });
    // Cut inside the type section: the header promises more than the file holds.
    await withTempFile(bytes.subarray(0, 100), (path) => {
      assert.throws(() => KernelBtf.open(path), /ends past the 100-byte blob/);
    });
  },
}));

Deno.test(requiring([vmlinux], {
  name: "KernelBtf.field() agrees with the full parse on the running kernel, reading a few pages",
  fn: () => {
    const full = parseBtf(Deno.readFileSync(VMLINUX_BTF_PATH));
    const fileSize = Deno.statSync(VMLINUX_BTF_PATH).size;
    using btf = KernelBtf.open();
    const fields: [string, string][] = [
      ["task_struct", "flags"],
      ["task_struct", "stack"],
      ["task_struct", "pid"],
      ["task_struct", "tgid"],
      ["task_struct", "signal"],
      ["task_struct", "comm"],
      ["task_struct", "mm"],
      ["signal_struct", "live"],
      ["thread_struct", "fsbase"],
      ["mm_struct", "start_stack"],
    ];
    // The full parse's members, searching anonymous ones as C does (mm_struct keeps its fields in one).
    const find = (id: BtfTypeId, name: string): { offset: number; type: BtfTypeId } | undefined => {
      const type = full.type(full.resolve(id));
      assert.ok(type.kind === BtfKind.Struct || type.kind === BtfKind.Union);
      for (const m of type.members) {
        if (m.name === name) return { offset: m.bitOffset / 8, type: m.type };
        if (m.name !== "") continue;
        const inner = find(m.type, name);
        if (inner) return { offset: m.bitOffset / 8 + inner.offset, type: inner.type };
      }
      return undefined;
    };
    for (const [struct, name] of fields) {
      const [id] = full.findByName(struct, BtfKind.Struct);
      assert.ok(id !== undefined, struct);
      const member = find(id, name);
      assert.ok(member, `${struct}.${name} in the full parse`);
      assert.deepEqual(
        btf.field(struct, name),
        { offset: member.offset, size: full.sizeOf(member.type) },
        `${struct}.${name}`,
      );
    }
    const thread = btf.field("task_struct", "thread");
    assert.equal(
      btf.field("task_struct", "thread.fsbase").offset,
      thread.offset + btf.field("thread_struct", "fsbase").offset,
    );
    const pages = Math.ceil(fileSize / 4096);
    assert.ok(btf.pagesRead * 10 < pages, `read ${btf.pagesRead} of ${pages} pages`);
  },
}));

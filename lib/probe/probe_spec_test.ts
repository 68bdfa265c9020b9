import assert from "node:assert/strict";
import { parseProbe, ProbeError, type ProbeMachine, resolveProbe } from "./probe_spec.ts";
import type { Tracefs } from "./tracefs.ts";
import { programs, requiring } from "../testing/requirements.ts";

Deno.test("parseProbe() reads each kind of event, a path with a colon included", () => {
  assert.deepEqual(parseProbe("uprobe:/usr/bin/app:handle"), {
    kind: "uprobe",
    path: "/usr/bin/app",
    symbol: "handle",
  });
  assert.deepEqual(parseProbe("uretprobe:/opt/a:b/app:handle_v2"), {
    kind: "uretprobe",
    path: "/opt/a:b/app",
    symbol: "handle_v2",
  });
  assert.deepEqual(parseProbe("uprobe:libc.so.6:malloc"), {
    kind: "uprobe",
    path: "libc.so.6",
    symbol: "malloc",
  });
  assert.deepEqual(parseProbe("tracepoint:sched:sched_switch"), {
    kind: "tracepoint",
    category: "sched",
    name: "sched_switch",
  });
  assert.deepEqual(parseProbe("kprobe:do_sys_openat2"), { kind: "kprobe", function: "do_sys_openat2" });
});

Deno.test("parseProbe() refuses malformed events, saying what it expected", () => {
  const cases: [string, RegExp][] = [
    ["uprobe:/bin/true", /expected uprobe:PATH:SYMBOL/],
    ["uprobe::main", /expected uprobe:PATH:SYMBOL/],
    ["uprobe:/bin/true:", /expected uprobe:PATH:SYMBOL/],
    ["uprobe:/bin/true:a b", /expected uprobe:PATH:SYMBOL/],
    ["tracepoint:syscalls", /expected tracepoint:CATEGORY:NAME/],
    ["tracepoint:a:b:c", /expected tracepoint:CATEGORY:NAME/],
    ["tracepoint:../x:y", /expected tracepoint:CATEGORY:NAME/],
    ["kprobe:", /expected kprobe:FUNCTION/],
    ["kprobe:a/b", /expected kprobe:FUNCTION/],
    ["usdt:/bin/x:p", /unknown kind of event "usdt"/],
    ["", /unknown kind of event ""/],
  ];
  for (const [text, message] of cases) {
    assert.throws(
      () => parseProbe(text),
      (error: unknown) => error instanceof ProbeError && message.test(error.message),
      text,
    );
  }
});

/** A machine with the given tracepoints and kernel functions, and kprobes or not. */
function machine(options: { kprobes: boolean; tracepoints?: string[]; functions?: string[] }): ProbeMachine {
  return {
    tracefs: () =>
      ({
        path: "/sys/kernel/tracing",
        hasTracepoint: (category: string, name: string) =>
          (options.tracepoints ?? []).includes(`${category}:${name}`),
      }) as unknown as Tracefs,
    kprobesSupported: () => options.kprobes,
    kernelFunction: (name) => (options.functions ?? []).includes(name),
  };
}

Deno.test("resolveProbe() checks tracepoints and kernel functions against the machine", () => {
  const here = machine({ kprobes: true, tracepoints: ["syscalls:sys_enter_write"], functions: ["vfs_read"] });
  assert.deepEqual(resolveProbe(parseProbe("tracepoint:syscalls:sys_enter_write"), here), {
    kind: "tracepoint",
    name: "tracepoint:syscalls:sys_enter_write",
    category: "syscalls",
    tracepoint: "sys_enter_write",
  });
  assert.throws(
    () => resolveProbe(parseProbe("tracepoint:syscalls:sys_enter_nope"), here),
    /no such tracepoint/,
  );
  assert.deepEqual(resolveProbe(parseProbe("kprobe:vfs_read"), here), {
    kind: "kprobe",
    name: "kprobe:vfs_read",
    function: "vfs_read",
  });
  assert.throws(() => resolveProbe(parseProbe("kprobe:vfs_nope"), here), /has no function vfs_nope/);
  const noKprobes = machine({ kprobes: false, functions: ["vfs_read"] });
  assert.throws(() => resolveProbe(parseProbe("kprobe:vfs_read"), noKprobes), /cannot attach kprobes/);
});

/** `readelf`'s answer for `symbol` of `path`: its address, and the file offset of that address. */
async function readelfOffset(path: string, symbol: string): Promise<number> {
  const run = async (args: string[]) =>
    new TextDecoder().decode((await new Deno.Command("readelf", { args, stdout: "piped" }).output()).stdout);
  const symbols = await run(["-Ws", path]);
  // Dynamic symbols carry their version: malloc@@GLIBC_2.2.5.
  const line = symbols.split("\n").find((text) =>
    text.trim().split(/\s+/)[7]?.replace(/@.*/, "") === symbol && / FUNC /.test(text)
  );
  assert.ok(line, `readelf lists ${symbol}`);
  const address = parseInt(line.trim().split(/\s+/)[1]!, 16);
  for (const header of (await run(["-lW", path])).split("\n")) {
    const fields = header.trim().split(/\s+/);
    if (fields[0] !== "LOAD") continue;
    const [offset, vaddr, , , memsz] = fields.slice(1, 6).map((field) => parseInt(field, 16)) as number[];
    if (address >= vaddr! && address < vaddr! + memsz!) return address - vaddr! + offset!;
  }
  throw new Error(`no LOAD segment of ${path} holds ${symbol}`);
}

Deno.test(requiring([programs("readelf")], {
  name: "resolveProbe() finds a uprobe's file in the library folders and its function's file offset",
  async fn() {
    const probe = resolveProbe(parseProbe("uprobe:libc.so.6:malloc"), machine({ kprobes: false }));
    assert.equal(probe.kind, "uprobe");
    if (probe.kind !== "uprobe") return;
    assert.equal(probe.path, Deno.realPathSync("/lib/x86_64-linux-gnu/libc.so.6"));
    assert.equal(probe.name, `uprobe:${probe.path}:malloc`);
    assert.equal(probe.fileOffset, await readelfOffset(probe.path, "malloc"));
  },
}));

Deno.test("resolveProbe() refuses a missing file, a file that is not ELF, and a missing function", () => {
  const none = machine({ kprobes: false });
  assert.throws(
    () => resolveProbe(parseProbe("uprobe:/no/such/file:main"), none),
    /no file \/no\/such\/file$/,
  );
  assert.throws(
    () => resolveProbe(parseProbe("uprobe:no-such-program-here:main"), none),
    /in PATH or the library/,
  );
  assert.throws(() => resolveProbe(parseProbe("uprobe:/etc/hostname:main"), none), /not an ELF file/);
  assert.throws(
    () => resolveProbe(parseProbe("uretprobe:libc.so.6:no_such_function_here"), none),
    /has no function no_such_function_here/,
  );
  // A symbol that is data, not code.
  assert.throws(() => resolveProbe(parseProbe("uprobe:libc.so.6:environ"), none), /has no function environ/);
});

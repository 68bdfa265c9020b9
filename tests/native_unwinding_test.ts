/**
 * NativeUnwinding's bookkeeping of a process's mappings in the pid/page trie, on a real BPF object: a
 * process read again writes only what changed.
 */
import assert from "node:assert/strict";
import { ProcessManager, type ResolvedMapping } from "../lib/process/process_manager.ts";
import { Tracer } from "../lib/record/tracer.ts";
import type { Address, Pid } from "../lib/types.ts";
import { NativeUnwinding } from "../lib/unwind/native_unwinding.ts";
import { UnwindProgram } from "../support/types.ts";
import { tracingTest } from "./helpers.ts";
import { BpfObject } from "../lib/bpf/object.ts";
import { bpfObjectBytes } from "../support/bpf_object.ts";
import { KERNEL_NAMES_PROGRAM } from "../lib/symbolize/bpf_kernel_names.ts";

Deno.test(tracingTest("a process read again writes only its changed mappings to the trie", () => {
  using tracer = Tracer.start({ frequencyHz: 99, paused: true });
  const unwinding = new NativeUnwinding(tracer.object, () => UnwindProgram.Native);
  // This process's own executable mappings, as the process manager resolves them.
  let mappings: readonly ResolvedMapping[] = [];
  using processes = new ProcessManager({
    listener: { onMappings: (_pid, seen) => mappings = seen, onExit: () => {} },
  });
  processes.preloadProcess(Deno.pid as Pid);
  assert.ok(mappings.length >= 3, `${mappings.length} executable mappings of this process`);
  const pid = 0x3fff_fff0 as Pid; // a pid no process has: the entries are only bookkeeping here

  unwinding.onMappings(pid, mappings);
  const first = unwinding.stats;
  assert.ok(first.trieEntries > 0);
  assert.equal(first.trieWrites, first.trieEntries, "each prefix written once");

  unwinding.onMappings(pid, mappings);
  assert.equal(unwinding.stats.trieWrites, first.trieWrites, "the same mappings again: nothing written");
  assert.equal(unwinding.stats.trieEntries, first.trieEntries);

  // One mapping gone, then back: only its prefixes are deleted, then written. ([vsyscall], last, lies
  // in kernel space and is never installed.)
  const victim = mappings.findIndex((mapping) => mapping.end < 2 ** 47);
  const without = mappings.filter((_, i) => i !== victim);
  unwinding.onMappings(pid, without);
  const removed = unwinding.stats.trieWrites - first.trieWrites;
  assert.ok(removed > 0 && removed < first.trieWrites, `${removed} deletes of ${first.trieWrites} entries`);
  assert.equal(unwinding.stats.trieEntries, first.trieEntries - removed);
  unwinding.onMappings(pid, mappings);
  assert.equal(unwinding.stats.trieWrites, first.trieWrites + 2 * removed);
  assert.equal(unwinding.stats.trieEntries, first.trieEntries);

  // A mapping that moved (to an address nothing else maps) is rewritten; the process's exit removes
  // everything.
  const old = mappings[victim]!;
  const start = 0x100_0000_0000;
  const moved = [...without, {
    ...old,
    start: start as Address,
    end: (start + old.end - old.start) as Address,
  }];
  unwinding.onMappings(pid, moved);
  assert.ok(unwinding.stats.trieWrites > first.trieWrites + 2 * removed);
  unwinding.onExit(pid);
  assert.equal(unwinding.stats.trieEntries, 0);
  // Every file reference the mappings took was given back with them.
  assert.equal(unwinding.stats.filesMapped, 0);
}));

Deno.test(
  tracingTest("a large file loads a page at a time, or whole when it holds an interpreter loop", () => {
    using tracer = Tracer.start({ frequencyHz: 99, paused: true });
    let mappings: readonly ResolvedMapping[] = [];
    using processes = new ProcessManager({
      listener: { onMappings: (_pid, seen) => mappings = seen, onExit: () => {} },
    });
    processes.preloadProcess(Deno.pid as Pid);
    // libc: thousands of FDEs, so a native library of its size is loaded page by page.
    const libc = mappings.find((mapping) => /\/libc\.so\.6$/.test(mapping.path));
    assert.ok(libc !== undefined, "this process maps libc.so.6");
    const pid = 0x3fff_fff0 as Pid;
    // An ELF address amid libc's code (its text is mapped at the file offset of its ELF address).
    const address = libc.fileOffset + Math.floor((libc.end - libc.start) / 2);

    const native = new NativeUnwinding(tracer.object, () => UnwindProgram.Native);
    native.onMappings(pid, mappings);
    const nativeId = native.idOf(libc.file)!;
    native.onFileNeeded(nativeId, address);
    assert.equal(native.stats.pagesLoaded, 1, "one page of libc");
    const pageBytes = native.stats.deltaBytes;
    assert.ok(pageBytes > 0, "the page has rows");
    native.onExit(pid);

    // The same library as the home of an interpreter's loop: every page at the first need.
    const interpreted = new NativeUnwinding(
      tracer.object,
      (file) => file.key === libc.file.key ? UnwindProgram.Python : UnwindProgram.Native,
    );
    interpreted.onMappings(pid, mappings);
    interpreted.onFileNeeded(interpreted.idOf(libc.file)!, address);
    assert.equal(interpreted.stats.pagesLoaded, 0, "no page loaded alone");
    assert.ok(
      interpreted.stats.deltaBytes > 4 * pageBytes,
      `the whole table (${interpreted.stats.deltaBytes} bytes) against one page (${pageBytes})`,
    );
    interpreted.onExit(pid);
  }),
);

Deno.test(tracingTest("full BPF maps leave processes and files to frame pointers, and nothing throws", () => {
  using object = BpfObject.open(bpfObjectBytes, "omniprof.bpf.o");
  // Room for one process, three trie entries and two pages of stack deltas.
  object.map("known_pids").setMaxEntries(1);
  object.map("pid_page_to_mapping_info").setMaxEntries(3);
  object.map("stack_delta_page_to_info").setMaxEntries(2);
  object.program(KERNEL_NAMES_PROGRAM).setAutoload(false);
  object.load();
  const unwinding = new NativeUnwinding(object, () => UnwindProgram.Native);
  let mappings: readonly ResolvedMapping[] = [];
  using processes = new ProcessManager({
    listener: { onMappings: (_pid, seen) => mappings = seen, onExit: () => {} },
  });
  processes.preloadProcess(Deno.pid as Pid);
  const pids = [0x3fff_fff0 as Pid, 0x3fff_fff1 as Pid];
  for (const pid of pids) unwinding.onMappings(pid, mappings);
  assert.ok(unwinding.stats.mappingsNotInstalled > 0, "the trie ran out of room");
  const libc = mappings.find((mapping) => /\/libc\.so\.6$/.test(mapping.path))!;
  const id = unwinding.idOf(libc.file)!;
  for (const share of [0.1, 0.3, 0.5, 0.7]) {
    unwinding.onFileNeeded(id, libc.fileOffset + Math.floor((libc.end - libc.start) * share));
  }
  assert.ok(unwinding.stats.filesFailed > 0, "pages past the map's room failed");
  for (const pid of pids) unwinding.onExit(pid);
  assert.equal(unwinding.stats.trieEntries, 0, "no partly installed mapping was left in the trie");

  // A file whose pages do not all fit is not loaded at all: the two it wrote are taken back, so a small
  // library fits afterwards.
  unwinding.onMappings(pids[0]!, mappings);
  const failed = unwinding.stats.filesFailed;
  unwinding.onPreload(libc.file);
  assert.equal(unwinding.stats.filesFailed, failed + 1, "libc's 20-odd pages did not fit");
  const small = mappings.find((mapping) => /\/lib(dl|pthread|rt)\.so/.test(mapping.path));
  assert.ok(small !== undefined, "this process maps a small glibc stub library");
  unwinding.onPreload(small.file);
  assert.equal(unwinding.stats.filesFailed, failed + 1, `${small.path} fits`);
  unwinding.onExit(pids[0]!);
}));

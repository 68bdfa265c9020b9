/**
 * The native unwinder's state on a real BPF object: a process's mappings in the pid/page trie (a process
 * read again writes only what changed), files' stack deltas loaded by page or whole, and full maps.
 */
import { openTracerObject } from "../lib/record/tracer_object.ts";
import assert from "node:assert/strict";
import { FileRegistry } from "../lib/process/file_registry.ts";
import type { ResolvedMapping } from "../lib/process/mapped_file.ts";
import { type InstallerMaps, MappingInstaller } from "../lib/process/mapping_installer.ts";
import { ProcessManager } from "../lib/process/process_manager.ts";
import type { Data } from "../lib/interpreter/interpreter.ts";
import type { Runtime } from "../lib/interpreter/runtime.ts";
import { pythonRuntime } from "../lib/interpreter/python/runtime.ts";
import { Tracer } from "../lib/record/tracer.ts";
import type { Address, Pid } from "../lib/types.ts";
import { PidPageMappings } from "../lib/unwind/pid_page_mappings.ts";
import { PythonUnwindProgram, UnwindProgram } from "../support/types.ts";
import { tracingTest } from "./helpers.ts";
import type { BpfObject } from "../lib/bpf/object.ts";
import { KERNEL_NAMES_PROGRAM } from "../lib/symbolize/bpf_kernel_names.ts";

/** The trie and known-pid set of `object`, as the process manager writes them. */
function installerMaps(object: BpfObject): InstallerMaps {
  const trie = new PidPageMappings(object.map("pid_page_to_mapping_info"), object.map("mapping_generation"));
  return { trie, knownPids: object.map("known_pids") };
}

/** This process's own executable mappings, resolved against `files` (a host-side process manager). */
function ownMappings(files: FileRegistry): { mappings: readonly ResolvedMapping[]; done(): void } {
  const processes = new ProcessManager({ files });
  processes.onExec(Deno.pid as Pid);
  return {
    mappings: processes.mappingsOf(Deno.pid as Pid),
    // The host side holds its mappings' references too: it gives them back at the process's exit.
    done: () => processes.onExit(Deno.pid as Pid),
  };
}

/** A pid no process has: the entries are only bookkeeping here. */
const PID = 0x3fff_fff0 as Pid;

Deno.test(tracingTest("a process read again writes only its changed mappings to the trie", () => {
  using tracer = Tracer.start({ frequencyHz: 99, paused: true });
  using files = new FileRegistry({ object: tracer.object, graceMs: 0 });
  const installer = new MappingInstaller(files, installerMaps(tracer.object));
  const own = ownMappings(files);
  const mappings = own.mappings;
  assert.ok(mappings.length >= 3, `${mappings.length} executable mappings of this process`);

  let installed = installer.update(PID, [], mappings);
  const first = installer.stats;
  assert.ok(first.trieEntries > 0);
  assert.equal(first.trieWrites, first.trieEntries, "each prefix written once");

  installed = installer.update(PID, installed, mappings);
  assert.equal(installer.stats.trieWrites, first.trieWrites, "the same mappings again: nothing written");
  assert.equal(installer.stats.trieEntries, first.trieEntries);

  // One mapping gone, then back: only its prefixes are deleted, then written. ([vsyscall], last, lies
  // in kernel space and is never installed.)
  const victim = mappings.findIndex((mapping) => mapping.end < 2 ** 47);
  const without = mappings.filter((_, i) => i !== victim);
  installed = installer.update(PID, installed, without);
  const removed = installer.stats.trieWrites - first.trieWrites;
  assert.ok(removed > 0 && removed < first.trieWrites, `${removed} deletes of ${first.trieWrites} entries`);
  assert.equal(installer.stats.trieEntries, first.trieEntries - removed);
  installed = installer.update(PID, installed, mappings);
  assert.equal(installer.stats.trieWrites, first.trieWrites + 2 * removed);
  assert.equal(installer.stats.trieEntries, first.trieEntries);

  // A mapping that moved (to an address nothing else maps) is rewritten; the process's exit removes
  // everything.
  const old = mappings[victim]!;
  const start = 0x100_0000_0000;
  const moved = [...without, {
    ...old,
    start: start as Address,
    end: (start + old.end - old.start) as Address,
  }];
  installed = installer.update(PID, installed, moved);
  assert.ok(installer.stats.trieWrites > first.trieWrites + 2 * removed);
  installer.remove(PID, installed);
  assert.equal(installer.stats.trieEntries, 0);
  // Every file reference the mappings took was given back with them: after the grace period (none
  // here), no file has state left.
  own.done();
  assert.ok(files.stats.filesMapped > 0, "the files wait out their grace period");
  files.sweep();
  assert.equal(files.stats.filesMapped, 0);
}));

/** A runtime that claims the C library as the home of its interpreter loop. */
const libcAsInterpreter: Runtime = {
  name: "python",
  frameKind: pythonRuntime.frameKind,
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
  unwinder: null,
  jitCode: false,
  processMap: null,
  bpfMetrics: {},
  check: null,
};

Deno.test(
  tracingTest("a large file loads a page at a time, or whole when it holds an interpreter loop", () => {
    using tracer = Tracer.start({ frequencyHz: 99, paused: true });
    const bytes: number[] = [];
    for (const runtimes of [[], [libcAsInterpreter]]) {
      using files = new FileRegistry({ object: tracer.object, runtimes, graceMs: 0 });
      const own = ownMappings(files);
      // libc: thousands of FDEs, so a native library of its size is loaded page by page.
      const libc = own.mappings.find((mapping) => /\/libc\.so\.6$/.test(mapping.path));
      assert.ok(libc !== undefined, "this process maps libc.so.6");
      // An ELF address amid libc's code (its text is mapped at the file offset of its ELF address).
      const address = libc.fileOffset + Math.floor((libc.end - libc.start) / 2);
      const use = files.acquire(libc.file)!;
      files.onFileNeeded(use.bpfId, address);
      if (runtimes.length === 0) {
        assert.equal(use.program, UnwindProgram.Native);
        assert.equal(files.stats.pagesLoaded, 1, "one page of libc");
        assert.ok(files.stats.deltaBytes > 0, "the page has rows");
      } else {
        // The same library as the home of an interpreter's loop: every page at the first need.
        assert.equal(use.program, PythonUnwindProgram.Python);
        assert.equal(files.stats.pagesLoaded, 0, "no page loaded alone");
        assert.ok(files.stats.filesLoaded >= 1 && files.stats.deltaBytes > 0);
      }
      bytes.push(files.stats.deltaBytes);
      files.release(libc.file);
      own.done();
      files.sweep();
      // The rows go back; the rules they used stay in the array all files share.
      assert.ok(files.stats.deltaBytes < bytes.at(-1)!, "unloaded: its rows given back");
      assert.equal(files.stats.filesMapped, 0);
    }
    const [page, whole] = bytes as [number, number];
    assert.ok(whole > 4 * page, `the whole table (${whole} bytes) against one page (${page})`);
  }),
);

Deno.test(tracingTest("full BPF maps leave processes and files to frame pointers, and nothing throws", () => {
  using object = openTracerObject();
  // Room for one process, three trie entries and two pages of stack deltas.
  object.map("known_pids").setMaxEntries(1);
  object.map("pid_page_to_mapping_info").setMaxEntries(3);
  object.map("stack_delta_page_to_info").setMaxEntries(2);
  object.program(KERNEL_NAMES_PROGRAM).setAutoload(false);
  object.load();
  using files = new FileRegistry({ object });
  const installer = new MappingInstaller(files, installerMaps(object));
  const own = ownMappings(files);
  const mappings = own.mappings;
  const pids = [0x3fff_fff0 as Pid, 0x3fff_fff1 as Pid];
  const installed = pids.map((pid) => installer.update(pid, [], mappings));
  assert.ok(installer.stats.mappingsNotInstalled > 0, "the trie ran out of room");
  const libc = mappings.find((mapping) => /\/libc\.so\.6$/.test(mapping.path))!;
  const id = files.acquire(libc.file)!.bpfId;
  for (const share of [0.1, 0.3, 0.5, 0.7]) {
    files.onFileNeeded(id, libc.fileOffset + Math.floor((libc.end - libc.start) * share));
  }
  assert.ok(files.stats.filesFailed > 0, "pages past the map's room failed");
  pids.forEach((pid, i) => installer.remove(pid, installed[i]!));
  assert.equal(installer.stats.trieEntries, 0, "no partly installed mapping was left in the trie");
  files.release(libc.file);
  own.done();

  // A file whose pages do not all fit is not loaded at all: the two it wrote are taken back, so a small
  // library fits afterwards. (Its pages of before were unloaded with it at the grace period's end.)
  files.sweep(performance.now() + 60_000);
  const failed = files.stats.filesFailed;
  files.preload(libc.file);
  assert.equal(files.stats.filesFailed, failed + 1, "libc's 20-odd pages did not fit");
  const small = mappings.find((mapping) => /\/lib(dl|pthread|rt)\.so/.test(mapping.path));
  assert.ok(small !== undefined, "this process maps a small glibc stub library");
  files.preload(small.file);
  assert.equal(files.stats.filesFailed, failed + 1, `${small.path} fits`);
}));

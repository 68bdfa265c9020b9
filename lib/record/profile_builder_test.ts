import assert from "node:assert/strict";
import {
  buildProfile,
  buildProfileInterruptibly,
  JITDUMP_MAPPING,
  PERF_MAP_MAPPING,
} from "./profile_builder.ts";
import type { Stack, StackFrame } from "./stack_table.ts";
import type { MappedFile } from "../process/mapped_file.ts";
import type { KernelSymbolLookup } from "../symbolize/kallsyms.ts";
import { JitDump } from "../symbolize/jitdump.ts";
import { JitNames } from "../symbolize/jit_names.ts";
import { PerfMap } from "../symbolize/perf_map.ts";
import { concat, debugInfo, GrowingFile, header, load } from "../testing/jitdump_writer.ts";
import { PerfMaps } from "../symbolize/perf_maps.ts";
import type { Pid, Tid } from "../types.ts";
import { FrameMarker } from "../../support/types.ts";
import { RegularFile } from "../sys/regular_file.ts";
import { run } from "../testing/commands.ts";
import { programs, requiring } from "../testing/requirements.ts";

/** The C library this process runs with (Deno maps it). */
const LIBC = Deno.readTextFileSync("/proc/self/maps").split("\n").map((line) => line.split(/\s+/)[5] ?? "")
  .find((path) => /\/libc\.so\.6$/.test(path))!;
const libc: MappedFile = {
  key: "libc",
  kind: "file",
  path: LIBC,
  fileId: null,
  readable: true,
  refusal: null,
  root: null,
  open: () => RegularFile.open(LIBC),
};
const INFO = { startTimeNs: 0, durationNs: 1e9, periodNs: 1e7 };

/** The ELF address of libc's `name`, from nm: what the builder must find there. */
function libcFunction(name: string): number {
  const line = run("nm", "-D", "--defined-only", LIBC).split("\n").find((l) =>
    / [TW] /.test(l) && l.endsWith(` ${name}@@GLIBC_2.2.5`)
  );
  assert.ok(line, `${name} in libc`);
  return parseInt(line.split(" ")[0]!, 16);
}

function stack(frames: StackFrame[]): Stack {
  return { pid: 1 as Pid, tid: 1 as Tid, comm: "t", frames, stopReason: 0, count: 1, offCpuNs: 0 };
}

function kernelFrame(address: number): StackFrame {
  return { kind: FrameMarker.Native, returnAddress: false, addressKind: "kernel", address, file: null };
}

function libcFrame(address: number): StackFrame {
  return { kind: FrameMarker.Native, returnAddress: false, addressKind: "vaddr", address, file: libc };
}

Deno.test(requiring([programs("nm")], {
  name:
    "buildProfileInterruptibly() names what it reached before the interrupt, and keeps addresses after it",
  fn: async () => {
    const qsort = libcFunction("qsort");
    const getpid = libcFunction("getpid");
    const controller = new AbortController();
    // The first kernel name asked for stands for a Ctrl-C in the middle of symbolizing.
    const kernel: KernelSymbolLookup = {
      lookup(address) {
        controller.abort("SIGINT");
        return { name: `kernel_function_${address.toString(16)}`, module: null, offset: 0 };
      },
    };
    const stacks = [
      stack([kernelFrame(0x81000000), libcFrame(qsort)]),
      stack([kernelFrame(0x81000100), libcFrame(getpid)]),
    ];
    const { profile, complete } = await buildProfileInterruptibly(
      stacks,
      INFO,
      { kernel },
      controller.signal,
      0,
    );
    assert.equal(complete, false);
    const names = profile.samples.map((sample) =>
      sample.locations.map((i) => profile.locations[i]!.functionName)
    );
    assert.deepEqual(names[0], ["kernel_function_81000000", "qsort"], "named before the interrupt");
    assert.deepEqual(names[1], ["[kernel+0xffffffff81000100]", `[libc.so.6+0x${getpid.toString(16)}]`]);
    const kept = profile.locations[profile.samples[1]!.locations[1]!]!;
    assert.equal(kept.address, getpid, "the address stays, for a later look-up");
    assert.equal(profile.mappings[kept.mapping]!.fileName, LIBC);
  },
}));

Deno.test(requiring([programs("nm")], {
  name: "buildProfileInterruptibly() without an interrupt names everything, as buildProfile() does",
  fn: async () => {
    const stacks = [stack([libcFrame(libcFunction("qsort"))]), stack([libcFrame(libcFunction("getpid"))])];
    const { profile, complete } = await buildProfileInterruptibly(
      stacks,
      INFO,
      { kernel: null },
      new AbortController().signal,
      0,
    );
    assert.equal(complete, true);
    assert.deepEqual(profile, buildProfile(stacks, INFO, { kernel: null }));
    assert.deepEqual(profile.locations.map((l) => l.functionName), ["qsort", "getpid"]);
  },
}));

const anonymous: MappedFile = {
  ...libc,
  key: "[anonymous]",
  kind: "anonymous",
  path: "[anonymous]",
  readable: false,
};

function jitFrame(address: number, jit: JitNames, returnAddress = false): StackFrame {
  return { kind: FrameMarker.Native, returnAddress, addressKind: "jit", address, file: anonymous, jit };
}

Deno.test("buildProfile() names JIT frames from their process's perf map, in the mapping [perf-map]", () => {
  const first = new PerfMap();
  first.append(
    new TextEncoder().encode("7f0000001000 100 JS:*leaf /a.js:1:1\n7f0000002000 100 JS:*main /a.js:9:1\n"),
  );
  const second = new PerfMap();
  second.append(new TextEncoder().encode("7f0000001000 100 Other::Process()\n"));
  const counts = new PerfMaps();
  const firstNames = new JitNames(first);
  const secondNames = new JitNames(second);
  const stacks = [
    // The caller's return address is just past its call: the call names it, even at the function's end.
    {
      ...stack([jitFrame(0x7f0000001010, firstNames), jitFrame(0x7f0000002100, firstNames, true)]),
      count: 3,
    },
    stack([jitFrame(0x7f0000001010, secondNames), jitFrame(0x7f0000005000, secondNames)]),
  ];
  const profile = buildProfile(stacks, INFO, { kernel: null, perfMaps: counts });
  const names = profile.samples.map((sample) =>
    sample.locations.map((i) => {
      const location = profile.locations[i]!;
      return `${location.functionName} in ${profile.mappings[location.mapping]!.fileName}`;
    })
  );
  assert.deepEqual(names, [
    [`JS:*leaf /a.js:1:1 in ${PERF_MAP_MAPPING}`, `JS:*main /a.js:9:1 in ${PERF_MAP_MAPPING}`],
    [`Other::Process() in ${PERF_MAP_MAPPING}`, "[anonymous] in [anonymous]"],
  ]);
  const unnamed = profile.locations[profile.samples[1]!.locations[1]!]!;
  assert.equal(unnamed.address, 0x7f0000005000, "an unnamed JIT frame keeps its address");
  assert.equal(profile.mappings.find((m) => m.fileName === PERF_MAP_MAPPING)!.hasFunctions, true);
  assert.deepEqual([counts.stats.framesNamed, counts.stats.framesUnnamed], [7, 1]);
});

Deno.test("buildProfile() names JIT frames from the jitdump first, with lines, in the mapping [jitdump]", () => {
  const map = new PerfMap();
  map.append(
    new TextEncoder().encode("7f0000001000 100 JS:*leaf /a.js:1:1\n7f0000002000 100 JS:*main /a.js:9:1\n"),
  );
  const dump = new JitDump();
  const code = 0x7f0000001000;
  const bytes = concat(
    header(),
    debugInfo(code, [{ address: code, line: 2, file: "/a.js" }, {
      address: code + 0x20,
      line: 3,
      file: "/a.js",
    }]),
    load(code, 0x100, "leaf", 1),
  );
  dump.follow(() => new GrowingFile(bytes));
  const counts = new PerfMaps();
  const names = new JitNames(map, dump);
  const profile = buildProfile(
    [{ ...stack([jitFrame(code + 0x24, names), jitFrame(0x7f0000002010, names, true)]), count: 2 }],
    INFO,
    { kernel: null, perfMaps: counts },
  );
  const locations = profile.samples[0]!.locations.map((i) => {
    const location = profile.locations[i]!;
    return [
      location.functionName,
      location.sourceFile,
      location.line,
      profile.mappings[location.mapping]!.fileName,
    ];
  });
  assert.deepEqual(locations, [
    ["leaf", "/a.js", 3, JITDUMP_MAPPING],
    ["JS:*main /a.js:9:1", "", 0, PERF_MAP_MAPPING],
  ]);
  const stats = counts.stats;
  assert.deepEqual([stats.framesNamed, stats.framesNamedFromJitdumps, stats.framesUnnamed], [4, 2, 0]);
});

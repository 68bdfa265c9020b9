import assert from "node:assert/strict";
import { buildProfile, buildProfileInterruptibly } from "./profile_builder.ts";
import type { Stack, StackFrame } from "./stack_table.ts";
import type { MappedFile } from "../process/mapped_file.ts";
import type { KernelSymbolLookup } from "../symbolize/kallsyms.ts";
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
  return { pid: 1 as Pid, tid: 1 as Tid, comm: "t", frames, stopReason: 0, count: 1 };
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

// Stacks that BPF copies for the host to unwind (a process whose mappings it does not know yet): the host
// must unwind them as BPF would have, and short-lived processes must get complete stacks from them.
// Needs root and BTF.
import assert from "node:assert/strict";
import {
  buildWorkload,
  countWhere,
  type FoldedStack,
  hasChain,
  parseFolded,
  runCli,
  tempDir,
  tracingTest,
} from "./helpers.ts";
import { Recorder } from "../lib/record/recorder.ts";
import { ElfFile } from "../lib/elf/elf_file.ts";
import { findElfSymbols } from "../lib/interpreter/elf_symbols.ts";
import { delay } from "../lib/sys/timer.ts";
import type { Pid } from "../lib/types.ts";
import { StackCopyMode } from "../support/types.ts";

/** The C runtime's frames a stack may start with (glibc's CFI ends the stack at one of these). */
const ROOTS = ["_start", "__libc_start_main", "__libc_start_call_main"];

/**
 * Records `program` (a workload of tests/workloads, told to burn CPU for 30 s) for 5 s with BPF's stack
 * copying set to `mode`; returns its stacks (root first) and how many samples the host unwound from copies.
 */
async function recordWorkload(
  program: string,
  mode: StackCopyMode,
): Promise<{ stacks: FoldedStack[]; hostUnwound: number }> {
  const workload = new Deno.Command(program, { args: ["30"], stdout: "null" }).spawn();
  try {
    using recorder = Recorder.start({ frequencyHz: 99, pids: [workload.pid as Pid], stackCopy: mode });
    await delay(5000);
    const profile = recorder.takeProfile();
    const stacks = profile.samples.filter((sample) => sample.pid === workload.pid).map((sample) => ({
      comm: sample.comm,
      frames: sample.locations.map((index) => profile.locations[index]!.functionName).reverse(),
      count: sample.count,
    }));
    return { stacks, hostUnwound: recorder.unwindStats().hostUnwound.samples };
  } finally {
    workload.kill();
    await workload.status;
  }
}

/** The frames from the root down to `chain` (consecutive frames), or null when the chain is not there. */
function throughChain(stack: FoldedStack, chain: string[]): string | null {
  if (!hasChain(stack.frames, chain)) return null;
  const end = stack.frames.lastIndexOf(chain[chain.length - 1]!);
  return stack.frames.slice(0, end + 1).join(";");
}

/** The most common root-to-`chain` prefix of `stacks` and its share of their samples. */
function dominantPrefix(stacks: FoldedStack[], chain: string[], label: string) {
  const counts = new Map<string, number>();
  for (const stack of stacks) {
    const prefix = throughChain(stack, chain) ?? "(chain missing)";
    counts.set(prefix, (counts.get(prefix) ?? 0) + stack.count);
  }
  const total = countWhere(stacks, () => true);
  assert.ok(total >= 100, `${label}: too few samples (${total})`);
  const [prefix, count] = [...counts].sort((a, b) => b[1] - a[1])[0]!;
  console.log(`${label}: ${count}/${total} samples are ${prefix}`);
  return { prefix, share: count / total };
}

/**
 * Records `program` with BPF unwinding, then with every stack copied and unwound on the host, and checks
 * that both give the same frames from the root to `chain` (functions of the workload's source) in at least
 * 95% of samples. Returns both recordings' stacks.
 */
async function assertSameStacks(
  program: string,
  chain: string[],
  copyMode: StackCopyMode = StackCopyMode.All,
) {
  const bpf = await recordWorkload(program, StackCopyMode.Unknown);
  const host = await recordWorkload(program, copyMode);
  const total = countWhere(host.stacks, () => true);
  // Every sample of the workload was copied and unwound on the host (from the leaf's caller on, with
  // StackCopyMode.AboveLeaf).
  assert.ok(host.hostUnwound >= total, `${host.hostUnwound} host-unwound of ${total} samples`);
  const fromBpf = dominantPrefix(bpf.stacks, chain, "BPF-unwound");
  const fromHost = dominantPrefix(host.stacks, chain, "host-unwound");
  assert.equal(fromHost.prefix, fromBpf.prefix);
  const frames = fromHost.prefix.split(";");
  assert.deepEqual(frames.slice(-chain.length), chain);
  assert.ok(ROOTS.includes(frames[0]!), frames[0]);
  assert.ok(fromBpf.share >= 0.95);
  assert.ok(fromHost.share >= 0.95);
  return { bpf: bpf.stacks, host: host.stacks };
}

Deno.test(
  tracingTest("copied stacks unwound on the host give the stacks BPF unwinding gives", async () => {
    // tests/workloads/chain.c and chain.h: main calls a, a b, b c, which burns the CPU.
    const chain = await buildWorkload("chain", ["-O2", "-fomit-frame-pointer"], "-nofp");
    await assertSameStacks(chain, ["main", "a", "b", "c"]);
  }),
);

Deno.test(
  tracingTest("stacks copied above the leaf go on on the host as BPF unwinding goes on", async () => {
    // BPF unwinds c, the leaf, and copies the rest from b on (its pc a return address, looked up at the
    // call, as BPF does): what BPF meets when a library it has no deltas or mapping for calls on.
    const chain = await buildWorkload("chain", ["-O2", "-fomit-frame-pointer"], "-nofp");
    await assertSameStacks(chain, ["main", "a", "b", "c"], StackCopyMode.AboveLeaf);
  }),
);

Deno.test(
  tracingTest("copied stacks through libc's qsort unwind on the host as in BPF", async () => {
    // tests/workloads/qsort_callback.c: main calls sort_rounds, which calls libc's qsort, whose merge sort
    // (recursive, so of varying depth) calls compare. libc is loaded page by page, here by the host.
    const qsort = await buildWorkload("qsort_callback", ["-O2", "-fomit-frame-pointer"]);
    const { bpf, host } = await assertSameStacks(qsort, ["main", "sort_rounds"]);
    for (const [label, stacks] of [["BPF-unwound", bpf], ["host-unwound", host]] as const) {
      const total = countWhere(stacks, () => true);
      const through = countWhere(stacks, (stack) => {
        const sortRounds = stack.frames.indexOf("sort_rounds");
        const qsortFrame = stack.frames.findIndex((frame) => /qsort/.test(frame));
        return sortRounds >= 0 && sortRounds < qsortFrame && qsortFrame < stack.frames.lastIndexOf("compare");
      });
      console.log(`${label}: ${through}/${total} samples reach compare through qsort`);
      assert.ok(through / total >= 0.9);
    }
  }),
);

/**
 * How the functions `names` of the ELF file `symbolsFrom` show in the folded output of its stripped twin
 * `stripped` (same code, no symbols): `[file+0xOFFSET]`; `_start` is the entry point.
 */
function strippedNames(symbolsFrom: string, stripped: string, names: string[]): Map<string, string> {
  using elf = ElfFile.fromBytes(Deno.readFileSync(symbolsFrom), symbolsFrom);
  const symbols = findElfSymbols(elf, names);
  const base = stripped.slice(stripped.lastIndexOf("/") + 1);
  const shown = new Map<string, string>();
  for (const name of names) {
    const address = name === "_start" ? elf.entry : symbols.get(name)!.value;
    const segment = elf.loadSegments.find((s) => address >= s.vaddr && address < s.vaddr + s.memsz)!;
    shown.set(name, `[${base}+0x${(address - segment.vaddr + segment.offset).toString(16)}]`);
  }
  return shown;
}

/** `p_type` of the program header that names a program's dynamic loader. */
const PT_INTERP = 3;

/**
 * How the root frame of a stack that the dynamic loader of `program` runs (before main) may show: `_start`
 * where the loader's symbols are at hand (Debian's ld.so keeps them in libc6-dbg's debug file), otherwise
 * `[ld-linux-x86-64.so.2+0xOFFSET]` at an address of its entry code, from the ELF entry to the return
 * address of the first call there (`call _dl_start`), which the root frame's address is.
 */
function loaderRoots(program: string): Set<string> {
  using elf = ElfFile.fromBytes(Deno.readFileSync(program), program);
  const interp = elf.programHeaders.find((p) => p.type === PT_INTERP)!;
  const path = new TextDecoder().decode(elf.read(interp.offset, interp.filesz)).replace(/\0+$/, "");
  using loader = ElfFile.fromBytes(Deno.readFileSync(path), path);
  const segment = loader.loadSegments.find((s) =>
    loader.entry >= s.vaddr && loader.entry < s.vaddr + s.memsz
  )!;
  const entryOffset = loader.entry - segment.vaddr + segment.offset;
  const code = loader.read(entryOffset, 16);
  const call = code.indexOf(0xe8); // call rel32: its return address is 5 bytes on
  assert.ok(call >= 0, `no call in the first 16 bytes at ${path}'s entry`);
  const base = path.slice(path.lastIndexOf("/") + 1);
  const roots = new Set(["_start"]);
  for (let offset = entryOffset; offset <= entryOffset + call + 5; offset++) {
    roots.add(`[${base}+0x${offset.toString(16)}]`);
  }
  return roots;
}

/**
 * Share of the samples of 200 runs of tests/workloads/short_lived.c (stripped, no frame pointers) that
 * must be complete. Measured with 2 CPUs at 99 Hz: 93-94% while unknown processes fell back to frame
 * pointers, 98% since their stacks are copied. In a fresh Debian root, where libc's deltas are new to
 * the host too, 56-63% while BPF fell back to frame pointers at a library or file new to it, 96-98% since
 * it copies the rest of the stack there. There the loader's `_start` has no name (no libc6-dbg): counted
 * by its address, 403/403 and 400/401 there (the host: 396/399); counted by name only, 93.7-95.5%.
 */
const SHORT_LIVED_COMPLETE = 0.95;

Deno.test(
  tracingTest(
    `a stripped short-lived program without frame pointers, run 200 times, is complete in ${
      SHORT_LIVED_COMPLETE * 100
    }% of samples`,
    async () => {
      const flags = ["-O2", "-fomit-frame-pointer"];
      const program = await buildWorkload("short_lived", [...flags, "-s"], "-stripped");
      const names = strippedNames(await buildWorkload("short_lived", flags, "-nofp"), program, [
        "_start",
        "main",
      ]);
      const comm = "short_lived-str"; // cut to the kernel's 15 characters
      const dir = tempDir();
      try {
        const script = `for i in $(seq 200); do ${program} 20; done`;
        const result = await runCli([
          "record",
          "-o",
          `${dir}/out.folded`,
          "--stats",
          `${dir}/stats.json`,
          "--",
          "sh",
          "-c",
          script,
        ]);
        assert.equal(result.code, 0, result.stderr);
        const stacks = parseFolded(Deno.readTextFileSync(`${dir}/out.folded`)).filter((s) => s.comm === comm);
        const total = countWhere(stacks, () => true);
        assert.ok(total >= 100, `too few samples (${total})`);
        // Complete: rooted at the C runtime's start and through main; or, while the dynamic loader runs
        // before main, rooted at its _start (named or not: that depends on the machine's debug files).
        const roots = [names.get("_start")!, "__libc_start_main", "__libc_start_call_main"];
        const loader = loaderRoots(program);
        const complete = countWhere(
          stacks,
          (s) =>
            (roots.includes(s.frames[0]!) && s.frames.includes(names.get("main")!)) ||
            loader.has(s.frames[0]!),
        );
        const host = JSON.parse(Deno.readTextFileSync(`${dir}/stats.json`)).unwinding.hostUnwound;
        console.log(`short-lived stripped: ${complete}/${total} samples complete; host-unwound`, host);
        assert.ok(complete / total >= SHORT_LIVED_COMPLETE, `${complete}/${total}`);
      } finally {
        Deno.removeSync(dir, { recursive: true });
      }
    },
  ),
);

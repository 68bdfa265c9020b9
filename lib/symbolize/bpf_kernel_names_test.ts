import assert from "node:assert/strict";
import { Tracer } from "../record/tracer.ts";
import type { KernelAddress } from "../types.ts";
import { tracingTest, tracingUnavailable } from "../../tests/helpers.ts";
import { optional } from "../testing/requirements.ts";
import { kernelNamesSupported, parseSymbolText } from "./bpf_kernel_names.ts";
import { KernelSymbols } from "./kallsyms.ts";

Deno.test("parseSymbolText reads %pS for the image, modules, BPF programs and unknown addresses", () => {
  assert.deepEqual(parseSymbolText("do_syscall_64+0x30/0x150"), {
    name: "do_syscall_64",
    module: null,
    offset: 0x30,
  });
  assert.deepEqual(parseSymbolText("ext4_file_read_iter+0x5/0x1a0 [ext4]"), {
    name: "ext4_file_read_iter",
    module: "ext4",
    offset: 5,
  });
  assert.deepEqual(parseSymbolText("bpf_prog_6deef7357e7b4530_sample_cpu+0x42/0x3c0"), {
    name: "bpf_prog_6deef7357e7b4530_sample_cpu",
    module: "bpf",
    offset: 0x42,
  });
  assert.equal(parseSymbolText("0xffffffffc0de0000"), null);
  assert.equal(parseSymbolText(""), null);
});

// Probing the kernel takes root; without it the test is skipped for that reason already.
const namingProgram = optional(
  tracingUnavailable() === null && !kernelNamesSupported()
    ? "this kernel has no syscall programs or bpf_snprintf (before 5.14)"
    : null,
);

Deno.test(
  tracingTest(
    "the kernel names addresses through BPF as /proc/kallsyms does",
    nameKernelAddresses,
    namingProgram,
  ),
);

function nameKernelAddresses(): void {
  using tracer = Tracer.start({ frequencyHz: 1, paused: true });
  const names = tracer.kernelNames;
  assert.ok(names !== null, "a kernel that supports the program gets a namer");
  // The kernel image and its modules are static; BPF programs and trampolines, and ftrace's and kprobes'
  // trampolines ([__builtin__ftrace], [__builtin__kprobes]), are created and freed at run time, by any
  // tool on the machine. /proc/kallsyms is read before and after the naming, and such dynamic text is
  // compared only where both show it: it existed for the whole comparison.
  const before = Deno.readTextFileSync("/proc/kallsyms");
  const kallsyms = KernelSymbols.parse(before);
  // Text symbols of the image (1,000 spread over it), of modules, and of dynamic text (this tracer's
  // programs among it), each looked up one byte in.
  const image: KernelAddress[] = [];
  const modules: KernelAddress[] = [];
  const dynamic = new Map<KernelAddress, string>();
  for (const line of before.split("\n")) {
    const [hex, type, name, bracketed] = line.split(/\s+/);
    if (!hex?.startsWith("ffffffff") || !/^[tT]$/.test(type ?? "") || !name) continue;
    const address = (parseInt(hex.slice(8), 16) + 1) as KernelAddress;
    if (kallsyms.lookup(address)?.name !== name) continue; // aliases: kallsyms keeps one of them
    const module = bracketed?.slice(1, -1);
    if (module === undefined) image.push(address);
    else if (isDynamicText(module)) dynamic.set(address, line);
    else modules.push(address);
  }
  const step = Math.max(1, Math.floor(image.length / 1000));
  const staticText = [...image.filter((_, i) => i % step === 0), ...modules.slice(0, 500)];
  names.name([...staticText, ...dynamic.keys()]);
  const after = new Set(Deno.readTextFileSync("/proc/kallsyms").split("\n"));

  for (const address of staticText) {
    assert.deepEqual(names.lookup(address), kallsyms.lookup(address), `0xffffffff${address.toString(16)}`);
  }
  const dynamicCompared: string[] = [];
  const unnamedTrampolines: string[] = [];
  const cameAndWent: string[] = [];
  for (const [address, line] of dynamic) {
    if (!after.has(line)) {
      cameAndWent.push(line);
      continue;
    }
    const expected = kallsyms.lookup(address);
    const actual = names.lookup(address);
    if (expected?.module?.startsWith("__builtin__") && actual === null) {
      // %pS consults the image, modules and BPF's symbols, not ftrace's or kprobes' trampolines: the
      // profile shows such a frame as an address, never under another name.
      unnamedTrampolines.push(line);
      continue;
    }
    assert.deepEqual(actual, expected, line);
    dynamicCompared.push(line);
  }
  console.log(
    `${staticText.length} static and ${dynamicCompared.length} dynamic kernel addresses named alike; ` +
      `${unnamedTrampolines.length} trampolines %pS does not name; ` +
      `${cameAndWent.length} dynamic symbols freed during the comparison`,
  );
  for (const line of [...unnamedTrampolines, ...cameAndWent]) console.log(`  ${line}`);
  assert.ok(staticText.length >= 1000, `only ${staticText.length} static addresses compared`);
  // This tracer's own programs lived through it.
  assert.ok(
    dynamicCompared.some((line) => /\sbpf_prog_[0-9a-f]{16}_sample_cpu\t\[bpf\]$/.test(line)),
    `the tracer's own sampling program was not compared: ${dynamicCompared.join(" | ")}`,
  );
}

/** Kernel text the kernel creates and frees at run time: BPF's, and ftrace's and kprobes' trampolines. */
function isDynamicText(module: string): boolean {
  return module === "bpf" || module.startsWith("__builtin__");
}

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

Deno.test(tracingTest("the kernel names addresses through BPF as /proc/kallsyms does", () => {
  using tracer = Tracer.start({ frequencyHz: 1, paused: true });
  const names = tracer.kernelNames;
  assert.ok(names !== null, "a kernel that supports the program gets a namer");
  const kallsyms = KernelSymbols.load();
  // Text symbols of the image (1,000 spread over it), of modules and of BPF programs (this tracer's among
  // them), each looked up one byte in.
  const image: KernelAddress[] = [];
  const others: KernelAddress[] = [];
  for (const line of Deno.readTextFileSync("/proc/kallsyms").split("\n")) {
    const [hex, type, name, module] = line.split(/\s+/);
    if (!hex?.startsWith("ffffffff") || !/^[tT]$/.test(type ?? "") || !name) continue;
    const address = (parseInt(hex.slice(8), 16) + 1) as KernelAddress;
    if (kallsyms.lookup(address)?.name !== name) continue; // aliases: kallsyms keeps one of them
    (module === undefined ? image : others).push(address);
  }
  const step = Math.max(1, Math.floor(image.length / 1000));
  const wanted = [...image.filter((_, i) => i % step === 0), ...others.slice(0, 500)];
  names.name(wanted);
  let compared = 0;
  for (const address of wanted) {
    const expected = kallsyms.lookup(address);
    const actual = names.lookup(address);
    assert.deepEqual(actual, expected, `0xffffffff${address.toString(16)}`);
    compared++;
  }
  console.log(`${compared} kernel addresses named alike`);
  assert.ok(compared >= 1000, `only ${compared} addresses compared`);
}, namingProgram));

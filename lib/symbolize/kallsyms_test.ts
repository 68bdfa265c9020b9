import assert from "node:assert/strict";
import { KernelSymbols } from "./kallsyms.ts";
import type { KernelAddress } from "../types.ts";

function readKallsyms(): { text: string | null; reason: string } {
  try {
    const text = Deno.readTextFileSync("/proc/kallsyms");
    if (/^0{16} /m.test(text.slice(0, 4096)) && !/^f{8}/m.test(text.slice(0, 4096))) {
      return { text: null, reason: "/proc/kallsyms shows zeroed addresses (kptr_restrict or no privilege)" };
    }
    return { text, reason: "" };
  } catch (error) {
    return { text: null, reason: `/proc/kallsyms is unreadable: ${error}` };
  }
}

const real = readKallsyms();
if (real.text === null) console.log(`real kallsyms tests are skipped: ${real.reason}`);

interface Line {
  low: number;
  name: string;
  module: string | null;
}

/** The text symbols of kallsyms text, parsed the slow and obvious way. */
function textSymbols(text: string): Line[] {
  const out: Line[] = [];
  for (const line of text.split("\n")) {
    const m = line.match(/^ffffffff([0-9a-f]{8}) [tTwW] (\S+)(?:\t\[(\S+)\])?/);
    if (m !== null) out.push({ low: parseInt(m[1] ?? "", 16), name: m[2] ?? "", module: m[3] ?? null });
  }
  return out;
}

Deno.test({
  name: "parse() of the real /proc/kallsyms resolves every kind of its symbols",
  ignore: real.text === null,
  fn() {
    const text = real.text ?? "";
    const timings: number[] = [];
    let symbols = KernelSymbols.parse(text);
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      symbols = KernelSymbols.parse(text);
      timings.push(performance.now() - t0);
    }
    const t0 = performance.now();
    KernelSymbols.load();
    const loadMs = performance.now() - t0;
    timings.sort((a, b) => a - b);
    const lines = text.split("\n").length;
    console.log(
      `kallsyms: ${lines} lines, ${symbols.size} text addresses; parse median ${timings[2]?.toFixed(1)} ms ` +
        `(min ${timings[0]?.toFixed(1)}), load() with the read ${loadMs.toFixed(1)} ms`,
    );
    assert.equal(symbols.addressesHidden, false);

    const expected = textSymbols(text);
    assert.ok(expected.length > 1000);
    const byAddress = new Map<number, Line[]>();
    for (const line of expected) byAddress.set(line.low, [...(byAddress.get(line.low) ?? []), line]);
    assert.equal(symbols.size, byAddress.size);
    const addresses = [...byAddress.keys()].sort((a, b) => a - b);

    let seed = 99;
    const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0);
    for (let i = 0; i < 2000; i++) {
      const k = next() % addresses.length;
      const address = addresses[k] ?? 0;
      const candidates = byAddress.get(address) ?? [];
      const found = symbols.lookup(address as KernelAddress);
      assert.ok(found !== null);
      const match = candidates.find((c) => c.name === found.name);
      assert.ok(match !== undefined, `0x${address.toString(16)} resolved to ${found.name}`);
      assert.equal(found.module, match.module);
      assert.equal(found.offset, 0);
      const following = addresses[k + 1];
      if (following !== undefined && following - address > 1) {
        const delta = 1 + (next() % (following - address - 1));
        assert.deepEqual(symbols.lookup((address + delta) as KernelAddress), { ...found, offset: delta });
      }
    }
    assert.equal(symbols.lookup(((addresses[0] ?? 1) - 1) as KernelAddress), null);
    // Module and BPF symbols are rare among 100k+ lines: check all of them (up to a bound).
    const moduleLines = expected.filter((l) => l.module !== null).slice(0, 5000);
    for (const line of moduleLines) {
      const found = symbols.lookup(line.low as KernelAddress);
      const names = (byAddress.get(line.low) ?? []).map((c) => c.name);
      assert.ok(found !== null && names.includes(found.name) && found.module !== null, line.name);
    }
    console.log(
      `kallsyms: ${moduleLines.length} module symbols checked ` +
        `(${moduleLines.filter((l) => l.module === "bpf").length} BPF programs)`,
    );
  },
});

Deno.test("parse() reads module and BPF program symbols out of order", () => {
  const text = [
    "ffffffffc0a02000 t bpf_prog_6deef7357e7b4530_sd_fw_egress\t[bpf]",
    "ffffffff81000000 T _stext",
    "ffffffff81000000 T srso_alias_untrain_ret",
    "ffffffffc0400000 t ext4_fill_super\t[ext4]",
    "ffffffffc0400800 T ext4_sync_fs\t[ext4]",
    "ffffffffc0800000 t nf_hook_slow\t[nf_tables]",
    "ffffffff81002000 t do_syscall_64",
    "ffffffff81003000 W weak_fn",
    "ffffffff82000000 D some_data",
    "ffffffff81004000 r some_rodata",
    "0000000000000000 A fixed_percpu_data",
    "ffff888000000000 t below_the_top_half",
    "zzzzzzzzzzzzzzzz t not_hex",
    "",
  ].join("\n");
  const symbols = KernelSymbols.parse(text);
  assert.equal(symbols.addressesHidden, false);
  assert.equal(symbols.size, 7);
  const at = (hex: string) => symbols.lookup(parseInt(hex, 16) as KernelAddress);
  assert.deepEqual(at("81000004"), { name: "srso_alias_untrain_ret", module: null, offset: 4 });
  assert.deepEqual(at("81002010"), { name: "do_syscall_64", module: null, offset: 0x10 });
  assert.deepEqual(at("81003000"), { name: "weak_fn", module: null, offset: 0 });
  assert.deepEqual(at("c0400900"), { name: "ext4_sync_fs", module: "ext4", offset: 0x100 });
  assert.deepEqual(at("c0400010"), { name: "ext4_fill_super", module: "ext4", offset: 0x10 });
  assert.deepEqual(at("c0800001"), { name: "nf_hook_slow", module: "nf_tables", offset: 1 });
  assert.deepEqual(at("c0a02040"), {
    name: "bpf_prog_6deef7357e7b4530_sd_fw_egress",
    module: "bpf",
    offset: 0x40,
  });
  assert.equal(at("80ffffff"), null);
});

Deno.test("parse() reports zeroed addresses instead of resolving them", () => {
  const source = real.text ?? "ffffffff81000000 T _stext\nffffffff81000010 t foo\nffffffff82000000 D bar\n";
  const zeroed = source.split("\n").slice(0, 5000).map((l) => l.replace(/^[0-9a-f]{16}/, "0".repeat(16)))
    .join("\n");
  const symbols = KernelSymbols.parse(zeroed);
  assert.equal(symbols.addressesHidden, true);
  assert.equal(symbols.size, 0);
  assert.equal(symbols.lookup(0x81000000 as KernelAddress), null);
  assert.equal(KernelSymbols.parse("").addressesHidden, false);
});

import assert from "node:assert/strict";
import { KernelSymbols } from "./kallsyms.ts";
import type { KernelAddress } from "../types.ts";
import { bootstrapped, requiring } from "../testing/requirements.ts";

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
// Root reads the real addresses; CI runs as root.
const realKallsyms = bootstrapped(real.text === null ? real.reason : null);

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

Deno.test(requiring([realKallsyms], {
  name: "parse() of the real /proc/kallsyms resolves every kind of its symbols",
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
}));

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

Deno.test(requiring([realKallsyms], {
  name: "loadFor() of the real /proc/kallsyms resolves its addresses as parse() does, for less",
  fn() {
    const text = real.text ?? "";
    const full = KernelSymbols.parse(text);
    const starts = textSymbols(text).map((line) => line.low);
    let seed = 7;
    const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0);
    // Symbol starts, addresses inside symbols, module symbols, and the extremes.
    const wanted: number[] = [0, 0x1000, 0xffffffff];
    for (let i = 0; i < 500; i++) wanted.push(((starts[next() % starts.length] ?? 0) + (next() % 96)) >>> 0);
    for (const line of textSymbols(text).filter((l) => l.module !== null).slice(0, 200)) {
      wanted.push(line.low);
    }
    // The same snapshot for both: BPF programs loaded meanwhile (by any tool) change /proc/kallsyms.
    const snapshot = Deno.makeTempFileSync({ prefix: "omniprof-kallsyms-" });
    Deno.writeTextFileSync(snapshot, text);
    const t0 = performance.now();
    let partial: KernelSymbols;
    try {
      partial = KernelSymbols.loadFor(wanted as KernelAddress[], snapshot);
    } finally {
      Deno.removeSync(snapshot);
    }
    const partialMs = performance.now() - t0;
    const t1 = performance.now();
    KernelSymbols.load();
    console.log(
      `kallsyms: loadFor(${wanted.length} addresses) ${
        partialMs.toFixed(1)
      } ms, ${partial.size} symbols kept; ` +
        `load() ${(performance.now() - t1).toFixed(1)} ms`,
    );
    assert.ok(partial.size <= wanted.length);
    for (const address of wanted) {
      assert.deepEqual(partial.lookup(address as KernelAddress), full.lookup(address as KernelAddress));
      assert.ok(partial.covers(address as KernelAddress));
    }
  },
}));

Deno.test("parseFor() keeps the symbols of its addresses and knows where they end", () => {
  const text = [
    "ffffffffc0a02000 t bpf_prog_6deef7357e7b4530_sd_fw_egress\t[bpf]",
    "ffffffff81000000 T _stext",
    "ffffffff81000000 T srso_alias_untrain_ret",
    "ffffffff81000000 T __other_alias",
    "ffffffffc0400000 t ext4_fill_super\t[ext4]",
    "ffffffffc0400800 T ext4_sync_fs\t[ext4]",
    "ffffffff81002000 t do_syscall_64",
    "ffffffff81003000 W weak_fn",
    "ffffffff82000000 D some_data",
    "0000000000000000 A fixed_percpu_data",
    "ffff888000000000 t below_the_top_half",
    "ffffffff81004000 t last_in_image",
  ].join("\n");
  const bytes = new TextEncoder().encode(text);
  const wanted = [0x81000004, 0x81002010, 0x81002020, 0xc0400900, 0xc0a02040, 0x80ffffff] as KernelAddress[];
  const partial = KernelSymbols.parseFor(bytes, wanted);
  const full = KernelSymbols.parse(text);
  for (const address of wanted) assert.deepEqual(partial.lookup(address), full.lookup(address), `${address}`);
  assert.equal(partial.size, 4);
  assert.deepEqual(partial.lookup(0x81000004 as KernelAddress), {
    name: "srso_alias_untrain_ret",
    module: null,
    offset: 4,
  });
  // Within a kept symbol: known; in a symbol nobody asked for: not.
  assert.deepEqual(partial.lookup(0x81002ff0 as KernelAddress)?.name, "do_syscall_64");
  assert.ok(partial.covers(0x81002ff0 as KernelAddress));
  assert.equal(partial.lookup(0x81003000 as KernelAddress), null);
  assert.equal(partial.covers(0x81003000 as KernelAddress), false);
  // Below every symbol: asked for, so known to be nothing.
  assert.ok(partial.covers(0x80ffffff as KernelAddress));
  // The last symbol of a module extends to the end of the address space, as in parse().
  assert.deepEqual(partial.lookup(0xc0a02040 as KernelAddress), full.lookup(0xc0a02040 as KernelAddress));
  assert.ok(partial.covers(0xfffffff0 as KernelAddress));
});

Deno.test("loadFor() reads a file in chunks without losing lines that straddle them", () => {
  // Well over the 64 KiB read size, with lines of varied length so that chunk ends fall mid-line.
  const lines: string[] = [];
  for (let i = 0; i < 6000; i++) {
    const address = (0x81000000 + i * 0x40).toString(16);
    lines.push(`ffffffff${address} ${i % 3 === 0 ? "T" : "t"} fn_${i}_${"x".repeat(i % 37)}`);
  }
  lines.push("ffffffffc0400000 t modfn\t[some_module]");
  const text = lines.join("\n") + "\n";
  const dir = Deno.makeTempDirSync();
  try {
    Deno.writeTextFileSync(`${dir}/kallsyms`, text);
    const wanted: KernelAddress[] = [];
    for (let i = 0; i < 6000; i += 7) wanted.push((0x81000000 + i * 0x40 + (i % 0x40)) as KernelAddress);
    wanted.push(0xc0400010 as KernelAddress);
    const partial = KernelSymbols.loadFor(wanted, `${dir}/kallsyms`);
    const full = KernelSymbols.parse(text);
    for (const address of wanted) assert.deepEqual(partial.lookup(address), full.lookup(address));
    assert.equal(partial.lookup(0xc0400010 as KernelAddress)?.module, "some_module");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test(requiring([realKallsyms], {
  name: "loadFor() of kernel-image addresses only stops reading past them, with the same answers",
  fn() {
    const text = real.text ?? "";
    const full = KernelSymbols.parse(text);
    const image = textSymbols(text).filter((line) => line.module === null).map((line) => line.low);
    image.sort((a, b) => a - b);
    // Addresses in the lower half of the kernel image: the modules and the upper half need not be read.
    const wanted: number[] = [];
    for (let i = 0; i < 300; i++) wanted.push((image[Math.floor((i * image.length) / 600)] ?? 0) + (i % 40));
    const partial = KernelSymbols.loadFor(wanted as KernelAddress[]);
    for (const address of wanted) {
      assert.deepEqual(partial.lookup(address as KernelAddress), full.lookup(address as KernelAddress));
    }
  },
}));

Deno.test("parseFor() stops after the kernel image's symbols pass every wanted address", () => {
  const text = [
    "ffffffff81000000 T _stext",
    "ffffffff81001000 t first",
    "ffffffff81002000 t second",
    "ffffffff81003000 t third",
    "ffffffffc0400000 t ext4_fill_super\t[ext4]",
    // Never real (the image's symbols come sorted, before the modules'): shows the rest is not read.
    "ffffffff81001800 t unread",
  ].join("\n");
  const partial = KernelSymbols.parseFor(new TextEncoder().encode(text), [0x81001900 as KernelAddress]);
  assert.deepEqual(partial.lookup(0x81001900 as KernelAddress), {
    name: "first",
    module: null,
    offset: 0x900,
  });
  assert.ok(partial.covers(0x81001fff as KernelAddress));
  assert.equal(partial.covers(0x81002000 as KernelAddress), false);
});

Deno.test("KernelSymbols.hasFunction finds text symbols by their exact name, of the kernel and of modules", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const path = `${dir}/kallsyms`;
    Deno.writeTextFileSync(
      path,
      [
        "ffffffff81000000 T _stext",
        "ffffffff81001000 t do_one.isra.0",
        "ffffffff81002000 D some_data",
        "ffffffffc0000000 t mod_fn\t[mymod]",
        "",
      ].join("\n"),
    );
    assert.equal(KernelSymbols.hasFunction("_stext", path), true);
    assert.equal(KernelSymbols.hasFunction("do_one.isra.0", path), true);
    assert.equal(KernelSymbols.hasFunction("mod_fn", path), true);
    // Data is not a function; a prefix or a pattern is not the name.
    assert.equal(KernelSymbols.hasFunction("some_data", path), false);
    assert.equal(KernelSymbols.hasFunction("do_one", path), false);
    assert.equal(KernelSymbols.hasFunction("do_one.isra.", path), false);
    assert.equal(KernelSymbols.hasFunction("do_one.isra.*", path), false);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

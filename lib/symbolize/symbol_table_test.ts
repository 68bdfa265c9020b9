import assert from "node:assert/strict";
import { ElfFile } from "../elf/elf_file.ts";
import { SymbolTable } from "./symbol_table.ts";
import { run } from "../testing/commands.ts";
import { optional, programs, requiring } from "../testing/requirements.ts";

const tools = programs("gcc", "readelf", "nm", "ldd");

let fixturePath: string | undefined;
function fixture(): string {
  if (fixturePath === undefined) {
    const dir = Deno.makeTempDirSync({ prefix: "omniprof_symtab_test_" });
    globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
    fixturePath = `${dir}/functions`;
    const source = new URL("./testdata/functions.c", import.meta.url).pathname;
    run("gcc", "-O1", "-o", fixturePath, source);
  }
  return fixturePath;
}

function libcPath(): string {
  const match = run("ldd", "/bin/true").match(/libc\.so\.\d+ => (\S+)/);
  if (match?.[1] === undefined) throw new Error("ldd /bin/true names no libc");
  return match[1];
}

interface ReadelfSymbol {
  value: number;
  size: number;
  type: string;
  bind: string;
  section: string;
  name: string;
}

/** Defined symbols from `readelf -sW` (both tables), version suffixes removed. */
function readelfSymbols(path: string): ReadelfSymbol[] {
  const out: ReadelfSymbol[] = [];
  for (const line of run("readelf", "-sW", path).split("\n")) {
    const m = line.match(/^\s*\d+: ([0-9a-f]+)\s+(\d+|0x[0-9a-f]+)\s+(\S+)\s+(\S+)\s+\S+\s+(\S+)\s+(\S+)/);
    if (m === null || m[5] === "UND") continue;
    out.push({
      value: parseInt(m[1] ?? "", 16),
      size: Number(m[2]),
      type: m[3] ?? "",
      bind: m[4] ?? "",
      section: m[5] ?? "",
      name: (m[6] ?? "").replace(/@.*$/, ""),
    });
  }
  return out;
}

/** Names of the function symbols at each address. */
function namesByAddress(symbols: ReadelfSymbol[]): Map<number, Set<string>> {
  const map = new Map<number, Set<string>>();
  for (const s of symbols) {
    if (s.type !== "FUNC" && s.type !== "IFUNC" && s.type !== "NOTYPE") continue;
    let names = map.get(s.value);
    if (names === undefined) map.set(s.value, names = new Set());
    names.add(s.name);
  }
  return map;
}

Deno.test(requiring([tools], {
  name: "lookup() finds the enclosing symbol for every function readelf lists (fixture)",
  fn() {
    using elf = ElfFile.open(fixture());
    const table = elf.symbols();
    const symbols = readelfSymbols(fixture());
    const byAddress = namesByAddress(symbols);
    const functions = symbols.filter((s) => (s.type === "FUNC" || s.type === "IFUNC") && s.size > 0);
    for (const name of ["fixture_alpha", "fixture_beta", "fixture_static_gamma", "fixture_delta", "main"]) {
      assert.ok(functions.some((s) => s.name === name), `readelf does not list ${name}`);
    }
    for (const f of functions) {
      const names = byAddress.get(f.value);
      for (const delta of [0, f.size >> 1, f.size - 1]) {
        const found = table.lookup(f.value + delta);
        assert.ok(found !== null, `${f.name}+${delta}`);
        assert.ok(names?.has(found.name), `${f.name}+${delta} resolved to ${found.name}`);
        assert.equal(found.offset, delta);
      }
    }
  },
}));

Deno.test(requiring([tools], {
  name: "lookup() extends a zero-size assembly label to the next symbol",
  fn() {
    using elf = ElfFile.open(fixture());
    const table = elf.symbols();
    const symbols = readelfSymbols(fixture());
    const label = symbols.find((s) => s.name === "fixture_asm_label");
    assert.ok(label !== undefined && label.type === "NOTYPE" && label.size === 0);
    const next = Math.min(
      ...symbols.filter((s) => s.value > label.value && s.section === label.section).map((s) => s.value),
    );
    assert.deepEqual(table.lookup(label.value), { name: "fixture_asm_label", offset: 0 });
    assert.deepEqual(table.lookup(next - 1), { name: "fixture_asm_label", offset: next - 1 - label.value });
    assert.notEqual(table.lookup(next)?.name, "fixture_asm_label");
  },
}));

Deno.test(requiring([tools], {
  name: "lookup() returns null outside every symbol",
  fn() {
    using elf = ElfFile.open(fixture());
    const table = elf.symbols();
    const first = table.symbolAt(0);
    assert.equal(table.lookup(first.start - 1), null);
    assert.equal(table.lookup(0), null);
    const last = table.symbolAt(table.size - 1);
    assert.equal(table.lookup(last.end), null);
    assert.equal(table.lookup(2 ** 46), null);
  },
}));

Deno.test(requiring([tools], {
  name: "the table keeps one symbol per address and no data symbols",
  fn() {
    using elf = ElfFile.open(fixture());
    const table = elf.symbols();
    const starts = new Set<number>();
    for (let i = 0; i < table.size; i++) {
      const s = table.symbolAt(i);
      assert.ok(!starts.has(s.start));
      starts.add(s.start);
      if (i > 0) assert.ok(table.symbolAt(i - 1).start < s.start);
    }
    const codeAddresses = new Set(
      readelfSymbols(fixture()).filter((s) => s.type === "FUNC" || s.type === "IFUNC").map((s) => s.value),
    );
    for (const address of codeAddresses) assert.ok(starts.has(address), `missing 0x${address.toString(16)}`);
    const data = readelfSymbols(fixture()).filter((s) => s.type === "OBJECT");
    assert.ok(data.length > 0);
    for (const d of data) assert.ok(!starts.has(d.value) || codeAddresses.has(d.value));
  },
}));

/** mulberry32, for a reproducible sample. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

Deno.test(requiring([tools], {
  name: "lookup() agrees with nm on libc's dynamic symbols",
  fn() {
    const path = libcPath();
    const t0 = performance.now();
    using elf = ElfFile.open(path);
    const table = elf.symbols();
    console.log(`libc: ${table.size} function symbols loaded in ${(performance.now() - t0).toFixed(1)} ms`);
    const nm = run("nm", "-D", "-S", "--defined-only", path).split("\n")
      .map((l) => l.match(/^([0-9a-f]+) ([0-9a-f]+) [TtWwi] (\S+)$/))
      .filter((m) => m !== null)
      .map((m) => ({ value: parseInt(m[1] ?? "", 16), size: parseInt(m[2] ?? "", 16), name: m[3] ?? "" }))
      .filter((s) => s.size > 0);
    assert.ok(nm.length > 1000, `nm lists only ${nm.length} sized functions`);
    const byAddress = new Map<number, Set<string>>();
    for (const s of nm) {
      const set = byAddress.get(s.value) ?? new Set();
      set.add(s.name.replace(/@.*$/, ""));
      byAddress.set(s.value, set);
    }
    const random = prng(42);
    for (let i = 0; i < 500; i++) {
      const s = nm[Math.floor(random() * nm.length)];
      assert.ok(s !== undefined);
      const delta = Math.floor(random() * s.size);
      const found = table.lookup(s.value + delta);
      assert.ok(found !== null, `${s.name}+${delta}`);
      // A symbol nested in s (an alternate entry point) may be the innermost match.
      const owner = found.offset === delta ? s.value : s.value + delta - found.offset;
      assert.ok(byAddress.get(owner)?.has(found.name), `${s.name}+${delta} resolved to ${found.name}`);
      assert.ok(owner >= s.value);
    }
  },
}));

/** libjvm.so of each installed JDK: the largest C++ symbol tables commonly at hand. */
function jvmLibraries(): string[] {
  const out: string[] = [];
  try {
    for (const jdk of Deno.readDirSync("/usr/lib/jvm")) {
      const path = `/usr/lib/jvm/${jdk.name}/lib/server/libjvm.so`;
      try {
        if (
          Deno.statSync(path).isFile && !out.some((p) => Deno.realPathSync(p) === Deno.realPathSync(path))
        ) {
          out.push(path);
        }
      } catch {
        // Not every JDK directory has a server VM.
      }
    }
  } catch {
    // No JDK installed.
  }
  return out;
}

const jvms = jvmLibraries();
const jdk = optional(jvms.length > 0 ? null : "no JDK installed (no /usr/lib/jvm/*/lib/server/libjvm.so)");

Deno.test(requiring([programs("nm"), jdk], {
  name: "lookup() agrees with nm on libjvm's 50k-symbol .symtab",
  fn() {
    for (const path of jvms) {
      const t0 = performance.now();
      using elf = ElfFile.open(path);
      const table = elf.symbols();
      const ms = performance.now() - t0;
      console.log(
        `${path}: ${table.size} function symbols in ${ms.toFixed(1)} ms, ${table.byteSize} bytes retained`,
      );
      const nm = run("nm", "-S", "--defined-only", path).split("\n")
        .map((l) => l.match(/^([0-9a-f]+) ([0-9a-f]+) [TtWwi] (\S+)$/))
        .filter((m) => m !== null)
        .map((m) => ({ value: parseInt(m[1] ?? "", 16), size: parseInt(m[2] ?? "", 16), name: m[3] ?? "" }))
        .filter((s) => s.size > 0);
      assert.ok(nm.length > 10_000);
      const byAddress = new Map<number, Set<string>>();
      for (const s of nm) byAddress.set(s.value, (byAddress.get(s.value) ?? new Set()).add(s.name));
      const random = prng(7);
      for (let i = 0; i < 2000; i++) {
        const s = nm[Math.floor(random() * nm.length)];
        assert.ok(s !== undefined);
        const delta = Math.floor(random() * s.size);
        const found = table.lookup(s.value + delta);
        assert.ok(found !== null, `${s.name}+${delta}`);
        assert.ok(
          byAddress.get(s.value + delta - found.offset)?.has(found.name),
          `${s.name}+${delta}: ${found.name}`,
        );
      }
    }
  },
}));

Deno.test("build() refuses a symbol table entry size below 24 bytes", () => {
  assert.throws(
    () =>
      SymbolTable.build([{
        kind: "symtab",
        symbols: new Uint8Array(48),
        entrySize: 16,
        strings: new Uint8Array(1),
        sections: [],
      }]),
    RangeError,
  );
  assert.equal(SymbolTable.empty.lookup(0), null);
  assert.equal(SymbolTable.empty.size, 0);
});

Deno.test("build() reads entries of an odd size or at an odd offset as it reads aligned ones", () => {
  using elf = ElfFile.open(libcPath());
  const source = elf.symbolSources().find((s) => s.kind === "dynsym")!;
  const entrySize = source.entrySize === 0 ? 24 : source.entrySize;
  const n = source.symbols.length / entrySize;
  // Each entry followed by one padding byte, in a buffer that starts one byte in.
  const padded = new Uint8Array(1 + n * (entrySize + 1));
  for (let i = 0; i < n; i++) {
    padded.set(source.symbols.subarray(i * entrySize, (i + 1) * entrySize), 1 + i * (entrySize + 1));
  }
  const odd = SymbolTable.build([{ ...source, symbols: padded.subarray(1), entrySize: entrySize + 1 }]);
  const aligned = SymbolTable.build([source]);
  assert.equal(odd.size, aligned.size);
  for (let i = 0; i < aligned.size; i++) assert.deepEqual(odd.symbolAt(i), aligned.symbolAt(i));
  assert.ok(aligned.size > 1000);
});

import assert from "node:assert/strict";
import { ElfFile } from "../elf/elf_file.ts";
import { findDynamicSymbol, gnuHash, SHT_GNU_HASH, SHT_HASH, sysvHash } from "./dynamic_symbol_lookup.ts";
import { programs, requiring } from "../testing/requirements.ts";

const decoder = new TextDecoder();

/** `readelf --dyn-syms` of `path`: the values of each name's defined entries, and the undefined names. */
function readelfDynamic(path: string): { defined: Map<string, Set<number>>; undefined: Set<string> } {
  const out = new Deno.Command("readelf", { args: ["-W", "--dyn-syms", path], stdout: "piped" }).outputSync();
  const defined = new Map<string, Set<number>>();
  const undefinedNames = new Set<string>();
  for (const line of decoder.decode(out.stdout).split("\n")) {
    const m = line.match(/^\s*\d+: ([0-9a-f]+)\s+\S+\s+\S+\s+\S+\s+\S+\s+(\S+)\s+(\S+)/);
    if (m === null) continue;
    const name = (m[3] ?? "").replace(/@.*$/, "");
    if (m[2] === "UND") {
      undefinedNames.add(name);
      continue;
    }
    const values = defined.get(name) ?? new Set<number>();
    values.add(parseInt(m[1] ?? "", 16));
    defined.set(name, values);
  }
  return { defined, undefined: undefinedNames };
}

/** Every defined name is found at a value readelf gives it; imported and made-up names are not found. */
function assertLookupsMatch(path: string, hashType: number): void {
  const reference = readelfDynamic(path);
  using elf = ElfFile.open(path);
  assert.ok(elf.sections.some((s) => s.type === hashType), `${path} has the hash table under test`);
  assert.ok(reference.defined.size > 0, `${path} defines dynamic symbols`);
  for (const [name, values] of reference.defined) {
    if (name === "") continue;
    const found = findDynamicSymbol(elf, name);
    assert.ok(
      found !== null && values.has(found.value),
      `${path}: ${name} at ${[...values]}, got ${found?.value}`,
    );
  }
  for (const name of reference.undefined) {
    if (!reference.defined.has(name)) assert.equal(findDynamicSymbol(elf, name), null, `${path}: ${name}`);
  }
  for (const name of ["_PyRuntime", "no_such_symbol", "", "mallo", "mallocx"]) {
    if (!reference.defined.has(name)) assert.equal(findDynamicSymbol(elf, name), null, `${path}: ${name}`);
  }
}

const LIBC = "/lib/x86_64-linux-gnu/libc.so.6";

Deno.test(requiring([programs("readelf")], {
  name: "findDynamicSymbol() finds every exported symbol of libc through .gnu.hash, and nothing else",
  fn: () => assertLookupsMatch(Deno.realPathSync(LIBC), SHT_GNU_HASH),
}));

Deno.test(requiring([programs("gcc", "readelf")], {
  name: "findDynamicSymbol() reads a SysV .hash table",
  fn: () => {
    const dir = Deno.makeTempDirSync({ prefix: "omniprof_dynhash_" });
    try {
      const source = `${dir}/lib.c`;
      const names = Array.from({ length: 300 }, (_, i) => `exported_${i}`);
      Deno.writeTextFileSync(
        source,
        names.map((name, i) => `int ${name}(void) { return ${i}; }\n`).join("") +
          "extern int imported(void);\nint calls(void) { return imported(); }\n",
      );
      const library = `${dir}/libsysv.so`;
      const built = new Deno.Command("gcc", {
        args: ["-shared", "-fPIC", "-Wl,--hash-style=sysv", source, "-o", library],
        stderr: "piped",
      }).outputSync();
      assert.ok(built.success, decoder.decode(built.stderr));
      assertLookupsMatch(library, SHT_HASH);
      using elf = ElfFile.open(library);
      assert.ok(!elf.sections.some((s) => s.type === SHT_GNU_HASH), "no .gnu.hash to fall back on");
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
}));

Deno.test("gnuHash() and sysvHash() give the values of the ELF and GNU specifications", () => {
  const bytes = (text: string) => new TextEncoder().encode(text);
  // From the GNU hash write-ups and the System V ABI's elf_hash.
  assert.equal(gnuHash(bytes("")), 0x00001505);
  assert.equal(gnuHash(bytes("printf")), 0x156b2bb8);
  assert.equal(gnuHash(bytes("exit")), 0x7c967e3f);
  assert.equal(gnuHash(bytes("syscall")), 0xbac212a0);
  assert.equal(sysvHash(bytes("")), 0);
  assert.equal(sysvHash(bytes("printf")), 0x077905a6);
  assert.equal(sysvHash(bytes("exit")), 0x0006cf04);
  assert.equal(sysvHash(bytes("syscall")), 0x0b09985c);
});

Deno.test(requiring([programs("gcc")], {
  name: "findDynamicSymbol() answers null for a file without a dynamic symbol table",
  fn: () => {
    const dir = Deno.makeTempDirSync({ prefix: "omniprof_dynhash_" });
    try {
      Deno.writeTextFileSync(`${dir}/main.c`, "int main(void) { return 0; }\n");
      const built = new Deno.Command("gcc", {
        args: ["-c", `${dir}/main.c`, "-o", `${dir}/main.o`],
        stderr: "piped",
      }).outputSync();
      assert.ok(built.success, decoder.decode(built.stderr));
      using elf = ElfFile.open(`${dir}/main.o`);
      assert.ok(elf.hasSymtab, "the object defines main in .symtab");
      assert.equal(findDynamicSymbol(elf, "main"), null);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
}));

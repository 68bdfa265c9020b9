import assert from "node:assert/strict";
import { ElfFile } from "../elf/elf_file.ts";
import { findElfSymbols, readElfBytes, STT_FUNC, STT_OBJECT, STT_TLS } from "./elf_symbols.ts";
import { findProcessLibraries } from "./process_libraries.ts";
import { openableMappings } from "../testing/process_mappings.ts";
import { asPid } from "../types.ts";
import { bootstrapped, programs, requiring } from "../testing/requirements.ts";

const decoder = new TextDecoder();

const libc = findProcessLibraries(openableMappings(asPid(Deno.pid))).libc;
const needs = [programs("readelf"), bootstrapped(libc === null ? "this process maps no libc" : null)];

interface ReadelfSymbol {
  value: number;
  size: number;
  type: string;
}

/** Defined symbols of `readelf --dyn-syms`, by name without version. */
function readelfDynamic(path: string): Map<string, ReadelfSymbol> {
  const out = new Map<string, ReadelfSymbol>();
  const text = decoder.decode(
    new Deno.Command("readelf", { args: ["-W", "--dyn-syms", path], stdout: "piped" }).outputSync().stdout,
  );
  for (const line of text.split("\n")) {
    const m = line.match(/^\s*\d+: ([0-9a-f]+)\s+(\d+|0x[0-9a-f]+)\s+(\S+)\s+\S+\s+\S+\s+(\S+)\s+(\S+)/);
    if (m === null || m[4] === "UND") continue;
    out.set((m[5] ?? "").replace(/@.*$/, ""), {
      value: parseInt(m[1] ?? "", 16),
      size: Number(m[2]),
      type: m[3] ?? "",
    });
  }
  return out;
}

Deno.test(requiring(needs, {
  name: "findElfSymbols() finds functions, objects and TLS variables as readelf lists them",
  fn() {
    using elf = ElfFile.fromFile(libc!.open(), libc!.path);
    const names = ["malloc", "_thread_db_pthread_tid", "errno", "no_such_symbol_here"];
    const found = findElfSymbols(elf, names);
    const expected = readelfDynamic(libc!.path);
    const typeOf = { FUNC: STT_FUNC, OBJECT: STT_OBJECT, TLS: STT_TLS } as Record<string, number>;
    for (const name of names.slice(0, 3)) {
      const want = expected.get(name);
      assert.ok(want !== undefined, `readelf does not list ${name}`);
      const got = found.get(name);
      assert.deepEqual(
        got && { value: got.value, size: got.size, type: got.type },
        { value: want.value, size: want.size, type: typeOf[want.type] },
        name,
      );
      assert.equal(got?.table, "dynsym");
    }
    assert.equal(found.has("no_such_symbol_here"), false);
  },
}));

Deno.test(requiring(needs, {
  name: "readElfBytes() reads a symbol's initialized data, and refuses ranges outside file data",
  fn() {
    using elf = ElfFile.fromFile(libc!.open(), libc!.path);
    const symbol = findElfSymbols(elf, ["_thread_db_sizeof_pthread_key_data"]).get(
      "_thread_db_sizeof_pthread_key_data",
    );
    assert.ok(symbol !== undefined);
    const bytes = readElfBytes(elf, symbol.value, 4);
    // struct pthread_key_data { uintptr_t seq; void *data; } on a 64-bit target.
    assert.equal(new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true), 16);
    assert.throws(() => readElfBytes(elf, 0x7fff_0000_0000, 4), RangeError);
  },
}));

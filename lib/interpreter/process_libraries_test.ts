import assert from "node:assert/strict";
import { ElfFile } from "../elf/elf_file.ts";
import { asPid } from "../types.ts";
import { findElfSymbols } from "./elf_symbols.ts";
import { findProcessLibraries, mappingBias } from "./process_libraries.ts";
import { openableMappings } from "../testing/process_mappings.ts";

Deno.test("findProcessLibraries() finds this process's libc and loader, and mappingBias() their bias", () => {
  const { libc, loader } = findProcessLibraries(openableMappings(asPid(Deno.pid)));
  assert.ok(libc !== null && loader !== null);
  assert.match(libc.path, /libc/);
  assert.match(loader.path, /\/ld-/);
  using elf = ElfFile.fromFile(libc.open(), libc.path);
  const bias = mappingBias(libc.mapping, elf.loadSegments);
  assert.ok(bias !== null);
  // Where this process's own call of dlsym finds malloc, minus its ELF address, is the bias.
  const malloc = findElfSymbols(elf, ["malloc"]).get("malloc");
  assert.ok(malloc !== undefined);
  const lib = Deno.dlopen("libc.so.6", { dlsym: { parameters: ["pointer", "buffer"], result: "pointer" } });
  const address = Number(
    Deno.UnsafePointer.value(lib.symbols.dlsym(null, new TextEncoder().encode("malloc\0"))),
  );
  lib.close();
  assert.ok(address > 0);
  assert.equal(bias + malloc.value, address);
});

Deno.test("findProcessLibraries() finds neither in mappings without them", () => {
  const own = openableMappings(asPid(Deno.pid));
  const others = own.filter((mapping) => !/\/(?:libc|ld-)/.test(mapping.path));
  assert.ok(others.length > 0 && others.length < own.length);
  assert.deepEqual(findProcessLibraries(others), { libc: null, loader: null });
});

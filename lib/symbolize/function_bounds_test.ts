import assert from "node:assert/strict";
import { ElfFile } from "../elf/elf_file.ts";
import { run } from "../testing/commands.ts";
import { programs, requiring } from "../testing/requirements.ts";
import { FunctionBounds } from "./function_bounds.ts";

const tools = programs("gcc", "strip", "nm");

/** The fixture built with symbols and stripped, and its functions' ranges as `nm` gives them. */
function build(): { stripped: string; functions: Map<string, { start: number; end: number }> } {
  const dir = Deno.makeTempDirSync({ prefix: "omniprof_bounds_test_" });
  globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
  const source = new URL("./testdata/functions.c", import.meta.url).pathname;
  run("gcc", "-O1", "-o", `${dir}/full`, source);
  run("strip", "--strip-all", "-o", `${dir}/stripped`, `${dir}/full`);
  const functions = new Map<string, { start: number; end: number }>();
  // nm -S: address, size, type, name; t/T are code.
  for (const m of run("nm", "-S", `${dir}/full`).matchAll(/^([0-9a-f]+) ([0-9a-f]+) [tT] (\w+)$/gm)) {
    const start = parseInt(m[1]!, 16);
    functions.set(m[3]!, { start, end: start + parseInt(m[2]!, 16) });
  }
  return { stripped: `${dir}/stripped`, functions };
}

Deno.test(requiring([tools], {
  name: "FunctionBounds finds each function's range in a stripped binary, as nm reads it from the symbols",
  fn() {
    const { stripped, functions } = build();
    using elf = ElfFile.open(stripped);
    const bounds = FunctionBounds.read(elf);
    assert.ok(bounds !== null, "gcc writes .eh_frame_hdr");
    for (const name of ["fixture_static_gamma", "fixture_beta", "main"]) {
      const range = functions.get(name);
      assert.ok(range !== undefined, `nm lists ${name}`);
      for (const address of [range.start, Math.floor((range.start + range.end) / 2), range.end - 1]) {
        assert.deepEqual(bounds.find(address), range, `${name} at 0x${address.toString(16)}`);
      }
    }
    assert.equal(bounds.find(0), null, "below every function");
    assert.ok(bounds.byteSize > 0);
  },
}));

Deno.test("FunctionBounds.read() returns null for a file without .eh_frame_hdr", () => {
  // The BPF object is ELF without program headers, so without PT_GNU_EH_FRAME.
  const path = new URL("../../.build/omniprof.bpf.o", import.meta.url).pathname;
  using elf = ElfFile.open(path);
  assert.equal(FunctionBounds.read(elf), null);
});

import assert from "node:assert/strict";
import { ElfFile } from "../../elf/elf_file.ts";
import { programs, requiring } from "../../testing/requirements.ts";
import { findEmbeddedBlob } from "./embedded_blob.ts";
import { formatV8Version, mayHoldV8, readV8Layout } from "./introspection.ts";

/** The file node runs from, and what node itself says of its V8 (`11.3.244.8-node.38`). */
function nodeFacts(): { path: string; v8: string } {
  const run = (code: string) => {
    const result = new Deno.Command("node", { args: ["-p", code] }).outputSync();
    assert.ok(result.success, new TextDecoder().decode(result.stderr));
    return new TextDecoder().decode(result.stdout).trim();
  };
  return { path: Deno.realPathSync(run("process.execPath")), v8: run("process.versions.v8") };
}

/** The file that holds node's V8: node itself, or the libnode it links (Debian's nodejs). */
function v8File(node: string): string {
  using elf = ElfFile.open(node);
  if (mayHoldV8(elf)) return node;
  const ldd = new TextDecoder().decode(new Deno.Command("ldd", { args: [node] }).outputSync().stdout);
  const libnode = /libnode\.so\S* => (\S+)/.exec(ldd)?.[1];
  assert.ok(libnode !== undefined, `${node} holds no V8 and links no libnode:\n${ldd}`);
  return Deno.realPathSync(libnode);
}

Deno.test(requiring([programs("node", "ldd")], {
  name: "readV8Layout() of node's V8 has the version node reports, and frame slots below fp",
  fn() {
    const { path, v8 } = nodeFacts();
    const file = v8File(path);
    using elf = ElfFile.open(file);
    const layout = readV8Layout(elf, file);
    assert.ok(layout !== null, `${file} holds V8's introspection data`);
    assert.ok(v8.startsWith(formatV8Version(layout.version)), `${formatV8Version(layout.version)} of ${v8}`);
    // V8's standard frame: the context or marker right below the saved fp, the function below it.
    assert.equal(layout.frame.marker, -8);
    assert.equal(layout.frame.function, -16);
    assert.ok(layout.frame.bytecodeOffset < layout.frame.function);
    // Two are roles, each one of the other types: the source position tables' and DeoptimizationData's.
    const { positionTable, deoptimizationData, ...objects } = layout.types;
    const types = Object.values(objects);
    assert.equal(new Set(types).size, types.length, `distinct instance types: ${types.join(", ")}`);
    assert.ok(positionTable === objects.byteArray || !types.includes(positionTable), String(positionTable));
    assert.ok(
      deoptimizationData === objects.fixedArray || !types.includes(deoptimizationData),
      String(deoptimizationData),
    );
  },
}));

Deno.test(requiring([programs("node", "ldd", "nm")], {
  name: "findEmbeddedBlob() holds the interpreter's entry trampoline, where nm puts it",
  fn() {
    const file = v8File(nodeFacts().path);
    using elf = ElfFile.open(file);
    const blob = findEmbeddedBlob(elf);
    assert.ok(blob !== null, `${file}: builtins found`);
    const nm = new TextDecoder().decode(new Deno.Command("nm", { args: [file] }).outputSync().stdout);
    const trampoline = /^([0-9a-f]+) t Builtins_InterpreterEntryTrampoline$/m.exec(nm)?.[1];
    if (trampoline === undefined) {
      // Debian's libnode is stripped: nm has nothing to compare with; the range must still be code.
      console.log(`${file} has no symbol table: the range is only checked to be code`);
      assert.ok(blob.end - blob.start > 1 << 20, `${blob.end - blob.start} bytes of builtins`);
      return;
    }
    const address = parseInt(trampoline, 16);
    assert.ok(address >= blob.start && address < blob.end, `0x${address.toString(16)} in the builtins`);
    const first = /^([0-9a-f]+) [tT] v8_Default_embedded_blob_code_$/m.exec(nm)?.[1];
    if (first !== undefined) assert.equal(blob.start, parseInt(first, 16));
  },
}));

Deno.test("readV8Layout() of a file without V8 is null", () => {
  using elf = ElfFile.open("/bin/true");
  assert.equal(readV8Layout(elf, "/bin/true"), null);
  assert.equal(findEmbeddedBlob(elf), null);
});

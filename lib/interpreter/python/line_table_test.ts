import assert from "node:assert/strict";
import { lineForOffset } from "./line_table.ts";
import type { LineTableFormat } from "./offsets.ts";
import { pythonInstalls, skipForMissingPythons } from "./test_processes.ts";

const installs = pythonInstalls();
const lineTableTest = (label: string) =>
  `lineForOffset() gives the line CPython gives every instruction (${label})`;
skipForMissingPythons(installs, lineTableTest);

interface CodeLines {
  name: string;
  firstLine: number;
  table: string;
  size: number;
  expected: [number, number][];
}

function hexBytes(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}

for (const install of installs.found) {
  Deno.test(lineTableTest(install.label), () => {
    const script = new URL("./testdata/line_tables.py", import.meta.url).pathname;
    const out = new Deno.Command(install.executable, { args: [script], stdout: "piped" }).outputSync();
    assert.ok(out.success);
    const { format, codes } = JSON.parse(new TextDecoder().decode(out.stdout)) as {
      format: LineTableFormat;
      codes: CodeLines[];
    };
    assert.ok(codes.length >= 6);
    let checked = 0;
    for (const code of codes) {
      const table = hexBytes(code.table);
      for (const [offset, line] of code.expected) {
        assert.equal(lineForOffset(format, table, code.firstLine, offset), line, `${code.name} at ${offset}`);
        checked++;
      }
      // Beyond the bytecode the table has nothing to say (3.8-3.9 repeat the last line, as CPython does).
      if (format !== "lnotab") assert.equal(lineForOffset(format, table, code.firstLine, code.size + 64), 0);
      assert.equal(lineForOffset(format, table, code.firstLine, -2), code.firstLine);
    }
    assert.ok(checked > 800, `only ${checked} offsets checked`);
  });
}

Deno.test("lineForOffset() survives truncated and garbage tables", () => {
  const garbage = new Uint8Array(257);
  for (let i = 0; i < garbage.length; i++) garbage[i] = (i * 73 + 11) & 0xff;
  for (const format of ["lnotab", "linetable", "locations"] as const) {
    for (let length = 0; length <= garbage.length; length += 13) {
      for (const offset of [0, 2, 100, 10_000]) {
        const line = lineForOffset(format, garbage.subarray(0, length), 5, offset);
        assert.ok(Number.isInteger(line), `${format} ${length} ${offset}`);
      }
    }
  }
  // A long-form entry whose varint runs off the end of the table.
  assert.ok(Number.isInteger(lineForOffset("locations", new Uint8Array([0xf0, 0x7f, 0x7f]), 1, 0)));
});

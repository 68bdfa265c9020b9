import assert from "node:assert/strict";
import type { Address } from "../../types.ts";
import { FrameMarker, PythonFrameMarker } from "../../../support/types.ts";
import { InterpreterMismatchError } from "../interpreter.ts";
import { RemoteMemoryError } from "../remote_memory.ts";
import {
  decodePythonAddrOrLine,
  encodePythonAddrOrLine,
  FIRST_LINE_STAMP_MASK,
  PythonSymbolizer,
} from "./symbolize.ts";
import {
  anyPython,
  attachPython,
  pythonInstalls,
  skipForMissingPythons,
  startPython,
} from "./test_processes.ts";
import { requiring } from "../../testing/requirements.ts";

const installs = pythonInstalls();
const codeObjectsTest = (label: string) =>
  `PythonSymbolizer reads names, files and lines of ${label}'s code objects`;
skipForMissingPythons(installs, codeObjectsTest);

interface Expected {
  address: number;
  name: string | null;
  qualname: string;
  filename: string;
  firstLine: number;
  lines: [number, number][];
}

const script = Deno.readTextFileSync(new URL("./testdata/code_objects.py", import.meta.url));

Deno.test("encodePythonAddrOrLine() and decodePythonAddrOrLine() round-trip, negative offsets included", () => {
  for (const [firstLine, offset] of [[1, 0], [12345, 4096], [FIRST_LINE_STAMP_MASK, 0x7ffffffe], [7, -2]]) {
    const encoded = encodePythonAddrOrLine(firstLine as number, offset as number);
    assert.ok(Number.isSafeInteger(encoded));
    assert.deepEqual(decodePythonAddrOrLine(encoded), { firstLine, byteOffset: offset });
  }
  // Only the stamp's bits survive.
  assert.equal(decodePythonAddrOrLine(encodePythonAddrOrLine(FIRST_LINE_STAMP_MASK + 2, 0)).firstLine, 1);
});

for (const install of installs.found) {
  Deno.test(codeObjectsTest(install.label), async () => {
    await using python = await startPython(install.executable, script);
    const expected = JSON.parse(python.output[0] ?? "[]") as Expected[];
    using attached = attachPython(python.pid);
    const symbolizer = new PythonSymbolizer(attached.memory, attached.instance.offsets);
    for (const code of expected) {
      const address = code.address as Address;
      if (code.name === null) {
        assert.throws(() => symbolizer.codeInfo(address), RemoteMemoryError);
        assert.equal(symbolizer.symbolize(address, 0).functionName, "<unknown>");
        continue;
      }
      const info = symbolizer.codeInfo(address);
      assert.equal(info.name, code.name);
      assert.equal(info.qualifiedName, code.qualname);
      assert.equal(info.fileName, code.filename);
      assert.equal(info.firstLine, code.firstLine);
      for (const [offset, line] of code.lines) {
        const symbol = symbolizer.symbolize(address, offset, code.firstLine);
        assert.deepEqual(symbol, { functionName: code.qualname, sourceFile: code.filename, line });
      }
      // The BPF frame encoding gives the same answer through the instance.
      const [offset, line] = code.lines[code.lines.length - 1] ?? [0, code.firstLine];
      const frame = {
        kind: PythonFrameMarker.Python,
        fileId: address,
        addrOrLine: encodePythonAddrOrLine(code.firstLine, offset),
      };
      assert.deepEqual(attached.instance.symbolize(frame), [{
        kind: "python",
        functionName: code.qualname,
        sourceFile: code.filename,
        line,
      }]);
    }
    assert.equal(symbolizer.stats.failures, 1);
    assert.throws(
      () => attached.instance.symbolize({ kind: FrameMarker.Native, fileId: 0, addrOrLine: 0 }),
      InterpreterMismatchError,
    );
    const metrics = new Map(attached.instance.getAndResetMetrics().map((m) => [m.id, m.value]));
    assert.ok((metrics.get("python.frames_symbolized") ?? 0) >= expected.length - 1);
    assert.equal(
      attached.instance.getAndResetMetrics().find((m) => m.id === "python.frames_symbolized")?.value,
      0,
    );
  });
}

const first = installs.found[0];
Deno.test(requiring([anyPython(installs)], {
  name: "PythonSymbolizer keeps at most cacheSize code objects and re-reads on a first-line mismatch",
  async fn() {
    await using python = await startPython(first!.executable, script);
    const expected = (JSON.parse(python.output[0] ?? "[]") as Expected[]).filter((c) => c.name !== null);
    using attached = attachPython(python.pid);
    const symbolizer = new PythonSymbolizer(attached.memory, attached.instance.offsets, { cacheSize: 2 });
    for (const code of expected) symbolizer.codeInfo(code.address as Address);
    assert.equal(symbolizer.cachedCount, 2);
    assert.equal(symbolizer.stats.misses, expected.length);
    const last = expected[expected.length - 1]!;
    symbolizer.codeInfo(last.address as Address, last.firstLine);
    assert.equal(symbolizer.stats.hits, 1);
    symbolizer.codeInfo(last.address as Address, last.firstLine + 1);
    assert.equal(symbolizer.stats.stale, 1, "a different stamp means another code object");

    // Once the process is gone, uncached code objects are unknown, never an exception.
    const evicted = expected[0]!;
    await python.kill();
    attached.memory.clearCache();
    assert.equal(symbolizer.symbolize(evicted.address as Address, 0).functionName, "<unknown>");
  },
}));

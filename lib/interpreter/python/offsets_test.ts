import assert from "node:assert/strict";
import { pythonInstalls, skipForMissingPythons, SYSTEM_PYTHON } from "./test_processes.ts";
import { bootstrapped, optional, programs, requiring } from "../../testing/requirements.ts";
import { isFile } from "../../sys/files.ts";
import { type PythonOffsets, pythonOffsets, versionFromHex, versionHex } from "./offsets.ts";

const decoder = new TextDecoder();
const installs = pythonInstalls();
const headersTest = (label: string) =>
  `pythonOffsets() of ${label} equals offsetof() in its installed headers`;
const hexVersionTest = (label: string) =>
  `versionFromHex() and versionHex() agree with sys.hexversion of ${label}`;
skipForMissingPythons(installs, headersTest, hexVersionTest);
const gcc = programs("gcc");

interface PythonFacts {
  version: [number, number, number];
  hexversion: number;
  include: string;
}

function factsOf(executable: string): PythonFacts {
  const out = new Deno.Command(executable, {
    args: [
      "-c",
      "import json, sys, sysconfig; print(json.dumps({'version': list(sys.version_info[:3]), " +
      "'hexversion': sys.hexversion, 'include': sysconfig.get_paths()['include']}))",
    ],
    stdout: "piped",
  }).outputSync();
  return JSON.parse(decoder.decode(out.stdout)) as PythonFacts;
}

const NON_OFFSET_FIELDS = new Set(["frameModel", "instructionModel", "lineTableFormat"]);

for (const install of installs.found) {
  const facts = factsOf(install.executable);
  const [major, minor, micro] = facts.version;
  const internal = `${facts.include}/internal/pycore_pystate.h`;
  // Bootstrap installs python3-dev, which has the system Python's internal headers.
  const headers = (install.executable === SYSTEM_PYTHON ? bootstrapped : optional)(
    isFile(internal) ? null : `${install.label} has no internal headers (${internal})`,
  );

  Deno.test(requiring([gcc, headers], {
    name: headersTest(install.label),
    fn() {
      const dir = Deno.makeTempDirSync({ prefix: "omniprof_pyoffsets_" });
      try {
        const binary = `${dir}/offsets`;
        const source = new URL("./testdata/offsets.c", import.meta.url).pathname;
        const build = new Deno.Command("gcc", {
          args: [`-I${facts.include}`, `-I${facts.include}/internal`, source, "-o", binary],
          stderr: "piped",
        }).outputSync();
        assert.ok(build.success, decoder.decode(build.stderr));
        const printed = new Map<string, number>();
        const text = decoder.decode(new Deno.Command(binary, { stdout: "piped" }).outputSync().stdout);
        for (const line of text.trim().split("\n")) {
          const [name, value] = line.split(" ");
          printed.set(name ?? "", Number(value));
        }
        const table = pythonOffsets({ major, minor, micro });
        for (const [key, value] of Object.entries(table) as [keyof PythonOffsets, unknown][]) {
          if (NON_OFFSET_FIELDS.has(key)) continue;
          assert.equal(value, printed.has(key) ? printed.get(key) : null, `${install.label} ${key}`);
        }
        for (const key of printed.keys()) assert.ok(key in table, `the table lacks ${key}`);
      } finally {
        Deno.removeSync(dir, { recursive: true });
      }
    },
  }));

  Deno.test(hexVersionTest(install.label), () => {
    assert.deepEqual(versionFromHex(facts.hexversion), { major, minor, micro });
    if ((facts.hexversion & 0xff) === 0xf0) {
      assert.equal(versionHex({ major, minor, micro }), facts.hexversion);
    }
  });
}

Deno.test("pythonOffsets() covers 3.8 to 3.13 and refuses other versions", () => {
  for (let minor = 8; minor <= 13; minor++) {
    const table = pythonOffsets({ major: 3, minor, micro: 0 });
    assert.equal(table.frameModel, minor < 11 ? "frame-object" : "interpreter-frame");
    assert.equal(table.codeQualname === null, minor < 11);
  }
  assert.throws(() => pythonOffsets({ major: 3, minor: 7, micro: 0 }), RangeError);
  assert.throws(() => pythonOffsets({ major: 3, minor: 14, micro: 0 }), RangeError);
  assert.throws(() => pythonOffsets({ major: 2, minor: 7, micro: 18 }), RangeError);
});

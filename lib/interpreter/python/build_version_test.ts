import assert from "node:assert/strict";
import { ElfFile } from "../../elf/elf_file.ts";
import { findElfSymbols } from "../elf_symbols.ts";
import { pythonVersionFromName, versionFromGetVersionCode, versionFromPyVersion } from "./build_version.ts";
import { interpreterFileOf, pythonInstalls, skipForMissingPythons } from "./test_processes.ts";

const installs = pythonInstalls();
const codeTest = (label: string) =>
  `versionFromGetVersionCode() reads sys.hexversion's version in ${label}'s Py_GetVersion`;
const dataTest = (label: string) => `versionFromPyVersion() reads sys.hexversion's version in ${label}`;
skipForMissingPythons(installs, codeTest, dataTest);

/** The version `sys.hexversion` spells: major, minor, micro in its top three bytes. */
function hexVersionParts(hex: number): { major: number; minor: number; micro: number } {
  return { major: hex >>> 24, minor: (hex >>> 16) & 0xff, micro: (hex >>> 8) & 0xff };
}

for (const install of installs.found) {
  const python = interpreterFileOf(install.executable);

  // Every build, 3.11+ included, so the code path is checked on position-independent libraries and on
  // Debian's position-dependent executable alike. It is how 3.8-3.10 (no Py_Version) are read, so there it
  // must find the version; from 3.11 the loader reads Py_Version first, and this scan must then give the
  // right version or none, never a wrong one (Debian 13's python3.13 builds Py_GetVersion so that it finds
  // none).
  Deno.test(codeTest(install.label), () => {
    using elf = ElfFile.open(python.path);
    const getVersion = findElfSymbols(elf, ["Py_GetVersion"]).get("Py_GetVersion");
    assert.ok(getVersion !== undefined, `${python.path} defines Py_GetVersion`);
    const found = versionFromGetVersionCode(elf, getVersion);
    if (python.version[1] >= 11 && found === null) {
      console.log(`${install.label}: no version in Py_GetVersion's code; Py_Version names it`);
      return;
    }
    assert.deepEqual(found, hexVersionParts(python.hexversion));
  });

  Deno.test(dataTest(install.label), () => {
    using elf = ElfFile.open(python.path);
    const pyVersion = findElfSymbols(elf, ["Py_Version"]).get("Py_Version");
    // Py_Version exists from 3.11 on.
    if (python.version[1] < 11) {
      assert.equal(pyVersion, undefined);
      return;
    }
    assert.ok(pyVersion !== undefined, `${python.path} defines Py_Version`);
    assert.deepEqual(versionFromPyVersion(elf, pyVersion), hexVersionParts(python.hexversion));
  });
}

Deno.test("versionFromGetVersionCode() answers null for a function that loads another kind of version", () => {
  // glibc's version is "2.36": major.minor, which no PY_VERSION is.
  using elf = ElfFile.open("/lib/x86_64-linux-gnu/libc.so.6");
  const symbol = findElfSymbols(elf, ["gnu_get_libc_version"]).get("gnu_get_libc_version");
  assert.ok(symbol !== undefined && symbol.size > 0, "libc defines gnu_get_libc_version");
  assert.equal(versionFromGetVersionCode(elf, symbol), null);
});

Deno.test("pythonVersionFromName() reads interpreter and library names, and nothing else", () => {
  const cases: [string, string | null][] = [
    ["/usr/bin/python3.11", "3.11"],
    ["/opt/py/lib/libpython3.12.so.1.0", "3.12"],
    ["libpython3.8.so", "3.8"],
    ["/usr/bin/python3.7m", "3.7"],
    ["/usr/bin/python3", null],
    ["/usr/lib/x86_64-linux-gnu/libc.so.6", null],
    ["/usr/bin/python3.11-config", null],
    ["/home/python3.11/bin/node", null],
  ];
  for (const [path, want] of cases) {
    const got = pythonVersionFromName(path);
    assert.equal(got === null ? null : `${got.major}.${got.minor}`, want, path);
  }
});

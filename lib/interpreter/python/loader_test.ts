import assert from "node:assert/strict";
import type { FileId } from "../../types.ts";
import { PythonUnwindProgram } from "../../../support/types.ts";
import { ElfFile } from "../../elf/elf_file.ts";
import { LoaderInfo } from "../interpreter.ts";
import { MemoryEbpfHandler } from "../memory_ebpf_handler.ts";
import { detectPythonFile, mayHoldPython, pythonLoader } from "./loader.ts";
import {
  buildAgainstSystemPython,
  type InterpreterFile,
  interpreterFileOf,
  type LibpythonLink,
  pythonInstalls,
  readelfSymbols,
  skipForMissingPythons,
  SYSTEM_PYTHON,
  systemPython,
  systemPythonDev,
  systemStaticLibpython,
} from "./test_processes.ts";
import { bootstrapped, optional, programs, requiring } from "../../testing/requirements.ts";

const installs = pythonInstalls();
const detectTest = (label: string) => `detectPythonFile() reads ${label}'s interpreter file`;
const evalLoopTest = (label: string) => `pythonLoader() declares ${label}'s eval loop to BPF`;
const passesOverTest = (label: string) =>
  `pythonLoader() passes over ${label}'s executable, which only imports libpython`;
const renamedTest = (label: string) =>
  `pythonLoader() recognises ${label}'s interpreter file copied under a name unlike Python's`;
skipForMissingPythons(installs, detectTest, evalLoopTest, passesOverTest, renamedTest);

function fileId(path: string): FileId {
  return path.replaceAll("/", "_") as FileId;
}

/** The version `sys.hexversion` spells: major, minor, micro in its top three bytes. */
function hexVersionParts(hex: number): { major: number; minor: number; micro: number } {
  return { major: hex >>> 24, minor: (hex >>> 16) & 0xff, micro: (hex >>> 8) & 0xff };
}

/** `file` detected as the interpreter `python` describes: version (from the file), runtime and eval loop. */
function assertDetected(path: string, python: InterpreterFile, symbolsOf: string = path): void {
  using elf = ElfFile.open(path);
  const detected = detectPythonFile(elf, path);
  assert.ok(detected !== null, `${path} is recognised`);
  assert.deepEqual(
    detected.version,
    hexVersionParts(python.hexversion),
    `${path}: the version it was built as`,
  );
  const symbols = readelfSymbols(symbolsOf);
  assert.equal(detected.runtimeVaddr, symbols.get("_PyRuntime")?.value);
  const evalLoop = symbols.get("_PyEval_EvalFrameDefault")!;
  assert.deepEqual(detected.evalRanges[0], { start: evalLoop.value, end: evalLoop.value + evalLoop.size });
  const tls = symbols.get("_Py_tss_tstate");
  assert.equal(detected.tssTstateOffset, tls?.value ?? null);
}

for (const install of installs.found) {
  const python = interpreterFileOf(install.executable);

  Deno.test(detectTest(install.label), () => assertDetected(python.path, python));

  Deno.test(evalLoopTest(install.label), () => {
    const ebpf = new MemoryEbpfHandler();
    using info = new LoaderInfo({ fileId: fileId(python.path), fileName: python.path });
    const data = pythonLoader(ebpf, info);
    assert.ok(data !== null);
    const entry = ebpf.interpreterOffsets.get(info.fileId);
    assert.equal(entry?.program, PythonUnwindProgram.Python);
    assert.deepEqual(entry?.ranges[0], info.getSymbolAsRanges("_PyEval_EvalFrameDefault")[0]);
  });

  const linksLibpython = optional(
    python.inExecutable ? `${install.label} has the interpreter in its executable` : null,
  );
  Deno.test(requiring([linksLibpython], {
    name: passesOverTest(install.label),
    fn: () => {
      const ebpf = new MemoryEbpfHandler();
      using info = new LoaderInfo({ fileId: fileId(python.executable), fileName: python.executable });
      assert.equal(pythonLoader(ebpf, info), null);
      assert.equal(ebpf.interpreterOffsets.size, 0);
    },
  }));

  Deno.test(renamedTest(install.label), () => {
    const dir = Deno.makeTempDirSync({ prefix: "omniprof_pyloader_" });
    try {
      // Neither `python` nor `libpython` in the path: only the content can tell.
      const copy = `${dir}/${python.inExecutable ? "not-a-snake" : "libnot-a-snake.so"}`;
      Deno.copyFileSync(python.path, copy);
      assertDetected(copy, python, python.path);
      const ebpf = new MemoryEbpfHandler();
      using info = new LoaderInfo({ fileId: fileId(copy), fileName: copy });
      assert.ok(pythonLoader(ebpf, info) !== null);
      assert.equal(ebpf.interpreterOffsets.get(info.fileId)?.program, PythonUnwindProgram.Python);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  });
}

const staticLibpython = systemStaticLibpython();
const buildsAgainstPython = [systemPython(), systemPythonDev(), programs("gcc", "readelf")];

for (const link of ["shared", "static"] as LibpythonLink[]) {
  const hasStatic = link === "static"
    ? [bootstrapped(typeof staticLibpython === "string" ? staticLibpython : null)]
    : [];
  Deno.test(requiring([...buildsAgainstPython, ...hasStatic], {
    name: `pythonLoader() finds the interpreter of a program that embeds the ${link} libpython where it is`,
    fn: () => {
      const dir = Deno.makeTempDirSync({ prefix: "omniprof_pyloader_" });
      try {
        const program = buildAgainstSystemPython("embed", link, dir);
        const python = interpreterFileOf(SYSTEM_PYTHON);
        const ebpf = new MemoryEbpfHandler();
        using info = new LoaderInfo({ fileId: fileId(program), fileName: program });
        if (link === "shared") {
          // The program only calls libpython: the library is the interpreter's file.
          assert.equal(pythonLoader(ebpf, info), null);
          assert.ok(python.library !== null, `${SYSTEM_PYTHON} has a shared library`);
          assertDetected(python.library, python);
          return;
        }
        // Linked in and not exported: the symbols are in .symtab only, and `.PyRuntime` flags the file.
        const exported = new TextDecoder().decode(
          new Deno.Command("readelf", { args: ["-W", "--dyn-syms", program], stdout: "piped" }).outputSync()
            .stdout,
        );
        assert.doesNotMatch(exported, /_PyRuntime/, "the program does not export _PyRuntime");
        assertDetected(program, python);
        assert.ok(pythonLoader(ebpf, info) !== null);
      } finally {
        Deno.removeSync(dir, { recursive: true });
      }
    },
  }));
}

Deno.test(requiring(buildsAgainstPython, {
  name: "pythonLoader() passes over a program that imports _PyRuntime, even when it copies it in",
  fn: () => {
    const dir = Deno.makeTempDirSync({ prefix: "omniprof_pyloader_" });
    try {
      const program = buildAgainstSystemPython("imports_runtime", "shared", dir);
      const symbols = readelfSymbols(program);
      // The copy relocation defines `_PyRuntime` in the program; the eval loop stays libpython's.
      assert.ok(symbols.has("_PyRuntime"), "the program defines a copy of _PyRuntime");
      assert.ok(!symbols.has("_PyEval_EvalFrameDefault"), "the program only imports the eval loop");
      using elf = ElfFile.open(program);
      assert.ok(mayHoldPython(elf), "the cheap test lets it through to the full one");
      assert.equal(detectPythonFile(elf, program), null);
      const ebpf = new MemoryEbpfHandler();
      using info = new LoaderInfo({ fileId: fileId(program), fileName: program });
      assert.equal(pythonLoader(ebpf, info), null);
      assert.equal(ebpf.interpreterOffsets.size, 0);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
}));

Deno.test("pythonLoader() returns null for a non-Python file, even one named like Python", () => {
  const dir = Deno.makeTempDirSync({ prefix: "omniprof_pyloader_" });
  try {
    const impostor = `${dir}/python3.11`;
    Deno.copyFileSync("/bin/true", impostor);
    const ebpf = new MemoryEbpfHandler();
    using info = new LoaderInfo({ fileId: fileId(impostor), fileName: impostor });
    assert.equal(pythonLoader(ebpf, info), null);
    using other = new LoaderInfo({ fileId: fileId("/bin/true"), fileName: "/bin/true" });
    assert.equal(pythonLoader(ebpf, other), null);
    assert.equal(ebpf.interpreterOffsets.size, 0);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("pythonLoader() returns null for a file that is no ELF file", () => {
  const dir = Deno.makeTempDirSync({ prefix: "omniprof_pyloader_" });
  try {
    const script = `${dir}/libpython3.11.so.1.0`;
    Deno.writeTextFileSync(script, "#!/bin/sh\nexit 0\n");
    const ebpf = new MemoryEbpfHandler();
    using info = new LoaderInfo({ fileId: fileId(script), fileName: script });
    assert.equal(pythonLoader(ebpf, info), null);
    assert.equal(ebpf.interpreterOffsets.size, 0);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

import assert from "node:assert/strict";
import type { FileId } from "../../types.ts";
import { UnwindProgram } from "../../../support/types.ts";
import { ElfFile } from "../../elf/elf_file.ts";
import { LoaderInfo } from "../interpreter.ts";
import { MemoryEbpfHandler } from "../memory_ebpf_handler.ts";
import { detectPythonFile, pythonLoader, pythonVersionFromName } from "./loader.ts";
import { pythonInstalls, skipForMissingPythons } from "./test_processes.ts";
import { optional, requiring } from "../../testing/requirements.ts";

const decoder = new TextDecoder();
const installs = pythonInstalls();
const detectTest = (label: string) => `detectPythonFile() reads ${label}'s interpreter file`;
const evalLoopTest = (label: string) => `pythonLoader() declares ${label}'s eval loop to BPF`;
const passesOverTest = (label: string) =>
  `pythonLoader() passes over ${label}'s executable, which only imports libpython`;
skipForMissingPythons(installs, detectTest, evalLoopTest, passesOverTest);

interface BuildFacts {
  version: [number, number, number];
  executable: string;
  library: string;
}

function buildFacts(executable: string): BuildFacts {
  const code = "import json, os, sys, sysconfig; v = sysconfig.get_config_var; " +
    "print(json.dumps({'version': list(sys.version_info[:3]), 'executable': os.path.realpath(sys.executable), " +
    "'library': os.path.join(v('LIBDIR') or '', v('INSTSONAME') or '')}))";
  const out = new Deno.Command(executable, { args: ["-c", code], stdout: "piped" }).outputSync();
  return JSON.parse(decoder.decode(out.stdout)) as BuildFacts;
}

/** `readelf` symbol values by name (defined symbols of both tables). */
function readelfSymbols(path: string): Map<string, { value: number; size: number }> {
  const text = decoder.decode(
    new Deno.Command("readelf", { args: ["-sW", path], stdout: "piped" }).outputSync().stdout,
  );
  const out = new Map<string, { value: number; size: number }>();
  for (const line of text.split("\n")) {
    const m = line.match(/^\s*\d+: ([0-9a-f]+)\s+(\d+|0x[0-9a-f]+)\s+\S+\s+\S+\s+\S+\s+(\S+)\s+(\S+)/);
    if (m === null || m[3] === "UND") continue;
    out.set((m[4] ?? "").replace(/@.*$/, ""), { value: parseInt(m[1] ?? "", 16), size: Number(m[2]) });
  }
  return out;
}

function fileId(path: string): FileId {
  return path.replaceAll("/", "_") as FileId;
}

for (const install of installs.found) {
  const facts = buildFacts(install.executable);
  // The interpreter is in the executable unless it links libpython (Debian links it in statically even
  // though it also ships the shared library).
  const inExecutable = readelfSymbols(facts.executable).has("_PyRuntime");
  const interpreterFile = inExecutable ? facts.executable : Deno.realPathSync(facts.library);
  const [major, minor, micro] = facts.version;

  Deno.test(detectTest(install.label), () => {
    using elf = ElfFile.open(interpreterFile);
    const detected = detectPythonFile(elf, interpreterFile);
    assert.ok(detected !== null);
    assert.equal(detected.version.major, major);
    assert.equal(detected.version.minor, minor);
    // Py_Version exists from 3.11 on; before, the file name gives only major.minor.
    assert.equal(detected.version.micro, minor >= 11 ? micro : -1);
    const symbols = readelfSymbols(interpreterFile);
    assert.equal(detected.runtimeVaddr, symbols.get("_PyRuntime")?.value);
    const evalLoop = symbols.get("_PyEval_EvalFrameDefault")!;
    assert.deepEqual(detected.evalRanges[0], { start: evalLoop.value, end: evalLoop.value + evalLoop.size });
    const tls = symbols.get("_Py_tss_tstate");
    assert.equal(detected.tssTstateOffset, tls?.value ?? null);
  });

  Deno.test(evalLoopTest(install.label), () => {
    const ebpf = new MemoryEbpfHandler();
    using info = new LoaderInfo({ fileId: fileId(interpreterFile), fileName: interpreterFile });
    const data = pythonLoader(ebpf, info);
    assert.ok(data !== null);
    const entry = ebpf.interpreterOffsets.get(info.fileId);
    assert.equal(entry?.program, UnwindProgram.Python);
    assert.deepEqual(entry?.ranges[0], info.getSymbolAsRanges("_PyEval_EvalFrameDefault")[0]);
  });

  const linksLibpython = optional(
    inExecutable ? `${install.label} has the interpreter in its executable` : null,
  );
  Deno.test(requiring([linksLibpython], {
    name: passesOverTest(install.label),
    fn: () => {
      const ebpf = new MemoryEbpfHandler();
      using info = new LoaderInfo({ fileId: fileId(facts.executable), fileName: facts.executable });
      assert.equal(pythonLoader(ebpf, info), null);
      assert.equal(ebpf.interpreterOffsets.size, 0);
    },
  }));
}

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

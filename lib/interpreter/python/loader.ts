/**
 * Recognises CPython by what a file is, not by its name: the file that defines `_PyRuntime` and
 * `_PyEval_EvalFrameDefault` holds an interpreter, whether it is `python3.11` (Debian links the
 * interpreter into it), a `libpython3.12.so.1.0`, a copy of either under another name, or a program that
 * links libpython in statically. An executable that links libpython only imports those symbols and is
 * not the interpreter's file: the library is.
 *
 * The process manager offers every file a process maps to every loader, so the first test is cheap:
 * `_PyRuntime` looked up through the dynamic symbol table's hash (a few dozen bytes read; exported by
 * libpython, and by interpreters linked with `-export-dynamic` as CPython's own executable is), or a
 * `.PyRuntime` section (the builds of 3.10.13, 3.11, 3.12.1 and 3.13.0 measured put `_PyRuntime` there;
 * 3.8.18 and 3.9.18 do not), which flags a program that links the interpreter in without exporting it.
 * Only a file that passes reads its symbol tables in full (about 16 µs per file that does not pass,
 * 150-200 µs per one that does: tests/bench/python_detect_bench.ts).
 *
 * The version comes from the file (build_version.ts): `Py_Version` (3.11+), else the `PY_VERSION`
 * literal that `Py_GetVersion` loads, else the file name.
 *
 * @example
 * ```ts ignore
 * import { pythonLoader } from "./loader.ts";
 * const data = pythonLoader(ebpf, info); // PythonData, or null
 * ```
 *
 * @module
 */
import type { ElfFile } from "../../elf/elf_file.ts";
import { PythonUnwindProgram } from "../../../support/types.ts";
import { findDynamicSymbol } from "../dynamic_symbol_lookup.ts";
import { type ElfSymbol, findElfSymbols, STT_TLS } from "../elf_symbols.ts";
import type { AddressRange, EbpfHandler, Loader, LoaderInfo } from "../interpreter.ts";
import { PythonData } from "./data.ts";
import type { PythonFileFacts } from "./file_facts.ts";
import { pythonVersionFromName, versionFromGetVersionCode, versionFromPyVersion } from "./build_version.ts";
import { MAX_PYTHON_MINOR, MIN_PYTHON_MINOR, type PythonVersion } from "./offsets.ts";

const PT_DYNAMIC = 2;
/** The section that holds `_PyRuntime` in the builds of 3.10.13 to 3.13.0 measured. */
const RUNTIME_SECTION = ".PyRuntime";
const SYMBOLS = [
  "_PyRuntime",
  "_PyEval_EvalFrameDefault",
  "_PyEval_EvalFrameDefault.cold",
  "Py_Version",
  "Py_GetVersion",
  "_Py_tss_tstate",
] as const;

/**
 * Whether `elf` may hold an interpreter, from a few bytes: it exports `_PyRuntime`, or has the section
 * that holds it. Every file a process maps goes through this.
 *
 * @throws {RangeError} when the file's hash table is malformed.
 */
export function mayHoldPython(elf: ElfFile): boolean {
  return elf.section(RUNTIME_SECTION) !== undefined || findDynamicSymbol(elf, "_PyRuntime") !== null;
}

/**
 * What an interpreter file holds, or null when `elf` is not a CPython interpreter file.
 *
 * @throws {RangeError} when it is one but of an unsupported version, or its ELF is malformed.
 */
export function detectPythonFile(elf: ElfFile, fileName: string): PythonFileFacts | null {
  if (!mayHoldPython(elf)) return null;
  const symbols = findElfSymbols(elf, SYMBOLS);
  const runtime = symbols.get("_PyRuntime");
  const evalLoop = symbols.get("_PyEval_EvalFrameDefault");
  if (runtime === undefined || evalLoop === undefined || evalLoop.size === 0) return null;

  const version = buildVersion(elf, symbols, fileName);
  if (version.major !== 3 || version.minor < MIN_PYTHON_MINOR || version.minor > MAX_PYTHON_MINOR) {
    throw new RangeError(
      `Cannot unwind Python in ${fileName}: version ${version.major}.${version.minor} is not ` +
        `3.${MIN_PYTHON_MINOR} to 3.${MAX_PYTHON_MINOR}`,
    );
  }

  const evalRanges: AddressRange[] = [{ start: evalLoop.value, end: evalLoop.value + evalLoop.size }];
  // gcc moves the eval loop's unlikely paths into a `.cold` part elsewhere in .text.
  const cold = symbols.get("_PyEval_EvalFrameDefault.cold");
  if (cold !== undefined && cold.size > 0) {
    evalRanges.push({ start: cold.value, end: cold.value + cold.size });
  }

  const tls = symbols.get("_Py_tss_tstate");
  const dynamic = elf.programHeaders.find((p) => p.type === PT_DYNAMIC);
  return {
    version,
    runtimeVaddr: runtime.value,
    runtimeSize: runtime.size,
    evalRanges,
    tssTstateOffset: tls !== undefined && tls.type === STT_TLS ? tls.value : null,
    dynamicVaddr: dynamic?.vaddr ?? null,
  };
}

/**
 * The version the interpreter file was built as: from its data or code, else its name.
 *
 * @throws {RangeError} when neither tells it.
 */
function buildVersion(elf: ElfFile, symbols: Map<string, ElfSymbol>, fileName: string): PythonVersion {
  const pyVersion = symbols.get("Py_Version");
  const fromData = pyVersion === undefined ? null : versionFromPyVersion(elf, pyVersion);
  if (fromData !== null) return fromData;
  const getVersion = symbols.get("Py_GetVersion");
  const fromCode = getVersion === undefined ? null : versionFromGetVersionCode(elf, getVersion);
  if (fromCode !== null) return fromCode;
  const fromName = pythonVersionFromName(fileName);
  if (fromName !== null) return fromName;
  throw new RangeError(
    `Cannot unwind Python in ${fileName}: neither Py_Version, Py_GetVersion's code nor the name tells ` +
      `its version`,
  );
}

/**
 * The CPython {@linkcode Loader}: returns {@linkcode PythonData} for an interpreter file and declares its
 * eval loop to BPF (`PythonUnwindProgram.Python`).
 */
export const pythonLoader: Loader = (ebpf: EbpfHandler, info: LoaderInfo): PythonData | null => {
  let elf: ElfFile;
  try {
    elf = info.getElf();
  } catch (error) {
    // A file that is no ELF64 file (a data file mapped executable) holds no interpreter this reads.
    if (error instanceof RangeError) return null;
    throw error;
  }
  const facts = detectPythonFile(elf, info.fileName);
  if (facts === null) return null;
  ebpf.updateInterpreterOffsets(PythonUnwindProgram.Python, info.fileId, facts.evalRanges);
  return new PythonData(info.fileName, facts);
};

/**
 * Recognises CPython: an interpreter executable (`python3.11`, which holds the interpreter when built
 * without a shared library, as Debian does) or a shared library (`libpython3.12.so.1.0`), 3.8 to 3.13.
 * The name is the cheap first test (the process manager offers every mapped file to every loader); the
 * symbols decide: a file that defines `_PyRuntime` and `_PyEval_EvalFrameDefault` holds an interpreter.
 * An executable that links libpython only imports them and is not the interpreter's file.
 *
 * The version comes from `Py_Version` (3.11+, the build's PY_VERSION_HEX in read-only data) and
 * otherwise from the file name.
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
import { UnwindProgram } from "../../../support/types.ts";
import { findElfSymbols, readElfBytes, STT_TLS } from "../elf_symbols.ts";
import type { AddressRange, EbpfHandler, Loader, LoaderInfo } from "../interpreter.ts";
import { PythonData, type PythonFileFacts } from "./data.ts";
import { MAX_PYTHON_MINOR, MIN_PYTHON_MINOR, type PythonVersion, versionFromHex } from "./offsets.ts";

const LIBPYTHON_NAME = /^(?:.*\/)?libpython(\d)\.(\d+)[^/]*$/;
const PYTHON_NAME = /^(?:.*\/)?python(\d)\.(\d+)(?:d|m|dm)?$/;
const PT_DYNAMIC = 2;
const SYMBOLS = [
  "_PyRuntime",
  "_PyEval_EvalFrameDefault",
  "_PyEval_EvalFrameDefault.cold",
  "Py_Version",
  "_Py_tss_tstate",
] as const;

/** The major.minor version a file name announces (`python3.11`, `libpython3.12.so.1.0`), or null. */
export function pythonVersionFromName(path: string): PythonVersion | null {
  const match = LIBPYTHON_NAME.exec(path) ?? PYTHON_NAME.exec(path);
  if (match === null) return null;
  return { major: Number(match[1]), minor: Number(match[2]), micro: -1 };
}

/**
 * What an interpreter file holds, or null when `elf` is not a CPython interpreter file.
 *
 * @throws {RangeError} when it is one but of an unsupported version, or its ELF is malformed.
 */
export function detectPythonFile(elf: ElfFile, fileName: string): PythonFileFacts | null {
  const named = pythonVersionFromName(fileName);
  if (named === null || named.major !== 3) return null;
  const symbols = findElfSymbols(elf, SYMBOLS);
  const runtime = symbols.get("_PyRuntime");
  const evalLoop = symbols.get("_PyEval_EvalFrameDefault");
  if (runtime === undefined || evalLoop === undefined || evalLoop.size === 0) return null;

  let version = named;
  const pyVersion = symbols.get("Py_Version");
  if (pyVersion !== undefined && pyVersion.size >= 4) {
    const bytes = readElfBytes(elf, pyVersion.value, 4);
    const hex = new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true);
    version = versionFromHex(hex);
  }
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
 * The CPython {@linkcode Loader}: returns {@linkcode PythonData} for an interpreter file and declares its
 * eval loop to BPF (`UnwindProgram.Python`).
 */
export const pythonLoader: Loader = (ebpf: EbpfHandler, info: LoaderInfo): PythonData | null => {
  if (pythonVersionFromName(info.fileName) === null) return null;
  const facts = detectPythonFile(info.getElf(), info.fileName);
  if (facts === null) return null;
  ebpf.updateInterpreterOffsets(UnwindProgram.Python, info.fileId, facts.evalRanges);
  return new PythonData(info.fileName, facts);
};

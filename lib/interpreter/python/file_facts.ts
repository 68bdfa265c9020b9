/**
 * What is known of a CPython interpreter file whatever process maps it, as the loader finds it in the
 * file (lib/interpreter/python/loader.ts): its version, where `_PyRuntime` and the eval loop are. The
 * file's data and each process's instance read it; neither owns the other.
 *
 * @example
 * ```ts ignore
 * import type { PythonFileFacts } from "./file_facts.ts";
 * const facts: PythonFileFacts | null = detectPythonFile(elf, path);
 * ```
 *
 * @module
 */
import type { AddressRange } from "../interpreter.ts";
import type { PythonVersion } from "./offsets.ts";

/** What {@linkcode detectPythonFile} learns from an interpreter file. */
export interface PythonFileFacts {
  readonly version: PythonVersion;
  /** ELF virtual address of `_PyRuntime`. */
  readonly runtimeVaddr: number;
  /** `st_size` of `_PyRuntime` (sizeof(_PyRuntimeState)). */
  readonly runtimeSize: number;
  /** ELF virtual address ranges of `_PyEval_EvalFrameDefault` (and its `.cold` part). */
  readonly evalRanges: readonly AddressRange[];
  /** Offset of `_Py_tss_tstate` in the file's TLS segment (3.12+, when `.symtab` has it), else null. */
  readonly tssTstateOffset: number | null;
  /** ELF virtual address of the dynamic section (to find the file's link map), null when static. */
  readonly dynamicVaddr: number | null;
}

/**
 * Recognises V8 by what a file is: the file that holds V8's introspection data (`v8dbg_*` symbols, which
 * Node.js's `node` and Debian's `libnode.so` export) and V8's version, whatever its name. It reads the
 * layouts (introspection.ts) and where the embedded builtins lie (embedded_blob.ts), which it declares to
 * BPF as the file's interpreter ranges; the process's JIT code gets the same unwinder through the
 * runtime's `jitCode`.
 *
 * A file without the marker symbol costs one lookup in its dynamic symbol table's hash; one with it reads
 * its symbol tables (about 100 ms for Node 20's `node`, once per file). Deno's V8 has no such data: it is
 * recognised by its version string (rusty_v8.ts) and refused with the flags its processes need.
 *
 * @example
 * ```ts ignore
 * import { v8Loader } from "./loader.ts";
 * const data = v8Loader(ebpf, info); // V8Data, or null
 * ```
 *
 * @module
 */
import type { ElfFile } from "../../elf/elf_file.ts";
import { V8Limits, V8UnwindProgram } from "../../../support/types.ts";
import type { EbpfHandler, Loader, LoaderInfo } from "../interpreter.ts";
import { V8Data } from "./data.ts";
import { findEmbeddedBlob } from "./embedded_blob.ts";
import { formatV8Version, readV8Layout, type V8Layout } from "./introspection.ts";
import { readRustyV8Version, rustyV8Refusal } from "./rusty_v8.ts";

/**
 * Why BPF could not read frames with `layout`, or null when it can: the fields it reads must lie where
 * its fixed-size reads reach.
 */
export function bpfLayoutProblem(layout: V8Layout): string | null {
  const frame = layout.frame;
  for (const [name, offset] of Object.entries(frame)) {
    if (offset >= 0 || offset < -V8Limits.FrameBelowFp) return `frame slot ${name} at fp${offset}`;
  }
  const code = layout.code;
  const codeFields: [string, number, number][] = [
    ["instruction_size", code.instructionSize, 4],
    ["flags", code.flags, 4],
    ...(code.instructionStartIsPointer
      ? [["instruction_start", code.instructionStart, 8] as [string, number, number]]
      : []),
  ];
  for (const [name, offset, width] of codeFields) {
    if (offset < 0 || offset + width > V8Limits.CodeBytes) return `Code.${name} at ${offset}`;
  }
  const objectFields: [string, number][] = [
    ["HeapObject.map", layout.heapObjectMap],
    ["JSFunction.shared", layout.jsFunction.shared],
    ["JSFunction.code", layout.jsFunction.code],
  ];
  for (const [name, offset] of objectFields) {
    if (offset < 0 || offset + 8 > V8Limits.ObjectBytes) return `${name} at ${offset}`;
  }
  return null;
}

/**
 * The V8 {@linkcode Loader}: returns {@linkcode V8Data} for a file that holds V8, and declares its
 * embedded builtins to BPF (`V8UnwindProgram.V8`).
 */
export const v8Loader: Loader = (ebpf: EbpfHandler, info: LoaderInfo): V8Data | null => {
  let elf: ElfFile;
  try {
    elf = info.getElf();
  } catch (error) {
    // A file that is no ELF64 file (a data file mapped executable) holds no V8 this reads.
    if (error instanceof RangeError) return null;
    throw error;
  }
  const layout = readV8Layout(elf, info.fileName);
  if (layout === null) {
    const rusty = readRustyV8Version(elf);
    if (rusty !== null) throw rustyV8Refusal(rusty, info.fileName);
    return null;
  }
  const version = formatV8Version(layout.version);
  const problem = bpfLayoutProblem(layout);
  if (problem !== null) throw new RangeError(`Cannot unwind V8 ${version} in ${info.fileName}: ${problem}`);
  const blob = findEmbeddedBlob(elf);
  if (blob === null) {
    throw new RangeError(
      `Cannot unwind V8 ${version} in ${info.fileName}: its embedded builtins were not found`,
    );
  }
  ebpf.updateInterpreterOffsets(V8UnwindProgram.V8, info.fileId, [blob]);
  return new V8Data(info.fileName, layout);
};

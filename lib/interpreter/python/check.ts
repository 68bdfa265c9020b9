/**
 * What `omniprof check` says of CPython here: the BPF unwinder finds each thread's interpreter state
 * through glibc's thread-specific data, at offsets the C library publishes for debuggers, so Python frames
 * need a glibc that publishes them.
 *
 * @module
 */
import { ElfFile } from "../../elf/elf_file.ts";
import { readProcMaps } from "../../process/proc_maps.ts";
import type { Pid } from "../../types.ts";
import { readGlibcThreadLayout } from "../glibc_threads.ts";
import { MAX_PYTHON_MINOR, MIN_PYTHON_MINOR } from "./offsets.ts";

/**
 * The versions supported and the C library that serves them, read from this process's own C library (the
 * one the machine's programs use).
 *
 * @throws {Error} when the C library is not glibc or publishes no thread descriptors.
 */
export function checkPython(): string {
  const libc = readProcMaps(Deno.pid as Pid).mappings?.find((mapping) => /\/libc\.so\.6$/.test(mapping.path));
  if (libc === undefined) throw new Error("no glibc in this process: Python frames need glibc");
  using elf = ElfFile.open(libc.path);
  const layout = readGlibcThreadLayout(elf);
  if (layout === null) {
    throw new Error(`${libc.path} has no thread descriptors (_thread_db_*): Python frames unavailable`);
  }
  return `CPython 3.${MIN_PYTHON_MINOR}-3.${MAX_PYTHON_MINOR} ` +
    `(thread states through ${libc.path}'s thread-specific data at offset ${layout.tsd.offset})`;
}

/**
 * Offers a file to the runtimes' loaders, in the runtime list's order, and keeps the first claim: the
 * runtime, its per-file data, and the interpreter loop the loader declared. Loaders declare their loop
 * through an {@linkcode EbpfHandler} keyed by content id; they are given one that keeps what they declare
 * (a {@linkcode MemoryEbpfHandler}), which the file registry then writes under the id BPF knows the file
 * by. A loader declares per-file facts only: anything else it wrote there is dropped.
 *
 * @example
 * ```ts ignore
 * import { claimFile } from "./runtime_claims.ts";
 * using info = new LoaderInfo({ fileId, fileName: path, open: () => file.open() });
 * const claimed = claimFile(RUNTIMES, info, segments); // null: no runtime's file
 * ```
 *
 * @module
 */
import type { LoadSegment } from "../elf/elf_file.ts";
import type { Data, LoaderInfo } from "./interpreter.ts";
import { type InterpreterOffsetsEntry, MemoryEbpfHandler } from "./memory_ebpf_handler.ts";
import type { Runtime, RuntimeClaim } from "./runtime.ts";

/** A runtime's claim on a file, with the loop its loader declared (null: none, its code is native). */
export interface ClaimedFile {
  readonly claim: RuntimeClaim;
  readonly loop: InterpreterOffsetsEntry | null;
}

/**
 * The first claim of `runtimes` on the file of `info`, whose program headers are `segments`; null when
 * no runtime recognises the file.
 *
 * @throws {Error} from a loader that recognised its runtime but cannot support this file (a permanent
 * failure for the file, to be logged once).
 */
export function claimFile(
  runtimes: readonly Runtime[],
  info: LoaderInfo,
  segments: readonly LoadSegment[],
): ClaimedFile | null {
  for (const runtime of runtimes) {
    const declared = new MemoryEbpfHandler();
    const data: Data | null = runtime.loader(declared, info);
    if (data === null) continue;
    return {
      claim: { runtime, data, segments },
      loop: declared.interpreterOffsets.get(info.fileId) ?? null,
    };
  }
  return null;
}

/**
 * Go's inline trees (`FUNCDATA_InlTree`): for a function with inlined calls, an array of `inlinedCall`
 * entries, one per inlined call, that the pcdata table `PCDATA_InlTreeIndex` indexes by instruction.
 * An entry names the called function and gives `parentPc`, the offset from the function's entry of an
 * instruction whose position is the call site: its own inline index and line give the caller's frame
 * (Go's `runtime.inlineUnwinder`). The entry's layout changed in Go 1.20:
 *
 * | Go        | size | name offset at | parentPc at | also                                  |
 * |-----------|------|----------------|-------------|---------------------------------------|
 * | 1.16-1.19 | 20   | 12 (`func_`)   | 16          | parent, funcID, file and line of the call |
 * | 1.20+     | 16   | 4 (`nameOff`)  | 8           | funcID, startLine                     |
 *
 * The trees live in the read-only data the funcdata entries point at: from Go 1.18 at offsets from the
 * module's `gofunc` address, before that at addresses. Reads are checked against the bytes kept.
 *
 * @example
 * ```ts ignore
 * import { InlineTrees } from "./inline_tree.ts";
 * const trees = new InlineTrees("1.20", { vaddr: gofunc, bytes }, gofunc);
 * console.log(trees.call(funcdataValue, 0)); // { nameOff, parentPc } or null
 * ```
 *
 * @module
 */

import type { PclntabVersion } from "./pclntab.ts";

/** Bytes of a binary as they are loaded: `bytes[0]` is at ELF virtual address `vaddr`. */
export interface LoadedBytes {
  vaddr: number;
  bytes: Uint8Array;
}

/** One inlined call. */
export interface InlinedCall {
  /** Offset of the called function's name in the function name table. */
  nameOff: number;
  /** Offset from the enclosing function's entry of an instruction at the call site. */
  parentPc: number;
}

interface EntryLayout {
  size: number;
  nameOff: number;
  parentPc: number;
}

const OLD_ENTRY: EntryLayout = { size: 20, nameOff: 12, parentPc: 16 };
const NEW_ENTRY: EntryLayout = { size: 16, nameOff: 4, parentPc: 8 };

/** The inline trees of one binary. */
export class InlineTrees {
  readonly #layout: EntryLayout;
  readonly #memory: LoadedBytes;
  readonly #view: DataView;
  readonly #base: number;

  /**
   * @param version the `.gopclntab` layout, which fixes the entries' layout
   * @param memory the loaded bytes that hold the trees
   * @param base what funcdata values count from: the module's `gofunc` (Go 1.18+), 0 for addresses
   */
  constructor(version: PclntabVersion, memory: LoadedBytes, base: number) {
    this.#layout = version === "1.20" ? NEW_ENTRY : OLD_ENTRY;
    this.#memory = memory;
    this.#view = new DataView(memory.bytes.buffer, memory.bytes.byteOffset, memory.bytes.byteLength);
    this.#base = base;
  }

  /** Bytes retained. */
  get byteSize(): number {
    return this.#memory.bytes.byteLength;
  }

  /** Entry `index` of the tree that funcdata value `funcdata` points at; null when outside the bytes. */
  call(funcdata: number, index: number): InlinedCall | null {
    const layout = this.#layout;
    const at = this.#base + funcdata + index * layout.size - this.#memory.vaddr;
    if (!(index >= 0 && at >= 0 && at + layout.size <= this.#memory.bytes.length)) return null;
    return {
      nameOff: this.#view.getInt32(at + layout.nameOff, true),
      parentPc: this.#view.getInt32(at + layout.parentPc, true),
    };
  }
}

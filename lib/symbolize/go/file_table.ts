/**
 * The source file names of a `.gopclntab`: a function's file table value is an index into its
 * compilation unit's run of the `cutab` (32-bit offsets into `filetab`, 0xffffffff for none), and the
 * name is the NUL-terminated string there (Go's `runtime.funcfile`). Lookups are bounded by the tables'
 * lengths; decoded names are cached.
 *
 * @example
 * ```ts ignore
 * import { FileTable } from "./file_table.ts";
 * const files = new FileTable(pclntab);
 * console.log(files.name(f.cuOffset, pclntab.pcValue(f.pcfile, f, pc) ?? -1)); // "/src/main.go" or ""
 * ```
 *
 * @module
 */

import { type Pclntab, stringAt } from "./pclntab.ts";

const NO_FILE = 0xffffffff;
/** Most names kept decoded; the cache is cleared when full. */
const MAX_CACHED_NAMES = 1 << 14;

/** File names by compilation unit and index. */
export class FileTable {
  readonly #cutab: DataView;
  readonly #filetab: Uint8Array;
  readonly #names = new Map<number, string>();

  constructor(pclntab: Pclntab) {
    const { cutab } = pclntab;
    this.#cutab = new DataView(cutab.buffer, cutab.byteOffset, cutab.byteLength);
    this.#filetab = pclntab.filetab;
  }

  /** The name of file `index` of the compilation unit at `cuOffset`; "" when there is none. */
  name(cuOffset: number, index: number): string {
    if (index < 0) return "";
    const at = (cuOffset + index) * 4;
    if (!(at >= 0 && at + 4 <= this.#cutab.byteLength)) return "";
    const offset = this.#cutab.getUint32(at, true);
    if (offset === NO_FILE) return "";
    let name = this.#names.get(offset);
    if (name === undefined) {
      name = stringAt(this.#filetab, offset);
      if (this.#names.size >= MAX_CACHED_NAMES) this.#names.clear();
      this.#names.set(offset, name);
    }
    return name;
  }
}

/**
 * Symbolization of Go code from the binary's `.gopclntab`, which Go keeps even in binaries built without
 * a symbol table (`go build -ldflags="-s -w"`): an address becomes the frames it stands for, innermost
 * first, each with function name, source file and line. Code the compiler inlined adds one frame per
 * inlined call, from the function's inline tree, as Go's own tracebacks and pprof profiles show them.
 * Go 1.16 and later are read (see `pclntab.ts` for the layouts).
 *
 * The binary is hostile input: reading it throws `RangeError` ("Cannot parse .gopclntab: ..."), and a
 * lookup never throws; what the tables do not give reads as "" and line 0, and a lookup whose tables do
 * not parse returns null.
 *
 * @example
 * ```ts ignore
 * import { ElfFile } from "../../elf/elf_file.ts";
 * import { GoSymbols } from "./go_symbols.ts";
 * using elf = ElfFile.open("./server");
 * const symbols = GoSymbols.read(elf);
 * console.log(symbols?.frames(0x4853a7));
 * // [{ functionName: "main.b", sourceFile: "/src/main.go", line: 42 },
 * //  { functionName: "main.a", sourceFile: "/src/main.go", line: 48 }]
 * ```
 *
 * @module
 */

import { type ElfFile, SHT_NOBITS } from "../../elf/elf_file.ts";
import { FileTable } from "./file_table.ts";
import { InlineTrees, type LoadedBytes } from "./inline_tree.ts";
import { findModuleData, type ModuleData } from "./module_data.ts";
import {
  FUNCDATA_INL_TREE,
  type GoFunc,
  PCDATA_INL_TREE_INDEX,
  Pclntab,
  type PclntabVersion,
} from "./pclntab.ts";
import { findPclntab } from "./pclntab_location.ts";

/** One source-level frame. */
export interface GoFrame {
  functionName: string;
  /** Source file as the compiler saw it, "" when unknown. */
  sourceFile: string;
  /** Line, 0 when unknown. */
  line: number;
}

/** One function of the table. */
export interface GoFunction {
  name: string;
  /** Entry address, and where the next function starts. */
  entry: number;
  end: number;
}

/**
 * Deepest chain of inlined calls followed at one address: far beyond what Go's inliner builds, and a
 * bound on a tree whose parents loop.
 */
const MAX_INLINE_DEPTH = 128;

/** The Go symbols of one binary. */
export class GoSymbols {
  /** The `.gopclntab` layout. */
  readonly version: PclntabVersion;
  readonly #pclntab: Pclntab;
  readonly #vaddr: number;
  readonly #files: FileTable;
  readonly #trees: InlineTrees | null;

  private constructor(pclntab: Pclntab, vaddr: number, trees: InlineTrees | null) {
    this.version = pclntab.version;
    this.#pclntab = pclntab;
    this.#vaddr = vaddr;
    this.#files = new FileTable(pclntab);
    this.#trees = trees;
  }

  /**
   * The Go symbols of `elf`, or null when it has no `.gopclntab` of Go 1.16 or later. The bytes needed
   * later are copied, so `elf` may be closed.
   *
   * @throws {RangeError} when the table is malformed or cannot be read.
   */
  static read(elf: ElfFile): GoSymbols | null {
    const found = findPclntab(elf);
    if (found === null) return null;
    const bytes = owned(found.bytes);
    if (Pclntab.versionOf(bytes) === null) return null;
    let pclntab = Pclntab.parse(bytes, null);
    let module: ModuleData | null = null;
    if (pclntab.version !== "1.16") {
      module = findModuleData(elf, pclntab, found.vaddr);
      if (pclntab.textStart === 0) {
        if (module === null) {
          throw new RangeError("Cannot parse .gopclntab: no text start, and no module data");
        }
        pclntab = Pclntab.parse(bytes, module.text);
      }
    }
    return new GoSymbols(pclntab, found.vaddr, inlineTrees(elf, pclntab, found, module));
  }

  /** Whether inline trees were found (else inlined code is named after the function it was inlined into). */
  get hasInlineTrees(): boolean {
    return this.#trees !== null;
  }

  /** Number of functions in the table. */
  get functionCount(): number {
    return this.#pclntab.functionCount;
  }

  /** Bytes retained. */
  get byteSize(): number {
    return this.#pclntab.bytes.byteLength + (this.#trees?.byteSize ?? 0);
  }

  /**
   * The functions of the table, in address order.
   *
   * @throws {RangeError} when a function's record is malformed.
   */
  *functions(): Generator<GoFunction> {
    for (let i = 0; i < this.#pclntab.functionCount; i++) {
      const f = this.#pclntab.func(i);
      yield { name: this.#pclntab.name(f.nameOff), entry: f.entry, end: f.end };
    }
  }

  /** Where the table's functions start and end (ELF addresses); null when it has none. */
  get codeRange(): { start: number; end: number } | null {
    const table = this.#pclntab;
    return table.functionCount === 0
      ? null
      : { start: table.entryOf(0), end: table.entryOf(table.functionCount) };
  }

  /**
   * The functions called one of `names`, in address order: one table may hold several of a name (an
   * assembly function and its wrapper of the other calling convention). Faster than filtering
   * {@linkcode functions}: names are compared as bytes, not decoded.
   *
   * @throws {RangeError} when a function's record is malformed.
   */
  *functionsNamed(names: readonly string[]): Generator<GoFunction> {
    const encoded = names.map((name) => new TextEncoder().encode(name));
    const table = this.#pclntab;
    for (let i = 0; i < table.functionCount; i++) {
      const nameOff = table.nameOffOf(i);
      const at = encoded.findIndex((name) => table.nameIs(nameOff, name));
      if (at < 0) continue;
      const f = table.func(i);
      yield { name: names[at]!, entry: f.entry, end: f.end };
    }
  }

  /**
   * How far rsp is below its value at the entry of the function that holds `pc` when the instruction at
   * `pc` runs (the function's frame there, its return address not counted), from the function's SP delta
   * table; null when no function holds `pc` or its table has no value there.
   */
  spDelta(pc: number): number | null {
    try {
      const index = this.#pclntab.find(pc);
      if (index < 0) return null;
      const f = this.#pclntab.func(index);
      return this.#pclntab.pcValue(f.pcsp, f, pc);
    } catch (error) {
      if (error instanceof RangeError) return null;
      throw error;
    }
  }

  /** The function whose code holds `pc` (its outermost, not inlined, frame), or null as for `frames`. */
  functionAt(pc: number): GoFunction | null {
    try {
      const index = this.#pclntab.find(pc);
      if (index < 0) return null;
      const f = this.#pclntab.func(index);
      const name = this.#pclntab.name(f.nameOff);
      return (f.pcln === 0 && f.pcfile === 0) || name === "" ? null : { name, entry: f.entry, end: f.end };
    } catch (error) {
      if (error instanceof RangeError) return null;
      throw error;
    }
  }

  /**
   * The source frames of the instruction at ELF virtual address `pc`, innermost first: the functions
   * inlined there, then the function that holds it. Null when no Go function holds `pc` (C code of a cgo
   * binary: its ELF symbols name it) or the function's record does not parse.
   */
  frames(pc: number): GoFrame[] | null {
    try {
      return this.#frames(pc);
    } catch (error) {
      if (error instanceof RangeError) return null;
      throw error;
    }
  }

  #frames(pc: number): GoFrame[] | null {
    const table = this.#pclntab;
    const index = table.find(pc);
    if (index < 0) return null;
    const f = table.func(index);
    // Foreign code linked in by Go's internal linker has an entry without tables.
    if (f.pcln === 0 && f.pcfile === 0) return null;
    const name = table.name(f.nameOff);
    if (name === "") return null;
    const frames: GoFrame[] = [];
    const indexTable = table.pcdata(f, PCDATA_INL_TREE_INDEX);
    const tree = indexTable === 0 ? null : table.funcdata(f, FUNCDATA_INL_TREE, this.#vaddr);
    let at = pc;
    for (let depth = 0; depth < MAX_INLINE_DEPTH; depth++) {
      const inlined = indexTable === 0 ? -1 : table.pcValue(indexTable, f, at) ?? -1;
      if (inlined < 0) {
        frames.push({ functionName: name, ...this.#position(f, at) });
        return frames;
      }
      const call = tree === null ? null : this.#trees?.call(tree, inlined) ?? null;
      const parent = call === null ? -1 : f.entry + call.parentPc;
      if (call === null || parent < f.entry || parent >= f.end) break;
      frames.push({ functionName: table.name(call.nameOff), ...this.#position(f, at) });
      at = parent;
    }
    // Inlined code whose tree cannot be followed: the function it is in, at a line not known.
    frames.push({ functionName: name, sourceFile: "", line: 0 });
    return frames;
  }

  #position(f: GoFunc, pc: number): { sourceFile: string; line: number } {
    const file = this.#pclntab.pcValue(f.pcfile, f, pc);
    const line = this.#pclntab.pcValue(f.pcln, f, pc);
    return {
      sourceFile: file === null ? "" : this.#files.name(f.cuOffset, file),
      line: line === null || line < 0 ? 0 : line,
    };
  }
}

/**
 * The loaded bytes that hold the inline trees: from Go 1.18 those from `gofunc` to the end of its
 * segment or the start of the table, whichever comes first; for Go 1.16, whose funcdata are addresses,
 * the segment of `.rodata` (where the linker puts them) or else of the table. Null when they cannot be
 * found or read.
 */
function inlineTrees(
  elf: ElfFile,
  pclntab: Pclntab,
  table: LoadedBytes,
  module: ModuleData | null,
): InlineTrees | null {
  let start: number;
  if (pclntab.version === "1.16") {
    const rodata = elf.section(".rodata");
    start = rodata !== undefined && rodata.type !== SHT_NOBITS ? rodata.addr : table.vaddr;
  } else {
    if (module?.gofunc == null) return null;
    start = module.gofunc;
  }
  const segment = elf.loadSegments.find((s) => start >= s.vaddr && start - s.vaddr < s.filesz);
  if (segment === undefined) return null;
  const from = pclntab.version === "1.16" ? segment.vaddr : start;
  // The linker puts the table after the trees, often in the same segment: it is kept once already.
  const segmentEnd = segment.vaddr + segment.filesz;
  const to = table.vaddr > start && table.vaddr < segmentEnd ? table.vaddr : segmentEnd;
  try {
    const bytes = elf.read(segment.offset + (from - segment.vaddr), to - from);
    const base = pclntab.version === "1.16" ? 0 : start;
    return new InlineTrees(pclntab.version, { vaddr: from, bytes: owned(bytes) }, base);
  } catch (error) {
    if (error instanceof RangeError) return null;
    throw error;
  }
}

/**
 * `bytes` in memory of their own: a file read already is; a view of a larger buffer (a scanned segment,
 * an ElfFile over a buffer) is copied, so that the rest is not kept alive.
 */
function owned(bytes: Uint8Array): Uint8Array {
  return bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : bytes.slice();
}

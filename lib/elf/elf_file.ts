/**
 * A reader for ELF64 little-endian files (executables, shared libraries, relocatable objects such as BPF
 * programs) that reads only what is asked for: the file header, the program and section header tables,
 * then single sections on demand through positional reads. The profiler runs as root and opens the
 * binaries of every process, so the file is hostile input: every offset and size is checked against the
 * file length, every count is capped and a single read is capped by a byte budget, so a sparse 4 GiB file
 * cannot make it allocate 4 GiB. A malformed file throws `RangeError("Cannot parse ELF <name>: ...")`.
 *
 * @example
 * ```ts
 * import { ElfFile } from "./elf_file.ts";
 * using elf = ElfFile.open("/bin/true");
 * console.log(elf.buildId(), elf.sections.map((s) => s.name));
 * console.log(elf.symbols().lookup(0x2a40));
 * ```
 *
 * @module
 */

import { unzlib } from "./inflate.ts";
import type { Address, FileOffset } from "../types.ts";
import { type DebugLink, findGnuBuildId, parseDebugLink } from "./notes.ts";
import { SymbolTable, type SymbolTableSource } from "../symbolize/symbol_table.ts";
import { RegularFile } from "../sys/regular_file.ts";

/** `e_type`: relocatable object. */
export const ET_REL = 1;
/** `e_type`: executable at a fixed address. */
export const ET_EXEC = 2;
/** `e_type`: shared object or position-independent executable. */
export const ET_DYN = 3;
/** `e_type`: core dump. */
export const ET_CORE = 4;
/** `e_machine`: x86-64. */
export const EM_X86_64 = 62;
/** `e_machine`: eBPF. */
export const EM_BPF = 247;

/** `sh_type`: section without file content (`.bss`, or any allocated section of a debug-only file). */
export const SHT_NOBITS = 8;
/** `sh_type`: static symbol table. */
export const SHT_SYMTAB = 2;
/** `sh_type`: dynamic symbol table. */
export const SHT_DYNSYM = 11;
/** `sh_type`: note section. */
export const SHT_NOTE = 7;
/** `sh_flags`: the section holds machine code. */
export const SHF_EXECINSTR = 0x4;
/** `sh_flags`: the section content is an `Elf64_Chdr` followed by compressed data. */
export const SHF_COMPRESSED = 0x800;

/** `p_type`: loadable segment. */
export const PT_LOAD = 1;
/** `p_type`: note segment. */
export const PT_NOTE = 4;
/** `p_flags`: executable segment. */
export const PF_X = 1;

/** One section header. Addresses, offsets and sizes are exact numbers (checked to be below 2^53). */
export interface ElfSection {
  /** Index in the section header table (what symbols' `st_shndx` refers to). */
  index: number;
  name: string;
  type: number;
  /** `sh_flags`, low 32 bits (ELF defines no flag above them). */
  flags: number;
  addr: number;
  offset: number;
  size: number;
  link: number;
  info: number;
  addralign: number;
  entsize: number;
}

/** One program header. */
export interface ProgramHeader {
  type: number;
  flags: number;
  offset: number;
  vaddr: number;
  filesz: number;
  memsz: number;
  align: number;
}

/** A PT_LOAD segment: how a range of the file is mapped into memory. */
export interface LoadSegment {
  offset: number;
  vaddr: number;
  filesz: number;
  memsz: number;
  /** `p_flags` (PF_X = 1, PF_W = 2, PF_R = 4). */
  flags: number;
  align: number;
}

/** Limits for reading a hostile file. */
export interface ElfFileOptions {
  /**
   * The largest section (after decompression) or header table read in one piece, in bytes. Default
   * 256 MiB: the symbol tables of the largest real binaries (libjvm, browsers) stay well below it.
   */
  maxSectionBytes?: number;
}

const DEFAULT_MAX_SECTION_BYTES = 256 * 1024 * 1024;
/** Real files have at most a few hundred thousand sections (`-ffunction-sections` objects). */
const MAX_SECTIONS = 1 << 20;
/** Real files have about a dozen program headers. */
const MAX_PROGRAM_HEADERS = 1 << 16;
/** Note areas hold a few small notes; a larger one is not worth reading for a build ID. */
const MAX_NOTE_BYTES = 1 << 20;
const MAX_DEBUGLINK_BYTES = 1 << 16;
const EHDR_SIZE = 64;
const SHDR_SIZE = 64;
const PHDR_SIZE = 56;
const CHDR_SIZE = 24;
const ELFCOMPRESS_ZLIB = 1;
const SHN_XINDEX = 0xffff;
const PN_XNUM = 0xffff;
const TWO_POW_32 = 4294967296;

/** Where the bytes of an ELF come from: an open file or a buffer. */
interface ByteSource {
  readonly size: number;
  /** Returns `length` bytes at `offset`; the caller has checked the range against `size`. */
  read(offset: number, length: number): Uint8Array;
  close(): void;
}

class FileSource implements ByteSource {
  readonly #file: RegularFile;
  readonly size: number;

  constructor(file: RegularFile) {
    this.#file = file;
    this.size = file.size;
  }

  read(offset: number, length: number): Uint8Array {
    return this.#file.read(offset, length);
  }

  close(): void {
    this.#file.close();
  }
}

class BufferSource implements ByteSource {
  readonly #bytes: Uint8Array;
  readonly size: number;

  constructor(bytes: Uint8Array) {
    this.#bytes = bytes;
    this.size = bytes.length;
  }

  read(offset: number, length: number): Uint8Array {
    return this.#bytes.subarray(offset, offset + length);
  }

  close(): void {}
}

/** Reads an unsigned 64-bit field as a number; values at or above 2^53 come out inexact but still huge. */
function u64(view: DataView, offset: number): number {
  return view.getUint32(offset + 4, true) * TWO_POW_32 + view.getUint32(offset, true);
}

const latin1 = new TextDecoder("latin1");

/**
 * An ELF64 little-endian file, opened lazily. Headers are parsed by the constructor; sections are read
 * when asked. Every parse error is a `RangeError` naming the file.
 */
export class ElfFile implements Disposable {
  /** The path or name given when opening, used in error messages. */
  readonly name: string;
  /** Length of the file in bytes. */
  readonly size: number;
  /** `e_type` (ET_REL, ET_EXEC, ET_DYN, ...). */
  readonly type: number;
  /** `e_machine` (EM_X86_64, EM_BPF, ...). */
  readonly machine: number;
  /** `e_entry`. */
  readonly entry: number;
  readonly sections: readonly ElfSection[];
  readonly programHeaders: readonly ProgramHeader[];
  readonly loadSegments: readonly LoadSegment[];
  readonly #maxSectionBytes: number;
  #source: ByteSource;
  #closed = false;
  #buildId: string | undefined;

  private constructor(source: ByteSource, name: string, options: ElfFileOptions) {
    this.name = name;
    this.size = source.size;
    this.#source = source;
    this.#maxSectionBytes = options.maxSectionBytes ?? DEFAULT_MAX_SECTION_BYTES;
    try {
      const header = this.#readChecked(0, EHDR_SIZE, "the ELF header");
      const view = viewOf(header);
      if (header[0] !== 0x7f || header[1] !== 0x45 || header[2] !== 0x4c || header[3] !== 0x46) {
        throw new RangeError("no ELF magic");
      }
      if (header[4] !== 2) throw new RangeError(`class ${header[4]} is not ELF64`);
      if (header[5] !== 1) throw new RangeError(`data encoding ${header[5]} is not little-endian`);
      this.type = view.getUint16(16, true);
      this.machine = view.getUint16(18, true);
      this.entry = u64(view, 24);
      const phoff = u64(view, 32);
      const shoff = u64(view, 40);
      const phentsize = view.getUint16(54, true);
      let phnum = view.getUint16(56, true);
      const shentsize = view.getUint16(58, true);
      let shnum = view.getUint16(60, true);
      let shstrndx = view.getUint16(62, true);

      // Counts that overflow 16 bits live in section 0 (extended numbering).
      if (shoff !== 0 && (shnum === 0 || shstrndx === SHN_XINDEX || phnum === PN_XNUM)) {
        if (shentsize < SHDR_SIZE) throw new RangeError(`section header size ${shentsize} is below 64`);
        const first = viewOf(this.#readChecked(shoff, SHDR_SIZE, "section header 0"));
        if (shnum === 0) shnum = u64(first, 32);
        if (shstrndx === SHN_XINDEX) shstrndx = first.getUint32(40, true);
        if (phnum === PN_XNUM) phnum = first.getUint32(44, true);
      }

      this.programHeaders = this.#parseProgramHeaders(phoff, phnum, phentsize);
      this.loadSegments = this.programHeaders.filter((p) => p.type === PT_LOAD).map((p) => ({
        offset: p.offset,
        vaddr: p.vaddr,
        filesz: p.filesz,
        memsz: p.memsz,
        flags: p.flags,
        align: p.align,
      }));
      this.sections = shoff === 0 ? [] : this.#parseSections(shoff, shnum, shentsize, shstrndx);
    } catch (error) {
      throw this.#wrap(error);
    }
  }

  /**
   * Opens the ELF file at `path` with {@linkcode RegularFile.open}: only a regular file is opened (a FIFO
   * or device is refused without being opened, so nothing blocks). The file stays open until
   * {@linkcode ElfFile.close}.
   *
   * @throws {FileRefusedError} when the path is missing, unreadable or not a regular file.
   * @throws {RangeError} when the file is not a well-formed ELF64 LE file.
   */
  static open(path: string, options: ElfFileOptions = {}): ElfFile {
    return ElfFile.fromFile(RegularFile.open(path), path, options);
  }

  /**
   * Parses the ELF in an open file, which it then owns: closing the ElfFile closes it, and so does a
   * parse error.
   *
   * @throws {RangeError} when the file is not a well-formed ELF64 LE file.
   */
  static fromFile(file: RegularFile, name: string = file.name, options: ElfFileOptions = {}): ElfFile {
    try {
      return new ElfFile(new FileSource(file), name, options);
    } catch (error) {
      file.close();
      throw error;
    }
  }

  /** Parses an ELF held in memory. Sections read from it share memory with `bytes`. */
  static fromBytes(bytes: Uint8Array, name: string, options: ElfFileOptions = {}): ElfFile {
    return new ElfFile(new BufferSource(bytes), name, options);
  }

  /** The first section named `name`, if any. */
  section(name: string): ElfSection | undefined {
    return this.sections.find((s) => s.name === name);
  }

  /**
   * Returns the content of a section (by name or header), decompressed when SHF_COMPRESSED with zlib.
   * SHT_NOBITS sections return an empty array. For files from {@linkcode ElfFile.fromBytes} the result
   * may share memory with the input.
   *
   * @throws {RangeError} when the section is missing, lies outside the file, or exceeds the byte budget.
   */
  readSection(section: ElfSection | string): Uint8Array {
    try {
      const header = typeof section === "string" ? this.section(section) : section;
      if (header === undefined) throw new RangeError(`no section ${section}`);
      if (header.type === SHT_NOBITS) return new Uint8Array(0);
      const raw = this.#readChecked(header.offset, header.size, `section ${header.name}`);
      return (header.flags & SHF_COMPRESSED) === 0 ? raw : this.#decompress(raw, header.name);
    } catch (error) {
      throw this.#wrap(error);
    }
  }

  /**
   * Reads `length` bytes at file offset `offset`, within the byte budget.
   *
   * @throws {RangeError} when the range lies outside the file or exceeds the budget.
   */
  read(offset: number, length: number): Uint8Array {
    try {
      return this.#readChecked(offset, length, `range ${offset}+${length}`);
    } catch (error) {
      throw this.#wrap(error);
    }
  }

  /**
   * The GNU build ID as lowercase hex, from a PT_NOTE segment (present even when section headers are
   * stripped) or else a note section; "" when the file has none.
   */
  buildId(): string {
    if (this.#buildId !== undefined) return this.#buildId;
    const areas: { offset: number; size: number; align: number }[] = [];
    for (const p of this.programHeaders) {
      if (p.type === PT_NOTE) areas.push({ offset: p.offset, size: p.filesz, align: p.align });
    }
    for (const s of this.sections) {
      if (s.type === SHT_NOTE) areas.push({ offset: s.offset, size: s.size, align: s.addralign });
    }
    let id = "";
    for (const area of areas) {
      if (area.size > MAX_NOTE_BYTES) continue;
      let bytes: Uint8Array;
      try {
        bytes = this.#readChecked(area.offset, area.size, "a note area");
      } catch (error) {
        // The build ID is advisory: a note area outside the file hides it but breaks nothing else.
        if (error instanceof RangeError) continue;
        throw error;
      }
      id = findGnuBuildId(bytes, area.align);
      if (id !== "") break;
    }
    this.#buildId = id;
    return id;
  }

  /** The `.gnu_debuglink` of a stripped file, or null when absent or malformed. */
  debugLink(): DebugLink | null {
    const section = this.section(".gnu_debuglink");
    if (section === undefined || section.type === SHT_NOBITS || section.size > MAX_DEBUGLINK_BYTES) {
      return null;
    }
    try {
      return parseDebugLink(this.readSection(section));
    } catch (error) {
      if (error instanceof RangeError) return null;
      throw error;
    }
  }

  /** Whether the file has a static symbol table with content (false for stripped binaries). */
  get hasSymtab(): boolean {
    return this.sections.some((s) => s.type === SHT_SYMTAB && s.size > 0);
  }

  /**
   * Maps a file offset to the virtual address it is loaded at, through the PT_LOAD segment whose file
   * range contains it; null when no segment maps it.
   */
  fileOffsetToVaddr(offset: FileOffset): Address | null {
    for (const seg of this.loadSegments) {
      if (offset >= seg.offset && offset - seg.offset < seg.filesz) {
        return (seg.vaddr + (offset - seg.offset)) as Address;
      }
    }
    return null;
  }

  /** Maps a virtual address back to its file offset; null when no segment maps it from the file. */
  vaddrToFileOffset(vaddr: Address): FileOffset | null {
    for (const seg of this.loadSegments) {
      if (vaddr >= seg.vaddr && vaddr - seg.vaddr < seg.filesz) {
        return (seg.offset + (vaddr - seg.vaddr)) as FileOffset;
      }
    }
    return null;
  }

  /**
   * Reads the symbol tables (`.symtab` and `.dynsym`, skipping empty or SHT_NOBITS ones) with their
   * string tables, for {@linkcode SymbolTable.build}. Useful to merge a debug file's `.symtab` with the
   * stripped binary's `.dynsym`.
   */
  symbolSources(): SymbolTableSource[] {
    const out: SymbolTableSource[] = [];
    for (const s of this.sections) {
      if ((s.type !== SHT_SYMTAB && s.type !== SHT_DYNSYM) || s.size === 0) continue;
      const strings = this.sections[s.link];
      if (strings === undefined || strings.type === SHT_NOBITS) {
        throw this.#wrap(new RangeError(`symbol table ${s.name} links to missing string table ${s.link}`));
      }
      out.push({
        kind: s.type === SHT_SYMTAB ? "symtab" : "dynsym",
        symbols: this.readSection(s),
        entrySize: s.entsize,
        strings: this.readSection(strings),
        sections: this.sections,
      });
    }
    return out;
  }

  /** The function symbols of `.symtab` and `.dynsym`, merged. */
  symbols(): SymbolTable {
    try {
      return SymbolTable.build(this.symbolSources());
    } catch (error) {
      throw this.#wrap(error);
    }
  }

  /** Closes the underlying file. Idempotent; reads after it throw. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#source.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  #readChecked(offset: number, length: number, what: string): Uint8Array {
    if (this.#closed) throw new Error(`Cannot read ELF ${this.name}: the file is closed`);
    if (!(offset >= 0 && length >= 0 && offset <= this.size && length <= this.size - offset)) {
      throw new RangeError(
        `${what} (offset ${offset}, size ${length}) lies outside the ${this.size}-byte file`,
      );
    }
    if (length > this.#maxSectionBytes) {
      throw new RangeError(`${what} is ${length} bytes, over the ${this.#maxSectionBytes}-byte budget`);
    }
    return this.#source.read(offset, length);
  }

  #parseProgramHeaders(phoff: number, phnum: number, phentsize: number): ProgramHeader[] {
    if (phoff === 0 || phnum === 0) return [];
    if (phnum > MAX_PROGRAM_HEADERS) throw new RangeError(`${phnum} program headers is too many`);
    if (phentsize < PHDR_SIZE) throw new RangeError(`program header size ${phentsize} is below 56`);
    const table = this.#readChecked(phoff, phnum * phentsize, "the program header table");
    const view = viewOf(table);
    const out: ProgramHeader[] = [];
    for (let i = 0; i < phnum; i++) {
      const o = i * phentsize;
      out.push({
        type: view.getUint32(o, true),
        flags: view.getUint32(o + 4, true),
        offset: u64(view, o + 8),
        vaddr: exact(u64(view, o + 16), `program header ${i} address`),
        filesz: u64(view, o + 32),
        memsz: exact(u64(view, o + 40), `program header ${i} memory size`),
        align: u64(view, o + 48),
      });
    }
    return out;
  }

  #parseSections(shoff: number, shnum: number, shentsize: number, shstrndx: number): ElfSection[] {
    if (shnum === 0) return [];
    if (shnum > MAX_SECTIONS) throw new RangeError(`${shnum} sections is too many`);
    if (shentsize < SHDR_SIZE) throw new RangeError(`section header size ${shentsize} is below 64`);
    const view = viewOf(this.#readChecked(shoff, shnum * shentsize, "the section header table"));
    const out: ElfSection[] = [];
    const nameOffsets: number[] = [];
    for (let i = 0; i < shnum; i++) {
      const o = i * shentsize;
      nameOffsets.push(view.getUint32(o, true));
      out.push({
        index: i,
        name: "",
        type: view.getUint32(o + 4, true),
        flags: view.getUint32(o + 8, true),
        addr: exact(u64(view, o + 16), `section ${i} address`),
        offset: u64(view, o + 24),
        size: u64(view, o + 32),
        link: view.getUint32(o + 40, true),
        info: view.getUint32(o + 44, true),
        addralign: u64(view, o + 48),
        entsize: u64(view, o + 56),
      });
    }
    if (shstrndx === 0) return out;
    const strtab = out[shstrndx];
    if (strtab === undefined) throw new RangeError(`section name table index ${shstrndx} is out of range`);
    if (strtab.type === SHT_NOBITS) throw new RangeError("the section name table has no content");
    // Decoded once: a decode per name costs more than the rest of the parse (one byte, one character).
    const names = latin1.decode(this.#readChecked(strtab.offset, strtab.size, "the section name table"));
    for (const [i, section] of out.entries()) {
      const start = nameOffsets[i] ?? 0;
      if (start >= names.length) {
        if (start === 0) continue;
        throw new RangeError(`section ${i} name offset ${start} is outside the name table`);
      }
      let end = names.indexOf("\0", start);
      if (end < 0) end = names.length;
      section.name = names.slice(start, end);
    }
    return out;
  }

  #decompress(raw: Uint8Array, name: string): Uint8Array {
    if (raw.length < CHDR_SIZE) throw new RangeError(`compressed section ${name} has no header`);
    const view = viewOf(raw);
    const kind = view.getUint32(0, true);
    const size = u64(view, 8);
    if (kind !== ELFCOMPRESS_ZLIB) {
      throw new RangeError(`section ${name} uses unsupported compression ${kind}`);
    }
    if (size > this.#maxSectionBytes) {
      throw new RangeError(`section ${name} inflates to ${size} bytes, over the byte budget`);
    }
    let out: Uint8Array;
    try {
      // Into a buffer of the declared size, which the budget bounds.
      out = unzlib(raw.subarray(CHDR_SIZE), size);
    } catch (error) {
      throw new RangeError(`section ${name} does not inflate: ${(error as Error).message}`);
    }
    if (out.length !== size) {
      throw new RangeError(`section ${name} inflates to ${out.length}, not ${size} bytes`);
    }
    return new Uint8Array(out.buffer, out.byteOffset, out.length);
  }

  #wrap(error: unknown): unknown {
    if (error instanceof RangeError && !error.message.startsWith("Cannot parse ELF ")) {
      return new RangeError(`Cannot parse ELF ${this.name}: ${error.message}`);
    }
    return error;
  }
}

function viewOf(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Rejects an address or size that a JS number cannot hold exactly (only kernel images have such). */
function exact(value: number, what: string): number {
  if (value > Number.MAX_SAFE_INTEGER) throw new RangeError(`${what} is not below 2^53`);
  return value;
}

/**
 * What a BPF object file holds, read from its ELF symbol table: the programs (global functions in a
 * program section, named like libbpf names them) and the maps (globals of `.maps`). The guest suite
 * derives its per-program checks from this, so a program added to bpf/ is tested without editing the
 * suite.
 *
 * @example
 * ```ts ignore
 * import { bpfObjectContents } from "./bpf_object_contents.ts";
 * const { programs, maps } = bpfObjectContents(bytes);
 * console.log(programs.map((p) => `${p.name} (${p.section})`), maps);
 * ```
 *
 * @module
 */
import { ElfFile, EM_BPF, SHF_EXECINSTR, SHT_SYMTAB } from "../../lib/elf/elf_file.ts";

/** A program of the object. */
export interface BpfProgramEntry {
  /** The C function name (what libbpf's find_program_by_name takes). */
  name: string;
  /** Its ELF section, which tells libbpf the program type and attach point, e.g. `perf_event`. */
  section: string;
}

/** Programs and maps of an object, in symbol table order. */
export interface BpfObjectContents {
  programs: BpfProgramEntry[];
  maps: string[];
}

const SYMBOL_SIZE = 24;
const STT_OBJECT = 1;
const STT_FUNC = 2;
const STB_GLOBAL = 1;
/** More symbols than any object of ours has; bounds the loop on hostile input. */
const MAX_SYMBOLS = 1 << 16;

/**
 * Lists the programs and maps of a BPF object.
 *
 * @throws {RangeError} when the bytes are not a BPF ELF object with a symbol table.
 */
export function bpfObjectContents(bytes: Uint8Array): BpfObjectContents {
  using elf = ElfFile.fromBytes(bytes, "BPF object");
  if (elf.machine !== EM_BPF) {
    throw new RangeError(`Cannot list BPF programs: machine ${elf.machine} is not BPF`);
  }
  const symtab = elf.sections.find((section) => section.type === SHT_SYMTAB);
  const strtab = symtab ? elf.sections[symtab.link] : undefined;
  if (!symtab || !strtab) throw new RangeError("Cannot list BPF programs: the object has no symbol table");
  const symbols = elf.readSection(symtab);
  const strings = elf.readSection(strtab);
  const view = new DataView(symbols.buffer, symbols.byteOffset, symbols.byteLength);
  const decoder = new TextDecoder();
  const nameAt = (offset: number) => {
    if (offset >= strings.length) {
      throw new RangeError(`Cannot list BPF programs: name offset ${offset} out of range`);
    }
    const end = strings.indexOf(0, offset);
    return decoder.decode(strings.subarray(offset, end < 0 ? strings.length : end));
  };
  const count = Math.min(Math.floor(symbols.length / SYMBOL_SIZE), MAX_SYMBOLS);
  const programs: BpfProgramEntry[] = [];
  const maps: string[] = [];
  for (let i = 1; i < count; i++) {
    const at = i * SYMBOL_SIZE;
    const info = view.getUint8(at + 4);
    if (info >> 4 !== STB_GLOBAL) continue;
    const section = elf.sections[view.getUint16(at + 6, true)];
    if (!section) continue;
    const type = info & 0xf;
    if (type === STT_FUNC && (section.flags & SHF_EXECINSTR) !== 0 && section.name !== ".text") {
      programs.push({ name: nameAt(view.getUint32(at, true)), section: section.name });
    } else if (type === STT_OBJECT && section.name === ".maps") {
      maps.push(nameAt(view.getUint32(at, true)));
    }
  }
  return { programs, maps };
}

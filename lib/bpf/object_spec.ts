/**
 * What a BPF object file declares, read from its ELF and BTF without libbpf and without a kernel: its maps
 * (the `.maps` section, whose BTF says each map's type and sizes, and the data sections libbpf turns into
 * maps) and its programs (the functions of its program sections). build.ts generates the typed catalogue
 * of the object (support/bpf_catalogue.ts) from it; the rules follow libbpf's, and the catalogue's test
 * compares them with what libbpf reports after opening the object.
 *
 * @example
 * ```ts ignore
 * import { ElfFile } from "../elf/elf_file.ts";
 * import { readObjectSpec } from "./object_spec.ts";
 * using elf = ElfFile.open(".build/omniprof.bpf.o");
 * const spec = readObjectSpec(elf);
 * console.log(spec.maps.map((map) => `${map.name}: ${map.keySize} -> ${map.valueSize}`));
 * ```
 *
 * @module
 */
import { type Btf, BtfKind, type BtfTypeId, parseBtf } from "../btf/btf.ts";
import {
  type ElfFile,
  type ElfSection,
  EM_BPF,
  SHF_EXECINSTR,
  SHT_NOBITS,
  SHT_SYMTAB,
} from "../elf/elf_file.ts";
import { BpfMapType, type BpfProgramType, programTypeOfSection } from "./uapi.ts";

/** A map as the object declares it (before the host resizes it or changes its flags). */
export interface BpfMapSpec {
  /** The C variable's name, or a data section's (`.rodata`): what libbpf's find_map_by_name takes. */
  name: string;
  type: BpfMapType;
  keySize: number;
  valueSize: number;
  maxEntries: number;
  /** The template of a map of maps' inner maps, which the host creates itself. */
  inner?: BpfInnerMapSpec;
}

/** The inner map of a map of maps: the host must create its inner maps alike (flags included). */
export interface BpfInnerMapSpec {
  type: BpfMapType;
  keySize: number;
  valueSize: number;
  maxEntries: number;
  flags: number;
}

/** A program of the object. */
export interface BpfProgramSpec {
  /** The C function's name: what libbpf's find_program_by_name takes. */
  name: string;
  /** Its ELF section, which names the program type and attach point (`raw_tp/sched_process_exec`). */
  section: string;
  type: BpfProgramType;
}

/** The maps and programs of an object, each list sorted by name. */
export interface BpfObjectSpec {
  maps: BpfMapSpec[];
  programs: BpfProgramSpec[];
}

/** A symbol of the object's `.symtab`. */
export interface ObjectSymbol {
  name: string;
  /** The section it is defined in (its header index); 0 when undefined. */
  section: number;
  value: number;
  size: number;
  /** STT_* */
  type: number;
  /** STB_* */
  bind: number;
}

const SYMBOL_SIZE = 24;
/** More symbols than any object of ours has; bounds the loop on a hostile file. */
const MAX_SYMBOLS = 1 << 16;
export const STT_OBJECT = 1;
export const STT_FUNC = 2;
const STB_LOCAL = 0;
/** What a libbpf data map's key is: an int (the one element's index). */
const DATA_MAP_KEY_SIZE = 4;
/** The value of a map of maps, and of a program array: a descriptor, 4 bytes. */
const DESCRIPTOR_SIZE = 4;

/**
 * The symbols of the object's `.symtab`, in table order (the null symbol left out).
 *
 * @throws {RangeError} when the object has no symbol table or a name lies outside its string table.
 */
export function objectSymbols(elf: ElfFile): ObjectSymbol[] {
  const symtab = elf.sections.find((section) => section.type === SHT_SYMTAB);
  const strtab = symtab ? elf.sections[symtab.link] : undefined;
  if (!symtab || !strtab) {
    throw new RangeError(`Cannot read the symbols of ${elf.name}: it has no symbol table`);
  }
  const table = elf.readSection(symtab);
  const strings = elf.readSection(strtab);
  const view = new DataView(table.buffer, table.byteOffset, table.byteLength);
  const decoder = new TextDecoder();
  const count = Math.min(Math.floor(table.length / SYMBOL_SIZE), MAX_SYMBOLS);
  const symbols: ObjectSymbol[] = [];
  for (let i = 1; i < count; i++) {
    const at = i * SYMBOL_SIZE;
    const nameStart = view.getUint32(at, true);
    if (nameStart >= strings.length) {
      throw new RangeError(`Cannot read symbol ${i} of ${elf.name}: its name lies outside the string table`);
    }
    const nameEnd = strings.indexOf(0, nameStart);
    const info = view.getUint8(at + 4);
    symbols.push({
      name: decoder.decode(strings.subarray(nameStart, nameEnd < 0 ? strings.length : nameEnd)),
      section: view.getUint16(at + 6, true),
      value: Number(view.getBigUint64(at + 8, true)),
      size: Number(view.getBigUint64(at + 16, true)),
      type: info & 0xf,
      bind: info >> 4,
    });
  }
  return symbols;
}

/**
 * Reads the maps and programs `elf` declares.
 *
 * @throws {RangeError} when it is no BPF object, or its BTF and symbol table disagree about its maps.
 */
export function readObjectSpec(elf: ElfFile): BpfObjectSpec {
  if (elf.machine !== EM_BPF) {
    throw new RangeError(`Cannot read ${elf.name} as a BPF object: its machine is ${elf.machine}, not BPF`);
  }
  const symbols = objectSymbols(elf);
  const maps = [...btfMaps(elf, symbols), ...dataMaps(elf)];
  const programs = objectPrograms(elf, symbols);
  const byName = (a: { name: string }, b: { name: string }) => compareNames(a.name, b.name);
  return { maps: maps.sort(byName), programs: programs.sort(byName) };
}

/** Orders names with their numbers by value: `exe_id_to_9_stack_deltas` before `exe_id_to_10_...`. */
export function compareNames(a: string, b: string): number {
  const parts = (name: string) => name.split(/(\d+)/);
  const left = parts(a);
  const right = parts(b);
  for (let i = 0; i < Math.min(left.length, right.length); i++) {
    const x = left[i]!;
    const y = right[i]!;
    if (x === y) continue;
    // Odd parts are the digit runs.
    if (i % 2 === 1 && Number(x) !== Number(y)) return Number(x) - Number(y);
    return x < y ? -1 : 1;
  }
  return left.length - right.length;
}

/** The maps of `.maps`: named by the symbol table, described by the BTF variables of its DATASEC. */
function btfMaps(elf: ElfFile, symbols: readonly ObjectSymbol[]): BpfMapSpec[] {
  const section = elf.section(".maps");
  if (section === undefined) return [];
  const named = new Set(
    symbols.filter((symbol) => symbol.section === section.index && symbol.type === STT_OBJECT)
      .map((symbol) => symbol.name),
  );
  const btf = parseBtf(elf.readSection(".BTF"));
  const maps: BpfMapSpec[] = [];
  for (const id of btf.findByName(".maps", BtfKind.Datasec)) {
    const datasec = btf.type(id);
    for (const variable of datasec.kind === BtfKind.Datasec ? datasec.vars : []) {
      const type = btf.type(variable.type);
      if (type.kind !== BtfKind.Var) {
        throw new RangeError(
          `Cannot read the maps of ${elf.name}: .maps holds a ${btf.typeName(variable.type)}`,
        );
      }
      if (!named.delete(type.name)) {
        throw new RangeError(`Cannot read map ${type.name} of ${elf.name}: the symbol table has no such map`);
      }
      const { flags: _flags, ...map } = mapDefinition(btf, type.name, type.type);
      maps.push(map);
    }
  }
  if (named.size > 0) {
    throw new RangeError(`Cannot read map ${[...named][0]} of ${elf.name}: its BTF does not describe it`);
  }
  return maps;
}

/**
 * The fields of a map definition (`__uint(...)`, `__type(...)`, `__array(...)`), read as libbpf does; the
 * flags too, which only an inner map's template keeps (the host sets a map's own flags before load).
 */
function mapDefinition(
  btf: Btf,
  name: string,
  typeId: BtfTypeId,
  inMap = false,
): BpfMapSpec & { flags: number } {
  const definition = btf.type(btf.resolve(typeId));
  if (definition.kind !== BtfKind.Struct) {
    throw new RangeError(
      `Cannot read map ${name}: its definition is a ${btf.typeName(typeId)}, not a struct`,
    );
  }
  const fields = { type: 0, maxEntries: 0, flags: 0, keySize: 0, valueSize: 0 };
  let inner: BpfInnerMapSpec | undefined;
  let valuesAreDescriptors = false;
  // __uint(field, N) is `int (*field)[N]`: a pointer to an array of N.
  const number = (member: BtfTypeId, field: string) => {
    const pointer = btf.type(btf.resolve(member));
    const array = pointer.kind === BtfKind.Ptr ? btf.type(btf.resolve(pointer.type)) : undefined;
    if (array?.kind !== BtfKind.Array) {
      throw new RangeError(`Cannot read ${field} of map ${name}: not __uint()`);
    }
    return array.count;
  };
  // __type(field, T) is `T *field`.
  const size = (member: BtfTypeId, field: string) => {
    const pointer = btf.type(btf.resolve(member));
    if (pointer.kind !== BtfKind.Ptr) {
      throw new RangeError(`Cannot read ${field} of map ${name}: not __type()`);
    }
    return btf.sizeOf(pointer.type);
  };
  for (const member of definition.members) {
    switch (member.name) {
      case "type":
        fields.type = number(member.type, member.name);
        break;
      case "max_entries":
        fields.maxEntries = number(member.type, member.name);
        break;
      case "map_flags":
        fields.flags = number(member.type, member.name);
        break;
      case "key_size":
        fields.keySize = number(member.type, member.name);
        break;
      case "value_size":
        fields.valueSize = number(member.type, member.name);
        break;
      case "key":
        fields.keySize = size(member.type, member.name);
        break;
      case "value":
        fields.valueSize = size(member.type, member.name);
        break;
      case "values": {
        // __array(values, T) is `T *values[]`: inner maps' template, or the programs of a program array.
        const array = btf.type(btf.resolve(member.type));
        const pointer = array.kind === BtfKind.Array ? btf.type(btf.resolve(array.elementType)) : undefined;
        if (pointer?.kind !== BtfKind.Ptr) {
          throw new RangeError(`Cannot read values of map ${name}: not __array()`);
        }
        const target = btf.type(btf.resolve(pointer.type));
        if (target.kind === BtfKind.Struct) {
          if (inMap) throw new RangeError(`Cannot read map ${name}: libbpf has no maps of maps of maps`);
          const { name: _name, inner: _inner, ...template } = mapDefinition(
            btf,
            `${name}.inner`,
            target.id,
            true,
          );
          inner = template;
        }
        valuesAreDescriptors = true;
        break;
      }
      case "pinning":
      case "numa_node":
      case "map_extra":
        break;
      default:
        throw new RangeError(`Cannot read map ${name}: libbpf knows no field ${member.name}`);
    }
  }
  // libbpf gives maps of maps and program arrays declared with their values a descriptor as value.
  if (valuesAreDescriptors) fields.valueSize = DESCRIPTOR_SIZE;
  return {
    name,
    type: fields.type as BpfMapType,
    keySize: fields.keySize,
    valueSize: fields.valueSize,
    maxEntries: fields.maxEntries,
    flags: fields.flags,
    ...(inner ? { inner } : {}),
  };
}

/** The maps libbpf makes of the data sections (`.rodata`, `.data`, `.bss` and their `.NAME` kin). */
function dataMaps(elf: ElfFile): BpfMapSpec[] {
  return elf.sections.filter(isDataSection).map((section) => ({
    name: section.name,
    type: BpfMapType.Array,
    keySize: DATA_MAP_KEY_SIZE,
    valueSize: section.size,
    maxEntries: 1,
  }));
}

function isDataSection(section: ElfSection): boolean {
  if (section.type === SHT_NOBITS) return section.name === ".bss";
  if ((section.flags & SHF_EXECINSTR) !== 0 || section.size === 0) return false;
  return [".data", ".rodata"].some((name) => section.name === name || section.name.startsWith(`${name}.`));
}

/** The global functions of the program sections (`.text` holds subprograms, which are not programs). */
function objectPrograms(elf: ElfFile, symbols: readonly ObjectSymbol[]): BpfProgramSpec[] {
  const programs: BpfProgramSpec[] = [];
  for (const symbol of symbols) {
    if (symbol.type !== STT_FUNC || symbol.size === 0) continue;
    const section = elf.sections[symbol.section];
    if (section === undefined || (section.flags & SHF_EXECINSTR) === 0 || section.name === ".text") continue;
    if (symbol.bind === STB_LOCAL) {
      throw new RangeError(
        `Cannot read program ${symbol.name} of ${elf.name}: libbpf refuses static programs`,
      );
    }
    programs.push({ name: symbol.name, section: section.name, type: programTypeOfSection(section.name) });
  }
  return programs;
}

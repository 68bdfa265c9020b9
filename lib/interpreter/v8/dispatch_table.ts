/**
 * V8 13's JS dispatch table (leaptiering). A JSFunction no longer points at its code: it holds a 32-bit
 * handle into a table of entries that the process's IsolateGroup owns, and the entry holds the code. BPF
 * and the namer read a frame's code through it, so they need the table's address in each process.
 *
 * Where it lies is not in V8's introspection data. V8's own accessor says it:
 * `ExternalReference::js_dispatch_table_address()` compiles on x86-64 to
 * `mov rax, [rip + IsolateGroup::default_isolate_group_]; mov rax, [rax + OFFSET]`, the table's address
 * being the first word of the IsolateGroup's table member. This module reads both instructions (the
 * symbols are in the symbol table, which Node's official builds keep) and refuses any other code. The
 * entry layout (handle >> 8 indexes 16-byte entries; the second word holds the code's address << 16) was
 * measured in Node 24 (V8 13.6) against `%DebugPrint`; the constants are bpf/v8_tracer.h's.
 *
 * @example
 * ```ts ignore
 * import { findDispatchTable } from "./dispatch_table.ts";
 * const symbols = findElfSymbols(elf, DISPATCH_TABLE_SYMBOLS);
 * const table = findDispatchTable(elf, symbols); // { groupPointer: 0x669b908, tableOffset: 0x3268 }, or null
 * ```
 *
 * @module
 */
import type { ElfFile } from "../../elf/elf_file.ts";
import { V8DispatchTable } from "../../../support/types.ts";
import type { ElfSymbol } from "../elf_symbols.ts";
import type { Address } from "../../types.ts";

/** Where a process keeps its JS dispatch table's address. */
export interface V8DispatchTableLocation {
  /** The ELF address of `IsolateGroup::default_isolate_group_`, the pointer to the IsolateGroup. */
  readonly groupPointer: number;
  /** Where in the IsolateGroup the table's address lies. */
  readonly tableOffset: number;
}

const GROUP_SYMBOL = "_ZN2v88internal12IsolateGroup22default_isolate_group_E";
const ACCESSOR_SYMBOL = "_ZN2v88internal17ExternalReference25js_dispatch_table_addressEv";
/** The symbols {@linkcode findDispatchTable} needs: local ones, in the symbol table. */
export const DISPATCH_TABLE_SYMBOLS: readonly string[] = [GROUP_SYMBOL, ACCESSOR_SYMBOL];
/** The accessor's first bytes read: both instructions, at their longest. */
const ACCESSOR_BYTES = 14;
/** No IsolateGroup member lies farther than this. */
const MAX_TABLE_OFFSET = 1 << 20;

/**
 * Where `elf`'s V8 keeps its JS dispatch table's address, from `symbols` (the file's
 * {@linkcode DISPATCH_TABLE_SYMBOLS}, as findElfSymbols finds them); null when the file has no such
 * accessor (no symbol table, or a V8 without leaptiering).
 *
 * @throws {RangeError} when the accessor is there but its code is not the two loads this reads.
 */
export function findDispatchTable(
  elf: ElfFile,
  symbols: ReadonlyMap<string, ElfSymbol>,
): V8DispatchTableLocation | null {
  const group = symbols.get(GROUP_SYMBOL);
  const accessor = symbols.get(ACCESSOR_SYMBOL);
  if (group === undefined || accessor === undefined) return null;
  const offset = elf.vaddrToFileOffset(accessor.value as Address);
  if (offset === null) throw new RangeError(`${ACCESSOR_SYMBOL} lies in no segment of ${elf.name}`);
  const code = elf.read(offset, ACCESSOR_BYTES);
  const view = new DataView(code.buffer, code.byteOffset, code.byteLength);
  // mov rax, [rip + rel32]: 48 8b 05 rel32, rip being the next instruction's address.
  const loadsGroup = code[0] === 0x48 && code[1] === 0x8b && code[2] === 0x05 &&
    accessor.value + 7 + view.getInt32(3, true) === group.value;
  // mov rax, [rax + disp32]: 48 8b 80 disp32; or [rax + disp8]: 48 8b 40 disp8.
  let tableOffset = -1;
  if (code[7] === 0x48 && code[8] === 0x8b && code[9] === 0x80) tableOffset = view.getInt32(10, true);
  else if (code[7] === 0x48 && code[8] === 0x8b && code[9] === 0x40) tableOffset = view.getInt8(10);
  if (!loadsGroup || tableOffset < 0 || tableOffset > MAX_TABLE_OFFSET) {
    throw new RangeError(
      `V8's JS dispatch table accessor in ${elf.name} is not the code this reads (${
        [...code].map((byte) => byte.toString(16).padStart(2, "0")).join(" ")
      })`,
    );
  }
  return { groupPointer: group.value, tableOffset };
}

/** The address of the entry `handle` names in the table at `table`, or null for a handle out of range. */
export function dispatchEntryAddress(table: number, handle: number): number | null {
  const index = Math.floor(handle / 2 ** V8DispatchTable.HandleShift);
  if (index >= V8DispatchTable.MaxEntries) return null;
  return table + index * V8DispatchTable.EntryBytes + V8DispatchTable.CodeWord;
}

/** The (untagged) code object address an entry's code word holds, given as its high and low 32 bits. */
export function codeOfEntryWord(high: number, low: number): number {
  const shift = V8DispatchTable.CodeShift;
  return high * 2 ** (32 - shift) + Math.floor(low / 2 ** shift);
}

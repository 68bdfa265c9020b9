/**
 * Where V8's embedded builtins lie in the file that holds V8: the interpreter's bytecode handlers, its
 * entry trampolines and the other builtins are compiled into the binary's text as one blob, without
 * unwind tables, and run in frames of JavaScript functions. The native unwinder hands frames there to
 * the V8 unwinder, as the file's interpreter ranges.
 *
 * The blob is `v8_Default_embedded_blob_code_` (a local symbol, in `.symtab` when the file keeps one) of
 * `v8_Default_embedded_blob_code_size_` bytes. Every file (a stripped one too, Debian's libnode) exports the
 * accessors `v8::internal::DefaultEmbeddedBlobCode()` and `...CodeSize()`, whose first instructions load
 * them: an immediate, or a RIP-relative variable (the code's address in a pointer the dynamic loader
 * relocates, so it is read from the file's R_X86_64_RELATIVE relocation). They are read first; the local
 * symbols only when the accessors have another shape.
 *
 * @example
 * ```ts ignore
 * import { findEmbeddedBlob } from "./embedded_blob.ts";
 * const blob = findEmbeddedBlob(elf); // { start: 0x18c4000, end: 0x1a55ac0 } in Node 20's node
 * ```
 *
 * @module
 */
import { type ElfFile, PF_X, PT_LOAD } from "../../elf/elf_file.ts";
import type { Address } from "../../types.ts";
import { findDynamicSymbol } from "../dynamic_symbol_lookup.ts";
import { findElfSymbols, readElfBytes } from "../elf_symbols.ts";
import type { AddressRange } from "../interpreter.ts";

const BLOB = "v8_Default_embedded_blob_code_";
const BLOB_SIZE = "v8_Default_embedded_blob_code_size_";
const BLOB_ACCESSOR = "_ZN2v88internal23DefaultEmbeddedBlobCodeEv";
const BLOB_SIZE_ACCESSOR = "_ZN2v88internal27DefaultEmbeddedBlobCodeSizeEv";
const SHT_RELA = 4;
const R_X86_64_RELATIVE = 8;
const RELA_ENTRY = 24;
/** No blob is larger (Node 24's is about 2 MiB). */
const MAX_BLOB_BYTES = 64 << 20;

/** How an accessor gets its value: a constant, or a variable it reads (value or pointer). */
type Load =
  | { readonly kind: "immediate"; readonly value: number }
  | { readonly kind: "variable"; readonly address: number };

/**
 * The ELF address range of V8's embedded builtins in `elf`, or null when neither the symbols nor the
 * accessors tell it.
 *
 * @throws {RangeError} when they tell a range outside the file's executable code.
 */
export function findEmbeddedBlob(elf: ElfFile): AddressRange | null {
  let start: number | null = null;
  let size: number | null = null;
  // The exported accessors first: a lookup in the hash table, where the local symbols need a scan of
  // the whole symbol table.
  const accessor = findDynamicSymbol(elf, BLOB_ACCESSOR);
  const sizeAccessor = findDynamicSymbol(elf, BLOB_SIZE_ACCESSOR);
  if (accessor !== null && sizeAccessor !== null) {
    const code = decodeLoad(elf, accessor.value, 8);
    const length = decodeLoad(elf, sizeAccessor.value, 4);
    if (code !== null && length !== null) {
      start = code.kind === "immediate" ? code.value : relocatedPointer(elf, code.address);
      size = length.kind === "immediate" ? length.value : readU32(elf, length.address);
    }
  }
  if (start === null) {
    const symbols = findElfSymbols(elf, [BLOB, BLOB_SIZE]);
    const blob = symbols.get(BLOB);
    const blobSize = symbols.get(BLOB_SIZE);
    if (blob !== undefined && blobSize !== undefined && isExecutable(elf, blob.value)) {
      start = blob.value;
      size = readU32(elf, blobSize.value);
    }
  }
  if (start === null || size === null) return null;
  if (
    size === 0 || size > MAX_BLOB_BYTES || !isExecutable(elf, start) || !isExecutable(elf, start + size - 1)
  ) {
    throw new RangeError(
      `Cannot find V8's builtins in ${elf.name}: [0x${start.toString(16)}, +0x${size.toString(16)}) is not ` +
        `in its code`,
    );
  }
  return { start, end: start + size };
}

/**
 * What the accessor at `vaddr` returns, from its first instructions, or null for code of another shape.
 * `width` is the value's size: 8 for the code's address, 4 for its size.
 */
function decodeLoad(elf: ElfFile, vaddr: number, width: 4 | 8): Load | null {
  const code = readElfBytes(elf, vaddr, 16);
  const view = new DataView(code.buffer, code.byteOffset, code.byteLength);
  // mov $imm32, %eax
  if (code[0] === 0xb8) return { kind: "immediate", value: view.getUint32(1, true) };
  const ripRelative = (length: number) => vaddr + length + view.getInt32(length - 4, true);
  if (width === 4 && code[0] === 0x8b && code[1] === 0x05) {
    // mov disp32(%rip), %eax
    return { kind: "variable", address: ripRelative(6) };
  }
  if (code[0] === 0x48 && code[2] === 0x05) {
    if (width === 8 && code[1] === 0x8b) return { kind: "variable", address: ripRelative(7) }; // mov disp32(%rip), %rax
    if (code[1] === 0x8d) {
      // lea disp32(%rip), %rax, then ret (the address itself) or a load through %rax (a variable).
      const address = ripRelative(7);
      if (code[7] === 0xc3) return width === 8 ? { kind: "immediate", value: address } : null;
      if (width === 8 && code[7] === 0x48 && code[8] === 0x8b && code[9] === 0x00) {
        return { kind: "variable", address };
      }
      if (width === 4 && code[7] === 0x8b && code[8] === 0x00) return { kind: "variable", address };
    }
  }
  return null;
}

/** The address the dynamic loader stores in the pointer at `vaddr`: its relocation's addend, else the file's word. */
function relocatedPointer(elf: ElfFile, vaddr: number): number {
  for (const section of elf.sections) {
    if (section.type !== SHT_RELA || section.size === 0) continue;
    const entries = elf.readSection(section);
    const view = new DataView(entries.buffer, entries.byteOffset, entries.byteLength);
    const low = vaddr % 2 ** 32;
    const high = Math.floor(vaddr / 2 ** 32);
    for (let o = 0; o + RELA_ENTRY <= entries.length; o += RELA_ENTRY) {
      if (view.getUint32(o, true) !== low || view.getUint32(o + 4, true) !== high) continue;
      if (view.getUint32(o + 8, true) !== R_X86_64_RELATIVE) continue;
      return Number(view.getBigInt64(o + 16, true));
    }
  }
  const word = readElfBytes(elf, vaddr, 8);
  return Number(new DataView(word.buffer, word.byteOffset, 8).getBigUint64(0, true));
}

function readU32(elf: ElfFile, vaddr: number): number {
  const bytes = readElfBytes(elf, vaddr, 4);
  return new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true);
}

function isExecutable(elf: ElfFile, vaddr: number): boolean {
  return elf.programHeaders.some((header) =>
    header.type === PT_LOAD && (header.flags & PF_X) !== 0 && vaddr >= header.vaddr &&
    vaddr < header.vaddr + header.filesz && elf.vaddrToFileOffset(vaddr as Address) !== null
  );
}

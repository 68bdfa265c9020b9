/**
 * Where a Go executable keeps the running goroutine (`g`) relative to the thread pointer (x86-64: the fs
 * base). Go's linker gives the executable a TLS segment holding the one variable `runtime.tlsg`: linked
 * by Go alone, that segment is 8 bytes and g sits at fs:-8; linked by the system linker (cgo), C code may
 * add variables, and g sits where `runtime.tlsg` lies in the segment. The executable's TLS block ends at
 * the thread pointer (variant II), so g is at `tp - roundUp(memsz, align) + offset of runtime.tlsg`.
 *
 * @example
 * ```ts ignore
 * import { ElfFile } from "../../elf/elf_file.ts";
 * import { goTlsOffset } from "./tls.ts";
 * using elf = ElfFile.open("./server");
 * console.log(goTlsOffset(elf)); // -8
 * ```
 *
 * @module
 */
import type { ElfFile } from "../../elf/elf_file.ts";
import { findElfSymbols } from "../elf_symbols.ts";

const PT_TLS = 7;
/** Where g is without a TLS segment or symbol to say otherwise: Go's own linker's choice on amd64. */
const DEFAULT_G_OFFSET = -8;
const POINTER_BYTES = 8;

/**
 * The offset of g from the thread pointer in processes of `elf`.
 *
 * @throws {RangeError} when the TLS segment holds more than g and no symbol says where g is in it
 * (a stripped binary linked with C code that has thread-local variables).
 */
export function goTlsOffset(elf: ElfFile): number {
  const tls = elf.programHeaders.find((header) => header.type === PT_TLS);
  if (tls === undefined) return DEFAULT_G_OFFSET;
  const align = Math.max(tls.align, 1);
  const blockStart = -Math.ceil(tls.memsz / align) * align;
  const tlsg = findElfSymbols(elf, ["runtime.tlsg"]).get("runtime.tlsg");
  if (tlsg !== undefined) return blockStart + tlsg.value;
  if (tls.memsz <= POINTER_BYTES) return blockStart;
  throw new RangeError(
    `Cannot find g in the ${tls.memsz}-byte TLS segment of ${elf.name}: no runtime.tlsg symbol`,
  );
}

/**
 * Recognises Go executables (by their `.go.buildinfo` section and `.gopclntab`, both kept in stripped
 * binaries) and reads what the label reader needs of one: the release's offsets, where g is in TLS, and
 * the Go text, which it declares as the file's "interpreter loop": the label reader runs once per trace
 * (it asks so, bpf/go_tracer.bpf.c), at the first Go frame the native unwinder meets.
 *
 * @example
 * ```ts ignore
 * import { goLoader } from "./loader.ts";
 * const data = goLoader(ebpf, info); // GoData, or null
 * ```
 *
 * @module
 */
import { type ElfFile, ET_DYN } from "../../elf/elf_file.ts";
import { GoUnwindProgram } from "../../../support/types.ts";
import { GoSymbols } from "../../symbolize/go/go_symbols.ts";
import type { AddressRange, EbpfHandler, Loader, LoaderInfo } from "../interpreter.ts";
import { hasGoBuildInfo, readGoBuildVersion } from "./build_info.ts";
import { GoData } from "./data.ts";
import { goLabelOffsets, MAX_GO_MINOR, MIN_GO_MINOR } from "./offsets.ts";
import { goTlsOffset } from "./tls.ts";

const PT_INTERP = 3;

/**
 * Whether `elf` is an executable: a Go library (`-buildmode=c-shared`, a shared object without an
 * interpreter) keeps g in a TLS block whose place only the dynamic loader knows, so it is not read.
 */
function isExecutable(elf: ElfFile): boolean {
  return elf.type !== ET_DYN || elf.programHeaders.some((header) => header.type === PT_INTERP);
}

/**
 * The ELF address range of the Go functions of `elf` (from the first one's entry to the last one's end,
 * as `.gopclntab` lists them in address order), or null when the table lists none.
 *
 * @throws {RangeError} when the table is malformed.
 */
export function findGoText(elf: ElfFile): AddressRange | null {
  const symbols = GoSymbols.read(elf);
  if (symbols === null) return null;
  let start = Infinity;
  let end = 0;
  for (const f of symbols.functions()) {
    start = Math.min(start, f.entry);
    end = Math.max(end, f.end);
  }
  return end > start ? { start, end } : null;
}

/**
 * The Go facts of `elf`, or null when it is not a Go executable (a Go shared library is not one).
 *
 * @throws {RangeError} when it is one that cannot be supported: an unknown release, no Go functions, g
 * not found in TLS.
 */
export function detectGoFile(elf: ElfFile): GoData | null {
  if (!hasGoBuildInfo(elf) || !isExecutable(elf)) return null;
  const version = readGoBuildVersion(elf);
  if (version === null) return null;
  const offsets = goLabelOffsets(version);
  if (offsets === null) {
    throw new RangeError(
      `Cannot read labels of ${version.text} in ${elf.name}: offsets known for go1.${MIN_GO_MINOR}-go1.${MAX_GO_MINOR}`,
    );
  }
  const text = findGoText(elf);
  if (text === null) throw new RangeError(`Cannot find Go functions in the .gopclntab of ${elf.name}`);
  return new GoData(elf.name, { version, offsets, tlsGOffset: goTlsOffset(elf), text });
}

/** The Go runtime's {@linkcode Loader}. */
export const goLoader: Loader = (ebpf: EbpfHandler, info: LoaderInfo): GoData | null => {
  const elf = info.getElf();
  // Every mapped file comes here: one section lookup turns away all that are not Go.
  if (!hasGoBuildInfo(elf)) return null;
  const data = detectGoFile(elf);
  if (data === null) return null;
  ebpf.updateInterpreterOffsets(GoUnwindProgram.Labels, info.fileId, [data.facts.text]);
  return data;
};

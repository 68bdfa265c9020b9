/**
 * Recognises Go executables (by their `.go.buildinfo` section and `.gopclntab`, both kept in stripped
 * binaries) and reads what the label reader needs of one: the release's offsets, where g is in TLS, and
 * `runtime.goexit`, the root of every goroutine's stack, which it declares as the file's "interpreter
 * loop" so that the native unwinder hands each goroutine's trace to the label reader there once.
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
import { UnwindProgram } from "../../../support/types.ts";
import { GoSymbols } from "../../symbolize/go/go_symbols.ts";
import type { AddressRange, EbpfHandler, Loader, LoaderInfo } from "../interpreter.ts";
import { hasGoBuildInfo, readGoBuildVersion } from "./build_info.ts";
import { GoData } from "./data.ts";
import { goLabelOffsets, MAX_GO_MINOR, MIN_GO_MINOR } from "./offsets.ts";
import { goTlsOffset } from "./tls.ts";

const GOEXIT = "runtime.goexit";
const PT_INTERP = 3;

/**
 * Whether `elf` is an executable: a Go library (`-buildmode=c-shared`, a shared object without an
 * interpreter) keeps g in a TLS block whose place only the dynamic loader knows, so it is not read.
 */
function isExecutable(elf: ElfFile): boolean {
  return elf.type !== ET_DYN || elf.programHeaders.some((header) => header.type === PT_INTERP);
}

/**
 * The ELF address range of `runtime.goexit` in `elf`, from `.gopclntab`, or null when the table has no
 * such function.
 *
 * @throws {RangeError} when the table is malformed.
 */
export function findGoexit(elf: ElfFile): AddressRange | null {
  const symbols = GoSymbols.read(elf);
  if (symbols === null) return null;
  for (const f of symbols.functions()) {
    if (f.name === GOEXIT) return { start: f.entry, end: f.end };
  }
  return null;
}

/**
 * The Go facts of `elf`, or null when it is not a Go executable (a Go shared library is not one).
 *
 * @throws {RangeError} when it is one that cannot be supported: an unknown release, no goexit, g not
 * found in TLS.
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
  const goexit = findGoexit(elf);
  if (goexit === null) throw new RangeError(`Cannot find ${GOEXIT} in the .gopclntab of ${elf.name}`);
  return new GoData(elf.name, { version, offsets, tlsGOffset: goTlsOffset(elf), goexit });
}

/** The Go runtime's {@linkcode Loader}. */
export const goLoader: Loader = (ebpf: EbpfHandler, info: LoaderInfo): GoData | null => {
  const elf = info.getElf();
  // Every mapped file comes here: one section lookup turns away all that are not Go.
  if (!hasGoBuildInfo(elf)) return null;
  const data = detectGoFile(elf);
  if (data === null) return null;
  ebpf.updateInterpreterOffsets(UnwindProgram.GoLabels, info.fileId, [data.facts.goexit]);
  return data;
};

/**
 * Recognises HotSpot by what a file is: the `libjvm.so` that exports the introspection tables
 * (`gHotSpotVMStructs` and the variables that describe its entries), whatever its name or JDK. The tables
 * themselves are only readable in a running JVM (data.ts reads them at the first process). The file has
 * no interpreter loop of its own (the interpreter is generated into the code cache): it declares none,
 * and the process's code cache, anonymous memory, goes to the HotSpot unwinder through the runtime's
 * `jitCode`.
 *
 * A file without the symbols costs a few lookups in its dynamic symbol table's hash.
 *
 * @example
 * ```ts ignore
 * import { hotspotLoader } from "./loader.ts";
 * const data = hotspotLoader(ebpf, info); // HotspotData, or null
 * ```
 *
 * @module
 */
import type { ElfFile } from "../../elf/elf_file.ts";
import { HotspotUnwindProgram } from "../../../support/types.ts";
import type { EbpfHandler, Loader, LoaderInfo } from "../interpreter.ts";
import { HotspotData } from "./data.ts";
import { vmStructsSymbols } from "./vm_structs.ts";

/** The HotSpot {@linkcode Loader}: returns {@linkcode HotspotData} for a `libjvm.so`. */
export const hotspotLoader: Loader = (ebpf: EbpfHandler, info: LoaderInfo): HotspotData | null => {
  let elf: ElfFile;
  try {
    elf = info.getElf();
  } catch (error) {
    if (error instanceof RangeError) return null;
    throw error;
  }
  const symbols = vmStructsSymbols(elf);
  if (symbols === null) return null;
  // No range of the file's own code is the interpreter's; this loads the unwinder for its code cache.
  ebpf.updateInterpreterOffsets(HotspotUnwindProgram.Hotspot, info.fileId, []);
  return new HotspotData(info.fileName, symbols);
};

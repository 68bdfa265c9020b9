/**
 * Test program for tests/mapped_files_test.ts: reads one process's mappings the way a recording does
 * and prints, as one JSON line, what omniprof made of the mapped file whose path contains SUBSTRING.
 * With VADDR (hex), it then waits for a line on standard input (the test ends the process meanwhile)
 * and names that ELF address of the file. Run as its own process so that a test can tell a hang (it
 * never prints) and run it with fewer capabilities.
 *
 * Usage: deno run -A tests/read_mapped_file.ts PID SUBSTRING [VADDR]
 *
 * @module
 */
import { ElfFile } from "../lib/elf/elf_file.ts";
import { FileRegistry } from "../lib/process/file_registry.ts";
import { ProcessManager } from "../lib/process/process_manager.ts";
import { NativeSymbolizer } from "../lib/symbolize/native.ts";
import type { Address, Pid } from "../lib/types.ts";

/** What the program prints. */
export interface MappedFileReport {
  found: boolean;
  key: string;
  readable: boolean;
  refusal: string | null;
  filesOpened: number;
  filesRefused: Record<string, number>;
  /** Names of the file's function symbols that contain "plugin". */
  symbols: string[];
  /** The name VADDR resolves to, when asked. */
  symbolized: string | null;
}

if (import.meta.main) {
  const [pidText, substring, vaddrText] = Deno.args;
  if (pidText === undefined || substring === undefined) {
    console.error("usage: read_mapped_file.ts PID SUBSTRING [VADDR]");
    Deno.exit(2);
  }
  using files = new FileRegistry();
  using processes = new ProcessManager({ files });
  processes.onExec(Number(pidText) as Pid);
  const file = [...files.files()].find((candidate) => candidate.path.includes(substring));
  const symbols: string[] = [];
  if (file?.readable) {
    using elf = ElfFile.fromFile(file.open(), file.path);
    const table = elf.symbols();
    for (let i = 0; i < table.size; i++) {
      const name = table.symbolAt(i).name;
      if (name.includes("plugin")) symbols.push(name);
    }
  }
  let symbolized: string | null = null;
  if (vaddrText !== undefined && file !== undefined) {
    console.log("ready");
    await Deno.stdin.read(new Uint8Array(1));
    using symbolizer = new NativeSymbolizer();
    symbolized = symbolizer.symbolize(file, parseInt(vaddrText, 16) as Address)?.functionName ?? null;
  }
  const report: MappedFileReport = {
    found: file !== undefined,
    key: file?.key ?? "",
    readable: file?.readable ?? false,
    refusal: file?.refusal ?? null,
    filesOpened: files.stats.filesOpened,
    filesRefused: files.stats.filesRefused,
    symbols,
    symbolized,
  };
  console.log(JSON.stringify(report));
}

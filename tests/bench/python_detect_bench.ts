/**
 * The cost of the CPython loader on files that are not Python: the process manager offers every file a
 * process maps to every loader, so the loader's first test must be cheap. Every ELF file in the folders
 * given (default: `/usr/lib/x86_64-linux-gnu`, `*.so*`) is opened once beforehand and kept open, as the
 * process manager keeps mapped files; each round then hands each file to the loader the way the manager
 * does (a {@linkcode LoaderInfo} over a duplicate of the open file) and times each file. On a shared
 * machine a round's time is mostly other processes' noise, so each file's fastest time over the rounds is
 * taken as its cost; the report sums them, in ms in all and µs per file, apart for the files the loader
 * claimed (they are analysed in full) and the others (only the first test runs), and gives the median
 * round's wall time beside.
 *
 *   deno run -A tests/bench/python_detect_bench.ts [--rounds N] [FOLDER...]
 *
 * @module
 */
import { parseArgs } from "node:util";
import { LoaderInfo } from "../../lib/interpreter/interpreter.ts";
import { MemoryEbpfHandler } from "../../lib/interpreter/memory_ebpf_handler.ts";
import { pythonLoader } from "../../lib/interpreter/python/loader.ts";
import { RegularFile } from "../../lib/sys/regular_file.ts";
import type { FileId } from "../../lib/types.ts";

const ELF_MAGIC = [0x7f, 0x45, 0x4c, 0x46];

/** The regular ELF files of `folder` whose names match `pattern`, opened. */
function openElfFiles(folder: string, pattern: RegExp): RegularFile[] {
  const out: RegularFile[] = [];
  for (const entry of Deno.readDirSync(folder)) {
    if (!pattern.test(entry.name) || entry.isDirectory) continue;
    let file: RegularFile;
    try {
      file = RegularFile.open(`${folder}/${entry.name}`);
    } catch {
      continue;
    }
    const magic = file.size >= 4 ? file.read(0, 4) : new Uint8Array(0);
    if (ELF_MAGIC.every((byte, i) => magic[i] === byte)) out.push(file);
    else file.close();
  }
  return out;
}

/** What the loader made of a file, and how long it took, in ms. */
interface Outcome {
  result: "claimed" | "passed over" | "refused";
  ms: number;
}

/** One round: each file offered to the loader once. */
function round(files: readonly RegularFile[]): Outcome[] {
  const ebpf = new MemoryEbpfHandler();
  return files.map((file) => {
    const start = performance.now();
    let result: Outcome["result"];
    using info = new LoaderInfo({
      fileId: file.name as FileId,
      fileName: file.name,
      open: () => file.duplicate(),
    });
    try {
      result = pythonLoader(ebpf, info) === null ? "passed over" : "claimed";
    } catch {
      result = "refused";
    }
    info.close();
    return { result, ms: performance.now() - start };
  });
}

function sum(values: readonly number[]): number {
  return values.reduce((total, value) => total + value, 0);
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    args: Deno.args,
    options: { rounds: { type: "string", default: "9" } },
    allowPositionals: true,
  });
  const folders = positionals.length > 0 ? positionals : ["/usr/lib/x86_64-linux-gnu"];
  const rounds = Number(values.rounds);
  const files = folders.flatMap((folder) => openElfFiles(folder, positionals.length > 0 ? /./ : /\.so/));
  try {
    round(files); // a warm JIT, as in a long-running recorder
    const results = Array.from({ length: rounds }, () => round(files));
    const fastest = files.map((_, i) => Math.min(...results.map((r) => r[i]!.ms)));
    const outcome = results[0]!;
    const totals = results.map((r) => sum(r.map((o) => o.ms))).sort((a, b) => a - b);
    console.log(
      `${files.length} ELF files: ${sum(fastest).toFixed(1)} ms (${
        (sum(fastest) * 1000 / files.length).toFixed(1)
      } ` +
        `µs per file) at each file's fastest of ${rounds} rounds; median round ` +
        `${totals[Math.floor(totals.length / 2)]!.toFixed(1)} ms`,
    );
    for (const result of ["passed over", "claimed", "refused"] as const) {
      const chosen = files.map((_, i) => i).filter((i) => outcome[i]!.result === result);
      if (chosen.length === 0) continue;
      const ms = sum(chosen.map((i) => fastest[i]!));
      const names = result === "passed over" ? "" : `: ${chosen.map((i) => files[i]!.name).join(", ")}`;
      console.log(
        `  ${result}: ${chosen.length} files, ${ms.toFixed(1)} ms, ${
          (ms * 1000 / chosen.length).toFixed(1)
        } ` +
          `µs per file${names}`,
      );
    }
  } finally {
    for (const file of files) file.close();
  }
}

/**
 * The unwind-table part of the benchmark: how fast .eh_frame becomes an unwind table, side by side with
 * `readelf -wF` on the same files, and how much BPF map memory each executable's stack deltas take.
 *
 * @module
 */
import { ElfFile } from "../../lib/elf/elf_file.ts";
import { buildStackDeltas, UnwindInfoRegistry } from "../../lib/unwind/stack_deltas.ts";
import { extractUnwindTable } from "../../lib/unwind/unwind_table.ts";
import { stackDeltaPageInfoLayout, stackDeltaPageKeyLayout, unwindInfoLayout } from "../../support/types.ts";
import { benchFiles, type EhFrameBenchRow, formatEhFrameBench, runEhFrameBench } from "./eh_frame_bench.ts";

/** BPF memory of one executable's deltas. */
export interface DeltaMemoryRow {
  label: string;
  path: string;
  tableRows: number;
  deltas: number;
  pages: number;
  /** log2 of its bucket array's size. */
  bucket: number;
  /** The bucket array (8-byte elements, as the kernel lays arrays out) plus its page entries. */
  bytes: number;
}

/** Everything the section measured. */
export interface UnwindTableReport {
  extraction: EhFrameBenchRow[];
  memory: DeltaMemoryRow[];
  /** Distinct rules of all these files together, and their bytes in the shared array. */
  sharedRules: number;
  sharedRuleBytes: number;
}

/** A hash entry's overhead in the kernel beyond key and value (struct htab_elem, roughly). */
const HASH_ENTRY_OVERHEAD = 48;

/** Runs the section (a few seconds). */
export async function unwindTableReport(): Promise<UnwindTableReport> {
  const extraction = await runEhFrameBench();
  const registry = new UnwindInfoRegistry(16384, () => {});
  const memory: DeltaMemoryRow[] = [];
  const files = [...benchFiles(), { label: "python3", path: safeRealPath("/usr/bin/python3") }];
  for (const { label, path } of files) {
    if (path === null) continue;
    using elf = ElfFile.open(path);
    const table = extractUnwindTable(elf);
    const deltas = buildStackDeltas(table, registry);
    const pageBytes = stackDeltaPageKeyLayout.sizeof + stackDeltaPageInfoLayout.sizeof + HASH_ENTRY_OVERHEAD;
    memory.push({
      label,
      path,
      tableRows: table.length,
      deltas: deltas.count,
      pages: deltas.pages.length,
      bucket: deltas.bucket,
      bytes: 2 ** deltas.bucket * 8 + deltas.pages.length * pageBytes,
    });
  }
  return {
    extraction,
    memory,
    sharedRules: registry.size,
    sharedRuleBytes: registry.size * unwindInfoLayout.sizeof,
  };
}

function safeRealPath(path: string): string | null {
  try {
    return Deno.realPathSync(path);
  } catch {
    return null;
  }
}

/** The section as text. */
export function formatUnwindTableReport(report: UnwindTableReport): string {
  const lines = ["unwind tables: .eh_frame extraction, side by side with readelf -wF on the same files"];
  lines.push(formatEhFrameBench(report.extraction));
  const slower = report.extraction.filter((row) => row.ratio !== null && row.ratio < 1).map((row) =>
    row.label
  );
  lines.push(
    `target extraction faster than readelf -wF: ${
      slower.length === 0 ? "PASS" : `FAIL (${slower.join(", ")})`
    }`,
  );
  lines.push("", "BPF map memory per executable (stack deltas in their bucket array, page entries)");
  const table = [["file", "table rows", "deltas", "pages", "bucket", "BPF memory"]];
  for (const row of report.memory) {
    table.push([
      row.label,
      String(row.tableRows),
      String(row.deltas),
      String(row.pages),
      `2^${row.bucket}`,
      `${(row.bytes / 1048576).toFixed(2)} MiB`,
    ]);
  }
  const widths = table[0]!.map((_, c) => Math.max(...table.map((r) => r[c]!.length)));
  for (const row of table) {
    lines.push(
      row.map((text, c) => c === 0 ? text.padEnd(widths[c]!) : text.padStart(widths[c]!)).join("  "),
    );
  }
  lines.push(
    `rules shared by these files: ${report.sharedRules} (${
      (report.sharedRuleBytes / 1024).toFixed(1)
    } KiB, ` +
      `one global array)`,
  );
  return lines.join("\n");
}

if (import.meta.main) console.log(formatUnwindTableReport(await unwindTableReport()));

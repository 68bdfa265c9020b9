/**
 * Test support: runs binutils' readelf on a file and parses its call-frame dumps, the reference the CFI
 * reader is checked against. `--debug-dump=frames` gives each CIE's fields and each entry's decoded
 * instructions; `--debug-dump=frames-interp` (`-wF`) gives the rule table of each entry, one row per
 * location with one cell per register column ("u" undefined, "s" same value, "c-16" at CFA-16, "v-16"
 * value CFA-16, "exp"/"vexp" expressions, a register name).
 *
 * Only sections read from the file itself are kept (readelf also follows debug links to separate files).
 *
 * @module
 */

/** One row of a `-wF` table: the location and the cell of every column ("CFA" included). */
export interface ReadelfRow {
  loc: number;
  cells: Map<string, string>;
}

/** A CIE or FDE as readelf prints it. */
export interface ReadelfEntry {
  kind: "CIE" | "FDE";
  offset: number;
  /** FDE: offset of its CIE (in the section). */
  cieOffset: number;
  /** CIE fields. */
  augmentation: string;
  codeAlignment: number;
  dataAlignment: number;
  returnAddressColumn: number;
  /** FDE: the address range. */
  start: number;
  end: number;
  /** `--debug-dump=frames`: the decoded instructions, one per line. */
  instructions: string[];
  /** `-wF`: the rows. */
  rows: ReadelfRow[];
}

/** One dumped section. */
export interface ReadelfSection {
  name: string;
  entries: ReadelfEntry[];
}

const decoder = new TextDecoder();

/** Runs readelf with `args` on `path`; output is parsed whatever the exit status (readelf warns with 1). */
export function runReadelf(path: string, ...args: string[]): string {
  const out = new Deno.Command("readelf", { args: [...args, path], stdout: "piped", stderr: "null" })
    .outputSync();
  return decoder.decode(out.stdout);
}

/** Parses readelf `--debug-dump=frames` or `--debug-dump=frames-interp` output for `path`. */
export function parseReadelfFrames(text: string, path: string): ReadelfSection[] {
  const sections: ReadelfSection[] = [];
  let section: ReadelfSection | null = null;
  let entry: ReadelfEntry | null = null;
  let columns: string[] | null = null;
  for (const line of text.split("\n")) {
    const contents = line.match(/^Contents of the (\.\S+) section(?: \(loaded from (.*)\))?:$/);
    if (contents) {
      const from = contents[2];
      section = from === undefined || from === path ? { name: contents[1]!, entries: [] } : null;
      if (section) sections.push(section);
      entry = null;
      columns = null;
      continue;
    }
    if (section === null) continue;
    if (/^[0-9a-f]+ ZERO terminator$/.test(line)) {
      entry = null;
      columns = null;
      continue;
    }
    const cie = line.match(
      /^([0-9a-f]+) ([0-9a-f]+) ([0-9a-f]+) CIE(?: "([^"]*)" cf=(\d+) df=(-?\d+) ra=(\d+))?$/,
    );
    const fde = line.match(
      /^([0-9a-f]+) ([0-9a-f]+) ([0-9a-f]+) FDE cie=([0-9a-f]+) pc=([0-9a-f]+)\.\.([0-9a-f]+)$/,
    );
    if (cie || fde) {
      const m = (cie ?? fde)!;
      entry = {
        kind: cie ? "CIE" : "FDE",
        offset: parseInt(m[1]!, 16),
        cieOffset: fde ? parseInt(fde[4]!, 16) : -1,
        augmentation: cie?.[4] ?? "",
        codeAlignment: Number(cie?.[5] ?? NaN),
        dataAlignment: Number(cie?.[6] ?? NaN),
        returnAddressColumn: Number(cie?.[7] ?? NaN),
        start: fde ? parseInt(fde[5]!, 16) : 0,
        end: fde ? parseInt(fde[6]!, 16) : 0,
        instructions: [],
        rows: [],
      };
      section.entries.push(entry);
      columns = null;
      continue;
    }
    if (entry === null) continue;
    const field = line.match(
      /^ {2}(Version|Augmentation|Code alignment factor|Data alignment factor|Return address column):\s+(.*)$/,
    );
    if (field) {
      const value = field[2]!;
      if (field[1] === "Augmentation") entry.augmentation = value.replace(/^"|"$/g, "");
      if (field[1] === "Code alignment factor") entry.codeAlignment = Number(value);
      if (field[1] === "Data alignment factor") entry.dataAlignment = Number(value);
      if (field[1] === "Return address column") entry.returnAddressColumn = Number(value);
      continue;
    }
    if (/^ {2}DW_CFA_/.test(line)) {
      entry.instructions.push(line.trim());
      continue;
    }
    const header = line.match(/^\s+LOC\s+CFA\s*(.*)$/);
    if (header) {
      columns = ["CFA", ...header[1]!.trim().split(/\s+/).filter((c) => c !== "")];
      continue;
    }
    const row = columns === null ? null : line.match(/^([0-9a-f]{8,16}) (.*)$/);
    if (row && columns) {
      // A register cell prints as "r13 (r13)": glue a parenthesised token to the one before it.
      const tokens: string[] = [];
      for (const token of row[2]!.trim().split(/\s+/)) {
        if (token.startsWith("(") && tokens.length > 0) tokens[tokens.length - 1] += ` ${token}`;
        else tokens.push(token);
      }
      const cells = new Map<string, string>();
      for (const [i, name] of columns.entries()) cells.set(name, tokens[i] ?? "");
      entry.rows.push({ loc: parseInt(row[1]!, 16), cells });
    }
  }
  return sections;
}

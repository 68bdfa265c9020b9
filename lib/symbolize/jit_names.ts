/**
 * The names of one process's JIT code: what its jitdump says (names and lines), else what its perf map
 * says (names). A runtime may write both (V8 with `--perf-basic-prof --perf-prof`, .NET with
 * `DOTNET_PerfMapEnabled=1`); the jitdump is asked first because it also gives the line.
 *
 * @example
 * ```ts
 * import { JitNames } from "./jit_names.ts";
 * import { PerfMap } from "./perf_map.ts";
 * const map = new PerfMap();
 * map.append(new TextEncoder().encode("7f0000001000 40 JS:*work /app/main.js:3:15\n"));
 * const names = new JitNames(map);
 * console.log(names.lookup(0x7f0000001010)); // { functionName: "JS:*work ...", source: "perf-map", ... }
 * ```
 *
 * @module
 */
import { type JitCodeFrame, JitDump } from "./jitdump.ts";
import type { PerfMap } from "./perf_map.ts";

/** Which file named a frame. */
export type JitNameSource = "jitdump" | "perf-map";

/** What a process's JIT names say of an address, and which file said it. */
export interface JitFrame extends JitCodeFrame {
  readonly source: JitNameSource;
}

/** A process's perf map and jitdump, asked together. */
export class JitNames {
  readonly perfMap: PerfMap;
  readonly jitDump: JitDump;

  constructor(perfMap: PerfMap, jitDump: JitDump = new JitDump()) {
    this.perfMap = perfMap;
    this.jitDump = jitDump;
  }

  /**
   * What the code at `address` is; when neither file names it, each first reads what was added to it (at
   * most every refresh interval). Null when neither names it.
   */
  frame(address: number): JitFrame | null {
    const dumped = this.jitDump.frame(address);
    if (dumped !== null) return { ...dumped, source: "jitdump" };
    return perfMapFrame(this.perfMap.name(address));
  }

  /** What the code at `address` is among what was read so far, or null. Never reads the files. */
  lookup(address: number): JitFrame | null {
    const dumped = this.jitDump.lookup(address);
    if (dumped !== null) return { ...dumped, source: "jitdump" };
    return perfMapFrame(this.perfMap.lookup(address));
  }

  /** Reads on in both files if the refresh interval has passed since the last look. */
  refreshIfDue(): void {
    this.perfMap.refreshIfDue();
    this.jitDump.refreshIfDue();
  }

  /** The process is gone: both files are read to their end and let go. Idempotent. */
  finish(): void {
    this.perfMap.finish();
    this.jitDump.finish();
  }

  /** Lets both files go; what was read stays. Idempotent. */
  close(): void {
    this.perfMap.close();
    this.jitDump.close();
  }
}

function perfMapFrame(name: string | null): JitFrame | null {
  return name === null ? null : { functionName: name, sourceFile: "", line: 0, source: "perf-map" };
}

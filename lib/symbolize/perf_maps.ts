/**
 * The perf maps and jitdumps of a session's processes: the one owner of their JIT names, a
 * {@linkcode JitNames} (a {@linkcode PerfMap} and a {@linkcode JitDump}) per process whose anonymous
 * executable memory (JIT code) showed up in a sample. A process's files are looked for when its first
 * such frame is resolved, while it runs ({@linkcode openPerfMapFile}, {@linkcode openJitDumpFile}), and
 * read on: when later frames of it are resolved and when symbolizing misses a name (each at most every
 * `refreshIntervalMs`), and to their end when the process exits, after which they are let go and their
 * names stay for the profile. A file not there yet is looked for again on the same schedule (an agent may
 * write one later); one that was refused is not, until the process exits.
 *
 * @example
 * ```ts ignore
 * import { PerfMaps } from "./perf_maps.ts";
 * using perfMaps = new PerfMaps();
 * const names = perfMaps.of(pid); // while the process runs
 * // ... later, even after it exited:
 * console.log(names.frame(address));
 * ```
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import type { RegularFile } from "../sys/regular_file.ts";
import type { Pid } from "../types.ts";
import { JitDump, type JitDumpSource, jitDumpSourceOf } from "./jitdump.ts";
import { openJitDumpFile } from "./jitdump_file.ts";
import { JitNames, type JitNameSource } from "./jit_names.ts";
import { PerfMap, type PerfMapOptions } from "./perf_map.ts";
import { openPerfMapFile, type PerfMapOpening, type PerfMapRefusal } from "./perf_map_file.ts";

const logger = getLogger(["omniprof", "symbolize"]);

/** Counters reported with the session's metrics (`--stats`). */
export interface PerfMapsStats {
  /** Perf maps found and read. */
  mapsRead: number;
  /** Maps a bound stopped reading: the rest of each is not used. */
  mapsTruncated: number;
  /** Maps found but not read, by reason. */
  mapsRefused: Record<PerfMapRefusal, number>;
  /** Looks for a perf map or jitdump skipped because `maxOpenMaps` files were open. */
  mapsOverLimit: number;
  /** Entries read from all maps. */
  entries: number;
  /** Lines of all maps skipped as malformed. */
  malformedLines: number;
  /** What was read from jitdumps. */
  jitdumps: JitDumpsStats;
  /**
   * Frames of samples in anonymous executable memory named from a perf map or a jitdump (a frame per
   * sample).
   */
  framesNamed: number;
  /** Of {@linkcode framesNamed}, those named from a jitdump. */
  framesNamedFromJitdumps: number;
  /** Frames of samples in anonymous executable memory that neither named. */
  framesUnnamed: number;
}

/** Counters of the jitdumps read, reported with {@linkcode PerfMapsStats}. */
export interface JitDumpsStats {
  /** Jitdumps found and read. */
  read: number;
  /** Jitdumps a bound stopped reading: the rest of each is not used. */
  truncated: number;
  /** Jitdumps whose header or a record was not a jitdump's: read up to there only. */
  rejected: number;
  /** Jitdumps found but not read, by reason. */
  refused: Record<PerfMapRefusal, number>;
  /** CODE_LOAD records kept. */
  loads: number;
  /** CODE_MOVE records applied. */
  moves: number;
  /** Source line entries kept. */
  lineEntries: number;
  /** Records skipped as malformed. */
  malformedRecords: number;
}

/** How {@linkcode PerfMaps} finds and bounds maps. */
export interface PerfMapsOptions extends PerfMapOptions {
  /** Where procfs is mounted. Default "/proc". */
  procRoot?: string;
  /** Most perf maps and jitdumps held open at once (up to two per live process). Default 1024. */
  maxOpenMaps?: number;
  /** How a process's map is looked for; default {@linkcode openPerfMapFile}. */
  open?: (pid: Pid, procRoot: string) => PerfMapOpening;
  /** How a process's jitdump is looked for; default {@linkcode openJitDumpFile}. */
  openJitDump?: (pid: Pid, procRoot: string) => PerfMapOpening;
  /** Most bytes read from one jitdump (its records include the code). Default 256 MiB. */
  maxJitDumpBytes?: number;
}

/** A kind of file read for JIT names, for the counters kept per kind. */
type JitFileKind = "map" | "dump";

function noRefusals(): Record<PerfMapRefusal, number> {
  return { "not-regular": 0, owner: 0, denied: 0, failed: 0 };
}

/** The session's perf maps and jitdumps, by process. */
export class PerfMaps implements Disposable {
  readonly #options: PerfMapOptions;
  readonly #procRoot: string;
  readonly #maxOpenMaps: number;
  readonly #maxJitDumpBytes: number | undefined;
  readonly #open: Record<JitFileKind, (pid: Pid, procRoot: string) => PerfMapOpening>;
  /** JIT names of the processes running (as far as the session knows). */
  readonly #names = new Map<Pid, JitNames>();
  /** Live processes whose file of a kind was refused: not looked at again. */
  readonly #refused: Record<JitFileKind, Set<Pid>> = { map: new Set(), dump: new Set() };
  /** Live processes whose file of a kind is open. */
  readonly #holding: Record<JitFileKind, Set<Pid>> = { map: new Set(), dump: new Set() };
  /** Counts of the files let go, added up. */
  #retired = {
    entries: 0,
    malformedLines: 0,
    truncated: 0,
    dumpsTruncated: 0,
    dumpsRejected: 0,
    loads: 0,
    moves: 0,
    lineEntries: 0,
    malformedRecords: 0,
  };
  #counts = {
    mapsRead: 0,
    dumpsRead: 0,
    mapsRefused: noRefusals(),
    dumpsRefused: noRefusals(),
    mapsOverLimit: 0,
    framesNamed: 0,
    framesNamedFromJitdumps: 0,
    framesUnnamed: 0,
  };

  constructor(options: PerfMapsOptions = {}) {
    const { procRoot, maxOpenMaps, open, openJitDump, maxJitDumpBytes, ...mapOptions } = options;
    this.#options = mapOptions;
    this.#procRoot = procRoot ?? "/proc";
    this.#maxOpenMaps = maxOpenMaps ?? 1024;
    this.#maxJitDumpBytes = maxJitDumpBytes;
    this.#open = { map: open ?? openPerfMapFile, dump: openJitDump ?? openJitDumpFile };
  }

  /** A snapshot of the counters. */
  get stats(): PerfMapsStats {
    const retired = this.#retired;
    let entries = retired.entries;
    let malformedLines = retired.malformedLines;
    let mapsTruncated = retired.truncated;
    const jitdumps: JitDumpsStats = {
      read: this.#counts.dumpsRead,
      truncated: retired.dumpsTruncated,
      rejected: retired.dumpsRejected,
      refused: { ...this.#counts.dumpsRefused },
      loads: retired.loads,
      moves: retired.moves,
      lineEntries: retired.lineEntries,
      malformedRecords: retired.malformedRecords,
    };
    for (const names of this.#names.values()) {
      const stats = names.perfMap.stats;
      entries += stats.entries;
      malformedLines += stats.malformedLines;
      if (stats.truncated) mapsTruncated++;
      const dump = names.jitDump.stats;
      if (dump.truncated) jitdumps.truncated++;
      if (dump.rejected !== null) jitdumps.rejected++;
      jitdumps.loads += dump.loads;
      jitdumps.moves += dump.moves;
      jitdumps.lineEntries += dump.lineEntries;
      jitdumps.malformedRecords += dump.malformedRecords;
    }
    return {
      mapsRead: this.#counts.mapsRead,
      mapsRefused: { ...this.#counts.mapsRefused },
      mapsOverLimit: this.#counts.mapsOverLimit,
      mapsTruncated,
      entries,
      malformedLines,
      jitdumps,
      framesNamed: this.#counts.framesNamed,
      framesNamedFromJitdumps: this.#counts.framesNamedFromJitdumps,
      framesUnnamed: this.#counts.framesUnnamed,
    };
  }

  /**
   * The JIT names of running process `pid`, for a frame in its anonymous executable memory: its files
   * are looked for now at the process's first such frame, read on (or looked for again) if
   * `refreshIntervalMs` has passed since.
   */
  of(pid: Pid): JitNames {
    let names = this.#names.get(pid);
    if (names === undefined) {
      const jitDump = new JitDump({
        maxBytes: this.#maxJitDumpBytes,
        refreshIntervalMs: this.#options.refreshIntervalMs,
      });
      names = new JitNames(new PerfMap(this.#options), jitDump);
      this.#names.set(pid, names);
      names.perfMap.follow(() => this.#openOf(pid, "map"));
      jitDump.follow((): JitDumpSource | null => {
        const file = this.#openOf(pid, "dump");
        return file === null ? null : jitDumpSourceOf(file);
      });
    } else {
      names.refreshIfDue();
    }
    return names;
  }

  /**
   * Counts the frames of `samples` samples in anonymous executable memory, named (by the file `source`)
   * or not (null).
   */
  countFrames(source: JitNameSource | null, samples: number): void {
    if (source === null) {
      this.#counts.framesUnnamed += samples;
      return;
    }
    this.#counts.framesNamed += samples;
    if (source === "jitdump") this.#counts.framesNamedFromJitdumps += samples;
  }

  /** The process exited: its files are read to the end and let go; their names stay with the frames. */
  onExit(pid: Pid): void {
    const names = this.#names.get(pid);
    for (const kind of ["map", "dump"] as const) {
      this.#refused[kind].delete(pid);
      this.#holding[kind].delete(pid);
    }
    if (names === undefined) return;
    this.#names.delete(pid);
    names.finish();
    const stats = names.perfMap.stats;
    const retired = this.#retired;
    retired.entries += stats.entries;
    retired.malformedLines += stats.malformedLines;
    if (stats.truncated) retired.truncated++;
    const dump = names.jitDump.stats;
    if (dump.truncated) retired.dumpsTruncated++;
    if (dump.rejected !== null) retired.dumpsRejected++;
    retired.loads += dump.loads;
    retired.moves += dump.moves;
    retired.lineEntries += dump.lineEntries;
    retired.malformedRecords += dump.malformedRecords;
  }

  /** Lets every file go (the names read stay). Idempotent. */
  close(): void {
    for (const names of this.#names.values()) names.close();
    this.#holding.map.clear();
    this.#holding.dump.clear();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  #openOf(pid: Pid, kind: JitFileKind): RegularFile | null {
    if (this.#refused[kind].has(pid)) return null;
    if (this.#holding.map.size + this.#holding.dump.size >= this.#maxOpenMaps) {
      this.#counts.mapsOverLimit++;
      return null;
    }
    const opening = this.#open[kind](pid, this.#procRoot);
    switch (opening.kind) {
      case "absent":
        return null;
      case "refused":
        this.#refused[kind].add(pid);
        this.#counts[kind === "map" ? "mapsRefused" : "dumpsRefused"][opening.reason]++;
        logger.debug("Not reading the {kind} of {pid}: {detail}", {
          kind: kind === "map" ? "perf map" : "jitdump",
          pid,
          detail: opening.detail,
        });
        return null;
      case "opened":
        this.#holding[kind].add(pid);
        this.#counts[kind === "map" ? "mapsRead" : "dumpsRead"]++;
        return opening.file;
    }
  }
}

/**
 * The perf maps of a session's processes, one {@linkcode PerfMap} per process whose anonymous executable
 * memory (JIT code) showed up in a sample. A process's map is looked for when its first such frame is
 * resolved, while it runs ({@linkcode openPerfMapFile}), and read on: when later frames of it are
 * resolved and when symbolizing misses a name (each at most every `refreshIntervalMs`), and to its end
 * when the process exits, after which its file is let go and its names stay for the profile. A process
 * without a map yet is looked at again on the same schedule (an agent may write one later); one whose
 * map was refused is not, until it exits.
 *
 * @example
 * ```ts ignore
 * import { PerfMaps } from "./perf_maps.ts";
 * using perfMaps = new PerfMaps();
 * const map = perfMaps.of(pid); // while the process runs
 * // ... later, even after it exited:
 * console.log(map.name(address));
 * ```
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import type { RegularFile } from "../sys/regular_file.ts";
import type { Pid } from "../types.ts";
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
  /** Looks for a map skipped because `maxOpenMaps` maps were open. */
  mapsOverLimit: number;
  /** Entries read from all maps. */
  entries: number;
  /** Lines of all maps skipped as malformed. */
  malformedLines: number;
  /** Frames of samples in anonymous executable memory named from a perf map (a frame per sample). */
  framesNamed: number;
  /** Frames of samples in anonymous executable memory that no perf map named. */
  framesUnnamed: number;
}

/** How {@linkcode PerfMaps} finds and bounds maps. */
export interface PerfMapsOptions extends PerfMapOptions {
  /** Where procfs is mounted. Default "/proc". */
  procRoot?: string;
  /** Most map files held open at once (one per live process that has one). Default 1024. */
  maxOpenMaps?: number;
  /** How a process's map is looked for; default {@linkcode openPerfMapFile}. */
  open?: (pid: Pid, procRoot: string) => PerfMapOpening;
}

/** The session's perf maps, by process. */
export class PerfMaps implements Disposable {
  readonly #options: PerfMapOptions;
  readonly #procRoot: string;
  readonly #maxOpenMaps: number;
  readonly #open: (pid: Pid, procRoot: string) => PerfMapOpening;
  /** Maps of the processes running (as far as the session knows). */
  readonly #maps = new Map<Pid, PerfMap>();
  /** Live processes whose map was refused: not looked at again. */
  readonly #refused = new Set<Pid>();
  /** Live processes whose map is open. */
  readonly #holding = new Set<Pid>();
  /** Counts of the maps let go, added up. */
  #retired = { entries: 0, malformedLines: 0, truncated: 0 };
  #counts = {
    mapsRead: 0,
    mapsRefused: { "not-regular": 0, owner: 0, denied: 0, failed: 0 } as Record<PerfMapRefusal, number>,
    mapsOverLimit: 0,
    framesNamed: 0,
    framesUnnamed: 0,
  };

  constructor(options: PerfMapsOptions = {}) {
    const { procRoot, maxOpenMaps, open, ...mapOptions } = options;
    this.#options = mapOptions;
    this.#procRoot = procRoot ?? "/proc";
    this.#maxOpenMaps = maxOpenMaps ?? 1024;
    this.#open = open ?? openPerfMapFile;
  }

  /** A snapshot of the counters. */
  get stats(): PerfMapsStats {
    let entries = this.#retired.entries;
    let malformedLines = this.#retired.malformedLines;
    let mapsTruncated = this.#retired.truncated;
    for (const map of this.#maps.values()) {
      const stats = map.stats;
      entries += stats.entries;
      malformedLines += stats.malformedLines;
      if (stats.truncated) mapsTruncated++;
    }
    return {
      ...this.#counts,
      mapsRefused: { ...this.#counts.mapsRefused },
      mapsTruncated,
      entries,
      malformedLines,
    };
  }

  /**
   * The map of running process `pid`, for a frame in its anonymous executable memory: looked for now at
   * the process's first such frame, read on (or looked for again) if `refreshIntervalMs` has passed since.
   */
  of(pid: Pid): PerfMap {
    let map = this.#maps.get(pid);
    if (map === undefined) {
      map = new PerfMap(this.#options);
      this.#maps.set(pid, map);
      map.follow(() => this.#openOf(pid));
    } else {
      map.refreshIfDue();
    }
    return map;
  }

  /** Counts the frames of `samples` samples in anonymous executable memory, named or not. */
  countFrames(named: boolean, samples: number): void {
    if (named) this.#counts.framesNamed += samples;
    else this.#counts.framesUnnamed += samples;
  }

  /** The process exited: its map is read to the end and let go; its names stay with the frames. */
  onExit(pid: Pid): void {
    const map = this.#maps.get(pid);
    this.#refused.delete(pid);
    this.#holding.delete(pid);
    if (map === undefined) return;
    this.#maps.delete(pid);
    map.finish();
    const stats = map.stats;
    this.#retired.entries += stats.entries;
    this.#retired.malformedLines += stats.malformedLines;
    if (stats.truncated) this.#retired.truncated++;
  }

  /** Lets every file go (the names read stay). Idempotent. */
  close(): void {
    for (const map of this.#maps.values()) map.close();
    this.#holding.clear();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  #openOf(pid: Pid): RegularFile | null {
    if (this.#refused.has(pid)) return null;
    if (this.#holding.size >= this.#maxOpenMaps) {
      this.#counts.mapsOverLimit++;
      return null;
    }
    const opening = this.#open(pid, this.#procRoot);
    switch (opening.kind) {
      case "absent":
        return null;
      case "refused":
        this.#refused.add(pid);
        this.#counts.mapsRefused[opening.reason]++;
        logger.debug("Not reading the perf map of {pid}: {detail}", { pid, detail: opening.detail });
        return null;
      case "opened":
        this.#holding.add(pid);
        this.#counts.mapsRead++;
        return opening.file;
    }
  }
}

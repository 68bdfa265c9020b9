/**
 * Loads files' stack deltas into the BPF maps the native unwinder reads, when the unwinder first meets a
 * file's code (most mapped libraries never run while a profile is taken): a small file whole; a large one
 * (a C library's thousands of functions) one 64 KiB page at a time, until its code has run in enough pages
 * to be worth loading whole. Files without usable CFI get rows that follow frame pointers over their code.
 *
 * One {@linkcode FileDeltas} per file says where its deltas are; the file registry keeps it with the rest
 * of the file's state, and unloads it when no process maps the file any more.
 *
 * @example
 * ```ts ignore
 * import { StackDeltaLoader } from "./stack_delta_loader.ts";
 * const loader = new StackDeltaLoader(object);
 * const deltas = loader.forFile(7, file, segments);
 * loader.need(deltas, 0x1234, false); // BPF asked: the page of 0x1234, or the whole file
 * loader.unload(deltas);
 * ```
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import { FullMaps } from "../bpf/full_maps.ts";
import type { BpfMap } from "../bpf/map.ts";
import { u64Key } from "../bpf/map.ts";
import type { BpfObject } from "../bpf/object.ts";
import { ElfFile, type LoadSegment } from "../elf/elf_file.ts";
import type { MappedFile } from "../process/mapped_file.ts";
import { StackDeltaConstants } from "../../support/types.ts";
import { StackDeltaMaps } from "./stack_delta_maps.ts";
import {
  buildStackDeltas,
  deltasOfPage,
  findDeltaRow,
  framePointerDeltas,
  type ResolvedRule,
  type StackDeltaFile,
} from "./stack_deltas.ts";
import { CfaRule, indexUnwindTable, type UnwindTable, type UnwindTableIndex } from "./unwind_table.ts";
import { type GoUnwindRules, goUnwindRules, withGoRules } from "./go_unwind_rules.ts";

const logger = getLogger(["omniprof", "unwind"]);
const PF_X = 1;
const PAGE_SIZE = 2 ** StackDeltaConstants.StackDeltaPageBits;
/**
 * Files with at least this many FDEs are loaded a page (64 KiB) at a time, as the unwinder meets their
 * code: a C library has thousands, of which a profile runs a few pages' worth, and interpreting them all
 * costs tens of ms at start. Smaller files load whole, so their first samples unwind completely.
 */
const BY_PAGE_MIN_FDES = 1024;
/**
 * A file whose code ran in this many pages is busy (a server's library): the rest of it is loaded at
 * once, so that its other pages lose no first samples to frame pointers. (A file that holds an
 * interpreter's loop loads whole at its first need: see FileDeltas.need.)
 */
const BY_PAGE_MAX_PAGES = 8;
/** Ids of the row arrays of pages loaded alone: above every file id. */
const FIRST_PAGE_ROWS_ID = 2 ** 31;

/** Counters for `check`, the status line and benchmarks. */
export interface StackDeltaStats {
  /** Files whose stack deltas were loaded (their code ran), whole or page by page. */
  filesLoaded: number;
  /** Pages loaded alone, of files loaded page by page. */
  pagesLoaded: number;
  /** Files (or pages) whose tables could not be used: their code unwinds by frame pointers. */
  filesFailed: number;
  /** Bytes of BPF map memory for stack deltas. */
  deltaBytes: number;
  /** Total ms spent extracting and loading deltas. */
  loadMs: number;
}

interface LoadedPage {
  readonly rowsId: number;
  readonly deltas: StackDeltaFile;
}

interface ByPage {
  readonly index: UnwindTableIndex;
  /** The pages in BPF (null: failed to load). */
  readonly pages: Map<number, LoadedPage | null>;
  /** A Go binary's own rows, laid over each page's CFI. */
  readonly go: GoUnwindRules | null;
}

/** What the host found for an address of a file (the BPF unwinder's outcomes of find_rule). */
export const RuleLookup = {
  /** The rule is in the `out` argument. */
  Found: 0,
  /** The file has no tables for the address: its frame is unwound by frame pointer, as BPF would. */
  FramePointer: 1,
  /** The file's tables are loaded and have no rule for the address: unwinding stops there. */
  NoInfo: 2,
  /** The row names a rule that does not exist. */
  Bad: 3,
} as const;
/** One value of {@linkcode RuleLookup}. */
export type RuleLookup = (typeof RuleLookup)[keyof typeof RuleLookup];

/** Where one file's deltas are in BPF: not yet, whole, or some of its pages. */
export interface FileDeltas {
  /** The id BPF knows the file by. */
  readonly bpfId: number;
  readonly file: MappedFile;
  /** Its program headers: the code to follow frame pointers over when it has no usable CFI. */
  readonly segments: readonly LoadSegment[];
  /** The whole file's deltas in BPF, or null while not loaded whole (or its tables failed). */
  whole: StackDeltaFile | null;
  /** For a file loaded page by page: its indexed CFI and the pages in BPF. */
  byPage: ByPage | null;
  /** The tables were loaded (or failed to load): never try again. */
  tablesDone: boolean;
  /** What `loaded_files` holds for the file (StackDeltaConstants.LoadedFile*), or 0 when nothing. */
  mark: number;
}

/** The stack-delta maps of one BPF object, and what loading into them cost. */
export class StackDeltaLoader {
  readonly #maps: StackDeltaMaps;
  readonly #loadedFiles: BpfMap;
  readonly #full = new FullMaps(logger);
  #nextRowsId = FIRST_PAGE_ROWS_ID;
  #closed = false;
  readonly #stats: Omit<StackDeltaStats, "deltaBytes"> = {
    filesLoaded: 0,
    pagesLoaded: 0,
    filesFailed: 0,
    loadMs: 0,
  };

  constructor(object: BpfObject) {
    this.#maps = new StackDeltaMaps(object);
    this.#loadedFiles = object.map("loaded_files");
  }

  get stats(): StackDeltaStats {
    return { ...this.#stats, deltaBytes: this.#maps.bytes };
  }

  /**
   * The deltas of `file`, known to BPF as `bpfId`, with its program headers `segments`: none loaded yet.
   * A file whose program headers could not be read is marked at once for BPF to follow frame pointers in
   * it without asking for its tables, or copying stacks for the host to unwind: it could do no better.
   */
  forFile(bpfId: number, file: MappedFile, segments: readonly LoadSegment[]): FileDeltas {
    const deltas = unloaded(bpfId, file, segments);
    if (deltas.tablesDone) {
      try {
        this.#mark(deltas, StackDeltaConstants.LoadedFileFramePointers);
      } catch (error) {
        // Unmarked, BPF asks for the file now and then, in vain, and copies its stacks: slower, not wrong.
        // Not counted again: a file whose headers could not be read was counted as failed then.
        logger.debug("Cannot mark {path} for frame pointers: {error}", {
          path: file.path,
          error: error instanceof Error ? error.message : String(error),
        });
      }
    }
    return deltas;
  }

  /**
   * The unwinder met code of the file at ELF address `address` before its deltas were loaded: load them
   * now, or the page holding `address` for a file loaded page by page. With `whole` (the file holds an
   * interpreter's loop) the file loads whole at once: its stacks run through many pages of it (the loop,
   * calls, object code), so paging would end in a whole load anyway, after paying for the pages first.
   */
  need(file: FileDeltas, address: number, whole: boolean): void {
    this.#loadTables(file, whole);
    const byPage = file.byPage;
    if (!byPage) return;
    if (byPage.pages.size < BY_PAGE_MAX_PAGES) {
      this.#loadPage(file, byPage, Math.floor(address / PAGE_SIZE));
    } else this.#loadWhole(file, byPage);
  }

  /**
   * The rule for ELF address `lookup` of the file, from the very deltas BPF holds: for unwinding on the
   * host (a copied stack). What is not loaded yet is loaded now, into BPF too, as if BPF had asked for it.
   */
  ruleAt(file: FileDeltas, lookup: number, whole: boolean, out: ResolvedRule): RuleLookup {
    if (!file.tablesDone || (file.byPage && !file.byPage.pages.has(Math.floor(lookup / PAGE_SIZE)))) {
      this.need(file, lookup, whole);
    }
    let deltas = file.whole;
    if (deltas === null) {
      const page = file.byPage?.pages.get(Math.floor(lookup / PAGE_SIZE));
      // A page that failed to load, or a file whose tables failed: BPF follows frame pointers there.
      if (!page) {
        return file.mark === StackDeltaConstants.LoadedFileComplete
          ? RuleLookup.NoInfo
          : RuleLookup.FramePointer;
      }
      deltas = page.deltas;
    }
    const row = findDeltaRow(deltas, lookup);
    if (row < 0) return RuleLookup.NoInfo;
    return this.#maps.resolveRule(deltas, row, lookup, out) ? RuleLookup.Found : RuleLookup.Bad;
  }

  /** Loads the whole file now, before its code runs (a program the user named). */
  loadWhole(file: FileDeltas): void {
    this.#loadTables(file, true);
    if (file.byPage) this.#loadWhole(file, file.byPage);
  }

  /** Removes what was loaded of the file from BPF; it is as if none was loaded. */
  unload(file: FileDeltas): void {
    if (file.whole) this.#maps.unload(file.bpfId, file.whole);
    for (const page of file.byPage?.pages.values() ?? []) {
      if (page) this.#maps.unload(file.bpfId, page.deltas, page.rowsId);
    }
    if (file.mark !== 0) this.#loadedFiles.delete(u64Key(file.bpfId));
    Object.assign(file, unloaded(file.bpfId, file.file, file.segments));
  }

  /**
   * Marks the file complete once BPF can read its rows, and only then: the mark lets the unwinder stop at
   * an address without a delta, where before it follows frame pointers. Nothing is marked if the file
   * was unloaded (or loaded anew) meanwhile, or the maps closed.
   */
  #markCompleteOnceStored(loaded: FileDeltas, stored: Promise<void>): void {
    const deltas = loaded.whole;
    stored.then(() => {
      if (this.#closed || loaded.whole !== deltas) return;
      try {
        this.#mark(loaded, StackDeltaConstants.LoadedFileComplete);
      } catch (error) {
        this.failed("Cannot mark {path} complete: {error}; using frame pointers there", loaded.file, error);
      }
    }, (error) => this.#failedLate(loaded, error));
  }

  /** The kernel refused rows after load() returned: counted and said as a failure at the time would be. */
  #failedLate(loaded: FileDeltas, error: unknown, address?: string): void {
    if (this.#closed) return;
    this.failed(
      address === undefined
        ? "Cannot store unwind tables of {path}: {error}; using frame pointers there"
        : "Cannot load unwind tables of {path} at {address}: {error}; using frame pointers there",
      loaded.file,
      error,
      address === undefined ? {} : { address },
    );
  }

  /** Resolves once BPF holds every rows array written so far and none is being removed. */
  settled(): Promise<void> {
    return this.#maps.settled();
  }

  /** Writes nothing more to BPF: the object is closing. */
  close(): void {
    this.#closed = true;
    this.#maps.close();
  }

  #mark(file: FileDeltas, how: number): void {
    this.#loadedFiles.update(u64Key(file.bpfId), new Uint8Array([how]));
    file.mark = how;
  }

  #loadTables(loaded: FileDeltas, whole: boolean): void {
    if (loaded.tablesDone) return;
    loaded.tablesDone = true;
    const started = performance.now();
    const { bpfId, file, segments } = loaded;
    let deltas: StackDeltaFile | null = null;
    try {
      using elf = ElfFile.fromFile(file.open(), file.path);
      const go = this.#goRules(elf, file);
      // Read whole, the index walks every FDE; else only .eh_frame_hdr's table until pages are asked for.
      const index = indexUnwindTable(elf, { lazy: !whole });
      if (!whole && index.fdeCount >= BY_PAGE_MIN_FDES) {
        loaded.byPage = { index, pages: new Map(), go };
        this.#mark(loaded, StackDeltaConstants.LoadedFileByPage);
        this.#stats.filesLoaded++;
        this.#timed(
          started,
          "Indexed the unwind tables of {path}: {count} FDEs, to load page by page in {ms} ms",
          { path: file.path, count: index.fdeCount },
        );
        return;
      }
      const cfi = index.table();
      // A Go binary without any CFI follows frame pointers over all its code, as other such files do;
      // its Go rows go over that.
      const code = go && cfi.length === 0 ? codeRange(segments) : null;
      const table = withGo(code ? framePointerTable(code.start, code.end) : cfi, go);
      deltas = table.length > 0 ? buildStackDeltas(table, this.#maps.registry) : null;
    } catch (error) {
      this.failed("Cannot load unwind tables of {path}: {error}; using frame pointers there", file, error);
    }
    if (!deltas) {
      // No usable CFI (some hand-written or Go code, or a bad file): follow frame pointers in its code.
      const code = codeRange(segments);
      if (code) deltas = framePointerDeltas(code.start, code.end);
    }
    try {
      if (deltas) {
        const stored = this.#maps.load(bpfId, deltas);
        loaded.whole = deltas;
        this.#markCompleteOnceStored(loaded, stored);
      } else this.#mark(loaded, StackDeltaConstants.LoadedFileComplete);
    } catch (error) {
      this.failed("Cannot store unwind tables of {path}: {error}; using frame pointers there", file, error);
    }
    this.#stats.filesLoaded++;
    this.#timed(started, "Loaded unwind tables of {path}: {count} rows in {ms} ms", {
      path: file.path,
      count: deltas?.count ?? 0,
    });
  }

  /** The Go-specific rows of `elf`, or null when it is no Go binary or its Go tables do not parse. */
  #goRules(elf: ElfFile, file: MappedFile): GoUnwindRules | null {
    try {
      const rules = goUnwindRules(elf);
      if (rules) {
        logger.debug("Go binary {path}: {calls} cgo calls of runtime.asmcgocall marked", {
          path: file.path,
          calls: rules.cgoCalls.length,
        });
      }
      return rules;
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
      logger.warn("Cannot read the Go tables of {path}: {error}; its cgo calls end its stacks", {
        path: file.path,
        error: error.message,
      });
      return null;
    }
  }

  /** Loads the rows of one page of a file loaded page by page; a page that fails stays unloaded. */
  #loadPage(loaded: FileDeltas, byPage: ByPage, page: number): void {
    if (byPage.pages.has(page)) return;
    const started = performance.now();
    const address = `0x${(page * PAGE_SIZE).toString(16)}`;
    byPage.pages.set(page, null);
    let deltas: StackDeltaFile | null = null;
    try {
      // Rows a Go binary's rules add outside the page are left out with the rest.
      const table = withGo(byPage.index.range(page * PAGE_SIZE, (page + 1) * PAGE_SIZE), byPage.go);
      deltas = deltasOfPage(buildStackDeltas(table, this.#maps.registry), page);
      const rowsId = this.#nextRowsId++;
      const stored = this.#maps.load(loaded.bpfId, deltas, rowsId);
      // Kept even if the kernel refuses the rows: unload() then removes the page entries.
      byPage.pages.set(page, { rowsId, deltas });
      stored.catch((error) => this.#failedLate(loaded, error, address));
      this.#stats.pagesLoaded++;
    } catch (error) {
      this.failed(
        "Cannot load unwind tables of {path} at {address}: {error}; using frame pointers there",
        loaded.file,
        error,
        { address },
      );
    }
    this.#timed(started, "Loaded unwind tables of {path} at {address}: {count} rows in {ms} ms", {
      path: loaded.file.path,
      address,
      count: deltas?.count ?? 0,
    });
  }

  /** Replaces the pages of a file loaded page by page with the whole file's rows. */
  #loadWhole(loaded: FileDeltas, byPage: ByPage): void {
    const started = performance.now();
    // Pages go first: a whole load writes every page's entry, which must then not be deleted.
    for (const page of byPage.pages.values()) {
      if (page) this.#maps.unload(loaded.bpfId, page.deltas, page.rowsId);
    }
    loaded.byPage = null;
    let deltas: StackDeltaFile | null = null;
    try {
      deltas = buildStackDeltas(withGo(byPage.index.table(), byPage.go), this.#maps.registry);
      const stored = this.#maps.load(loaded.bpfId, deltas, loaded.bpfId);
      loaded.whole = deltas;
      this.#markCompleteOnceStored(loaded, stored);
    } catch (error) {
      this.failed(
        "Cannot load unwind tables of {path}: {error}; using frame pointers there",
        loaded.file,
        error,
      );
    }
    this.#timed(started, "Loaded the rest of {path}: {count} rows in {ms} ms", {
      path: loaded.file.path,
      count: deltas?.count ?? 0,
    });
  }

  /** Counts a file (or page) whose tables cannot be used, and warns with `message` ({path}, {error}). */
  failed(message: string, file: MappedFile, error: unknown, properties: Record<string, unknown> = {}): void {
    this.#stats.filesFailed++;
    // A full table map fails every file after: one warning says it.
    if (this.#full.reported("A BPF map of the unwind tables", error)) return;
    logger.warn(message, {
      ...properties,
      path: file.path,
      error: error instanceof Error ? error.message : String(error),
    });
  }

  /** Adds the time since `started` to the load time and logs `message` with it ({ms}) at debug level. */
  #timed(started: number, message: string, properties: Record<string, unknown>): void {
    const elapsed = performance.now() - started;
    this.#stats.loadMs += elapsed;
    logger.debug(message, { ...properties, ms: elapsed.toFixed(1) });
  }
}

function withGo(table: UnwindTable, go: GoUnwindRules | null): UnwindTable {
  return go ? withGoRules(table, go) : table;
}

/** Where the executable segments of a file start and end (ELF addresses); null when it has none. */
function codeRange(segments: readonly LoadSegment[]): { start: number; end: number } | null {
  const code = segments.filter((segment) => segment.flags & PF_X);
  if (code.length === 0) return null;
  return {
    start: Math.min(...code.map((segment) => segment.vaddr)),
    end: Math.max(...code.map((segment) => segment.vaddr + segment.memsz)),
  };
}

/** A table that follows frame pointers over [start, end). */
function framePointerTable(start: number, end: number): UnwindTable {
  return {
    length: 2,
    addresses: Float64Array.of(start, end),
    cfaRules: Uint8Array.of(CfaRule.FramePointer, CfaRule.Invalid),
    cfaOffsets: new Int32Array(2),
    fpRules: new Uint8Array(2),
    fpOffsets: new Int32Array(2),
    fdeCount: 0,
    skipped: [],
  };
}

/** A file's deltas as before anything is loaded or marked. */
function unloaded(bpfId: number, file: MappedFile, segments: readonly LoadSegment[]): FileDeltas {
  const tablesDone = segments.length === 0 || !file.readable;
  return { bpfId, file, segments, whole: null, byPage: null, tablesDone, mark: 0 };
}

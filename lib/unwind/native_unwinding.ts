/**
 * Keeps the BPF native unwinder's view of processes up to date: when the process manager (re)reads a
 * process, each executable file it maps gets its stack deltas loaded (once per file, shared by every
 * process, reference-counted, dropped when no process maps it any more) and the process's address
 * ranges are installed in the LPM trie. Deltas are loaded when the unwinder first meets a file's code;
 * a large file's (a C library's thousands of functions), one 64 KiB page at a time, until its code has
 * run in enough pages to be worth loading whole. Files without usable CFI, anonymous memory (JIT code) and the
 * vdso are installed with file id 0, which tells the unwinder to follow frame pointers there.
 *
 * @example
 * ```ts ignore
 * const unwinding = new NativeUnwinding(tracer.object);
 * const processes = new ProcessManager({ listener: unwinding });
 * ```
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import type { BpfMap } from "../bpf/map.ts";
import type { BpfObject } from "../bpf/object.ts";
import { isMapFull, u32Key, u64Key } from "../bpf/map.ts";
import { ElfFile, type LoadSegment } from "../elf/elf_file.ts";
import type { Prefix } from "../lpm/prefixes.ts";
import type { MappedFile, ProcessListener, ResolvedMapping } from "../process/process_manager.ts";
import { mappingBias } from "../process/proc_maps.ts";
import type { Pid } from "../types.ts";
import { StackDeltaConstants, UnwindProgram } from "../../support/types.ts";
import { PidPageMappings } from "./pid_page_mappings.ts";
import { StackDeltaMaps } from "./stack_delta_maps.ts";
import { buildStackDeltas, deltasOfPage, framePointerDeltas, type StackDeltaFile } from "./stack_deltas.ts";
import { indexUnwindTable, type UnwindTableIndex } from "./unwind_table.ts";

const logger = getLogger(["omniprof", "unwind"]);
const PF_X = 1;
const USER_SPACE_END = 2 ** 47;
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
 * interpreter's loop loads whole at its first need: see onFileNeeded.)
 */
const BY_PAGE_MAX_PAGES = 8;
/** Ids of the row arrays of pages loaded alone: above every file id. */
const FIRST_PAGE_ROWS_ID = 2 ** 31;

interface LoadedFile {
  readonly id: number;
  readonly file: MappedFile;
  /** Empty when the file could not be read: its mappings are installed with file id 0 (frame pointers). */
  readonly segments: readonly LoadSegment[];
  /** The deltas in BPF, or null while the file's code has not run yet (or its tables failed). */
  deltas: StackDeltaFile | null;
  /** For a file loaded page by page: its indexed CFI and the pages in BPF (null: failed to load). */
  byPage: { index: UnwindTableIndex; pages: Map<number, LoadedPage | null> } | null;
  /** The tables were loaded (or failed to load): never try again. */
  tablesDone: boolean;
  references: number;
}

interface LoadedPage {
  readonly rowsId: number;
  readonly deltas: StackDeltaFile;
}

interface Installed {
  readonly start: number;
  readonly end: number;
  readonly fileId: number;
  readonly bias: number;
  readonly program: number;
  readonly prefixes: Prefix[];
  readonly file: LoadedFile | null;
}

/** Counters for `check`, the status line and benchmarks. */
export interface NativeUnwindingStats {
  /** Files seen in processes' mappings. */
  filesMapped: number;
  /** Files whose stack deltas were loaded (their code ran), whole or page by page. */
  filesLoaded: number;
  /** Pages loaded alone, of files loaded page by page. */
  pagesLoaded: number;
  filesFailed: number;
  /** Mappings left out of the pid/page trie (it was full, or refused them): they unwind by frame pointers. */
  mappingsNotInstalled: number;
  /** Bytes of BPF map memory for stack deltas. */
  deltaBytes: number;
  /** Entries in the pid/page trie. */
  trieEntries: number;
  /** Updates and deletes of those entries so far. */
  trieWrites: number;
  /** Total ms spent extracting and loading deltas. */
  loadMs: number;
}

/** The native unwinder's process and file state in BPF. */
export class NativeUnwinding implements ProcessListener {
  #deltaMaps: StackDeltaMaps;
  #trie: PidPageMappings;
  #knownPids: BpfMap;
  #loadedFiles: BpfMap;
  #tablesLoaded = 0;
  #pagesLoaded = 0;
  #nextRowsId = FIRST_PAGE_ROWS_ID;
  #files = new Map<string, LoadedFile>();
  #byId = new Map<number, MappedFile>();
  #installed = new Map<Pid, Installed[]>();
  #nextId = 1;
  #filesFailed = 0;
  #mappingsNotInstalled = 0;
  readonly #fullMaps = new Set<string>();
  #loadMs = 0;

  #unwindProgramOf: (file: MappedFile) => number;

  /**
   * `unwindProgramOf` names the unwinder for a file's code (`UnwindProgram.Native` unless an interpreter
   * claimed the file): it goes into the file's trie entries, and the native unwinder checks the
   * interpreter's loop ranges only in files whose entries name another program.
   */
  constructor(object: BpfObject, unwindProgramOf: (file: MappedFile) => number = () => UnwindProgram.Native) {
    this.#unwindProgramOf = unwindProgramOf;
    this.#deltaMaps = new StackDeltaMaps(object);
    this.#trie = new PidPageMappings(
      object.map("pid_page_to_mapping_info"),
      object.map("mapping_generation"),
    );
    this.#knownPids = object.map("known_pids");
    this.#loadedFiles = object.map("loaded_files");
  }

  /**
   * The id BPF knows `file` by (registering it on first use), or null when the file cannot be opened.
   * Interpreter plug-ins key their per-file BPF data by it.
   */
  idOf(file: MappedFile): number | null {
    return file.kind === "anonymous" ? null : this.#register(file)?.id ?? null;
  }

  /** The file behind a file id found in a trace. */
  fileById(id: number): MappedFile | undefined {
    return this.#byId.get(id);
  }

  get stats(): NativeUnwindingStats {
    return {
      filesMapped: this.#files.size,
      filesLoaded: this.#tablesLoaded,
      pagesLoaded: this.#pagesLoaded,
      filesFailed: this.#filesFailed,
      mappingsNotInstalled: this.#mappingsNotInstalled,
      deltaBytes: this.#deltaMaps.bytes,
      trieEntries: this.#trie.entries,
      trieWrites: this.#trie.writes,
      loadMs: this.#loadMs,
    };
  }

  /**
   * Brings the trie's view of `pid` to `mappings`. A process is read again whenever the unwinder meets an
   * address it does not know (a new library, a runtime's new code area), so only what changed is written:
   * rewriting every mapping cost a Deno process about 2,000 map updates and deletes per reading.
   */
  onMappings(pid: Pid, mappings: readonly ResolvedMapping[]): void {
    const previous = new Map<string, Installed>();
    for (const entry of this.#installed.get(pid) ?? []) previous.set(`${entry.start}:${entry.end}`, entry);
    const next: Installed[] = [];
    const added: { entry: Omit<Installed, "prefixes">; path: string }[] = [];
    for (const mapping of mappings) {
      // [vsyscall] sits in kernel space (and is never unwound through).
      if (mapping.end > USER_SPACE_END) continue;
      const loaded = mapping.file.kind !== "anonymous" ? this.#register(mapping.file) : null;
      let fileId = 0;
      let bias = 0;
      let program: number = UnwindProgram.Native;
      if (loaded && loaded.segments.length > 0) {
        const segmentBias = mappingBias(mapping, loaded.segments);
        if (segmentBias !== null && segmentBias >= 0) {
          fileId = loaded.id;
          bias = segmentBias;
          program = this.#unwindProgramOf(loaded.file);
        }
      }
      const key = `${mapping.start}:${mapping.end}`;
      const old = previous.get(key);
      if (
        old && old.file === loaded && old.fileId === fileId && old.bias === bias && old.program === program
      ) {
        // Unchanged: its prefixes and its reference to the file stay as they are.
        previous.delete(key);
        next.push(old);
        continue;
      }
      if (loaded) loaded.references++;
      added.push({
        entry: { start: mapping.start, end: mapping.end, fileId, bias, program, file: loaded },
        path: mapping.path,
      });
    }
    // What vanished or changed goes first: a changed mapping's new prefixes may reuse its old keys.
    this.#remove(pid, [...previous.values()]);
    for (const { entry, path } of added) {
      try {
        const prefixes = this.#trie.install(
          pid,
          entry.start,
          entry.end,
          entry.fileId,
          entry.bias,
          entry.program,
        );
        next.push({ ...entry, prefixes });
      } catch (error) {
        if (!this.#reportedFull("BPF map pid_page_to_mapping_info", error)) {
          logger.warn("Cannot install mapping {path} of {pid}: {error}", { path, pid, error: String(error) });
        }
        this.#mappingsNotInstalled++;
        if (entry.file) this.#release(entry.file);
      }
    }
    this.#installed.set(pid, next);
    try {
      this.#knownPids.update(u32Key(pid), new Uint8Array([1]));
    } catch (error) {
      // Unmarked, BPF reports the process again now and then, and it is read again: slower, not wrong.
      if (!this.#reportedFull("BPF map known_pids", error)) throw error;
    }
  }

  /**
   * Whether `error` is a kernel map refusing an update because it is full; warns once per map. Its
   * processes or mappings then unwind by frame pointers, and the session goes on.
   */
  #reportedFull(map: string, error: unknown): boolean {
    if (!isMapFull(error)) return false;
    if (!this.#fullMaps.has(map)) {
      this.#fullMaps.add(map);
      logger.warn("{map} is full: samples of what does not fit unwind by frame pointers", { map });
    }
    return true;
  }

  /**
   * Loads the whole of `file`, of a program the user named, before its code runs: its first samples
   * unwind completely, even in a large library.
   */
  onPreload(file: MappedFile): void {
    // Kept for the whole session: one extra reference that is never released.
    const loaded = file.kind !== "anonymous" ? this.#register(file) : null;
    if (!loaded) return;
    loaded.references++;
    this.#loadTables(loaded, true);
    if (loaded.byPage) this.#loadWhole(loaded, loaded.byPage);
  }

  /**
   * The unwinder met code of file `id` (at ELF address `address`) before its deltas were loaded: load
   * them now, or the page holding `address` for a file loaded page by page. A file that holds an
   * interpreter's loop loads whole at once: its stacks run through many pages of it (the loop, calls,
   * object code), so paging would end in a whole load anyway, after paying for the pages first.
   */
  onFileNeeded(id: number, address: number): void {
    const file = this.#byId.get(id);
    const loaded = file ? this.#files.get(file.key) : undefined;
    if (!loaded || loaded.id !== id) return;
    this.#loadTables(loaded, this.#unwindProgramOf(loaded.file) !== UnwindProgram.Native);
    const byPage = loaded.byPage;
    if (!byPage) return;
    if (byPage.pages.size < BY_PAGE_MAX_PAGES) {
      this.#loadPage(loaded, byPage, Math.floor(address / PAGE_SIZE));
    } else this.#loadWhole(loaded, byPage);
  }

  onExit(pid: Pid): void {
    this.#remove(pid, this.#installed.get(pid) ?? []);
    this.#installed.delete(pid);
    this.#knownPids.delete(u32Key(pid));
  }

  #remove(pid: Pid, installed: readonly Installed[]): void {
    for (const entry of installed) {
      this.#trie.remove(pid, entry.prefixes);
      if (entry.file) this.#release(entry.file);
    }
  }

  #release(loaded: LoadedFile): void {
    if (--loaded.references > 0) return;
    if (loaded.deltas) this.#deltaMaps.unload(loaded.id, loaded.deltas);
    for (const page of loaded.byPage?.pages.values() ?? []) {
      if (page) this.#deltaMaps.unload(loaded.id, page.deltas, page.rowsId);
    }
    if (loaded.tablesDone) this.#loadedFiles.delete(u64Key(loaded.id));
    this.#files.delete(loaded.file.key);
    // The id stays resolvable: traces already drained may still name it.
  }

  /**
   * Gives a file an id and reads its program headers (for the bias of its mappings); the stack deltas
   * come later, when its code first runs (onFileNeeded), since most mapped libraries never run while a
   * profile is taken.
   */
  #register(file: MappedFile): LoadedFile | null {
    const known = this.#files.get(file.key);
    if (known) return known;
    if (!file.readable) return null;
    let segments: readonly LoadSegment[] = [];
    try {
      using elf = ElfFile.fromFile(file.open(), file.path);
      segments = elf.loadSegments;
    } catch (error) {
      this.#failed("Cannot read {path}: {error}; using frame pointers there", file, error);
    }
    const loaded: LoadedFile = {
      id: this.#nextId++,
      file,
      segments,
      deltas: null,
      byPage: null,
      tablesDone: segments.length === 0,
      references: 0,
    };
    this.#files.set(file.key, loaded);
    this.#byId.set(loaded.id, file);
    return loaded;
  }

  #loadTables(loaded: LoadedFile, whole = false): void {
    if (loaded.tablesDone || !loaded.file.readable) return;
    loaded.tablesDone = true;
    const started = performance.now();
    const { id, file, segments } = loaded;
    let deltas: StackDeltaFile | null = null;
    try {
      using elf = ElfFile.fromFile(file.open(), file.path);
      // Read whole, the index walks every FDE; else only .eh_frame_hdr's table until pages are asked for.
      const index = indexUnwindTable(elf, { lazy: !whole });
      if (!whole && index.fdeCount >= BY_PAGE_MIN_FDES) {
        loaded.byPage = { index, pages: new Map() };
        this.#loadedFiles.update(u64Key(id), new Uint8Array([StackDeltaConstants.LoadedFileByPage]));
        this.#tablesLoaded++;
        this.#timed(
          started,
          "Indexed the unwind tables of {path}: {count} FDEs, to load page by page in {ms} ms",
          {
            path: file.path,
            count: index.fdeCount,
          },
        );
        return;
      }
      const table = index.table();
      deltas = table.length > 0 ? buildStackDeltas(table, this.#deltaMaps.registry) : null;
    } catch (error) {
      this.#failed("Cannot load unwind tables of {path}: {error}; using frame pointers there", file, error);
    }
    if (!deltas) {
      // No usable CFI (some hand-written or Go code, or a bad file): follow frame pointers in its code.
      const code = segments.filter((segment) => segment.flags & PF_X);
      if (code.length > 0) {
        const start = Math.min(...code.map((segment) => segment.vaddr));
        const end = Math.max(...code.map((segment) => segment.vaddr + segment.memsz));
        deltas = framePointerDeltas(start, end);
      }
    }
    try {
      if (deltas) this.#deltaMaps.load(id, deltas);
      loaded.deltas = deltas;
      // Only now may the unwinder stop at an address without a delta; until then it uses frame pointers.
      this.#loadedFiles.update(u64Key(id), new Uint8Array([StackDeltaConstants.LoadedFileComplete]));
    } catch (error) {
      this.#failed("Cannot store unwind tables of {path}: {error}; using frame pointers there", file, error);
    }
    this.#tablesLoaded++;
    this.#timed(started, "Loaded unwind tables of {path}: {count} rows in {ms} ms", {
      path: file.path,
      count: deltas?.count ?? 0,
    });
  }

  /** Loads the rows of one page of a file loaded page by page; a page that fails stays unloaded. */
  #loadPage(loaded: LoadedFile, byPage: NonNullable<LoadedFile["byPage"]>, page: number): void {
    if (byPage.pages.has(page)) return;
    const started = performance.now();
    const address = `0x${(page * PAGE_SIZE).toString(16)}`;
    byPage.pages.set(page, null);
    let deltas: StackDeltaFile | null = null;
    try {
      const table = byPage.index.range(page * PAGE_SIZE, (page + 1) * PAGE_SIZE);
      deltas = deltasOfPage(buildStackDeltas(table, this.#deltaMaps.registry), page);
      const rowsId = this.#nextRowsId++;
      this.#deltaMaps.load(loaded.id, deltas, rowsId);
      byPage.pages.set(page, { rowsId, deltas });
      this.#pagesLoaded++;
    } catch (error) {
      this.#failed(
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
  #loadWhole(loaded: LoadedFile, byPage: NonNullable<LoadedFile["byPage"]>): void {
    const started = performance.now();
    // Pages go first: a whole load writes every page's entry, which must then not be deleted.
    for (const page of byPage.pages.values()) {
      if (page) this.#deltaMaps.unload(loaded.id, page.deltas, page.rowsId);
    }
    loaded.byPage = null;
    let deltas: StackDeltaFile | null = null;
    try {
      deltas = buildStackDeltas(byPage.index.table(), this.#deltaMaps.registry);
      this.#deltaMaps.load(loaded.id, deltas, loaded.id);
      loaded.deltas = deltas;
      this.#loadedFiles.update(u64Key(loaded.id), new Uint8Array([StackDeltaConstants.LoadedFileComplete]));
    } catch (error) {
      this.#failed(
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

  /** Counts a file (or page) whose tables cannot be used, and warns with `message`. */
  #failed(message: string, file: MappedFile, error: unknown, properties: Record<string, unknown> = {}): void {
    this.#filesFailed++;
    // A full table map fails every file after: one warning says it.
    if (this.#reportedFull("A BPF map of the unwind tables", error)) return;
    logger.warn(message, {
      ...properties,
      path: file.path,
      error: error instanceof Error ? error.message : String(error),
    });
  }

  /** Adds the time since `started` to the load time and logs `message` with it ({ms}) at debug level. */
  #timed(started: number, message: string, properties: Record<string, unknown>): void {
    const elapsed = performance.now() - started;
    this.#loadMs += elapsed;
    logger.debug(message, { ...properties, ms: elapsed.toFixed(1) });
  }
}

/**
 * Host-side symbolization of native frames: (binary, address) to function name through the ELF symbol
 * tables, using the separate debug file's `.symtab` when the binary is stripped. Go code is named from
 * the binary's `.gopclntab` first, which Go keeps in stripped binaries and which also gives source files,
 * lines and the calls inlined at an address ({@linkcode NativeSymbolizer.frames}). A binary is a
 * {@linkcode SymbolFile}: a key that names the very file (its device and inode for a mapped file, so
 * another file later at the same path is not taken for it), a way to open it, and the process's root
 * for its debug file; a plain path also works, for files the caller names itself. Each file is opened
 * once, parsed into a {@linkcode SymbolTable} and closed again right away, so no descriptor stays open;
 * parsed tables are kept in a bounded LRU cache. A bad or unreadable file never throws: its frames
 * resolve to null and the reason is logged once per file.
 *
 * @example
 * ```ts
 * import { formatUnknownFrame, NativeSymbolizer } from "./native.ts";
 * import type { FileOffset } from "../types.ts";
 * using symbolizer = new NativeSymbolizer();
 * const offset = 0x2a40 as FileOffset;
 * const frame = symbolizer.symbolizeFileOffset("/usr/bin/bash", offset);
 * console.log(frame?.functionName ?? formatUnknownFrame("/usr/bin/bash", offset));
 * ```
 *
 * @module
 */

import { getLogger } from "../log/logger.ts";
import { ElfFile, type ElfFileOptions, type LoadSegment } from "../elf/elf_file.ts";
import { baseName } from "../sys/path.ts";
import { RegularFile } from "../sys/regular_file.ts";
import type { RootDirectory } from "../sys/root_directory.ts";
import type { Address, FileOffset } from "../types.ts";
import { findDebugFile } from "./debug_file.ts";
import { demangle } from "./demangle.ts";
import { FunctionBounds, type FunctionRange } from "./function_bounds.ts";
import { GoSymbols } from "./go/go_symbols.ts";
import { SymbolTable, type SymbolTableSource } from "./symbol_table.ts";

/** A binary to symbolize. The process manager's mapped files are ones. */
export interface SymbolFile {
  /** Names the file for the cache: its identity, not a path that may name another file later. */
  readonly key: string;
  /** The path as the process sees it (messages; debug links are looked for beside it). */
  readonly path: string;
  /** Where the process sees its files, looked in first for the debug file; null: the host's root. */
  readonly root: RootDirectory | null;
  /** Opens the file; each call returns a new handle that the caller closes. */
  open(): RegularFile;
}

/** A resolved native frame. */
export interface NativeSymbol {
  /** Function name, demangled unless the symbolizer was built with `demangle: false`. */
  functionName: string;
  /** Bytes from the function's start to the address. */
  offset: number;
}

/**
 * One source-level frame of a native address. An address in code the compiler inlined stands for several:
 * the inlined calls innermost first, then the function that holds the code.
 */
export interface NativeFrame {
  /** Function name, demangled as for {@linkcode NativeSymbol}. */
  functionName: string;
  /** Source file, "" when unknown (ELF symbols give none). */
  sourceFile: string;
  /** Source line, 0 when unknown. */
  line: number;
}

/** Cache bounds and lookup settings. */
export interface NativeSymbolizerOptions {
  /** Most files whose parsed tables are kept. Default 1024. */
  maxCachedFiles?: number;
  /** Most bytes of parsed tables kept (approximate). Default 1 GiB. */
  maxCachedBytes?: number;
  /** Global debug directories, in the process's root and then the host's. Default `["/usr/lib/debug"]`. */
  debugDirs?: readonly string[];
  /** Largest section read from a file, see {@linkcode ElfFileOptions}. Default 256 MiB. */
  maxSectionBytes?: number;
  /** Whether to demangle C++ and Rust names. Default true. */
  demangle?: boolean;
}

/** Counters for reporting. */
export interface NativeSymbolizerStats {
  /** Files parsed (including re-parses after eviction). */
  filesLoaded: number;
  /** Files that could not be opened or parsed. */
  filesFailed: number;
  /** Files parsed whose symbols came from a separate debug file. */
  debugFilesUsed: number;
  /** Files parsed whose Go code is named from their `.gopclntab`. */
  goFiles: number;
  /** Parsed files dropped from the cache to respect its bounds. */
  evictions: number;
}

/** What the cache holds for one file. */
interface FileEntry {
  symbols: SymbolTable;
  /** The Go symbols of a Go binary, null for other files (or a Go table that does not parse). */
  go: GoSymbols | null;
  loadSegments: readonly LoadSegment[];
  buildId: string;
  /** Why the file could not be read, or "" when it was read. */
  error: string;
  bytes: number;
  /** The file's FDEs, read at the first address no symbol covers; null when it has none. */
  bounds?: FunctionBounds | null;
}

const logger = getLogger(["omniprof", "symbolize"]);
/** Bounds the demangled-name cache; it is cleared when full (hot names come back at once). */
const MAX_DEMANGLED_NAMES = 65_536;
/** Bounds the set of paths already reported, so a stream of new bad paths cannot grow it without end. */
const MAX_REPORTED_PATHS = 10_000;

/**
 * Formats a frame that could not be symbolized: `[<basename>+0x<hex address>]`. Profiles pass the ELF
 * address where the frame's function starts when the file's unwind entries give it
 * ({@linkcode NativeSymbolizer.functionAt}), so that one unnamed function is one frame; else the frame's
 * own ELF address, or its file offset in a file that cannot be read.
 *
 * @example
 * ```ts
 * formatUnknownFrame("/usr/lib/libc.so.6", 0x2a1ca); // "[libc.so.6+0x2a1ca]"
 * ```
 */
export function formatUnknownFrame(path: string, address: Address | FileOffset | number): string {
  return `[${baseName(path)}+0x${address.toString(16)}]`;
}

/** Resolves native addresses to function names, caching parsed symbol tables per file. */
export class NativeSymbolizer implements Disposable {
  readonly #maxFiles: number;
  readonly #maxBytes: number;
  readonly #debugDirs: readonly string[] | undefined;
  /** How every file this symbolizer reads is opened. */
  readonly #elfOptions: ElfFileOptions;
  readonly #demangle: boolean;
  readonly #cache = new Map<string, FileEntry>();
  readonly #reported = new Set<string>();
  readonly #demangleCache = new Map<string, string>();
  #cachedBytes = 0;
  #closed = false;
  readonly #stats: NativeSymbolizerStats = {
    filesLoaded: 0,
    filesFailed: 0,
    debugFilesUsed: 0,
    goFiles: 0,
    evictions: 0,
  };

  constructor(options: NativeSymbolizerOptions = {}) {
    this.#maxFiles = Math.max(1, options.maxCachedFiles ?? 1024);
    this.#maxBytes = options.maxCachedBytes ?? 1024 * 1024 * 1024;
    this.#debugDirs = options.debugDirs;
    this.#elfOptions = options.maxSectionBytes === undefined
      ? {}
      : { maxSectionBytes: options.maxSectionBytes };
    this.#demangle = options.demangle ?? true;
  }

  /** A snapshot of the counters. */
  get stats(): NativeSymbolizerStats {
    return { ...this.#stats };
  }

  /** The number of files whose parse result is cached. */
  get cachedFiles(): number {
    return this.#cache.size;
  }

  /**
   * Resolves an ELF virtual address of `file` (a path names a file of the host). Returns null when the
   * file has no symbol covering the address or cannot be read.
   */
  symbolize(file: SymbolFile | string, vaddr: Address): NativeSymbol | null {
    const entry = this.#entry(file);
    const goFunction = entry.go?.functionAt(vaddr) ?? null;
    if (goFunction !== null) return { functionName: goFunction.name, offset: vaddr - goFunction.entry };
    const match = entry.symbols.lookup(vaddr);
    if (match === null) return null;
    // .symtab names of versioned definitions carry the version (`__libc_start_main@@GLIBC_2.34`).
    const at = match.name.indexOf("@");
    const name = at > 0 ? match.name.slice(0, at) : match.name;
    return { functionName: this.#demangle ? this.#demangled(name) : name, offset: match.offset };
  }

  /**
   * The source frames of ELF virtual address `vaddr` of `file`, innermost first: from the `.gopclntab`
   * of a Go binary, with files, lines and inlined calls; else the one function its ELF symbols name,
   * without file or line. Null when neither names it.
   */
  frames(file: SymbolFile | string, vaddr: Address): NativeFrame[] | null {
    const frames = this.#entry(file).go?.frames(vaddr) ?? null;
    if (frames !== null) return frames;
    const symbol = this.symbolize(file, vaddr);
    return symbol === null ? null : [{ functionName: symbol.functionName, sourceFile: "", line: 0 }];
  }

  /**
   * Resolves a file offset (what a mapping gives: address - mapping start + mapping offset) by converting
   * it to a virtual address through the file's PT_LOAD segments.
   */
  symbolizeFileOffset(file: SymbolFile | string, offset: FileOffset): NativeSymbol | null {
    const vaddr = this.fileOffsetToVaddr(file, offset);
    return vaddr === null ? null : this.symbolize(file, vaddr);
  }

  /** Converts a file offset to an ELF virtual address of the file; null when no PT_LOAD maps it. */
  fileOffsetToVaddr(file: SymbolFile | string, offset: FileOffset): Address | null {
    for (const seg of this.#entry(file).loadSegments) {
      if (offset >= seg.offset && offset - seg.offset < seg.filesz) {
        return (seg.vaddr + offset - seg.offset) as Address;
      }
    }
    return null;
  }

  /**
   * The function holding ELF virtual address `vaddr` as the file's unwind entries (FDEs) give it, for an
   * address no symbol covers; null when no FDE covers it or the file cannot be read.
   */
  functionAt(file: SymbolFile | string, vaddr: Address): FunctionRange | null {
    const source = symbolFileOf(file);
    const entry = this.#entry(source);
    if (entry.error !== "") return null;
    if (entry.bounds === undefined) {
      entry.bounds = null;
      try {
        using elf = ElfFile.fromFile(source.open(), source.path, this.#elfOptions);
        entry.bounds = FunctionBounds.read(elf);
      } catch (error) {
        this.#report(source.key, source.path, error);
      }
      const bytes = entry.bounds?.byteSize ?? 0;
      entry.bytes += bytes;
      if (this.#cache.get(source.key) === entry) this.#cachedBytes += bytes;
    }
    try {
      return entry.bounds?.find(vaddr) ?? null;
    } catch (error) {
      // One FDE that does not parse names only its own frames by address.
      if (error instanceof RangeError) return null;
      throw error;
    }
  }

  /** The GNU build ID of the file (lowercase hex), "" when it has none or cannot be read. */
  buildId(file: SymbolFile | string): string {
    return this.#entry(file).buildId;
  }

  /** Why the file could not be read, or "" when it was (reading it if it is not cached). */
  loadError(file: SymbolFile | string): string {
    return this.#entry(file).error;
  }

  /** Drops the cached parse of a file, e.g. after it was replaced on disk. */
  forget(file: SymbolFile | string): void {
    const key = symbolFileOf(file).key;
    const entry = this.#cache.get(key);
    if (entry === undefined) return;
    this.#cache.delete(key);
    this.#cachedBytes -= entry.bytes;
  }

  /** Drops all cached tables. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#cache.clear();
    this.#demangleCache.clear();
    this.#cachedBytes = 0;
  }

  [Symbol.dispose](): void {
    this.close();
  }

  #entry(file: SymbolFile | string): FileEntry {
    const source = symbolFileOf(file);
    const key = source.key;
    const cached = this.#cache.get(key);
    if (cached !== undefined) {
      // Re-insert to mark as most recently used.
      this.#cache.delete(key);
      this.#cache.set(key, cached);
      return cached;
    }
    const entry = this.#load(source);
    if (!this.#closed) {
      this.#cache.set(key, entry);
      this.#cachedBytes += entry.bytes;
      this.#evict();
    }
    return entry;
  }

  #load(file: SymbolFile): FileEntry {
    this.#stats.filesLoaded++;
    let elf: ElfFile | undefined;
    let debug: ElfFile | null = null;
    try {
      const handle = file.open();
      const binary = handle.identity;
      elf = ElfFile.fromFile(handle, file.path, this.#elfOptions);
      const sources: SymbolTableSource[] = elf.symbolSources();
      if (!sources.some((s) => s.kind === "symtab")) {
        debug = findDebugFile(elf, file.path, {
          root: file.root,
          binary,
          elfOptions: this.#elfOptions,
          ...(this.#debugDirs === undefined ? {} : { debugDirs: this.#debugDirs }),
        });
        if (debug !== null) {
          try {
            const extra = debug.symbolSources().filter((s) => s.kind === "symtab");
            if (extra.length > 0) this.#stats.debugFilesUsed++;
            sources.unshift(...extra);
          } catch (error) {
            // The binary's own .dynsym still works without its debug file.
            this.#report(`${file.key} debug`, debug.name, error);
          }
        }
      }
      const symbols = SymbolTable.build(sources);
      const buildId = elf.buildId();
      const go = this.#goSymbols(elf, file);
      return {
        symbols,
        go,
        loadSegments: elf.loadSegments,
        buildId,
        error: "",
        bytes: symbols.byteSize + (go?.byteSize ?? 0) + 256,
      };
    } catch (error) {
      this.#stats.filesFailed++;
      this.#report(file.key, file.path, error);
      return {
        symbols: SymbolTable.empty,
        go: null,
        loadSegments: [],
        buildId: "",
        error: describe(error),
        bytes: 256,
      };
    } finally {
      elf?.close();
      debug?.close();
    }
  }

  /** The Go symbols of `elf`; a Go table that does not parse leaves the ELF symbols to name its code. */
  #goSymbols(elf: ElfFile, file: SymbolFile): GoSymbols | null {
    try {
      const go = GoSymbols.read(elf);
      if (go !== null) this.#stats.goFiles++;
      return go;
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
      this.#report(`${file.key} go`, file.path, error);
      return null;
    }
  }

  /** Demangling costs tens of microseconds per C++ name, a lookup under one: remember recent results. */
  #demangled(name: string): string {
    let out = this.#demangleCache.get(name);
    if (out === undefined) {
      out = demangle(name);
      if (this.#demangleCache.size >= MAX_DEMANGLED_NAMES) this.#demangleCache.clear();
      this.#demangleCache.set(name, out);
    }
    return out;
  }

  /** Logs why `path` (the file `key` names) cannot be read, once per file. */
  #report(key: string, path: string, error: unknown): void {
    if (this.#reported.has(key)) return;
    if (this.#reported.size >= MAX_REPORTED_PATHS) this.#reported.clear();
    this.#reported.add(key);
    logger.warn("Cannot symbolize {path}: {reason}", { path, reason: describe(error) });
  }

  #evict(): void {
    for (const [key, entry] of this.#cache) {
      if (this.#cache.size <= this.#maxFiles && this.#cachedBytes <= this.#maxBytes) return;
      // Keep the newest entry even when it alone exceeds the byte bound: it is being used.
      if (this.#cache.size === 1) return;
      this.#cache.delete(key);
      this.#cachedBytes -= entry.bytes;
      this.#stats.evictions++;
    }
  }
}

/** A path given by the caller: a file of the host, cached under its path. */
function symbolFileOf(file: SymbolFile | string): SymbolFile {
  if (typeof file !== "string") return file;
  return { key: `path:${file}`, path: file, root: null, open: () => RegularFile.open(file) };
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

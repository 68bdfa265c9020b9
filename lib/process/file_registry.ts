/**
 * The one owner of file state: every file that code runs from, once by content, with all that is known of
 * it: its content identity ({@linkcode FileId}), the id BPF knows it by, its program headers, its stack
 * deltas in BPF, each runtime's per-file data (the loader's {@linkcode Data}, and the interpreter loop
 * declared to BPF), and how many mappings of live processes use it.
 *
 * A file is opened once per (device, inode), through the process that maps it (file_handles.ts), and
 * identified by content: equal files (another path, another container) are one file, with one BPF id, one
 * set of stack deltas and one claim by a runtime. A file's BPF id is given once and kept for the session,
 * so a trace names the same file whenever it was taken. Each mapping the process manager installs takes a
 * reference to its file; when the last one goes, the file waits a short grace period (a command run in a
 * loop maps the same programs again within milliseconds) and is then unloaded: its deltas, its interpreter
 * loop and its runtime data leave BPF. A file that comes back loads again under the same id.
 *
 * A file that cannot be read is counted by reason in `stats.filesRefused` and has no state: its code
 * unwinds by frame pointers and its frames stay unsymbolized.
 *
 * @example
 * ```ts ignore
 * import { FileRegistry } from "./file_registry.ts";
 * using files = new FileRegistry({ object, runtimes: RUNTIMES });
 * const file = files.fileOf(read, mapping);
 * const use = files.acquire(file); // { bpfId, segments, program } for the trie
 * files.release(file);
 * files.sweep(); // now and then: unloads files nobody mapped for the grace period
 * ```
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import type { BpfObject } from "../bpf/object.ts";
import type { UnwindProgramTable } from "../bpf/unwind_programs.ts";
import type { LoadSegment } from "../elf/elf_file.ts";
import {
  type AddressRange,
  FlagsRequiredError,
  type FlagsRequirement,
  LoaderInfo,
} from "../interpreter/interpreter.ts";
import { InterpreterOffsets } from "../interpreter/interpreter_offsets.ts";
import type { Runtime, RuntimeClaim } from "../interpreter/runtime.ts";
import { type ClaimedFile, claimFile } from "../interpreter/runtime_claims.ts";
import { type FileRefusal, FileRefusedError, formatIdentity } from "../sys/regular_file.ts";
import type { FileId, Pid } from "../types.ts";
import {
  type FileDeltas,
  RuleLookup,
  StackDeltaLoader,
  type StackDeltaStats,
} from "../unwind/stack_delta_loader.ts";
import type { ResolvedRule } from "../unwind/stack_deltas.ts";
import { UnwindProgram } from "../../support/types.ts";
import { fileIdOf } from "./file_id.ts";
import { FileHandles, type OpenedFile, type ProcessRootRead } from "./file_handles.ts";
import { type MappedFile, type ResolvedMapping, unreadableFile } from "./mapped_file.ts";
import { mappingIdentity } from "./mapped_file_opener.ts";
import { mappingBias, type ProcMapping } from "./proc_maps.ts";

const logger = getLogger(["omniprof", "process"]);

/**
 * How long a file nobody maps keeps its state: a shell loop or a build starts the same programs again
 * within milliseconds, and reloading their tables each time costs more than keeping them; five seconds
 * later a file that is really gone gives its BPF memory back.
 */
const GRACE_MS = 5000;

/** What an installed mapping needs of its file. */
export interface FileUse {
  /** The id BPF knows the file by. */
  readonly bpfId: number;
  /** Its program headers (for the bias of its mappings); empty when they cannot be read. */
  readonly segments: readonly LoadSegment[];
  /** The unwind program for its code: a runtime's when the file holds its interpreter loop. */
  readonly program: number;
  /**
   * The unwind program for the anonymous executable memory of a process that maps the file: the program
   * of the runtime that claimed it when that runtime compiles code there (a JIT), else null.
   */
  readonly jitProgram: number | null;
}

/** Counters reported with the session's metrics. */
export interface FileRegistryStats extends StackDeltaStats {
  /** Distinct mapped files opened. */
  filesOpened: number;
  /** Distinct mapped files not read, by reason: their frames stay unsymbolized. */
  filesRefused: Record<FileRefusal, number>;
  /** Files with state now: mapped by a process, or within their grace period. */
  filesMapped: number;
  /** Files a runtime claimed. */
  filesClaimed: number;
  /** Files a runtime recognised but could not support (logged once each). */
  claimsRefused: number;
  /** Files a runtime recognised whose frames only flags of its processes can have named (told once). */
  claimsNeedingFlags: number;
}

/** Options, mainly for tests. */
export interface FileRegistryOptions {
  /** The loaded BPF object whose maps hold file state; without one, only the host side is kept. */
  object?: BpfObject | null;
  /**
   * The object's tail-call table, which loads a runtime's unwinder when the first file of the runtime is
   * declared to BPF; without it, every program is taken to be in its slot already.
   */
  unwinders?: Pick<UnwindProgramTable, "require"> | null;
  /** The runtimes whose loaders are offered each file (none by default). */
  runtimes?: readonly Runtime[];
  /** Where procfs is mounted. */
  procRoot?: string;
  /** How many files to keep open at most. */
  maxPinnedFiles?: number;
  /** How long a file nobody maps keeps its state before it is unloaded. */
  graceMs?: number;
}

/** What a file is loaded with while processes map it. */
interface Loaded {
  /** Its stack deltas (null without BPF). */
  readonly deltas: FileDeltas | null;
  claim: RuntimeClaim | null;
  /** The unwind program of its interpreter loop, or Native. */
  program: number;
}

/** Everything known of one file with content identity. */
interface FileState {
  readonly file: MappedFile & { readonly fileId: FileId };
  readonly bpfId: number;
  /** Read at the first use; empty when the ELF cannot be read (its code unwinds by frame pointers). */
  segments: readonly LoadSegment[] | null;
  /** No runtime claimed it: a fact of its content, not offered to the loaders again after a reload. */
  unclaimed: boolean;
  /** A runtime recognised it but names its frames only in processes started with these flags. */
  flagsRequired: FlagsRequirement | null;
  references: number;
  /** performance.now() when the last reference went, or -1 while referenced (or never). */
  idleSince: number;
  loaded: Loaded | null;
}

/** The session's files. */
export class FileRegistry implements Disposable {
  readonly #handles: FileHandles;
  readonly #deltaLoader: StackDeltaLoader | null;
  readonly #offsets: InterpreterOffsets | null;
  readonly #unwinders: Pick<UnwindProgramTable, "require"> | null;
  readonly #runtimes: readonly Runtime[];
  readonly #graceMs: number;
  /** By the key of a mapping ("major:minor inode", or a pseudo name): what was made of it. */
  #byMapping = new Map<string, MappedFile>();
  #byContent = new Map<FileId, FileState>();
  /** Kept for the session: traces already drained may name a file after it was unloaded. */
  #byBpfId = new Map<number, FileState>();
  #nextBpfId = 1;
  #idle = new Set<FileState>();
  #stats: Omit<FileRegistryStats, keyof StackDeltaStats | "filesMapped"> = {
    filesOpened: 0,
    filesRefused: { missing: 0, denied: 0, "not-regular": 0, replaced: 0, failed: 0 },
    filesClaimed: 0,
    claimsRefused: 0,
    claimsNeedingFlags: 0,
  };

  constructor(options: FileRegistryOptions = {}) {
    this.#handles = new FileHandles({ procRoot: options.procRoot, maxPinnedFiles: options.maxPinnedFiles });
    const object = options.object ?? null;
    this.#deltaLoader = object === null ? null : new StackDeltaLoader(object);
    this.#offsets = object === null ? null : new InterpreterOffsets(object.map("interpreter_offsets"));
    this.#unwinders = options.unwinders ?? null;
    this.#runtimes = options.runtimes ?? [];
    this.#graceMs = options.graceMs ?? GRACE_MS;
  }

  get stats(): FileRegistryStats {
    let filesMapped = 0;
    for (const state of this.#byContent.values()) if (state.loaded !== null) filesMapped++;
    const deltas = this.#deltaLoader?.stats ??
      { filesLoaded: 0, pagesLoaded: 0, filesFailed: 0, deltaBytes: 0, loadMs: 0 };
    return {
      ...deltas,
      ...this.#stats,
      filesRefused: { ...this.#stats.filesRefused },
      filesMapped,
    };
  }

  /** Every file seen so far. */
  files(): IterableIterator<MappedFile> {
    // Copies of one file under several (device, inode) keys are one object.
    return new Set(this.#byMapping.values()).values();
  }

  /** Begins reading the files of process `pid`'s mappings; dispose of it when they are done. */
  readRoot(pid: Pid): ProcessRootRead {
    return this.#handles.readRoot(pid);
  }

  /** The file behind `mapping` of the process of `read`: opened and identified at its first sight. */
  fileOf(read: ProcessRootRead, mapping: ProcMapping): MappedFile {
    const identity = mapping.path.startsWith("/") ? mappingIdentity(mapping) : null;
    const key = identity !== null ? formatIdentity(identity) : mapping.path || "[anonymous]";
    const known = this.#byMapping.get(key);
    if (known) return known;
    let file: MappedFile;
    if (identity !== null) {
      try {
        file = this.#adopt(key, mapping.path, "file", this.#handles.openMapping(read, mapping));
      } catch (error) {
        if (!(error instanceof FileRefusedError)) throw error;
        file = this.#refused(key, mapping.path, error);
        // Its process had exited: a live one mapping the same file may still show it.
        if (read.directory === null) return file;
      }
    } else if (mapping.path === "[vdso]") {
      file = this.#vdso();
    } else {
      file = unreadableFile(key, "anonymous", mapping.path || "[anonymous]", null);
    }
    this.#byMapping.set(key, file);
    return file;
  }

  /**
   * The file at `path`, before any process maps it (the command `record` is about to start); null when
   * it cannot be read.
   */
  openPath(path: string): MappedFile | null {
    let opened: OpenedFile & { readonly path: string };
    try {
      opened = this.#handles.openPath(path);
    } catch {
      return null;
    }
    const key = formatIdentity(opened.handle.identity);
    const known = this.#byMapping.get(key);
    if (known) {
      opened.handle.close();
      return known;
    }
    const file = this.#adopt(key, opened.path, "file", opened);
    this.#byMapping.set(key, file);
    return file.readable ? file : null;
  }

  /**
   * Takes a reference to `file` for one mapping of a process, loading the file's state at the first one
   * (or after it was unloaded). Null when the file has no state (anonymous memory, unreadable files).
   */
  acquire(file: MappedFile): FileUse | null {
    const state = this.#stateOf(file);
    if (state === null) return null;
    state.references++;
    if (state.idleSince >= 0) {
      state.idleSince = -1;
      this.#idle.delete(state);
    }
    const loaded = state.loaded ?? this.#load(state);
    const runtime = loaded.claim?.runtime;
    const jitProgram = runtime?.jitCode && loaded.program !== UnwindProgram.Native
      ? runtime.unwinder?.slot ?? null
      : null;
    return { bpfId: state.bpfId, segments: state.segments ?? [], program: loaded.program, jitProgram };
  }

  /** Gives back a reference {@linkcode acquire} took; the last one starts the file's grace period. */
  release(file: MappedFile): void {
    const state = this.#stateOf(file);
    if (state === null || state.references === 0) return;
    if (--state.references > 0) return;
    state.idleSince = performance.now();
    this.#idle.add(state);
  }

  /** Unloads the files nobody has mapped for the grace period. Call it now and then (each drain). */
  sweep(now = performance.now()): void {
    for (const state of this.#idle) {
      if (now - state.idleSince < this.#graceMs) continue;
      this.#idle.delete(state);
      state.idleSince = -1;
      this.#unload(state);
    }
  }

  /**
   * Loads the whole of `file`, of a program the user named, before its code runs: its first samples
   * unwind completely, even in a large library. It keeps a reference for the whole session.
   */
  preload(file: MappedFile): void {
    if (this.acquire(file) === null) return;
    const deltas = this.#stateOf(file)?.loaded?.deltas;
    if (deltas) this.#deltaLoader?.loadWhole(deltas);
  }

  /**
   * The unwinder met code of file `bpfId` (at ELF address `address`) before its deltas were loaded: load
   * them now (see {@linkcode StackDeltaLoader.need}).
   */
  onFileNeeded(bpfId: number, address: number): void {
    const loaded = this.#byBpfId.get(bpfId)?.loaded;
    if (!loaded?.deltas) return;
    this.#deltaLoader!.need(loaded.deltas, address, loaded.program !== UnwindProgram.Native);
  }

  /**
   * The ELF address of process address `address` in `mapping`, for unwinding it on the host; null when
   * its file has no unwind state (anonymous memory, an unreadable file, no program headers): BPF follows
   * frame pointers there. A file nobody maps any more is loaded again (and unloaded after its grace
   * period).
   */
  elfAddress(mapping: ResolvedMapping, address: number): number | null {
    const state = this.#stateOf(mapping.file);
    if (state === null) return null;
    if (state.loaded === null) {
      this.acquire(mapping.file);
      this.release(mapping.file);
    }
    const segments = state.segments ?? [];
    if (segments.length === 0) return null;
    const bias = mappingBias(mapping, segments);
    return bias === null || bias < 0 ? null : address - bias;
  }

  /**
   * The unwind rule at ELF address `lookup` of `file` (see {@linkcode elfAddress}), into `out`: from the
   * deltas BPF holds, loaded now when BPF has not asked for them yet.
   */
  ruleAt(file: MappedFile, lookup: number, out: ResolvedRule): RuleLookup {
    const loaded = this.#stateOf(file)?.loaded;
    if (!loaded?.deltas) return RuleLookup.FramePointer;
    return this.#deltaLoader!.ruleAt(loaded.deltas, lookup, loaded.program !== UnwindProgram.Native, out);
  }

  /** The file behind a BPF file id found in a trace. */
  fileByBpfId(bpfId: number): MappedFile | undefined {
    return this.#byBpfId.get(bpfId)?.file;
  }

  /** The BPF id of the file with content `fileId`, if the registry knows it. */
  bpfIdOf(fileId: FileId): number | undefined {
    return this.#byContent.get(fileId)?.bpfId;
  }

  /**
   * The flags a runtime needs in the processes that map `file` to name their frames, when a runtime
   * recognised the file but could not claim it without them; else null.
   */
  flagsRequiredOf(file: MappedFile): FlagsRequirement | null {
    return this.#stateOf(file)?.flagsRequired ?? null;
  }

  /** The runtime claim on `file` while it is loaded, or null when no runtime claimed it. */
  claimOf(file: MappedFile): RuntimeClaim | null {
    return this.#stateOf(file)?.loaded?.claim ?? null;
  }

  /**
   * Declares `ranges` of the file `fileId` as the loop of the runtime that `program` unwinds: the file's
   * trie entries installed from now on name `program`. The program is loaded first if the session has
   * not loaded it yet (the first file of its runtime), so BPF never jumps to its slot while it is empty.
   *
   * @throws {RangeError} when the file is not loaded.
   * @throws {LibbpfError} when the kernel refuses the runtime's program: nothing is declared.
   */
  updateInterpreterOffsets(program: number, fileId: FileId, ranges: readonly AddressRange[]): void {
    const state = this.#byContent.get(fileId);
    if (!state?.loaded) throw new RangeError(`Cannot name file ${fileId} to BPF: it is not loaded`);
    if (this.#offsets !== null) this.#unwinders?.require(program);
    this.#offsets?.update(state.bpfId, program, ranges);
    state.loaded.program = program;
  }

  /** Removes what {@linkcode updateInterpreterOffsets} declared for `fileId`. */
  deleteInterpreterOffsets(fileId: FileId): void {
    const state = this.#byContent.get(fileId);
    if (!state?.loaded) return;
    this.#offsets?.delete(state.bpfId);
    state.loaded.program = UnwindProgram.Native;
  }

  /** Closes the files kept open. Safe to call twice. */
  /** Resolves once BPF holds every unwind table loaded so far (their last step runs off the main thread). */
  settled(): Promise<void> {
    return this.#deltaLoader?.settled() ?? Promise.resolve();
  }

  close(): void {
    this.#deltaLoader?.close();
    this.#handles.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  #stateOf(file: MappedFile): FileState | null {
    return file.fileId === null ? null : this.#byContent.get(file.fileId) ?? null;
  }

  /** A readable file from its first handle: identified by content, kept open when the limit allows. */
  #adopt(key: string, path: string, kind: "file" | "vdso", opened: OpenedFile): MappedFile {
    let fileId: FileId;
    try {
      fileId = fileIdOf(opened.handle);
    } catch (error) {
      opened.handle.close();
      this.#stats.filesRefused.failed++;
      logger.debug("Not reading {path}: {error}", { path, error: String(error) });
      return unreadableFile(key, kind, path, "failed");
    }
    const same = this.#byContent.get(fileId);
    if (same !== undefined) {
      // Another copy of a file already known (another path, another container): one file.
      opened.handle.close();
      return same.file;
    }
    this.#stats.filesOpened++;
    const open = this.#handles.keep(opened);
    const file = { key, kind, path, fileId, readable: true, refusal: null, root: opened.root, open };
    const state: FileState = {
      file,
      bpfId: this.#nextBpfId++,
      segments: null,
      unclaimed: false,
      flagsRequired: null,
      references: 0,
      idleSince: -1,
      loaded: null,
    };
    this.#byContent.set(fileId, state);
    this.#byBpfId.set(state.bpfId, state);
    return file;
  }

  #refused(key: string, path: string, error: FileRefusedError): MappedFile {
    this.#stats.filesRefused[error.reason]++;
    logger.debug("Not reading {path}: {error}", { path, error: error.message });
    return unreadableFile(key, "file", path, error.reason);
  }

  /** The vdso, copied into an in-memory file (file_handles.ts), or unreadable when it cannot be. */
  #vdso(): MappedFile {
    const opened = this.#handles.vdso();
    return opened === null
      ? unreadableFile("[vdso]", "vdso", "[vdso]", "failed")
      : this.#adopt("[vdso]", "[vdso]", "vdso", opened);
  }

  /**
   * Loads a file's state at its first reference: its program headers (once), its deltas' bookkeeping
   * (loaded into BPF when its code first runs), and a runtime's claim, whose interpreter loop goes to BPF
   * before any trie entry of the file names the runtime's program.
   */
  #load(state: FileState): Loaded {
    const { file } = state;
    using info = new LoaderInfo({ fileId: file.fileId, fileName: file.path, open: () => file.open() });
    if (state.segments === null) {
      try {
        state.segments = info.getElf().loadSegments;
      } catch (error) {
        state.segments = [];
        const message = "Cannot read {path}: {error}; using frame pointers there";
        if (this.#deltaLoader) this.#deltaLoader.failed(message, file, error);
        else logger.debug(message, { path: file.path, error: errorMessage(error) });
      }
    }
    const deltas = this.#deltaLoader?.forFile(state.bpfId, file, state.segments) ?? null;
    const loaded: Loaded = { deltas, claim: null, program: UnwindProgram.Native };
    state.loaded = loaded;
    if (file.kind === "file" && state.segments.length > 0 && !state.unclaimed) {
      this.#claim(state, loaded, info);
    }
    return loaded;
  }

  /**
   * Offers the file to the runtimes (runtime_claims.ts); a claim's interpreter loop goes to BPF under the
   * file's id before any trie entry of the file names the runtime's program.
   */
  #claim(state: FileState, loaded: Loaded, info: LoaderInfo): void {
    const { file } = state;
    let claimed: ClaimedFile | null;
    try {
      claimed = claimFile(this.#runtimes, info, state.segments ?? []);
    } catch (error) {
      state.unclaimed = true;
      if (error instanceof FlagsRequiredError) {
        // Not a fault: each process without the flags is told of (runtime_instances.ts).
        this.#stats.claimsNeedingFlags++;
        state.flagsRequired = error.requirement;
        logger.debug("{path}: {error}", { path: file.path, error: error.message });
        return;
      }
      this.#stats.claimsRefused++;
      logger.warn("{path}: {error}", { path: file.path, error: errorMessage(error) });
      return;
    }
    if (claimed === null) {
      state.unclaimed = true;
      return;
    }
    this.#stats.filesClaimed++;
    loaded.claim = claimed.claim;
    if (claimed.loop === null) return;
    try {
      this.updateInterpreterOffsets(claimed.loop.program, file.fileId, claimed.loop.ranges);
    } catch (error) {
      // Without its loop in BPF the file's code unwinds natively: its runtime's frames are missed.
      logger.warn("Cannot declare the interpreter loop of {path}: {error}", {
        path: file.path,
        error: errorMessage(error),
      });
    }
  }

  /** The file's last mapping went a grace period ago: its state leaves BPF. */
  #unload(state: FileState): void {
    const loaded = state.loaded;
    if (loaded === null) return;
    if (loaded.program !== UnwindProgram.Native) this.#offsets?.delete(state.bpfId);
    if (loaded.deltas) this.#deltaLoader!.unload(loaded.deltas);
    state.loaded = null;
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

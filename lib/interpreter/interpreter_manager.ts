/**
 * Runs the interpreter plug-ins for a session: every executable file a process maps is offered to every
 * loader once ({@linkcode Data} cached per file, null when no runtime claims it), each process that maps
 * a claimed file gets an {@linkcode Instance} (attached when its mappings are read, detached when it
 * exits, execs or unmaps the file), and frames that a runtime's BPF unwinder recorded are named by the
 * process's instance while the process is alive.
 *
 * The native unwinder learns from {@linkcode InterpreterManager.unwindProgramOf} which files hold an
 * interpreter loop, so that only their trie entries make it look at loop ranges.
 *
 * @example
 * ```ts ignore
 * import { InterpreterManager } from "./interpreter_manager.ts";
 * const interpreters = new InterpreterManager(ebpf, unwinding);
 * interpreters.prepare(mappings); // before the native unwinder installs them
 * unwinding.onMappings(pid, mappings);
 * interpreters.onMappings(pid, mappings);
 * const frame = interpreters.symbolize(pid, { kind: FrameMarker.Python, fileId, addrOrLine });
 * ```
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import type { LoadSegment } from "../elf/elf_file.ts";
import type { MappedFile, ResolvedMapping } from "../process/process_manager.ts";
import { mappingBias } from "../process/proc_maps.ts";
import type { FileId, Pid } from "../types.ts";
import { UnwindProgram } from "../../support/types.ts";
import {
  type AddressRange,
  type Data,
  type EbpfHandler,
  type Instance,
  type InterpreterFrame,
  InterpreterMismatchError,
  type InterpreterType,
  type Loader,
  LoaderInfo,
  type Metric,
  type SymbolizedFrame,
} from "./interpreter.ts";
import { RemoteMemory, RemoteMemoryError } from "./remote_memory.ts";
import { RUNTIMES } from "./runtimes.ts";
import type { Prefix } from "../lpm/prefixes.ts";

const logger = getLogger(["omniprof", "interpreter"]);

/** The loaders a session offers files to unless told otherwise: every runtime's. */
export const DEFAULT_LOADERS: readonly Loader[] = RUNTIMES.map((runtime) => runtime.loader);

/** How the manager names files to BPF: the native unwinder's file registry. */
export interface FileIds {
  idOf(file: MappedFile): number | null;
}

interface ClaimedFile {
  readonly fileId: FileId;
  readonly data: Data;
  readonly segments: readonly LoadSegment[];
  /** The unwind program the loader declared for the file's loop. */
  program: number;
}

interface Attached {
  readonly file: MappedFile;
  readonly bias: number;
  readonly instance: Instance;
  readonly memory: RemoteMemory;
}

/** Counters for the session's metrics. */
export interface InterpreterManagerStats {
  /** Files a runtime claimed. */
  filesClaimed: number;
  /** Files a runtime recognised but could not support (logged once each). */
  filesRefused: number;
  /** Processes with at least one attached instance now. */
  processes: number;
  /** Attach attempts that failed (the process exited, or its runtime was not ready). */
  attachFailures: number;
  /** Interpreter frames that could not be named. */
  symbolizeFailures: number;
}

/** Interpreter plug-ins, their per-file data and per-process instances. */
export class InterpreterManager {
  #ebpf: EbpfHandler;
  #ids: FileIds;
  #loaders: readonly Loader[];
  #procRoot: string;
  /** By MappedFile.key: the claim, or null when no runtime wants the file. */
  #files = new Map<string, ClaimedFile | null>();
  #bpfIds = new Map<FileId, number>();
  #programs = new Map<FileId, number>();
  #processes = new Map<Pid, Attached[]>();
  /** The mappings each attached process was last read with. */
  #mappings = new Map<Pid, readonly ResolvedMapping[]>();
  /** Attach failures already logged as warnings (file and reason). */
  #warned = new Set<string>();
  #stats = { filesClaimed: 0, filesRefused: 0, attachFailures: 0, symbolizeFailures: 0 };

  constructor(
    ebpf: EbpfHandler,
    ids: FileIds,
    options: { loaders?: readonly Loader[]; procRoot?: string } = {},
  ) {
    // Loaders declare their loop ranges through the handler; noting the program per file here lets
    // unwindProgramOf() answer without asking each runtime.
    const programs = this.#programs;
    this.#ebpf = {
      updateInterpreterOffsets(program: number, fileId: FileId, ranges: readonly AddressRange[]) {
        ebpf.updateInterpreterOffsets(program, fileId, ranges);
        programs.set(fileId, program);
      },
      deleteInterpreterOffsets: (fileId: FileId) => ebpf.deleteInterpreterOffsets(fileId),
      updateProcData: (type: InterpreterType, pid: Pid, data: Uint8Array) =>
        ebpf.updateProcData(type, pid, data),
      deleteProcData: (type: InterpreterType, pid: Pid) => ebpf.deleteProcData(type, pid),
      updatePidInterpreterMapping: (
        pid: Pid,
        prefix: Prefix,
        program: number,
        fileId: FileId,
        bias: number,
      ) => ebpf.updatePidInterpreterMapping(pid, prefix, program, fileId, bias),
      deletePidInterpreterMapping: (pid: Pid, prefix: Prefix) =>
        ebpf.deletePidInterpreterMapping(pid, prefix),
    };
    this.#ids = ids;
    this.#loaders = options.loaders ?? DEFAULT_LOADERS;
    this.#procRoot = options.procRoot ?? "/proc";
  }

  get stats(): InterpreterManagerStats {
    return { ...this.#stats, processes: this.#processes.size };
  }

  /** The native unwinder's id of a content-identified file the manager has seen (for the handler). */
  bpfFileIdOf(fileId: FileId): number | undefined {
    return this.#bpfIds.get(fileId);
  }

  /** The unwind program for the code of `file`: the runtime's, when a runtime claimed it. */
  unwindProgramOf(file: MappedFile): number {
    const claim = this.#files.get(file.key);
    return claim ? claim.program : UnwindProgram.Native;
  }

  /** Offers the files of `mappings` not seen before to every loader. Call before the trie is installed. */
  prepare(mappings: readonly ResolvedMapping[]): void {
    for (const { file } of mappings) {
      if (file.kind !== "file") continue;
      const known = this.#files.get(file.key);
      if (known === undefined) {
        this.#files.set(file.key, this.#claim(file));
      } else if (known !== null && this.#ids.idOf(file) !== this.#bpfIds.get(known.fileId)) {
        // The native unwinder forgot the file when the last process mapping it exited, and now knows it
        // by a new id: declare the loop again under that id.
        this.#ebpf.deleteInterpreterOffsets(known.fileId);
        this.#files.set(file.key, this.#claim(file));
      }
    }
  }

  /** Attaches the process to the runtimes whose files it maps, and detaches what it no longer maps. */
  onMappings(pid: Pid, mappings: readonly ResolvedMapping[]): void {
    const previous = this.#processes.get(pid) ?? [];
    const next: Attached[] = [];
    for (const mapping of mappings) {
      const claim = this.#files.get(mapping.file.key);
      if (!claim || next.some((a) => a.file === mapping.file)) continue;
      const bias = mappingBias(mapping, claim.segments);
      if (bias === null || bias < 0) continue;
      const kept = previous.find((a) => a.file === mapping.file && a.bias === bias);
      if (kept) {
        kept.instance.synchronizeMappings(this.#ebpf, pid, mappings);
        next.push(kept);
        continue;
      }
      const attached = this.#attach(pid, mapping.file, claim, bias, mappings);
      if (attached) next.push(attached);
    }
    for (const old of previous) {
      if (!next.includes(old)) this.#detach(pid, old);
    }
    if (next.length > 0) {
      this.#processes.set(pid, next);
      this.#mappings.set(pid, mappings);
    } else {
      this.#processes.delete(pid);
      this.#mappings.delete(pid);
    }
  }

  /**
   * Republishes the process's records now. BPF asks (rate-limited) when a record is not usable yet, e.g.
   * a runtime caught at exec before it created its thread-state key; re-reading the whole process would
   * wait for the process manager's re-read interval.
   */
  refresh(pid: Pid): void {
    const attached = this.#processes.get(pid);
    if (attached === undefined) return;
    const mappings = this.#mappings.get(pid) ?? [];
    for (const { instance } of attached) {
      try {
        instance.synchronizeMappings(this.#ebpf, pid, mappings);
      } catch (error) {
        logger.debug("Cannot refresh process {pid}: {error}", { pid, error: errorMessage(error) });
      }
    }
  }

  /** The process exited: its instances are detached. */
  onExit(pid: Pid): void {
    for (const attached of this.#processes.get(pid) ?? []) this.#detach(pid, attached);
    this.#processes.delete(pid);
    this.#mappings.delete(pid);
  }

  /**
   * Names an interpreter frame of `pid`, or returns null when no instance of the process knows its kind
   * (the process was not attached, or has exited).
   */
  symbolize(pid: Pid, frame: InterpreterFrame): SymbolizedFrame | null {
    for (const { instance } of this.#processes.get(pid) ?? []) {
      try {
        return instance.symbolize(frame);
      } catch (error) {
        if (error instanceof InterpreterMismatchError) continue;
        this.#stats.symbolizeFailures++;
        logger.debug("Cannot name an interpreter frame of {pid}: {error}", { pid, error: String(error) });
        return null;
      }
    }
    this.#stats.symbolizeFailures++;
    return null;
  }

  /** The instances' counters since the last call, summed by id. */
  getAndResetMetrics(): Metric[] {
    const sums = new Map<string, number>();
    for (const list of this.#processes.values()) {
      for (const { instance } of list) {
        for (const metric of instance.getAndResetMetrics()) {
          sums.set(metric.id, (sums.get(metric.id) ?? 0) + metric.value);
        }
      }
    }
    return [...sums].map(([id, value]) => ({ id, value }));
  }

  /** Detaches every process. Idempotent. */
  close(): void {
    for (const pid of [...this.#processes.keys()]) this.onExit(pid);
  }

  #claim(file: MappedFile): ClaimedFile | null {
    if (file.fileId === null || !file.readable) return null;
    const id = this.#ids.idOf(file);
    if (id === null) return null;
    this.#bpfIds.set(file.fileId, id);
    using info = new LoaderInfo({ fileId: file.fileId, fileName: file.path, open: () => file.open() });
    for (const loader of this.#loaders) {
      let data: Data | null;
      try {
        data = loader(this.#ebpf, info);
      } catch (error) {
        this.#stats.filesRefused++;
        logger.warn("{path}: {error}", { path: file.path, error: errorMessage(error) });
        return null;
      }
      if (data === null) continue;
      this.#stats.filesClaimed++;
      return {
        fileId: file.fileId,
        data,
        segments: info.getElf().loadSegments,
        program: this.#programs.get(file.fileId) ?? UnwindProgram.Native,
      };
    }
    return null;
  }

  #attach(
    pid: Pid,
    file: MappedFile,
    claim: ClaimedFile,
    bias: number,
    mappings: readonly ResolvedMapping[],
  ): Attached | null {
    let memory: RemoteMemory | null = null;
    try {
      memory = RemoteMemory.open(pid, { procRoot: this.#procRoot });
      const instance = claim.data.attach(this.#ebpf, pid, bias, memory, mappings);
      return { file, bias, instance, memory };
    } catch (error) {
      memory?.close();
      this.#stats.attachFailures++;
      // A process that exited, or whose runtime is not initialized yet, is tried again at its next read.
      // Other failures (a full BPF map, a build the runtime refuses) repeat for every process and every
      // retry: said once per file and reason, then only counted.
      const properties = { path: file.path, pid, error: errorMessage(error) };
      const message = "Cannot attach to {path} in process {pid}: {error}";
      const reason = `${file.key}\0${properties.error.replace(/\d+/g, "#")}`;
      if (error instanceof RemoteMemoryError || this.#warned.has(reason)) {
        logger.debug(message, properties);
      } else {
        this.#warned.add(reason);
        logger.warn(message, properties);
      }
      return null;
    }
  }

  #detach(pid: Pid, attached: Attached): void {
    try {
      attached.instance.detach(this.#ebpf, pid);
    } catch (error) {
      logger.debug("Cannot detach from process {pid}: {error}", { pid, error: errorMessage(error) });
    }
    attached.memory.close();
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

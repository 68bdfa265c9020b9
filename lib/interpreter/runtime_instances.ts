/**
 * The runtime instances of processes: each process that maps a file a runtime claimed gets an
 * {@linkcode Instance} (attached when its mappings are read, detached when it exits, execs or unmaps the
 * file), told of every later read of its mappings, and asked to name the frames its runtime's BPF unwinder
 * recorded while the process lives. The process manager keeps each process's attached instances; this
 * module holds no process state of its own. Each attached instance holds a reference to its file, so the
 * file's runtime data stays loaded while an instance uses it.
 *
 * @example
 * ```ts ignore
 * import { RuntimeInstances } from "./runtime_instances.ts";
 * const instances = new RuntimeInstances(files, ebpf);
 * let attached = instances.update(pid, [], mappings);
 * const frame = instances.symbolize(pid, attached, { kind, fileId, addrOrLine });
 * instances.detach(pid, attached);
 * ```
 *
 * @module
 */
import { getLogger } from "../log/logger.ts";
import type { MappedFile, ResolvedMapping } from "../process/mapped_file.ts";
import { mappingBias } from "../process/proc_maps.ts";
import type { Pid } from "../types.ts";
import { readProcessLaunch } from "../process/process_launch.ts";
import {
  type EbpfHandler,
  type FlagsRequirement,
  type Instance,
  type InterpreterFrame,
  InterpreterMismatchError,
  type Metric,
  type SymbolizedFrame,
} from "./interpreter.ts";
import { RemoteMemory, RemoteMemoryError } from "./remote_memory.ts";
import type { RuntimeClaim } from "./runtime.ts";

const logger = getLogger(["omniprof", "interpreter"]);

/**
 * What runtime instances need of the file registry: the claims, the flags of files a runtime names only
 * with them, and references to the claimed files.
 */
export interface RuntimeFiles {
  claimOf(file: MappedFile): RuntimeClaim | null;
  flagsRequiredOf(file: MappedFile): FlagsRequirement | null;
  acquire(file: MappedFile): unknown;
  release(file: MappedFile): void;
}

/** A runtime attached to one process for one file it maps. */
export interface AttachedInstance {
  readonly file: MappedFile;
  readonly bias: number;
  readonly instance: Instance;
  readonly memory: RemoteMemory;
}

/** Counters for the session's metrics. */
export interface RuntimeInstanceStats {
  /** Attach attempts that failed (the process exited, or its runtime was not ready). */
  attachFailures: number;
  /** Interpreter frames that could not be named. */
  symbolizeFailures: number;
}

/** How {@linkcode RuntimeInstances} reads processes and tells the user what they lack. */
export interface RuntimeInstancesOptions {
  /** Where procfs is mounted. */
  procRoot?: string;
  /**
   * Told, once per file, of the first process that maps a file a runtime names only with flags and was
   * started without them: which flags to add. Default: logged at info level.
   */
  advise?: (advice: string) => void;
}

/** Attaches, updates and detaches runtime instances. */
export class RuntimeInstances {
  readonly #files: RuntimeFiles;
  readonly #ebpf: EbpfHandler;
  readonly #procRoot: string;
  readonly #advise: (advice: string) => void;
  /** Requirements already told of: each is said once. */
  readonly #advised = new Set<FlagsRequirement>();
  /** Attach failures already logged as warnings (file and reason). */
  readonly #warned = new Set<string>();
  readonly #stats: RuntimeInstanceStats = { attachFailures: 0, symbolizeFailures: 0 };

  /** Instances write their BPF state through `ebpf`. */
  constructor(files: RuntimeFiles, ebpf: EbpfHandler, options: RuntimeInstancesOptions = {}) {
    this.#files = files;
    this.#ebpf = ebpf;
    this.#procRoot = options.procRoot ?? "/proc";
    this.#advise = options.advise ?? ((advice) => logger.info("{advice}", { advice }));
  }

  get stats(): RuntimeInstanceStats {
    return { ...this.#stats };
  }

  /**
   * Attaches the process to the runtimes whose files it maps, tells the instances it keeps of the new
   * mappings, and detaches what it no longer maps. Returns the instances attached now.
   */
  update(
    pid: Pid,
    attached: readonly AttachedInstance[],
    mappings: readonly ResolvedMapping[],
  ): AttachedInstance[] {
    const next: AttachedInstance[] = [];
    // A file is mapped several times (text, data): the process is looked at once per read.
    let flagsLooked = false;
    for (const mapping of mappings) {
      const claim = this.#files.claimOf(mapping.file);
      if (claim === null && !flagsLooked) flagsLooked = this.#adviseFlags(pid, mapping.file);
      if (!claim || next.some((a) => a.file === mapping.file)) continue;
      const bias = mappingBias(mapping, claim.segments);
      if (bias === null || bias < 0) continue;
      const kept = attached.find((a) => a.file === mapping.file && a.bias === bias);
      if (kept) {
        kept.instance.synchronizeMappings(this.#ebpf, pid, mappings);
        next.push(kept);
        continue;
      }
      const attaching = this.#attach(pid, mapping.file, claim, bias, mappings);
      if (attaching) next.push(attaching);
    }
    this.detach(pid, attached.filter((old) => !next.includes(old)));
    return next;
  }

  /**
   * Republishes the process's records now. BPF asks (rate-limited) when a record is not usable yet, e.g.
   * a runtime caught at exec before it created its thread-state key; re-reading the whole process would
   * wait for the process manager's re-read interval.
   */
  refresh(pid: Pid, attached: readonly AttachedInstance[], mappings: readonly ResolvedMapping[]): void {
    for (const { instance } of attached) {
      try {
        instance.synchronizeMappings(this.#ebpf, pid, mappings);
      } catch (error) {
        logger.debug("Cannot refresh process {pid}: {error}", { pid, error: errorMessage(error) });
      }
    }
  }

  /** Detaches `attached` from `pid` (it exited, or unmapped their files). */
  detach(pid: Pid, attached: readonly AttachedInstance[]): void {
    for (const old of attached) {
      try {
        old.instance.detach(this.#ebpf, pid);
      } catch (error) {
        logger.debug("Cannot detach from process {pid}: {error}", { pid, error: errorMessage(error) });
      }
      old.memory.close();
      this.#files.release(old.file);
    }
  }

  /**
   * Names an interpreter frame of `pid` (innermost first: see {@linkcode Instance.symbolize}), or returns
   * null when no instance of the process knows its kind (the process was not attached, or has exited).
   */
  symbolize(
    pid: Pid,
    attached: readonly AttachedInstance[],
    frame: InterpreterFrame,
  ): readonly SymbolizedFrame[] | null {
    for (const { instance } of attached) {
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

  /** The counters of every instance of `processes` since the last call, summed by id. */
  metrics(processes: Iterable<readonly AttachedInstance[]>): Metric[] {
    const sums = new Map<string, number>();
    for (const list of processes) {
      for (const { instance } of list) {
        for (const metric of instance.getAndResetMetrics()) {
          sums.set(metric.id, (sums.get(metric.id) ?? 0) + metric.value);
        }
      }
    }
    return [...sums].map(([id, value]) => ({ id, value }));
  }

  /**
   * Tells the user once if `pid` maps `file`, whose runtime needs flags the process was started without.
   * Returns whether the process was looked at (the file has such a runtime).
   */
  #adviseFlags(pid: Pid, file: MappedFile): boolean {
    const required = this.#files.flagsRequiredOf(file);
    if (required === null) return false;
    if (this.#advised.has(required)) return true;
    const launch = readProcessLaunch(pid, this.#procRoot);
    if (launch === null || required.satisfiedBy(launch)) return true;
    this.#advised.add(required);
    this.#advise(required.advice(pid, file.path));
    return true;
  }

  #attach(
    pid: Pid,
    file: MappedFile,
    claim: RuntimeClaim,
    bias: number,
    mappings: readonly ResolvedMapping[],
  ): AttachedInstance | null {
    let memory: RemoteMemory | null = null;
    try {
      memory = RemoteMemory.open(pid, { procRoot: this.#procRoot });
      const instance = claim.data.attach(this.#ebpf, pid, bias, memory, mappings);
      this.#files.acquire(file);
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
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Per-file CPython state: what is true of an interpreter file whatever process maps it (its version, the
 * address of `_PyRuntime`, the eval loop's ranges, the layout table), and {@linkcode PythonData.attach},
 * which adds the per-process part: the runtime's own debug offsets (3.13) read from the process, and
 * the {@linkcode PythonInstance}.
 *
 * @example
 * ```ts ignore
 * import { PythonData } from "./data.ts";
 * const instance = data.attach(ebpf, pid, bias, memory);
 * for (const thread of instance.threadStates()) console.log(instance.stack(thread.address));
 * ```
 *
 * @module
 */
import type { Address, Pid } from "../../types.ts";
import type { ResolvedMapping } from "../../process/mapped_file.ts";
import type { Data, EbpfHandler } from "../interpreter.ts";
import type { PythonFileFacts } from "./file_facts.ts";
import type { GlibcThreadLayout } from "../glibc_threads.ts";
import type { RemoteMemory } from "../remote_memory.ts";
import { PythonInstance } from "./instance.ts";
import {
  applyDebugOffsets,
  type PythonOffsets,
  pythonOffsets,
  type PythonVersion,
  readDebugOffsets,
} from "./offsets.ts";

/** Host-side settings of {@linkcode PythonData.attach}. */
export interface PythonDataOptions {
  /**
   * glibc's thread layout, when the caller already knows it; otherwise each instance reads it from the
   * libc its process maps (null: do not use glibc structures at all).
   */
  glibc?: GlibcThreadLayout | null;
}

/** The interpreter file's data, shared by every process that maps it. */
export class PythonData implements Data {
  readonly fileName: string;
  readonly facts: PythonFileFacts;
  /** The layout table of the file's version (3.13 processes refine it from their debug offsets). */
  readonly offsets: PythonOffsets;
  readonly #options: PythonDataOptions;

  constructor(fileName: string, facts: PythonFileFacts, options: PythonDataOptions = {}) {
    this.fileName = fileName;
    this.facts = facts;
    this.offsets = pythonOffsets(facts.version);
    this.#options = options;
  }

  get version(): PythonVersion {
    return this.facts.version;
  }

  /**
   * Sets up CPython unwinding for `pid`, which maps this file with `bias`, and writes its BPF record.
   *
   * @throws {RemoteMemoryError} when the process's memory cannot be read.
   * @throws {RangeError} when its 3.13 debug offsets are missing, of another version, or of a
   * free-threaded build (whose layouts differ).
   */
  attach(
    ebpf: EbpfHandler,
    pid: Pid,
    bias: number,
    memory: RemoteMemory,
    mappings: readonly ResolvedMapping[],
  ): PythonInstance {
    const runtime = (bias + this.facts.runtimeVaddr) as Address;
    let offsets = this.offsets;
    if (this.facts.version.minor >= 13) {
      const debug = readDebugOffsets(memory, runtime);
      const version = this.facts.version;
      const problem = debug === null
        ? "no _Py_DebugOffsets cookie at _PyRuntime"
        : ((debug.version >>> 24) & 0xff) !== version.major ||
            ((debug.version >>> 16) & 0xff) !== version.minor
        ? `_Py_DebugOffsets is of version 0x${debug.version.toString(16)}`
        : debug.freeThreaded
        ? "a free-threaded build"
        : null;
      if (problem !== null || debug === null) {
        throw new RangeError(
          `Cannot unwind Python ${version.major}.${version.minor} in process ${pid}: ${problem}`,
        );
      }
      offsets = applyDebugOffsets(offsets, debug);
    }
    const instance = new PythonInstance({
      pid,
      bias,
      runtime,
      memory,
      mappings,
      facts: this.facts,
      offsets,
      glibc: this.#options.glibc,
    });
    instance.publish(ebpf);
    return instance;
  }
}

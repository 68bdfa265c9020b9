/**
 * The {@linkcode EbpfHandler} of a real session: what runtime instances tell BPF goes into the maps of the
 * loaded BPF object. Per-process records go to each runtime's per-process map (runtimes.ts names it) and a
 * runtime's areas (JIT code) to the `pid_page_to_mapping_info` trie, through the process manager's one
 * trie writer. What concerns a file (its interpreter loop) goes to the file registry, which owns file
 * state and translates the content ids plug-ins use into the ids BPF knows files by.
 *
 * @example
 * ```ts ignore
 * import { BpfEbpfHandler } from "./bpf_ebpf_handler.ts";
 * const ebpf = new BpfEbpfHandler(object, trie, files, RUNTIMES);
 * const instance = data.attach(ebpf, pid, bias, memory, mappings);
 * ```
 *
 * @module
 */
import type { BpfMap } from "../bpf/map.ts";
import { u32Key } from "../bpf/map.ts";
import type { BpfObject } from "../bpf/object.ts";
import type { Prefix } from "../lpm/prefixes.ts";
import type { FileId, Pid } from "../types.ts";
import type { PidPageMappings } from "../unwind/pid_page_mappings.ts";
import type { AddressRange, EbpfHandler, InterpreterType } from "./interpreter.ts";
import type { Runtime } from "./runtime.ts";
import { processMapOf } from "./runtimes.ts";

/** What the handler needs of the file registry. */
export interface BpfFiles {
  /** The id BPF knows the file with content `fileId` by, if it is known. */
  bpfIdOf(fileId: FileId): number | undefined;
  updateInterpreterOffsets(program: number, fileId: FileId, ranges: readonly AddressRange[]): void;
  deleteInterpreterOffsets(fileId: FileId): void;
}

/** Writes runtime state into the maps of a loaded BPF object. */
export class BpfEbpfHandler implements EbpfHandler {
  readonly #object: BpfObject;
  readonly #trie: PidPageMappings;
  readonly #files: BpfFiles;
  readonly #runtimes: readonly Runtime[];
  readonly #procMaps = new Map<InterpreterType, BpfMap>();

  /** `trie` is the session's one writer of the trie; `runtimes` name the per-process maps. */
  constructor(object: BpfObject, trie: PidPageMappings, files: BpfFiles, runtimes: readonly Runtime[]) {
    this.#object = object;
    this.#trie = trie;
    this.#files = files;
    this.#runtimes = runtimes;
  }

  updateInterpreterOffsets(program: number, fileId: FileId, ranges: readonly AddressRange[]): void {
    this.#files.updateInterpreterOffsets(program, fileId, ranges);
  }

  deleteInterpreterOffsets(fileId: FileId): void {
    this.#files.deleteInterpreterOffsets(fileId);
  }

  updateProcData(type: InterpreterType, pid: Pid, data: Uint8Array): void {
    this.#procMap(type).update(u32Key(pid), data);
  }

  deleteProcData(type: InterpreterType, pid: Pid): void {
    this.#procMap(type).delete(u32Key(pid));
  }

  updatePidInterpreterMapping(pid: Pid, prefix: Prefix, program: number, fileId: FileId, bias: number): void {
    const bpfId = this.#files.bpfIdOf(fileId);
    if (bpfId === undefined) throw new RangeError(`Cannot name file ${fileId} to BPF: it is not registered`);
    this.#trie.installPrefix(pid, prefix, bpfId, bias, program);
  }

  deletePidInterpreterMapping(pid: Pid, prefix: Prefix): void {
    this.#trie.remove(pid, [prefix]);
  }

  #procMap(type: InterpreterType): BpfMap {
    let map = this.#procMaps.get(type);
    if (map === undefined) {
      map = this.#object.map(processMapOf(this.#runtimes, type));
      this.#procMaps.set(type, map);
    }
    return map;
  }
}

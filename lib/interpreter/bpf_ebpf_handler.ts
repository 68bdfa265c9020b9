/**
 * The {@linkcode EbpfHandler} of a real session: what interpreter plug-ins tell BPF goes into the maps of
 * the loaded BPF object. Plug-ins name files by content ({@linkcode FileId}); BPF knows a file by the
 * small number the native unwinder gave it, so the handler translates through `bpfFileIdOf`.
 *
 * Maps written: `interpreter_offsets` (file id -> loop ranges, `struct interpreter_offsets`),
 * each runtime's per-process map (pid -> the runtime's record; runtimes.ts names it) and
 * `pid_page_to_mapping_info` (interpreter mappings such as JIT areas).
 *
 * @example
 * ```ts ignore
 * import { BpfEbpfHandler } from "./bpf_ebpf_handler.ts";
 * const ebpf = new BpfEbpfHandler(tracer.object, (fileId) => ids.get(fileId));
 * pythonLoader(ebpf, info);
 * ```
 *
 * @module
 */
import type { BpfMap } from "../bpf/map.ts";
import { u32Key, u64Key, writeU64 } from "../bpf/map.ts";
import type { BpfObject } from "../bpf/object.ts";
import type { Prefix } from "../lpm/prefixes.ts";
import type { FileId, Pid } from "../types.ts";
import { PidPageMappings } from "../unwind/pid_page_mappings.ts";
import { InterpreterConstants, interpreterOffsetsLayout } from "../../support/types.ts";
import { processMapOf, RUNTIMES } from "./runtimes.ts";
import type { AddressRange, EbpfHandler, InterpreterType } from "./interpreter.ts";

/** Writes interpreter state into the maps of a loaded BPF object. */
export class BpfEbpfHandler implements EbpfHandler {
  #object: BpfObject;
  #bpfFileIdOf: (fileId: FileId) => number | undefined;
  #offsets: BpfMap;
  #trie: PidPageMappings;
  #procMaps = new Map<InterpreterType, BpfMap>();

  /** `bpfFileIdOf` gives the native unwinder's id of a file (undefined: the file is not registered). */
  constructor(object: BpfObject, bpfFileIdOf: (fileId: FileId) => number | undefined) {
    this.#object = object;
    this.#bpfFileIdOf = bpfFileIdOf;
    this.#offsets = object.map("interpreter_offsets");
    this.#trie = new PidPageMappings(
      object.map("pid_page_to_mapping_info"),
      object.map("mapping_generation"),
    );
  }

  updateInterpreterOffsets(program: number, fileId: FileId, ranges: readonly AddressRange[]): void {
    const L = interpreterOffsetsLayout;
    if (ranges.length > InterpreterConstants.InterpreterRanges) {
      throw new RangeError(
        `Cannot store ${ranges.length} interpreter ranges: BPF holds ${InterpreterConstants.InterpreterRanges}`,
      );
    }
    const value = new Uint8Array(L.sizeof);
    const view = new DataView(value.buffer);
    ranges.forEach((range, i) => {
      writeU64(view, L.lower.offset + i * L.lower.elementSize, range.start);
      writeU64(view, L.upper.offset + i * L.upper.elementSize, range.end);
    });
    view.setUint8(L.program.offset, program);
    this.#offsets.update(u64Key(this.#bpfId(fileId)), value);
  }

  updateProcData(type: InterpreterType, pid: Pid, data: Uint8Array): void {
    this.#procMap(type).update(u32Key(pid), data);
  }

  deleteProcData(type: InterpreterType, pid: Pid): void {
    this.#procMap(type).delete(u32Key(pid));
  }

  updatePidInterpreterMapping(pid: Pid, prefix: Prefix, program: number, fileId: FileId, bias: number): void {
    this.#trie.installPrefix(pid, prefix, this.#bpfId(fileId), bias, program);
  }

  deletePidInterpreterMapping(pid: Pid, prefix: Prefix): void {
    this.#trie.remove(pid, [prefix]);
  }

  deleteInterpreterOffsets(fileId: FileId): void {
    const id = this.#bpfFileIdOf(fileId);
    if (id !== undefined) this.#offsets.delete(u64Key(id));
  }

  #bpfId(fileId: FileId): number {
    const id = this.#bpfFileIdOf(fileId);
    if (id === undefined) throw new RangeError(`Cannot name file ${fileId} to BPF: it is not registered`);
    return id;
  }

  #procMap(type: InterpreterType): BpfMap {
    let map = this.#procMaps.get(type);
    if (map === undefined) {
      map = this.#object.map(processMapOf(RUNTIMES, type));
      this.#procMaps.set(type, map);
    }
    return map;
  }
}

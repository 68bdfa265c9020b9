/**
 * An {@linkcode EbpfHandler} that keeps the interpreter maps in memory instead of BPF: for host-only use
 * (inspecting what a plug-in would tell BPF, without loading BPF programs) and for tests. Its contents
 * mirror the BPF maps one to one: interpreter loop ranges per file, one record per (runtime, process),
 * and interpreter mappings per (process, prefix).
 *
 * @example
 * ```ts ignore
 * import { MemoryEbpfHandler } from "./memory_ebpf_handler.ts";
 * const ebpf = new MemoryEbpfHandler();
 * runtime.loader(ebpf, info);
 * console.log(ebpf.interpreterOffsets.get(info.fileId));
 * ```
 *
 * @module
 */
import type { Prefix } from "../lpm/prefixes.ts";
import type { FileId, Pid } from "../types.ts";
import type { AddressRange, EbpfHandler, InterpreterType } from "./interpreter.ts";

/** What {@linkcode EbpfHandler.updateInterpreterOffsets} stored for one file. */
export interface InterpreterOffsetsEntry {
  program: number;
  ranges: readonly AddressRange[];
}

/** What {@linkcode EbpfHandler.updatePidInterpreterMapping} stored for one prefix. */
export interface PidInterpreterMappingEntry {
  program: number;
  fileId: FileId;
  bias: number;
}

/** The interpreter maps, held in memory. */
export class MemoryEbpfHandler implements EbpfHandler {
  /** File id -> unwinder program and interpreter loop ranges. */
  readonly interpreterOffsets = new Map<FileId, InterpreterOffsetsEntry>();
  /** `${type}:${pid}` -> a copy of the record. */
  readonly procData = new Map<string, Uint8Array>();
  /** `${pid}:${prefix.value}/${prefix.length}` -> mapping. */
  readonly pidMappings = new Map<string, PidInterpreterMappingEntry>();

  updateInterpreterOffsets(program: number, fileId: FileId, ranges: readonly AddressRange[]): void {
    this.interpreterOffsets.set(fileId, { program, ranges: ranges.map((r) => ({ ...r })) });
  }

  deleteInterpreterOffsets(fileId: FileId): void {
    this.interpreterOffsets.delete(fileId);
  }

  updateProcData(type: InterpreterType, pid: Pid, data: Uint8Array): void {
    this.procData.set(`${type}:${pid}`, data.slice());
  }

  deleteProcData(type: InterpreterType, pid: Pid): void {
    this.procData.delete(`${type}:${pid}`);
  }

  updatePidInterpreterMapping(pid: Pid, prefix: Prefix, program: number, fileId: FileId, bias: number): void {
    this.pidMappings.set(`${pid}:${prefix.value}/${prefix.length}`, { program, fileId, bias });
  }

  deletePidInterpreterMapping(pid: Pid, prefix: Prefix): void {
    this.pidMappings.delete(`${pid}:${prefix.value}/${prefix.length}`);
  }

  /** The record of `type` for `pid`, if any. */
  procDataOf(type: InterpreterType, pid: Pid): Uint8Array | undefined {
    return this.procData.get(`${type}:${pid}`);
  }
}

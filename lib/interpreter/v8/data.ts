/**
 * Per-file V8 state: the layouts of the V8 a file holds, and {@linkcode V8Data.attach}, which writes a
 * process's `v8_procs` record (the same for every process of the file: V8 keeps no per-process layout)
 * and makes the instance that names its frames from its memory.
 *
 * @example
 * ```ts ignore
 * import { V8Data } from "./data.ts";
 * const instance = data.attach(ebpf, pid, bias, memory, mappings);
 * instance.symbolize({ kind, fileId, addrOrLine });
 * ```
 *
 * @module
 */
import type { Pid } from "../../types.ts";
import type { Data, EbpfHandler } from "../interpreter.ts";
import type { RemoteMemory } from "../remote_memory.ts";
import { V8Heap } from "./heap.ts";
import { V8Instance } from "./instance.ts";
import type { V8Layout } from "./introspection.ts";
import { v8ProcRecord } from "./proc_record.ts";

/** A file's V8, shared by every process that maps it. */
export class V8Data implements Data {
  readonly fileName: string;
  readonly layout: V8Layout;

  constructor(fileName: string, layout: V8Layout) {
    this.fileName = fileName;
    this.layout = layout;
  }

  attach(ebpf: EbpfHandler, pid: Pid, bias: number, memory: RemoteMemory): V8Instance {
    const heap = new V8Heap(memory, this.layout, bias);
    heap.locateDispatchTable();
    ebpf.updateProcData("v8", pid, v8ProcRecord(this.layout, heap.dispatchTable));
    return new V8Instance(heap);
  }
}

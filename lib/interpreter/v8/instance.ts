/**
 * A V8 process: names the frames its BPF unwinder recorded, from the process's memory while it lives, and
 * removes its record when it goes.
 *
 * @example
 * ```ts ignore
 * import { V8Instance } from "./instance.ts";
 * const instance = new V8Instance(new V8Heap(memory, layout));
 * const frames = instance.symbolize({ kind: V8FrameMarker.V8, fileId, addrOrLine });
 * ```
 *
 * @module
 */
import type { Pid } from "../../types.ts";
import { V8FrameMarker } from "../../../support/types.ts";
import {
  type EbpfHandler,
  InstanceStubs,
  type InterpreterFrame,
  InterpreterMismatchError,
  type Metric,
  type SymbolizedFrame,
} from "../interpreter.ts";
import type { ResolvedMapping } from "../../process/mapped_file.ts";
import { v8ProcRecord } from "./proc_record.ts";
import type { V8Heap } from "./heap.ts";
import { V8Symbolizer } from "./symbolize.ts";

/** One process's V8. */
export class V8Instance extends InstanceStubs {
  readonly symbolizer: V8Symbolizer;
  #reported = { named: 0, withoutLine: 0, failed: 0 };

  readonly #heap: V8Heap;

  constructor(heap: V8Heap) {
    super();
    this.#heap = heap;
    this.symbolizer = new V8Symbolizer(heap);
  }

  detach(ebpf: EbpfHandler, pid: Pid): void {
    ebpf.deleteProcData("v8", pid);
  }

  /** A V8 13 process whose dispatch table was not there at attach: looked for again at each re-read. */
  override synchronizeMappings(ebpf: EbpfHandler, pid: Pid, _mappings: readonly ResolvedMapping[]): void {
    const heap = this.#heap;
    if (heap.locateDispatchTable()) {
      ebpf.updateProcData("v8", pid, v8ProcRecord(heap.layout, heap.dispatchTable));
    }
  }

  override symbolize(frame: InterpreterFrame): readonly SymbolizedFrame[] {
    if (frame.kind !== V8FrameMarker.V8) throw new InterpreterMismatchError();
    return this.symbolizer.symbolize(frame.fileId, frame.addrOrLine);
  }

  override getAndResetMetrics(): Metric[] {
    const stats = this.symbolizer.stats;
    const metrics = [
      { id: "v8.frames_named", value: stats.named - this.#reported.named },
      { id: "v8.frames_without_line", value: stats.withoutLine - this.#reported.withoutLine },
      { id: "v8.frames_failed", value: stats.failed - this.#reported.failed },
    ];
    this.#reported = { ...stats };
    return metrics;
  }
}

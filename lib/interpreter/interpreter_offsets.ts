/**
 * The `interpreter_offsets` map: for each file that holds a runtime's interpreter loop, the loop's ELF
 * address ranges and the unwind program to tail-call there (`struct interpreter_offsets`, bpf/types.h).
 * The file registry writes it when a runtime claims a file, and removes the entry when the file is
 * unloaded.
 *
 * @example
 * ```ts ignore
 * import { InterpreterOffsets } from "./interpreter_offsets.ts";
 * const offsets = new InterpreterOffsets(object.map("interpreter_offsets"));
 * offsets.update(7, runtime.unwinder.slot, [{ start: 0x1000, end: 0x2000 }]);
 * ```
 *
 * @module
 */
import { type BpfMap, u64Key, writeU64 } from "../bpf/map.ts";
import { InterpreterConstants, interpreterOffsetsLayout } from "../../support/types.ts";
import type { AddressRange } from "./interpreter.ts";

/** Writes and removes entries of `interpreter_offsets`, keyed by the id BPF knows a file by. */
export class InterpreterOffsets {
  readonly #map: BpfMap;

  constructor(map: BpfMap) {
    this.#map = map;
  }

  /**
   * Declares `ranges` of file `bpfId` as the loop of the runtime unwound by `program`.
   *
   * @throws {RangeError} when BPF has no room for that many ranges.
   */
  update(bpfId: number, program: number, ranges: readonly AddressRange[]): void {
    const L = interpreterOffsetsLayout;
    if (ranges.length > InterpreterConstants.Ranges) {
      throw new RangeError(
        `Cannot store ${ranges.length} interpreter ranges: BPF holds ${InterpreterConstants.Ranges}`,
      );
    }
    const value = new Uint8Array(L.sizeof);
    const view = new DataView(value.buffer);
    ranges.forEach((range, i) => {
      writeU64(view, L.lower.offset + i * L.lower.elementSize, range.start);
      writeU64(view, L.upper.offset + i * L.upper.elementSize, range.end);
    });
    view.setUint8(L.program.offset, program);
    this.#map.update(u64Key(bpfId), value);
  }

  /** Removes the entry of file `bpfId`, if any. */
  delete(bpfId: number): void {
    this.#map.delete(u64Key(bpfId));
  }
}

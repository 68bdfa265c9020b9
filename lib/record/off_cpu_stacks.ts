/**
 * The off-CPU stacks whose waits the kernel adds up by itself, so that a thread switching tens of
 * thousands of times a second costs the host nothing per wait. BPF hashes each switched-out thread's
 * trace (bpf/trace.bpf.h `off_cpu_stack_hash`). The first wait of a stack it has not seen goes to the host
 * whole, as every wait did before, carrying that hash; {@linkcode OffCpuStacks.define} gives the stack the
 * next id and writes it into `off_cpu_stack_ids`. From then on BPF only adds each wait of the stack to
 * `off_cpu_totals[id]` (bpf/off_cpu.bpf.c), an array the host maps into memory;
 * {@linkcode OffCpuStacks.charge} hands each drain what was added since the last.
 *
 * Ids are never reused within a session: past `OFF_CPU_MAX_STACKS` stacks, the waits of the rest are sent
 * one by one, and nothing is lost either way.
 *
 * @example
 * ```ts ignore
 * const totals = object.map("off_cpu_totals");
 * using stacks = new OffCpuStacks(object.map("off_cpu_stack_ids"), totals.fd, totals.maxEntries);
 * const table = new StackTable(processes, files, stacks); // calls stacks.define() for new stacks
 * tracer.drain(table);
 * stacks.charge(table);
 * ```
 *
 * @module
 */
import { MappedArray } from "../bpf/mapped_array.ts";
import { BPF_ANY, isMapFull, type MapWriter, u32Key } from "../bpf/map.ts";
import { eventHeaderLayout, offCpuTotalLayout, traceLayout } from "../../support/types.ts";

/** What takes the waits added up in the kernel: the stack table of the interval. */
export interface OffCpuWaitSink {
  /** `waits` more waits, `ns` in all, of off-CPU stack `id`, first seen as trace record `record`. */
  addOffCpuWaits(id: number, record: Uint8Array<ArrayBuffer>, ns: number, waits: number): void;
}

const STACK_HASH = traceLayout.hdr.offset + eventHeaderLayout.off_cpu_stack.offset;
const TOTAL_SIZE = offCpuTotalLayout.sizeof;
const TOTAL_NS = offCpuTotalLayout.ns.offset;
const TOTAL_WAITS = offCpuTotalLayout.waits.offset;

/** The session's off-CPU stack ids, and what of each one's total has been charged already. */
export class OffCpuStacks implements Disposable {
  readonly capacity: number;
  #ids: MapWriter;
  #totals: MappedArray;
  /** The record that defined each id, to decode the stack again in a later interval's table. */
  #records: Uint8Array<ArrayBuffer>[] = [];
  #chargedNs: Float64Array;
  #chargedWaits: Float64Array;

  /**
   * `ids` is the map `off_cpu_stack_ids`; `totalsFd` the descriptor of `off_cpu_totals`, of `capacity`
   * entries.
   */
  constructor(ids: MapWriter, totalsFd: number, capacity: number) {
    this.capacity = capacity;
    this.#ids = ids;
    this.#totals = new MappedArray(totalsFd, capacity * TOTAL_SIZE);
    this.#chargedNs = new Float64Array(capacity);
    this.#chargedWaits = new Float64Array(capacity);
  }

  /** Ids given so far. */
  get size(): number {
    return this.#records.length;
  }

  /**
   * Gives the stack of the trace record at `offset` (one that asks for an id: its header's
   * `off_cpu_stack` is set) the next id, and tells BPF; returns the id, or -1 when none is left (its
   * waits then keep coming whole).
   */
  define(view: DataView, offset: number, length: number): number {
    if (this.#records.length >= this.capacity) return -1;
    const id = this.#records.length;
    const key = new Uint8Array(view.buffer, view.byteOffset + offset + STACK_HASH, 8).slice();
    try {
      this.#ids.update(key, u32Key(id), BPF_ANY);
    } catch (error) {
      if (isMapFull(error)) return -1;
      throw error;
    }
    this.#records.push(new Uint8Array(view.buffer, view.byteOffset + offset, length).slice());
    return id;
  }

  /** Hands `sink` the waits BPF added to each stack's total since the last call. */
  charge(sink: OffCpuWaitSink): void {
    const totals = this.#totals;
    for (let id = 0; id < this.#records.length; id++) {
      const at = id * TOTAL_SIZE;
      // Waits first: BPF adds the time first, so the time read after covers at least those waits.
      const waits = totals.readU64(at + TOTAL_WAITS);
      if (waits === this.#chargedWaits[id]) continue;
      const ns = totals.readU64(at + TOTAL_NS);
      sink.addOffCpuWaits(id, this.#records[id]!, ns - this.#chargedNs[id]!, waits - this.#chargedWaits[id]!);
      this.#chargedWaits[id] = waits;
      this.#chargedNs[id] = ns;
    }
  }

  /** Hands `sink` one wait of `ns` of stack `id` that BPF has not added up (a thread still switched out). */
  chargeWait(sink: OffCpuWaitSink, id: number, ns: number): void {
    const record = this.#records[id];
    if (record !== undefined) sink.addOffCpuWaits(id, record, ns, 1);
  }

  close(): void {
    this.#totals.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

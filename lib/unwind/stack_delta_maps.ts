/**
 * Writes files' stack deltas into the BPF maps the native unwinder reads: the global rule array
 * (unwind_info_array), the page index (stack_delta_page_to_info) and, per file, an array of rows put into
 * the hash-of-maps of its bucket size (exe_id_to_<N>_stack_deltas) under the file's id.
 *
 * Every write to a hash-of-maps returns only after an RCU grace period (7-16 ms here), though BPF sees
 * the change at once. On the main thread those waits took 0.54 s of a 13 s `make -j2` (45 writes), a
 * stall during which nothing drained BPF's ring and stack copies were refused. They run on a worker
 * thread instead, in order for each rows id, so that a delete never overtakes its update.
 *
 * @example
 * ```ts ignore
 * const maps = new StackDeltaMaps(object);
 * await maps.load(7, buildStackDeltas(table, maps.registry)); // resolves once BPF can read the rows
 * maps.unload(7, deltas);
 * await maps.settled();
 * ```
 *
 * @module
 */
import type { BpfObject } from "../bpf/object.ts";
import { type BpfMap, createMap, u64Key, writeMmapableArray, writeU64 } from "../bpf/map.ts";
import { LibbpfError } from "../bpf/libbpf.ts";
import { E2BIG } from "../sys/errno.ts";
import { libc } from "../sys/libc.ts";
import { getLogger } from "../log/logger.ts";
import {
  StackDeltaConstants,
  stackDeltaLayout,
  stackDeltaPageInfoLayout,
  stackDeltaPageKeyLayout,
  UnwindFpOpcode,
  unwindInfoLayout,
} from "../../support/types.ts";
import { BPF_MAPS, type BpfMapName, isBpfMapName } from "../../support/bpf_catalogue.ts";
import { type ResolvedRule, type StackDeltaFile, UnwindInfoRegistry } from "./stack_deltas.ts";

const logger = getLogger(["omniprof", "unwind"]);

/** The stack-delta maps of one loaded BPF object. */
export class StackDeltaMaps {
  readonly registry: UnwindInfoRegistry;
  #object: BpfObject;
  /** The rule array as the map holds it; rules [#flushed, #registered) are not in the map yet. */
  #rules: Uint8Array;
  #rulesView: DataView;
  #rulesFd: number;
  #flushed = 0;
  #registered = 0;
  /** Bytes of BPF map memory held for deltas (arrays and page entries), for reporting. */
  bytes = 0;
  /** The last write to a hash-of-maps of each rows id still running: the next one waits for it. */
  #writing = new Map<number, Promise<unknown>>();
  /** Row arrays held by each hash-of-maps, to refuse one it has no room for before writing anything. */
  #arrays = new Map<BucketMapName, number>();
  #closed = false;

  constructor(object: BpfObject) {
    this.#object = object;
    const rules = object.map("unwind_info_array");
    this.#rulesFd = rules.fd;
    this.#rules = new Uint8Array(rules.maxEntries * RULE_ELEMENT_SIZE);
    const view = new DataView(this.#rules.buffer);
    this.#rulesView = view;
    // Rules get consecutive indexes as they are first seen.
    this.registry = new UnwindInfoRegistry(
      rules.maxEntries,
      (index, opcode, fpOpcode, merge, param, fpParam) => {
        const at = index * RULE_ELEMENT_SIZE;
        view.setUint8(at + unwindInfoLayout.opcode.offset, opcode);
        view.setUint8(at + unwindInfoLayout.fp_opcode.offset, fpOpcode);
        view.setUint8(at + unwindInfoLayout.merge_opcode.offset, merge);
        view.setInt32(at + unwindInfoLayout.param.offset, param, true);
        view.setInt32(at + unwindInfoLayout.fp_param.offset, fpParam, true);
        this.#registered = Math.max(this.#registered, index + 1);
        this.bytes += unwindInfoLayout.sizeof;
      },
    );
  }

  /**
   * Makes the deltas of file `fileId` visible to the unwinder. Their rows go into an array of their
   * own, keyed `rowsId` in its bucket: the file id for a whole file; an id of their own for pages of a
   * file loaded one at a time. The page entries are written at once, and BPF reads a page whose rows
   * have not arrived as not loaded.
   *
   * @throws {LibbpfError} at once when a map is full or the rows cannot be written; the returned promise
   * resolves when BPF can read the rows, or rejects when the kernel refused them (the page entries then
   * lead nowhere until {@linkcode unload}).
   */
  load(fileId: number, deltas: StackDeltaFile, rowsId = fileId): Promise<void> {
    // Its rules first: a row must never name a rule the unwinder cannot read yet.
    if (this.#registered > this.#flushed) {
      const from = this.#flushed * RULE_ELEMENT_SIZE;
      writeMmapableArray(
        this.#rulesFd,
        this.#rules.subarray(from, this.#registered * RULE_ELEMENT_SIZE),
        this.#rules.length,
        from,
      );
      this.#flushed = this.#registered;
    }
    const size = 2 ** deltas.bucket;
    const bucketMap = bucketMapName(deltas.bucket);
    const outer = this.#object.map(bucketMap);
    const arrays = this.#arrays.get(bucketMap) ?? 0;
    if (arrays >= outer.maxEntries) throw new LibbpfError(`update map ${bucketMap}`, E2BIG);
    // Made as the object's template says (BPF_F_INNER_MAP lets it be larger than the template).
    const template = BPF_MAPS[bucketMap].inner;
    const inner = createMap(
      template.type,
      `deltas_${fileId}`,
      template.keySize,
      template.valueSize,
      size,
      template.flags,
    );
    // The value of a map of maps is the inner map's descriptor.
    const value = new Uint8Array(BPF_MAPS[bucketMap].valueSize);
    new DataView(value.buffer).setUint32(0, inner, true);
    let stored: Promise<void>;
    try {
      writeMmapableArray(inner, new Uint8Array(arrayElements(deltas).buffer), size * ARRAY_ELEMENT_SIZE);
      stored = this.#write(rowsId, (key) => outer.updateOffThread(key, value));
    } catch (error) {
      libc().fn.close(inner);
      throw error;
    }
    // The outer map holds its own reference to the array once the update ran.
    const settled = stored.finally(() => libc().fn.close(inner));
    this.#arrays.set(bucketMap, arrays + 1);
    const pages = this.#object.map("stack_delta_page_to_info");
    const key = new Uint8Array(stackDeltaPageKeyLayout.sizeof);
    const keyView = new DataView(key.buffer);
    const info = new Uint8Array(stackDeltaPageInfoLayout.sizeof);
    const infoView = new DataView(info.buffer);
    writeU64(keyView, stackDeltaPageKeyLayout.file_id.offset, fileId);
    infoView.setUint16(stackDeltaPageInfoLayout.map_id.offset, deltas.bucket, true);
    infoView.setUint32(stackDeltaPageInfoLayout.rows_id.offset, rowsId, true);
    let written = 0;
    try {
      for (; written < deltas.pages.length; written++) {
        writeU64(keyView, stackDeltaPageKeyLayout.page.offset, deltas.pages[written]!);
        infoView.setUint32(stackDeltaPageInfoLayout.first_delta.offset, deltas.pageFirst[written]!, true);
        infoView.setUint16(stackDeltaPageInfoLayout.num_deltas.offset, deltas.pageCount[written]!, true);
        pages.update(key, info);
      }
    } catch (error) {
      // All or nothing (the page map is full): what was written would be owned by no one, and the rows
      // array would hold its kernel memory until the session ends.
      for (let i = 0; i < written; i++) {
        writeU64(keyView, stackDeltaPageKeyLayout.page.offset, deltas.pages[i]!);
        pages.delete(key);
      }
      void settled.catch(() => {});
      this.#removeArray(bucketMap, outer, rowsId);
      throw error;
    }
    this.bytes += size * ARRAY_ELEMENT_SIZE +
      deltas.pages.length * (stackDeltaPageKeyLayout.sizeof + stackDeltaPageInfoLayout.sizeof);
    return settled;
  }

  /** Resolves once no write to a hash-of-maps is running. */
  async settled(): Promise<void> {
    while (this.#writing.size > 0) await Promise.allSettled([...this.#writing.values()]);
  }

  /** Writes nothing more: the BPF object is closing. Writes already running finish. */
  close(): void {
    this.#closed = true;
  }

  /**
   * Makes row `row` of `file` ready to apply at ELF address `vaddr`, as the BPF unwinder does
   * (bpf/stack_deltas.bpf.h, resolve_rule): its rule read from the rule array as BPF holds it, and a merged
   * push or pop applied. False when the row names a rule the array does not hold.
   */
  resolveRule(file: StackDeltaFile, row: number, vaddr: number, out: ResolvedRule): boolean {
    const addrLow = file.deltas[2 * row]!;
    const unwindInfo = file.deltas[2 * row + 1]!;
    out.unwindInfo = unwindInfo;
    out.cfaOpcode = 0;
    out.cfaParam = 0;
    out.fpOpcode = UnwindFpOpcode.Unchanged;
    out.fpParam = 0;
    if (unwindInfo & StackDeltaConstants.DeltaCommandFlag) return true;
    if (unwindInfo >= this.#flushed) return false;
    const at = unwindInfo * RULE_ELEMENT_SIZE;
    const view = this.#rulesView;
    let param = view.getInt32(at + unwindInfoLayout.param.offset, true);
    const merge = view.getUint8(at + unwindInfoLayout.merge_opcode.offset);
    if (merge && vaddr % PAGE_SIZE >= addrLow + (merge & ~StackDeltaConstants.MergeOpcodeNegative)) {
      param += merge & StackDeltaConstants.MergeOpcodeNegative ? -8 : 8;
    }
    out.cfaOpcode = view.getUint8(at + unwindInfoLayout.opcode.offset);
    out.cfaParam = param;
    out.fpOpcode = view.getUint8(at + unwindInfoLayout.fp_opcode.offset);
    out.fpParam = view.getInt32(at + unwindInfoLayout.fp_param.offset, true);
    return true;
  }

  /** Removes deltas loaded with {@linkcode load} (their rules stay in the shared array). */
  unload(fileId: number, deltas: StackDeltaFile, rowsId = fileId): void {
    const pages = this.#object.map("stack_delta_page_to_info");
    const key = new Uint8Array(stackDeltaPageKeyLayout.sizeof);
    const keyView = new DataView(key.buffer);
    writeU64(keyView, stackDeltaPageKeyLayout.file_id.offset, fileId);
    for (let i = 0; i < deltas.pages.length; i++) {
      writeU64(keyView, stackDeltaPageKeyLayout.page.offset, deltas.pages[i]!);
      pages.delete(key);
    }
    const bucketMap = bucketMapName(deltas.bucket);
    this.#removeArray(bucketMap, this.#object.map(bucketMap), rowsId);
    this.bytes -= 2 ** deltas.bucket * ARRAY_ELEMENT_SIZE +
      deltas.pages.length * (stackDeltaPageKeyLayout.sizeof + stackDeltaPageInfoLayout.sizeof);
  }

  /** Deletes the rows array `rowsId` from `outer` once its update ran; failures only cost map room. */
  #removeArray(bucketMap: BucketMapName, outer: BpfMap, rowsId: number): void {
    this.#arrays.set(bucketMap, (this.#arrays.get(bucketMap) ?? 1) - 1);
    void this.#write(rowsId, (key) => outer.deleteOffThread(key)).catch((error) => {
      logger.debug("Cannot delete stack deltas {rowsId} from {map}: {error}", {
        rowsId,
        map: bucketMap,
        error: error instanceof Error ? error.message : String(error),
      });
    });
  }

  /**
   * Runs `write` for the key of `rowsId` after the write to it that is still running, if any. Once
   * closed, a write not started yet does nothing.
   */
  #write<T>(rowsId: number, write: (key: Uint8Array) => Promise<T>): Promise<T | undefined> {
    const key = u64Key(rowsId);
    const before = this.#writing.get(rowsId);
    const run = () => this.#closed ? Promise.resolve(undefined) : write(key);
    const done = before ? before.then(run, run) : run();
    this.#writing.set(rowsId, done);
    const forget = () => {
      if (this.#writing.get(rowsId) === done) this.#writing.delete(rowsId);
    };
    done.then(forget, forget);
    return done;
  }
}

/**
 * The rows of `deltas` laid out as the kernel lays out array elements, 8-byte aligned (as the mapping
 * is). A loop over every row of a file, in a function of its own: in load(), V8 compiled all of that
 * function by on-stack replacement for it, in every session that loads libc.
 */
function arrayElements(deltas: StackDeltaFile): Uint32Array {
  const stride = ARRAY_ELEMENT_SIZE / 4;
  const packed = new Uint32Array(deltas.count * stride);
  const rows = new Uint32Array(deltas.deltas.buffer, deltas.deltas.byteOffset, deltas.count);
  for (let i = 0; i < deltas.count; i++) packed[stride * i] = rows[i]!;
  return packed;
}

/** The kernel rounds array elements up to 8 bytes. */
const ARRAY_ELEMENT_SIZE = Math.ceil(stackDeltaLayout.sizeof / 8) * 8;
const RULE_ELEMENT_SIZE = Math.ceil(unwindInfoLayout.sizeof / 8) * 8;
const PAGE_SIZE = 2 ** StackDeltaConstants.StackDeltaPageBits;

/** A hash of maps that holds the row arrays of one bucket. */
export type BucketMapName = Extract<BpfMapName, `exe_id_to_${number}_stack_deltas`>;

/**
 * The map of the files whose rows come in arrays of 2^`bucket` entries.
 *
 * @throws {RangeError} for a bucket the BPF object has no map for.
 */
export function bucketMapName(bucket: number): BucketMapName {
  const name = `exe_id_to_${bucket}_stack_deltas` as const;
  if (!isBpfMapName(name)) {
    throw new RangeError(`Cannot hold 2^${bucket} stack deltas: the BPF object has no ${name}`);
  }
  return name;
}

/** Buckets hold 2^smallest..2^largest rows. */
export const BUCKETS = {
  smallest: StackDeltaConstants.StackDeltaBucketSmallest,
  largest: StackDeltaConstants.StackDeltaBucketLargest,
};

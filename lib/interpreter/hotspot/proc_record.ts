/**
 * A process's `hotspot_procs` record (`struct hotspot_proc_info`, bpf/hotspot_tracer.h): its code heaps,
 * and the offsets of the JVM's classes the BPF unwinder reads, which every process of a `libjvm.so` shares.
 *
 * @example
 * ```ts ignore
 * import { hotspotProcRecord } from "./proc_record.ts";
 * ebpf.updateProcData("hotspot", pid, hotspotProcRecord(layout, heaps));
 * ```
 *
 * @module
 */
import { HotspotLimits, hotspotProcInfoLayout } from "../../../support/types.ts";
import type { CodeHeap } from "./code_cache.ts";
import type { HotspotLayout } from "./data.ts";
import { VmStructsError } from "./vm_structs.ts";

/**
 * The `struct hotspot_proc_info` of a JVM with `layout` and code `heaps`.
 *
 * @throws {VmStructsError} when the record cannot hold them (more heaps than it has room for, an offset
 *   beyond what BPF reads of a code blob, segments of different sizes).
 */
export function hotspotProcRecord(layout: HotspotLayout, heaps: readonly CodeHeap[]): Uint8Array {
  const L = hotspotProcInfoLayout;
  const { code, methods } = layout;
  if (heaps.length > HotspotLimits.MaxHeaps) {
    throw new VmStructsError(`${heaps.length} code heaps: BPF holds ${HotspotLimits.MaxHeaps}`);
  }
  const log2 = heaps[0]!.log2SegmentSize;
  if (heaps.some((heap) => heap.log2SegmentSize !== log2)) {
    throw new VmStructsError("code heaps with segments of different sizes");
  }
  const blobFields: [string, number, number][] = [
    ["CodeBlob._name", code.blobName, 8],
    ["CodeBlob._frame_size", code.blobFrameSize, 4],
    ["CodeBlob._frame_complete_offset", code.blobFrameComplete.offset, code.blobFrameComplete.bytes],
    ["CodeBlob code begin", code.blobCodeBegin.offset, code.blobCodeBegin.kind === "pointer" ? 8 : 4],
    ["nmethod._compile_id", code.nmethodCompileId, 4],
  ];
  for (const [name, offset, width] of blobFields) {
    if (offset < 0 || offset + width > HotspotLimits.BlobBytes) {
      throw new VmStructsError(
        `${name} at ${offset} lies beyond the ${HotspotLimits.BlobBytes} bytes BPF reads`,
      );
    }
  }
  const record = new Uint8Array(L.sizeof);
  const view = new DataView(record.buffer);
  heaps.forEach((heap, i) => {
    const at = L.heaps.offset + i * L.heaps.elementSize;
    view.setBigUint64(at, BigInt(heap.low), true);
    view.setBigUint64(at + 8, BigInt(heap.high), true);
    view.setBigUint64(at + 16, BigInt(heap.segmap), true);
  });
  view.setUint32(L.num_heaps.offset, heaps.length, true);
  const u16 = (field: { offset: number }, value: number) => view.setUint16(field.offset, value, true);
  const u8 = (field: { offset: number }, value: number) => view.setUint8(field.offset, value);
  u16(L.blob_name, code.blobName);
  u16(L.blob_frame_size, code.blobFrameSize);
  u16(L.blob_frame_complete, code.blobFrameComplete.offset);
  u16(L.blob_code_begin, code.blobCodeBegin.offset);
  u16(L.nmethod_compile_id, code.nmethodCompileId);
  u16(L.method_const_method, methods.methodConstMethod);
  u16(L.const_method_size, methods.constMethodSize);
  u8(L.log2_segment_size, log2);
  u8(L.heap_block_size, code.heapBlockSize);
  u8(L.blob_code_begin_is_offset, code.blobCodeBegin.kind === "offset" ? 1 : 0);
  u8(L.blob_frame_complete_short, code.blobFrameComplete.bytes === 2 ? 1 : 0);
  return record;
}

import assert from "node:assert/strict";
import { BPF_F_MMAPABLE, createMap, type MapWriter } from "../bpf/map.ts";
import { MappedArray } from "../bpf/mapped_array.ts";
import { BpfMapType } from "../bpf/uapi.ts";
import { FileRegistry } from "../process/file_registry.ts";
import { ProcessManager } from "../process/process_manager.ts";
import { EventKind, FrameMarker, offCpuTotalLayout, TraceOrigin } from "../../support/types.ts";
import { closeFd } from "../sys/directory.ts";
import { tracingTest } from "../../tests/helpers.ts";
import { OffCpuStacks } from "./off_cpu_stacks.ts";
import { StackTable } from "./stack_table.ts";
import {
  FRAME_ADDRESS,
  FRAME_KIND,
  FRAME_SIZE,
  RECORD_KIND,
  RECORD_OFF_CPU_NS,
  RECORD_OFF_CPU_STACK,
  RECORD_PID,
  RECORD_TID,
  TRACE_FRAMES,
  TRACE_NUM_FRAMES,
  TRACE_ORIGIN,
} from "./trace_format.ts";

/** An off-CPU trace of one kernel frame at `address`, away `ns`, asking for an id for `hash` (0: not). */
function offCpuTrace(address: number, ns: number, hash: number): DataView {
  const view = new DataView(new ArrayBuffer(TRACE_FRAMES + FRAME_SIZE));
  view.setUint32(RECORD_KIND, EventKind.Trace, true);
  view.setUint32(RECORD_PID, 700, true);
  view.setUint32(RECORD_TID, 701, true);
  view.setUint32(RECORD_OFF_CPU_NS, ns, true);
  view.setUint32(RECORD_OFF_CPU_STACK, hash, true);
  view.setUint8(TRACE_ORIGIN, TraceOrigin.OffCpu);
  view.setUint16(TRACE_NUM_FRAMES, 1, true);
  view.setUint8(TRACE_FRAMES + FRAME_KIND, FrameMarker.Kernel);
  view.setUint32(TRACE_FRAMES + FRAME_ADDRESS, address, true);
  view.setUint32(TRACE_FRAMES + FRAME_ADDRESS + 4, 0xffffffff, true);
  return view;
}

/** off_cpu_stack_ids as the kernel would hold it, by the hash's bytes. */
class IdsMap implements MapWriter {
  readonly ids = new Map<string, number>();
  update(key: Uint8Array, value: Uint8Array): void {
    this.ids.set(key.join(","), new DataView(value.buffer, value.byteOffset).getUint32(0, true));
  }
  delete(key: Uint8Array): boolean {
    return this.ids.delete(key.join(","));
  }
}

/** Adds a wait to off_cpu_totals[id] as BPF does, through a mapping of its own. */
function addWait(totals: MappedArray, id: number, ns: number): void {
  const at = id * offCpuTotalLayout.sizeof;
  totals.view.setBigUint64(at + offCpuTotalLayout.ns.offset, BigInt(totals.readU64(at) + ns), true);
  const waits = at + offCpuTotalLayout.waits.offset;
  totals.view.setBigUint64(waits, BigInt(totals.readU64(waits) + 1), true);
}

function summary(table: StackTable) {
  return table.stacks().map(({ frames, count, offCpuNs }) => ({
    address: frames[0]!.address,
    count,
    offCpuNs,
  }));
}

Deno.test(
  tracingTest(
    "OffCpuStacks gives each new stack an id, and charges the waits the kernel adds up to it, in every interval's table",
    () => {
      const capacity = 4;
      const fd = createMap(
        BpfMapType.Array,
        "test_totals",
        4,
        offCpuTotalLayout.sizeof,
        capacity,
        BPF_F_MMAPABLE,
      );
      try {
        using files = new FileRegistry({ procRoot: "/nonexistent" });
        using processes = new ProcessManager({ files, procRoot: "/nonexistent" });
        const ids = new IdsMap();
        using stacks = new OffCpuStacks(ids, fd, capacity);
        using kernel = new MappedArray(fd, capacity * offCpuTotalLayout.sizeof);
        const table = new StackTable(processes, files, stacks);

        // Two stacks ask for ids with their first waits; a third trace asks for none.
        table.onRecord(offCpuTrace(0x81000100, 1000, 0xaaaa), 0, TRACE_FRAMES + FRAME_SIZE);
        table.onRecord(offCpuTrace(0x81000200, 2000, 0xbbbb), 0, TRACE_FRAMES + FRAME_SIZE);
        table.onRecord(offCpuTrace(0x81000100, 500, 0), 0, TRACE_FRAMES + FRAME_SIZE);
        assert.deepEqual([...ids.ids.values()], [0, 1]);
        assert.equal(stacks.size, 2);

        // The kernel adds waits to both; each drain charges what was added since the last.
        addWait(kernel, 0, 10_000);
        addWait(kernel, 0, 20_000);
        addWait(kernel, 1, 5_000);
        stacks.charge(table);
        stacks.charge(table);
        assert.deepEqual(summary(table), [
          { address: 0x81000100, count: 4, offCpuNs: 31_500 },
          { address: 0x81000200, count: 2, offCpuNs: 7_000 },
        ]);
        assert.equal(table.offCpuWaits, 6);
        assert.equal(table.offCpuNs, 38_500);

        // A new interval's table gets only what came after, its stacks decoded from the records that
        // defined them; a thread still switched out at the end is charged one wait.
        const next = new StackTable(processes, files, stacks);
        addWait(kernel, 1, 7_000);
        stacks.charge(next);
        stacks.chargeWait(next, 1, 3_000);
        assert.deepEqual(summary(next), [{ address: 0x81000200, count: 2, offCpuNs: 10_000 }]);
        assert.equal(next.offCpuWaits, 2);

        // Past the capacity, no id is given: those waits keep coming whole.
        table.onRecord(offCpuTrace(0x81000300, 1, 0xcccc), 0, TRACE_FRAMES + FRAME_SIZE);
        table.onRecord(offCpuTrace(0x81000400, 1, 0xdddd), 0, TRACE_FRAMES + FRAME_SIZE);
        table.onRecord(offCpuTrace(0x81000500, 1, 0xeeee), 0, TRACE_FRAMES + FRAME_SIZE);
        assert.equal(stacks.size, capacity);
        assert.equal(ids.ids.size, capacity);
      } finally {
        closeFd(fd);
      }
    },
  ),
);

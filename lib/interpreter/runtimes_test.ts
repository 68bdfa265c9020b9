import { openTracerObject } from "../record/tracer_object.ts";
import assert from "node:assert/strict";
import { libbpf, LibbpfError } from "../bpf/libbpf.ts";
import { u32Key } from "../bpf/map.ts";
import { fillUnwindPrograms, unwindPrograms } from "../bpf/unwind_programs.ts";
import { BPF_MAPS, BPF_PROGRAMS, type BpfProgramName } from "../../support/bpf_catalogue.ts";
import { FrameMarker, MetricId, UnwindProgram } from "../../support/types.ts";
import { tracingTest } from "../../tests/helpers.ts";
import { processMapOf, runtimeProcessMaps, RUNTIMES, runtimeUnwinders } from "./runtimes.ts";

/** The program sampling starts with, which jumps through the table: its programs must be of its type. */
const ENTRY: BpfProgramName = "sample_cpu";

Deno.test("the runtime list fills distinct slots of the table with programs of the sampler's type", () => {
  const filled = unwindPrograms(runtimeUnwinders(RUNTIMES));
  assert.ok(
    filled.length >= 3 && filled.some(({ slot }) => slot === UnwindProgram.Native),
    `${filled.length} slots`,
  );
  assert.equal(new Set(filled.map(({ slot }) => slot)).size, filled.length);
  for (const { slot, program } of filled) {
    assert.ok(
      slot < BPF_MAPS.progs.maxEntries,
      `${program} in slot ${slot} of ${BPF_MAPS.progs.maxEntries}`,
    );
    assert.equal(BPF_PROGRAMS[program].type, BPF_PROGRAMS[ENTRY].type, program);
  }
});

/** The programs that begin traces on perf events: CPU samples, and switch-outs for off-CPU time. */
const PERF_EVENT_ENTRIES: readonly BpfProgramName[] = [ENTRY, "off_cpu_switch_out"];

Deno.test("every program of the sampler's type begins traces or is in the table (none is left unreachable)", () => {
  const listed = new Set<string>(unwindPrograms(runtimeUnwinders(RUNTIMES)).map(({ program }) => program));
  const sameType = (Object.keys(BPF_PROGRAMS) as BpfProgramName[])
    .filter((name) =>
      !PERF_EVENT_ENTRIES.includes(name) && BPF_PROGRAMS[name].type === BPF_PROGRAMS[ENTRY].type
    );
  assert.ok(sameType.length >= 3, sameType.join(", "));
  for (const name of sameType) assert.ok(listed.has(name), `${name} is in no slot of the table`);
});

Deno.test("each runtime has its own name, and its per-process map is a hash map of pids", () => {
  assert.equal(new Set(RUNTIMES.map(({ name }) => name)).size, RUNTIMES.length);
  for (const map of runtimeProcessMaps(RUNTIMES)) {
    assert.equal(BPF_MAPS[map].keySize, 4, map);
  }
  for (const runtime of RUNTIMES) {
    if (runtime.processMap !== null) assert.equal(processMapOf(RUNTIMES, runtime.name), runtime.processMap);
  }
  assert.throws(() => processMapOf([], "ruby"), /Cannot keep ruby processes/);
});

Deno.test("each runtime marks its frames and counts in BPF with ids of its own, outside the shared ones", () => {
  const markers = RUNTIMES.flatMap(({ frameKind }) => frameKind === null ? [] : [frameKind.marker]);
  assert.equal(new Set(markers).size, markers.length, `markers ${markers.join(", ")}`);
  const shared = new Set<number>(Object.values(FrameMarker));
  for (const marker of markers) {
    assert.ok(!shared.has(marker) && marker > 0 && marker < FrameMarker.ErrorBit, `marker ${marker}`);
  }
  const ids = RUNTIMES.flatMap(({ bpfMetrics }) => Object.values(bpfMetrics));
  const names = RUNTIMES.flatMap(({ bpfMetrics }) => Object.keys(bpfMetrics));
  assert.ok(ids.length >= RUNTIMES.length, `${ids.length} runtime counters`);
  assert.equal(new Set(ids).size, ids.length, `counter ids ${ids.join(", ")}`);
  for (const id of ids) assert.ok(id >= MetricId.RuntimesFirst && id < MetricId.Count, `counter ${id}`);
  const sharedNames = new Set(Object.keys(MetricId));
  for (const name of names) assert.ok(!sharedNames.has(name), `${name} is a shared counter's name`);
});

/** The kernel's id of a loaded program (struct bpf_prog_info: type at byte 0, id at byte 4). */
function programId(fd: number): number {
  const info = new Uint8Array(256);
  const length = new Uint32Array([info.length]);
  const result = libbpf().fn.bpf_obj_get_info_by_fd(fd, info, new Uint8Array(length.buffer));
  if (result < 0) throw new LibbpfError(`get the information on program fd ${fd}`, -result);
  return new DataView(info.buffer).getUint32(4, true);
}

Deno.test(tracingTest("fillUnwindPrograms() puts each listed program in its slot, and nothing else", () => {
  using object = openTracerObject();
  // Not jumped to; it needs a kernel of 5.14 or later.
  object.program("name_kernel_addresses").setAutoload(false);
  object.load();
  const entries = unwindPrograms(runtimeUnwinders(RUNTIMES));
  fillUnwindPrograms(object, entries);
  const progs = object.map("progs");
  // Read from user space, a slot of a program array holds the id of its program.
  const value = new Uint32Array(1);
  const filled = new Map<number, number>();
  for (let slot = 0; slot < progs.maxEntries; slot++) {
    if (progs.lookup(u32Key(slot), new Uint8Array(value.buffer))) filled.set(slot, value[0]!);
  }
  const expected = new Map<number, number>(
    entries.map(({ slot, program }) => [slot, programId(object.program(program).fd)]),
  );
  assert.ok(expected.size >= 3 && expected.has(UnwindProgram.Native), `${expected.size} programs listed`);
  assert.deepEqual(filled, expected);
}));

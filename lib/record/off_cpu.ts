/**
 * Off-CPU time, the host's part: how many switched-out threads BPF keeps room for, and the waits still
 * going on when a recording stops. BPF unwinds a thread in scope each time it is switched out
 * (`off_cpu_switch_out`, bpf/tracer.bpf.c) and keeps, by thread id, when and in which stack
 * (`off_cpu_waits`); when the thread is switched back in (bpf/off_cpu.bpf.c) the wait is added to its
 * stack's total in the kernel (lib/record/off_cpu_stacks.ts), or, for a stack without an id yet, the whole
 * trace kept in `off_cpu_traces` goes to the ring buffer with how long the thread was away, if that is at
 * least the minimum. A thread that never came back before the end (a lock held for the whole session)
 * would show nothing; {@linkcode drainSwitchedOut} charges its wait up to the end instead.
 *
 * @example
 * ```ts ignore
 * import { drainSwitchedOut, offCpuCapacity } from "./off_cpu.ts";
 * object.map("off_cpu_waits").setMaxEntries(offCpuCapacity([], true));
 * // ... after the programs are detached:
 * drainSwitchedOut({ waits, traces }, stoppedAtNs, minNs, offCpuStacks, table);
 * ```
 *
 * @module
 */
import type { BpfMap } from "../bpf/map.ts";
import type { RecordSink } from "../bpf/ring_buffer.ts";
import type { Pid } from "../types.ts";
import {
  eventHeaderLayout,
  frameLayout,
  OffCpuConstants,
  offCpuTraceLayout,
  offCpuWaitLayout,
} from "../../support/types.ts";
import type { OffCpuStacks, OffCpuWaitSink } from "./off_cpu_stacks.ts";

/** What off-CPU recording takes. */
export interface OffCpuOptions {
  /** Waits shorter than this many ns are dropped in BPF. */
  minNs: number;
}

/**
 * Default minimum wait, in µs: keep them all. Measured with the bench's switch-heavy workload (two threads
 * handing a byte back and forth through pipes on one CPU, about 34,000 switches a second, nearly every
 * wait between 10 and 100 µs), `record --off-cpu -p PID -d 5`, CPU of omniprof's process (user + system),
 * three runs each: minimum 1 µs 0.18-0.20 s, ~170,000 waits recorded (all but ~200 added up in the kernel);
 * 100 µs 0.18-0.20 s, 18-35 waits recorded, 99.9% of the 5 s of waits dropped. Since the kernel adds up
 * the waits of a stack it has seen (lib/record/off_cpu_stacks.ts), the host's cost does not depend on how
 * many there are, so a floor saves nothing and would drop the waits of exactly such a workload. The BPF
 * cost (an unwind per switch-out) is the same whatever the minimum.
 */
export const DEFAULT_OFF_CPU_MIN_US = 1;

/** Room per switched-out thread: one struct off_cpu_trace (4.6 KB), preallocated by the kernel. */
export const OFF_CPU_TRACE_BYTES = offCpuTraceLayout.sizeof;

/** Threads kept at least and at most; 1,024 cost 4.7 MB of kernel memory, 16,384 75 MB. */
const MIN_THREADS = 1024;
const MAX_THREADS = 16384;

/**
 * How many switched-out threads BPF keeps room for: twice the threads in scope now (they start more),
 * within 1,024..16,384. The whole system's when `pids` is empty; a command about to start has none yet,
 * and gets the minimum.
 */
export function offCpuCapacity(pids: readonly Pid[], wholeSystem: boolean): number {
  const threads = wholeSystem ? threadsOfAll() : pids.reduce((sum, pid) => sum + threadsOf(pid), 0);
  return Math.min(MAX_THREADS, Math.max(MIN_THREADS, 2 * threads));
}

function threadsOf(pid: Pid | string): number {
  try {
    let count = 0;
    for (const _ of Deno.readDirSync(`/proc/${pid}/task`)) count++;
    return count;
  } catch {
    return 0; // gone meanwhile
  }
}

function threadsOfAll(): number {
  let count = 0;
  for (const entry of Deno.readDirSync("/proc")) {
    if (/^\d+$/.test(entry.name)) count += threadsOf(entry.name);
  }
  return count;
}

const OFF_CPU_NS = eventHeaderLayout.off_cpu_ns.offset + offCpuTraceLayout.hdr.offset;
const WAIT_SINCE = offCpuWaitLayout.since_ns.offset;
const WAIT_STACK = offCpuWaitLayout.stack.offset;

/** The maps of switched-out threads: `off_cpu_waits` and `off_cpu_traces`. */
export interface SwitchedOutMaps {
  waits: BpfMap;
  traces: BpfMap;
}

/**
 * Charges each thread still switched out in `maps` when the programs were detached at `stoppedAtNs`
 * (CLOCK_MONOTONIC) with its wait so far, if at least `minNs`: to its stack's id through `stacks`, or, for
 * a stack without one, as a trace record handed to `sink`. Empties the maps. Returns how many waits it
 * charged. Call after detaching, so that nothing changes the maps meanwhile.
 */
export function drainSwitchedOut(
  maps: SwitchedOutMaps,
  stoppedAtNs: number,
  minNs: number,
  stacks: OffCpuStacks,
  sink: RecordSink & OffCpuWaitSink,
): number {
  const wait = new Uint8Array(offCpuWaitLayout.sizeof);
  const waitView = new DataView(wait.buffer);
  const trace = new Uint8Array(OFF_CPU_TRACE_BYTES);
  const traceView = new DataView(trace.buffer);
  let charged = 0;
  for (const key of maps.waits.keys(4)) {
    if (!maps.waits.lookup(key, wait)) continue;
    maps.waits.delete(key);
    const away = stoppedAtNs - Number(waitView.getBigUint64(WAIT_SINCE, true));
    const id = waitView.getUint32(WAIT_STACK, true);
    if (id !== OffCpuConstants.NoId) {
      if (!(away >= minNs)) continue;
      stacks.chargeWait(sink, id, Math.round(away));
      charged++;
      continue;
    }
    if (!maps.traces.lookup(key, trace)) continue;
    maps.traces.delete(key);
    if (!(away >= minNs)) continue;
    traceView.setBigUint64(OFF_CPU_NS, BigInt(Math.round(away)), true);
    const frames = Math.min(
      traceView.getUint16(offCpuTraceLayout.num_frames.offset, true),
      offCpuTraceLayout.frames.size / frameLayout.sizeof,
    );
    sink.onRecord(traceView, 0, offCpuTraceLayout.frames.offset + frames * frameLayout.sizeof);
    charged++;
  }
  return charged;
}

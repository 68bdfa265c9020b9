/**
 * One short tracer session that several guest checks read: the tracer follows the children of this
 * process, a workload is started (fork, exec), burns CPU while it is sampled, and exits. Everything the
 * ring buffer delivered for it is kept, decoded, with the BPF counters at the end.
 *
 * @example
 * ```ts ignore
 * import { runSamplingSession } from "./sampling_session.ts";
 * const session = await runSamplingSession("/omniprof/workloads/chain", ["1.5"]);
 * console.log(session.traces.length, session.events.map((e) => e.kind));
 * ```
 *
 * @module
 */
import type { RecordSink } from "../../lib/bpf/ring_buffer.ts";
import { Tracer, type TracerMetrics } from "../../lib/record/tracer.ts";
import {
  COMM_LENGTH,
  FRAME_KIND,
  FRAME_SIZE,
  PROCESS_EVENT_COMM,
  PROCESS_EVENT_PARENT,
  RECORD_KIND,
  RECORD_PID,
  RECORD_TID,
  TRACE_FRAMES,
  TRACE_NUM_FRAMES,
} from "../../lib/record/trace_format.ts";
import type { Pid } from "../../lib/types.ts";
import { EventKind, FrameMarker, StackCopyMode } from "../../support/types.ts";

/** A trace record, reduced to what the checks look at. */
export interface SessionTrace {
  pid: number;
  frames: number;
  kernelFrames: number;
  nativeFrames: number;
}

/** A process event record. */
export interface SessionEvent {
  kind: number;
  pid: number;
  tid: number;
  parentPid: number;
  comm: string;
}

/** What one session saw. */
export interface SamplingSession {
  /** The workload's process id. */
  workloadPid: number;
  workloadExitCode: number;
  /** Traces of the workload. */
  traces: SessionTrace[];
  /** Traces of other processes (should be none: the tracer follows only our children). */
  otherTraces: number;
  /** Process events of the workload, in ring buffer order. */
  events: SessionEvent[];
  metrics: TracerMetrics;
  cpus: number;
}

const decoder = new TextDecoder();

class SessionSink implements RecordSink {
  traces: SessionTrace[] = [];
  events: SessionEvent[] = [];
  otherTraces = 0;
  pid = -1;

  onRecord(view: DataView, offset: number): void {
    const kind = view.getUint32(offset + RECORD_KIND, true);
    const pid = view.getUint32(offset + RECORD_PID, true);
    if (kind === EventKind.Trace) {
      if (pid !== this.pid) {
        this.otherTraces++;
        return;
      }
      const frames = view.getUint16(offset + TRACE_NUM_FRAMES, true);
      let kernelFrames = 0;
      let nativeFrames = 0;
      for (let i = 0; i < frames; i++) {
        const marker = view.getUint8(offset + TRACE_FRAMES + i * FRAME_SIZE + FRAME_KIND);
        if (marker === FrameMarker.Kernel) kernelFrames++;
        else if (marker === FrameMarker.Native) nativeFrames++;
      }
      this.traces.push({ pid, frames, kernelFrames, nativeFrames });
      return;
    }
    const comm = new Uint8Array(view.buffer, view.byteOffset + offset + PROCESS_EVENT_COMM, COMM_LENGTH);
    const end = comm.indexOf(0);
    this.events.push({
      kind,
      pid,
      tid: view.getUint32(offset + RECORD_TID, true),
      parentPid: view.getUint32(offset + PROCESS_EVENT_PARENT, true),
      comm: decoder.decode(comm.subarray(0, end < 0 ? comm.length : end)),
    });
  }
}

/**
 * Starts the tracer (following this process's children), runs `command ARGS` to completion while
 * draining the ring buffer every 10 ms, and returns what arrived.
 */
export async function runSamplingSession(
  command: string,
  args: string[],
  frequencyHz = 199,
): Promise<SamplingSession> {
  const sink = new SessionSink();
  // The checks are of BPF's own unwinding. This tracer has no host side that installs processes, so by
  // default BPF would copy every stack for a host to unwind instead: ask for its frame-pointer walk.
  using tracer = Tracer.start({
    frequencyHz,
    followChildrenOf: [Deno.pid as Pid],
    stackCopy: StackCopyMode.Never,
  });
  // spawn() is synchronous, so the first drain runs after the pid is known.
  const timer = setInterval(() => tracer.drain(sink), 10);
  let status: Deno.CommandStatus;
  try {
    const child = new Deno.Command(command, { args, stdout: "null", stderr: "null" }).spawn();
    sink.pid = child.pid;
    status = await child.status;
    // Let the exit event and the last samples reach the ring buffer.
    await new Promise((resolve) => setTimeout(resolve, 100));
  } finally {
    clearInterval(timer);
  }
  tracer.stopSampling();
  tracer.drain(sink);
  return {
    workloadPid: sink.pid,
    workloadExitCode: status.code,
    traces: sink.traces,
    otherTraces: sink.otherTraces,
    events: sink.events.filter((event) => event.pid === sink.pid),
    metrics: tracer.metrics(),
    cpus: tracer.cpus.length,
  };
}

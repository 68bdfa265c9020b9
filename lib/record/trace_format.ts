/**
 * Byte offsets of the ring buffer records, derived from the layouts generated from the BPF object's
 * BTF (support/types.ts), as flat constants for the hot path.
 *
 * @module
 */
import {
  copiedStackLayout,
  eventHeaderLayout,
  frameLayout,
  processEventLayout,
  traceLabelLayout,
  traceLayout,
} from "../../support/types.ts";

const header = traceLayout.hdr.offset;
export const RECORD_KIND = header + eventHeaderLayout.kind.offset;
export const RECORD_KTIME = header + eventHeaderLayout.ktime.offset;
export const RECORD_OFF_CPU_NS = header + eventHeaderLayout.off_cpu_ns.offset;
export const RECORD_OFF_CPU_STACK = header + eventHeaderLayout.off_cpu_stack.offset;
export const RECORD_PID = header + eventHeaderLayout.pid.offset;
export const RECORD_TID = header + eventHeaderLayout.tid.offset;
export const TRACE_COMM = traceLayout.comm.offset;
export const COMM_LENGTH = traceLayout.comm.size;
export const TRACE_NUM_FRAMES = traceLayout.num_frames.offset;
export const TRACE_KERNEL_FRAMES = traceLayout.kernel_frames.offset;
export const TRACE_STOP_REASON = traceLayout.stop_reason.offset;
export const TRACE_ORIGIN = traceLayout.origin.offset;
export const TRACE_FRAMES = traceLayout.frames.offset;
export const TRACE_NUM_LABELS = traceLayout.num_labels.offset;
export const LABEL_SIZE = traceLabelLayout.sizeof;
export const LABEL_KEY_LENGTH = traceLabelLayout.key_len.offset;
export const LABEL_VALUE_LENGTH = traceLabelLayout.value_len.offset;
export const LABEL_KEY = traceLabelLayout.key.offset;
export const LABEL_VALUE = traceLabelLayout.value.offset;
/** The most bytes of a label's key or value a trace holds. */
export const LABEL_BYTES = traceLabelLayout.key.size;
export const FRAME_SIZE = frameLayout.sizeof;
export const FRAME_FILE_ID = frameLayout.file_id.offset;
export const FRAME_ADDRESS = frameLayout.addr_or_line.offset;
export const FRAME_KIND = frameLayout.kind.offset;
export const FRAME_FLAGS = frameLayout.flags.offset;
export const PROCESS_EVENT_PARENT = processEventLayout.parent_pid.offset;
export const PROCESS_EVENT_COMM = processEventLayout.comm.offset;
export const PROCESS_EVENT_FILE_ID = processEventLayout.file_id.offset;
export const PROCESS_EVENT_ADDRESS = processEventLayout.address.offset;
export const TRACE_FLAGS = traceLayout.flags.offset;
/** Offsets within the struct copied_stack behind the frames of a trace with TraceFlag.CopiedStack. */
export const COPY_PC = copiedStackLayout.pc.offset;
export const COPY_SP = copiedStackLayout.sp.offset;
export const COPY_FP = copiedStackLayout.fp.offset;
export const COPY_LENGTH = copiedStackLayout.length.offset;
export const COPY_SKIPPED = copiedStackLayout.skipped.offset;
export const COPY_RETURN_ADDRESS = copiedStackLayout.return_address.offset;
export const COPY_DATA = copiedStackLayout.data.offset;

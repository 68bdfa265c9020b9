// The HotSpot unwinder (the JVM). The native unwinder tail-calls it when pc is in the JVM's code cache
// (the code heaps, anonymous memory the host installs with this program): the template interpreter, the
// code C1 and C2 compiled, and the stubs. For each frame it finds the code blob that holds pc through its
// heap's segment map, and the blob says how to unwind: the interpreter's frames by their frame pointer
// (the Method and the bytecode pointer in fixed slots below it), compiled code and stubs by the frame size
// the blob records (their rbp is a general register), stubs without one by their frame pointer. It goes on
// while pc stays in the code cache and hands back to the native unwinder at the first frame that does not
// (the call stub returns into libjvm.so).
//
// A Java frame is recorded as (object | enum hotspot_frame_type, position | cookie << 32): the host
// names methods, lines and inlined calls from the process's memory while it lives
// (lib/interpreter/hotspot/README.md).
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>

#include "stack_deltas.bpf.h"
#include "stack_window.bpf.h"
#include "trace.bpf.h"
#include "hotspot_tracer.h"

// Frames per program run: the step is a global function, so the verifier checks it once whatever the
// number; with MAX_TAIL_CALLS runs this reaches MAX_FRAME_UNWINDS.
#define HOTSPOT_FRAMES_PER_RUN 16
// The first four bytes of a code blob's name, which tell its kind (little-endian).
#define HOTSPOT_NAME_INTERPRETER 0x65746e49 // "Inte"rpreter
#define HOTSPOT_NAME_NMETHOD 0x74656d6e     // "nmet"hod
#define HOTSPOT_NAME_NATIVE 0x6974616e      // "nati"ve nmethod
#define HOTSPOT_NAME_VTABLE 0x62617476      // "vtab"le chunks
#define HOTSPOT_FREE_SEGMENT 0xff
#define HOTSPOT_ADDRESS_MASK ((1ULL << 47) - 1)

struct hotspot_scratch {
  struct hotspot_proc_info info;
  // The first bytes of the code blob at pc; the slack lets a masked offset load 8 bytes inside the array.
  __u8 blob[HOTSPOT_BLOB_BYTES + 8];
};

// Pid -> the JVM's code heaps and layouts in the process (JVM processes only), written by the host.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, HOTSPOT_PROCS_MAX_ENTRIES);
  __type(key, __u32);
  __type(value, struct hotspot_proc_info);
} hotspot_procs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct hotspot_scratch);
} hotspot_scratch SEC(".maps");

// Never read: it makes clang emit BTF for the types of hotspot_tracer.h that no code here names as a
// type, so that build.ts can export them.
struct hotspot_btf_export {
  enum hotspot_frame_marker frame_marker;
  enum hotspot_unwind_program unwind_program;
  enum hotspot_metric_id metric_id;
  enum hotspot_limits limits;
  enum hotspot_frame_type frame_type;
  enum hotspot_interpreter_frame interpreter_frame;
  struct hotspot_code_heap code_heap;
};
const volatile struct hotspot_btf_export hotspot_btf_export = {};

enum hotspot_step {
  HOTSPOT_STEP_MORE = 0,  // the frame is unwound and pc is still in the code cache
  HOTSPOT_STEP_LEAVE = 1, // the frame is unwound and pc is outside it: the native unwinder goes on
  HOTSPOT_STEP_DONE = 2,  // the trace is finished (trace->stop_reason says why)
};

static __always_inline __u64 blob_u64(const struct hotspot_scratch *hs, __u32 offset)
{
  return *(const __u64 *)&hs->blob[offset & (HOTSPOT_BLOB_BYTES - 1)];
}

static __always_inline __u32 blob_u32(const struct hotspot_scratch *hs, __u32 offset)
{
  return *(const __u32 *)&hs->blob[offset & (HOTSPOT_BLOB_BYTES - 1)];
}

static __always_inline __u16 blob_u16(const struct hotspot_scratch *hs, __u32 offset)
{
  return *(const __u16 *)&hs->blob[offset & (HOTSPOT_BLOB_BYTES - 1)];
}

// Records one frame: 0, or -1 when the trace is full. A global function (scalars in and out, its map
// looked up itself): the places that record a frame then check the bound on the frame count again.
__noinline int hotspot_push(__u64 kind, __u64 file_id, __u64 addr_or_line, __u64 flags)
{
  __u32 zero = 0;
  struct trace *trace = bpf_map_lookup_elem(&trace_scratch, &zero);
  if (!trace)
    return -1;
  __u32 n = trace->num_frames;
  if (n >= MAX_FRAMES || n - trace->kernel_frames >= MAX_FRAME_UNWINDS)
    return -1;
  struct frame *f = &trace->frames[n];
  f->file_id = file_id;
  f->addr_or_line = addr_or_line;
  f->kind = kind;
  f->flags = flags;
  trace->num_frames = n + 1;
  return 0;
}

// The code blob that holds pc, through its heap's segment map: 0 when no heap holds pc or the map does
// not lead to a block within HOTSPOT_SEGMAP_HOPS.
static __always_inline __u64 find_code_blob(const struct hotspot_proc_info *info, __u64 pc)
{
  __u64 low = 0, segmap = 0;
  for (int i = 0; i < HOTSPOT_MAX_HEAPS; i++) {
    if (i < info->num_heaps && pc >= info->heaps[i].low && pc < info->heaps[i].high) {
      low = info->heaps[i].low;
      segmap = info->heaps[i].segmap;
    }
  }
  if (low == 0)
    return 0;
  __u8 shift = info->log2_segment_size & 31;
  __u64 segment = (pc - low) >> shift;
  for (int i = 0; i < HOTSPOT_SEGMAP_HOPS; i++) {
    __u8 tag;
    if (bpf_probe_read_user(&tag, sizeof(tag), (void *)(segmap + segment)) || tag == HOTSPOT_FREE_SEGMENT)
      return 0;
    if (tag == 0)
      return low + (segment << shift) + info->heap_block_size;
    if (segment < tag)
      return 0;
    segment -= tag;
  }
  return 0;
}

// How a frame is unwound.
enum hotspot_unwind {
  HOTSPOT_UNWIND_FRAME,         // sp-based: the return address at sp + size - 8, rbp saved below it
  HOTSPOT_UNWIND_PC_ONLY,       // the return address at sp (a prologue before it pushed rbp, or `ret`)
  HOTSPOT_UNWIND_FP_PC,         // rbp pushed at sp, the return address above it
  HOTSPOT_UNWIND_FRAME_POINTER, // through rbp: the caller's rbp at fp, the return address above it
};

// Records the frame at state->pc and unwinds it (enum hotspot_step). A global function (scalars in and
// out, its maps looked up itself): the verifier checks it once rather than once per unrolled step.
__noinline int hotspot_step(void)
{
  struct trace_context tc;
  __u32 zero = 0;
  struct hotspot_scratch *hs = bpf_map_lookup_elem(&hotspot_scratch, &zero);
  if (trace_context_get(&tc) || !hs)
    return HOTSPOT_STEP_DONE;
  struct trace *trace = tc.trace;
  struct unwind_state *state = tc.state;
  const struct hotspot_proc_info *info = &hs->info;
  __u64 pc = state->pc, sp = state->sp, fp = state->fp;
  __u8 ra_flag = state->return_address ? FRAME_FLAG_RETURN_ADDRESS : 0;

  __u64 blob = find_code_blob(info, pc);
  __u32 name = 0;
  __u64 name_pointer = 0;
  if (blob == 0 || bpf_probe_read_user(hs->blob, HOTSPOT_BLOB_BYTES, (void *)blob) ||
      (name_pointer = blob_u64(hs, info->blob_name)) == 0 ||
      bpf_probe_read_user(&name, sizeof(name), (void *)name_pointer)) {
    // Code the JVM does not describe (or not yet): the frame pointer goes on, from a native frame.
    metric_increment(blob == 0 ? METRIC_HOTSPOT_NO_CODE_BLOB : METRIC_HOTSPOT_READ_FAILED);
    state->interpreter_done = 1;
    return HOTSPOT_STEP_LEAVE;
  }
  __u64 code_begin = info->blob_code_begin_is_offset ? blob + (__s32)blob_u32(hs, info->blob_code_begin)
                                                     : blob_u64(hs, info->blob_code_begin);
  __s32 frame_size = (__s32)blob_u32(hs, info->blob_frame_size) * 8;
  __s32 frame_complete = info->blob_frame_complete_short ? (__s16)blob_u16(hs, info->blob_frame_complete)
                                                         : (__s32)blob_u32(hs, info->blob_frame_complete);
  __u64 position = pc - code_begin;

  __u64 file_id = blob | HOTSPOT_FRAME_STUB;
  __u64 line = position & 0xffffffff;
  int unwind = frame_size > 0 ? HOTSPOT_UNWIND_FRAME : HOTSPOT_UNWIND_FRAME_POINTER;
  __u64 next_sp = 0, next_fp = fp, next_pc = 0;

  if (name == HOTSPOT_NAME_INTERPRETER) {
    // The Method and the bytecode pointer in their slots below fp, the caller's sp above them; the lowest
    // first, so that the stack window then holds the others.
    __u64 bcp, method, sender_sp;
    if (fp < sp || fp - sp > HOTSPOT_MAX_FRAME_BYTES ||
        read_stack(state, fp - HOTSPOT_INTERPRETER_BCP_SLOT * 8, &bcp, 8) ||
        read_stack(state, fp - HOTSPOT_INTERPRETER_METHOD_SLOT * 8, &method, 8) ||
        read_stack(state, fp - HOTSPOT_INTERPRETER_SENDER_SP_SLOT * 8, &sender_sp, 8)) {
      metric_increment(METRIC_HOTSPOT_BAD_FRAME);
      goto native;
    }
    __u64 const_method = 0;
    if ((method & 7) || method == 0 ||
        bpf_probe_read_user(&const_method, sizeof(const_method), (void *)(method + info->method_const_method))) {
      metric_increment(METRIC_HOTSPOT_BAD_FRAME);
      goto native;
    }
    __u64 bci = bcp - (const_method + info->const_method_size);
    if (bcp < const_method + info->const_method_size || bci >= HOTSPOT_BCI_UNKNOWN) {
      metric_increment(METRIC_HOTSPOT_BAD_BCI);
      bci = HOTSPOT_BCI_UNKNOWN;
    }
    file_id = method | HOTSPOT_FRAME_INTERPRETED;
    line = bci | ((const_method >> 3) & HOTSPOT_COOKIE_MASK) << HOTSPOT_COOKIE_SHIFT;
    unwind = HOTSPOT_UNWIND_FRAME_POINTER;
    next_sp = sender_sp;
  } else if (name == HOTSPOT_NAME_NMETHOD || name == HOTSPOT_NAME_NATIVE) {
    __u32 compile_id = blob_u32(hs, info->nmethod_compile_id);
    file_id = blob | (name == HOTSPOT_NAME_NMETHOD ? HOTSPOT_FRAME_COMPILED : HOTSPOT_FRAME_NATIVE_WRAPPER);
    line = (position & 0xffffffff) | (__u64)(compile_id & HOTSPOT_COOKIE_MASK) << HOTSPOT_COOKIE_SHIFT;
    if (!state->return_address && frame_complete > 0 && pc < code_begin + frame_complete) {
      // In the prologue: rbp pushed in its last instructions, nothing before.
      unwind = pc + 4 >= code_begin + frame_complete ? HOTSPOT_UNWIND_FP_PC : HOTSPOT_UNWIND_PC_ONLY;
    } else if (!state->return_address) {
      // In the epilogue: at `ret`, or at the safepoint poll after `pop rbp` (cmp rsp, [r15 + ...]), the
      // frame is gone; at `pop rbp`, only rbp is left.
      __u8 code[3];
      if (bpf_probe_read_user(code, sizeof(code), (void *)pc) == 0) {
        if (code[0] == 0xc3 || (code[0] == 0x49 && code[1] == 0x3b && code[2] == 0xa7))
          unwind = HOTSPOT_UNWIND_PC_ONLY;
        else if (code[0] == 0x5d)
          unwind = HOTSPOT_UNWIND_FP_PC;
      }
    }
  } else if (name == HOTSPOT_NAME_VTABLE) {
    unwind = HOTSPOT_UNWIND_PC_ONLY;
  }

  __u64 record[2];
  switch (unwind) {
  case HOTSPOT_UNWIND_FRAME:
    next_sp = sp + frame_size;
    if (read_stack(state, next_sp - 16, record, sizeof(record)))
      goto read_failed;
    next_fp = record[0];
    next_pc = record[1];
    break;
  case HOTSPOT_UNWIND_PC_ONLY:
    next_sp = sp + 8;
    if (read_stack(state, sp, &next_pc, sizeof(next_pc)))
      goto read_failed;
    break;
  case HOTSPOT_UNWIND_FP_PC:
    next_sp = sp + 16;
    if (read_stack(state, sp, record, sizeof(record)))
      goto read_failed;
    next_fp = record[0];
    next_pc = record[1];
    break;
  default:
    if (fp < sp || (fp & 7) || read_stack(state, fp, record, sizeof(record))) {
      metric_increment(METRIC_HOTSPOT_BAD_FRAME);
      goto native;
    }
    next_fp = record[0];
    next_pc = record[1];
    // The interpreter knows its caller's sp; other frames end right above their return address.
    if (next_sp == 0)
      next_sp = fp + 16;
  }

  if (hotspot_push(FRAME_MARKER_HOTSPOT, file_id, line, ra_flag)) {
    trace->stop_reason = UNWIND_STOP_TRUNCATED;
    return HOTSPOT_STEP_DONE;
  }
  if (next_pc == 0) {
    trace->stop_reason = UNWIND_STOP_END_OF_STACK;
    return HOTSPOT_STEP_DONE;
  }
  if (next_sp <= sp) {
    metric_increment(METRIC_HOTSPOT_BAD_FRAME);
    trace->stop_reason = UNWIND_STOP_BAD_FRAME_POINTER;
    return HOTSPOT_STEP_DONE;
  }
  state->pc = next_pc & HOTSPOT_ADDRESS_MASK;
  state->sp = next_sp;
  state->fp = next_fp;
  state->return_address = 1;
  if (cache_mapping(trace->hdr.pid, state) == 0 && state->mapping_interpreter == PROG_UNWIND_HOTSPOT &&
      in_interpreter(state, state->pc - (state->mapping_bias_and_unwind_program & BIAS_MASK)))
    return HOTSPOT_STEP_MORE;
  return HOTSPOT_STEP_LEAVE;

read_failed:
  metric_increment(METRIC_HOTSPOT_READ_FAILED);
native:
  // The frame as a native one at its address; the native unwinder tries its frame pointer.
  state->interpreter_done = 1;
  return HOTSPOT_STEP_LEAVE;
}

SEC("perf_event")
int unwind_hotspot(struct bpf_perf_event_data *ctx)
{
  struct trace_context tc;
  __u32 zero = 0;
  struct hotspot_scratch *hs = bpf_map_lookup_elem(&hotspot_scratch, &zero);
  if (trace_context_get(&tc) || !hs)
    return 0;
  struct trace *trace = tc.trace;
  struct unwind_state *state = tc.state;
  __u32 pid = trace->hdr.pid;

  struct hotspot_proc_info *info = bpf_map_lookup_elem(&hotspot_procs, &pid);
  if (!info) {
    // The host claimed libjvm.so but has not read the JVM yet: the frame pointer goes on.
    metric_increment(METRIC_HOTSPOT_NO_PROC_INFO);
    report_process(EVENT_KIND_PROCESS_STALE, pid);
    state->interpreter_done = 1;
  } else {
    if (interpreter_walk_begins(state, PROG_UNWIND_HOTSPOT))
      hs->info = *info;
    int result = HOTSPOT_STEP_MORE;
    __u32 before = trace->num_frames;
    for (int i = 0; i < HOTSPOT_FRAMES_PER_RUN && result == HOTSPOT_STEP_MORE; i++)
      result = hotspot_step();
    metric_add(METRIC_HOTSPOT_FRAMES, trace->num_frames - before);
    if (result == HOTSPOT_STEP_DONE)
      return trace_finish(ctx, trace, trace->stop_reason);
    if (result == HOTSPOT_STEP_MORE && state->tail_calls < MAX_TAIL_CALLS) {
      state->tail_calls++;
      bpf_tail_call(ctx, &progs, PROG_UNWIND_HOTSPOT);
    }
  }
  if (state->tail_calls >= MAX_TAIL_CALLS)
    return trace_finish(ctx, trace, UNWIND_STOP_TRUNCATED);
  state->tail_calls++;
  bpf_tail_call(ctx, &progs, PROG_UNWIND_NATIVE);
  return trace_finish(ctx, trace, UNWIND_STOP_TAIL_CALL_FAILED);
}

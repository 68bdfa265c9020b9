// The CPython unwinder. The native unwinder tail-calls it when it reaches a frame of the interpreter
// loop (_PyEval_EvalFrameDefault); it records the Python frames that this C call of the loop runs,
// innermost first, and hands back to the native unwinder, which then unwinds the loop's own native
// frame. So one trace holds kernel, native and Python frames in their true order.
//
// What the host provides and why each step is right for each CPython version (3.8-3.13) is in
// lib/interpreter/python/README.md; PythonInstance.walk() there performs the same walk on the host.
// A frame is recorded as the code object's address (file_id) and the first-line stamp and instruction
// offset (addr_or_line); the host turns them into function, file and line while the process lives.
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>

#include "kernel.bpf.h"
#include "stack_deltas.bpf.h"
#include "trace.bpf.h"
#include "python_tracer.h"

// Python frames per program run; a C call of the 3.11+ loop that runs more (Python-to-Python calls are
// inlined) continues in another run.
#define PYTHON_FRAMES_PER_RUN 12
#define ABSENT_OFFSET 0xffff
#define FIRST_LINE_STAMP_MASK 0x1fffff

// Progress of the walk through one trace (python_scratch.walk).
enum python_walk {
  PYTHON_WALK_NOT_STARTED = 0, // the thread's current frame is not looked up yet
  PYTHON_WALK_ACTIVE = 1,      // python_scratch.frame is the next frame to emit
  PYTHON_WALK_DONE = 2,        // no more Python frames in this trace (none, the end, or a failed read)
};

// The walk through one trace, kept between the tail calls of that trace. A trace's first call resets it
// (interpreter_walk_begins): until then it holds an earlier trace's walk. What every step reads comes
// first, in one cache line.
struct python_scratch {
  __u8 walk;                    // enum python_walk
  __u8 pad[7];
  __u64 frame;                  // the next Python frame to emit (PyFrameObject or _PyInterpreterFrame)
  struct python_proc_info info; // the walking process's record, copied when the walk starts
  // The fields of the frame being recorded, read in one go (one user-memory read instead of one per
  // field); the slack lets a masked offset load 8 bytes without leaving the array.
  __u8 frame_bytes[PYTHON_FRAME_BYTES + 8];
};

// Pid -> what the unwinder needs of the process (CPython processes only), written by the host.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, PYTHON_PROCS_MAX_ENTRIES);
  __type(key, __u32);
  __type(value, struct python_proc_info);
} python_procs SEC(".maps");

// Never read: it makes clang emit BTF for the types of python_tracer.h that no code here names as a
// type, so that build.ts can export them (maps.bpf.c does the same for types.h).
struct python_btf_export {
  enum python_frame_marker frame_marker;
  enum python_unwind_program unwind_program;
  enum python_metric_id metric_id;
  enum python_limits limits;
  enum python_proc_flag proc_flag;
  enum python_frame_owner frame_owner;
};
const volatile struct python_btf_export python_btf_export = {};

// Per CPU, as unwind_state is: one trace at a time runs on a CPU.
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct python_scratch);
} python_scratch SEC(".maps");

static __always_inline struct python_scratch *python_scratch_get(void)
{
  __u32 zero = 0;
  return bpf_map_lookup_elem(&python_scratch, &zero);
}

enum python_step {
  PYTHON_STEP_MORE = 0,      // this C call runs more Python frames
  PYTHON_STEP_CALL_DONE = 1, // this C call's frames are recorded
  PYTHON_STEP_WALK_DONE = 2, // no Python frames left in the trace (the end, a read failed, no room)
};

static __always_inline int read_u64(__u64 address, __u64 *out)
{
  return bpf_probe_read_user(out, sizeof(*out), (void *)address);
}

// The current thread's PyThreadState, or 0. TSD first: CPython keeps it there for the thread's whole
// life; the TLS variable of 3.12+ is cleared while the thread waits for the GIL.
static __always_inline __u64 thread_state(const struct python_proc_info *info)
{
  __u64 fsbase = kernel_read_u64(bpf_get_current_task(), tracer_config.kernel.task_fsbase);
  __u64 tstate = 0;
  if (fsbase == 0)
    return 0;
  if (info->flags & PYTHON_PROC_TSD_VALID) {
    __u64 slot = fsbase + info->tsd_offset;
    if (info->tsd_indirect && read_u64(slot, &slot))
      slot = 0;
    if (slot && read_u64(slot + (__s64)info->tsd_key * info->tsd_multiplier, &tstate))
      tstate = 0;
  }
  if (tstate == 0 && (info->flags & PYTHON_PROC_TLS_VALID) &&
      read_u64(fsbase + info->tls_tstate_offset, &tstate))
    tstate = 0;
  return tstate;
}

// The frame the thread runs now: tstate->frame (3.8-3.10), tstate->cframe->current_frame (3.11-3.12),
// tstate->current_frame (3.13).
static __always_inline __u64 current_frame(const struct python_proc_info *info, __u64 tstate)
{
  __u64 frame = 0;
  if (read_u64(tstate + info->tstate_frame, &frame))
    return 0;
  if (frame && info->cframe_current_frame != ABSENT_OFFSET &&
      read_u64(frame + info->cframe_current_frame, &frame))
    return 0;
  return frame;
}

// The end of the last field the walk reads of a frame: the frame holds at least that many bytes, so
// reading them never touches memory past it. 0 when a field lies beyond PYTHON_FRAME_BYTES.
//
// 64 bits wide, as the read's size argument is: with a 32-bit value clang 19 tests a zero-extended copy
// and passes the original, whose bound the verifier then does not know.
static __always_inline __u64 frame_bytes_needed(const struct python_proc_info *info)
{
  __u64 need = info->frame_previous + 8;
  if (info->frame_code + 8 > need)
    need = info->frame_code + 8;
  if (info->frame_instruction + 8 > need)
    need = info->frame_instruction + 8;
  if (info->frame_owner != ABSENT_OFFSET && info->frame_owner + 1 > need)
    need = info->frame_owner + 1;
  if (info->frame_is_entry != ABSENT_OFFSET && info->frame_is_entry + 1 > need)
    need = info->frame_is_entry + 1;
  return need <= PYTHON_FRAME_BYTES ? need : 0;
}

// Fields of the frame read into python->frame_bytes (offsets below PYTHON_FRAME_BYTES).
static __always_inline __u64 frame_u64(const struct python_scratch *python, __u16 offset)
{
  return *(const __u64 *)&python->frame_bytes[offset & (PYTHON_FRAME_BYTES - 1)];
}

static __always_inline __s32 frame_s32(const struct python_scratch *python, __u16 offset)
{
  return *(const __s32 *)&python->frame_bytes[offset & (PYTHON_FRAME_BYTES - 1)];
}

static __always_inline __u8 frame_u8(const struct python_scratch *python, __u16 offset)
{
  return python->frame_bytes[offset & (PYTHON_FRAME_BYTES - 1)];
}

// Records the frame whose fields are in python->frame_bytes: 0, -1 when its code object could not be
// read, -2 when the trace is full.
static __always_inline int push_python_frame(struct trace *trace, const struct python_scratch *python)
{
  const struct python_proc_info *info = &python->info;
  __u64 code = frame_u64(python, info->frame_code);
  if (code == 0)
    return -1;
  __s64 offset;
  if (info->instruction_model <= 1) {
    __s32 lasti = frame_s32(python, info->frame_instruction);
    // 3.10 counts code units of 2 bytes.
    offset = info->instruction_model == 1 ? (__s64)lasti * 2 : lasti;
  } else {
    __u16 adaptive = info->code_code_adaptive == ABSENT_OFFSET ? 0 : info->code_code_adaptive;
    offset = (__s64)(frame_u64(python, info->frame_instruction) - (code + adaptive));
  }
  __s32 first_line;
  if (bpf_probe_read_user(&first_line, sizeof(first_line), (void *)(code + info->code_firstlineno)))
    return -1;

  __u32 n = trace->num_frames;
  if (n >= MAX_FRAMES || n - trace->kernel_frames >= MAX_FRAME_UNWINDS)
    return -2;
  struct frame *f = &trace->frames[n];
  f->file_id = code;
  // The stamp lets the host notice a freed code object whose address was reused.
  f->addr_or_line = ((__u64)(first_line & FIRST_LINE_STAMP_MASK) << 32) | (__u32)offset;
  f->kind = FRAME_MARKER_PYTHON;
  f->flags = 0;
  trace->num_frames = n + 1;
  return 0;
}

// Records the frame at the cursor and moves the cursor on (enum python_step).
//
// A global function (never inlined, takes and returns scalars as kernels since 5.10 require): the
// verifier checks it once, instead of once per unrolled step of the walk, which made most of this
// program's load time; and the walk runs the same few hundred bytes of code for every frame. Kernels
// before 5.12 take no pointer to a map value as an argument, so it looks up the trace and its scratch
// itself; its process's record is the copy in python->info.
__noinline int python_step(void)
{
  __u32 zero = 0;
  struct trace *trace = bpf_map_lookup_elem(&trace_scratch, &zero);
  struct python_scratch *python = python_scratch_get();
  if (!trace || !python)
    return PYTHON_STEP_WALK_DONE;
  const struct python_proc_info *info = &python->info;
  __u64 frame = python->frame;
  if (frame == 0)
    return PYTHON_STEP_WALK_DONE;
  __u64 need = frame_bytes_needed(info);
  if (need == 0 || need > PYTHON_FRAME_BYTES ||
      bpf_probe_read_user(python->frame_bytes, need, (void *)frame))
    goto failed;
  __u64 previous = frame_u64(python, info->frame_previous);
  // 3.8-3.10: one C call of the loop runs exactly one PyFrameObject.
  int call_done = info->frame_model == 0;
  if (!call_done && info->frame_owner != ABSENT_OFFSET) {
    if (frame_u8(python, info->frame_owner) == PYTHON_FRAME_OWNED_BY_CSTACK) {
      // 3.12+: the shim frame the loop pushes on entry ends this C call's frames.
      python->frame = previous;
      return PYTHON_STEP_CALL_DONE;
    }
  }
  __u8 entry = !call_done && info->frame_is_entry != ABSENT_OFFSET && frame_u8(python, info->frame_is_entry);
  int pushed = push_python_frame(trace, python);
  if (pushed == -2)
    return PYTHON_STEP_WALK_DONE;
  if (pushed)
    goto failed;
  python->frame = previous;
  // 3.11 marks the first frame a C call ran with is_entry.
  return call_done || entry || previous == 0 ? PYTHON_STEP_CALL_DONE : PYTHON_STEP_MORE;

failed:
  metric_increment(METRIC_PYTHON_READ_FAILED);
  return PYTHON_STEP_WALK_DONE;
}

SEC("perf_event")
int unwind_python(struct bpf_perf_event_data *ctx)
{
  struct trace_context tc;
  struct python_scratch *python = python_scratch_get();
  if (trace_context_get(&tc) || !python)
    return 0;
  struct trace *trace = tc.trace;
  struct unwind_state *state = tc.state;
  __u32 pid = trace->hdr.pid;
  // Whatever happens here, the native unwinder takes the loop's own frame next.
  state->interpreter_done = 1;
  if (interpreter_walk_begins(state, PROG_UNWIND_PYTHON))
    python->walk = PYTHON_WALK_NOT_STARTED;

  struct python_proc_info *info = bpf_map_lookup_elem(&python_procs, &pid);
  if (!info) {
    // The host claimed the file but could not attach to the process yet (caught too early at exec):
    // reading the process again retries.
    metric_increment(METRIC_PYTHON_NO_PROC_INFO);
    report_process(EVENT_KIND_PROCESS_STALE, pid);
    python->walk = PYTHON_WALK_DONE;
  }
  if (info && python->walk == PYTHON_WALK_NOT_STARTED) {
    python->walk = PYTHON_WALK_DONE;
    python->info = *info;
    __u64 tstate = thread_state(info);
    if (tstate == 0) {
      metric_increment(METRIC_PYTHON_NO_THREAD_STATE);
      // The record was written before the runtime created its thread-state key: ask the host to read
      // the process again, which republishes it; soon when the host expects the key any moment.
      if (!(info->flags & (PYTHON_PROC_TSD_VALID | PYTHON_PROC_TLS_VALID)))
        report_process_within(EVENT_KIND_PROCESS_STALE, pid,
                              (info->flags & PYTHON_PROC_NOT_READY) ? RUNTIME_RETRY_INTERVAL_NS
                                                                    : REPORT_INTERVAL_NS);
    } else {
      python->frame = current_frame(info, tstate);
      if (python->frame)
        python->walk = PYTHON_WALK_ACTIVE;
    }
  }
  if (info && python->walk == PYTHON_WALK_ACTIVE) {
    int result = PYTHON_STEP_MORE;
    __u16 pushed = 0;
    for (int i = 0; i < PYTHON_FRAMES_PER_RUN && result == PYTHON_STEP_MORE; i++) {
      __u32 before = trace->num_frames;
      result = python_step();
      pushed += trace->num_frames - before;
    }
    metric_add(METRIC_PYTHON_FRAMES, pushed);
    if (result == PYTHON_STEP_WALK_DONE)
      python->walk = PYTHON_WALK_DONE;
    if (result == PYTHON_STEP_MORE && state->tail_calls < MAX_TAIL_CALLS) {
      // More frames of this C call than one run takes: go on in a fresh run.
      state->tail_calls++;
      bpf_tail_call(ctx, &progs, PROG_UNWIND_PYTHON);
    }
  }

  if (state->tail_calls >= MAX_TAIL_CALLS)
    return trace_finish(ctx, trace, UNWIND_STOP_TRUNCATED);
  state->tail_calls++;
  bpf_tail_call(ctx, &progs, PROG_UNWIND_NATIVE);
  return trace_finish(ctx, trace, UNWIND_STOP_TAIL_CALL_FAILED);
}

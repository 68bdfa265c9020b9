// The native user-space unwinder: follows the frame-pointer chain (rbp -> [saved rbp, return address]).
// Code built without frame pointers ends the chain early; the .eh_frame unwinder replaces this walk.
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>

#include "trace.bpf.h"

// Frames walked per program run; the program tail-calls itself to go deeper. Kept small enough for the
// verifier on old kernels, large enough that typical stacks need no tail call.
#define FRAMES_PER_RUN 32
#define MAX_RUNS ((MAX_FRAME_UNWINDS + FRAMES_PER_RUN - 1) / FRAMES_PER_RUN)

SEC("perf_event")
int unwind_native(struct bpf_perf_event_data *ctx)
{
  struct trace_context tc;
  if (trace_context_get(&tc))
    return 0;
  struct trace *trace = tc.trace;
  struct unwind_state *state = tc.state;

  for (int i = 0; i < FRAMES_PER_RUN; i++) {
    __u32 n = trace->num_frames;
    if (n >= MAX_FRAMES || n - trace->kernel_frames >= MAX_FRAME_UNWINDS)
      return trace_finish(ctx, trace, UNWIND_STOP_TRUNCATED);
    struct frame *f = &trace->frames[n];
    f->file_id = 0;
    f->addr_or_line = state->pc;
    f->kind = FRAME_MARKER_NATIVE;
    f->flags = FRAME_FLAG_ABSOLUTE_ADDRESS | (state->return_address ? FRAME_FLAG_RETURN_ADDRESS : 0);
    trace->num_frames = n + 1;

    __u64 fp = state->fp;
    if (fp == 0)
      return trace_finish(ctx, trace, UNWIND_STOP_END_OF_STACK);
    // A frame record lies above the stack pointer and is 8-byte aligned; anything else means rbp is
    // not a frame pointer here.
    if ((fp & 7) || fp < state->sp)
      return trace_finish(ctx, trace, UNWIND_STOP_BAD_FRAME_POINTER);
    __u64 record[2];
    if (bpf_probe_read_user(record, sizeof(record), (void *)fp))
      return trace_finish(ctx, trace, UNWIND_STOP_READ_FAILED);
    if (record[1] == 0)
      return trace_finish(ctx, trace, UNWIND_STOP_END_OF_STACK);
    // The caller's frame is higher up the stack; a frame pointer that does not move up would loop.
    if (record[0] != 0 && record[0] <= fp)
      return trace_finish(ctx, trace, UNWIND_STOP_BAD_FRAME_POINTER);
    state->pc = record[1];
    state->sp = fp + sizeof(record);
    state->fp = record[0];
    state->return_address = 1;
  }

  if (++state->tail_calls < MAX_RUNS)
    bpf_tail_call(ctx, &progs, PROG_UNWIND_NATIVE);
  return trace_finish(ctx, trace, UNWIND_STOP_TRUNCATED);
}

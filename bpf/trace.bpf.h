// Helpers shared by the programs that build a trace: finding the per-CPU scratch, ending a trace.
#ifndef OMNIPROF_TRACE_BPF_H
#define OMNIPROF_TRACE_BPF_H

#include "maps.bpf.h"

// Tail calls the unwinders of one trace may make after the entry's call into the native unwinder: with
// that call and the final one into the stop program, the kernel's limit of 33 per sample. At 4 native
// frames a run this reaches MAX_FRAME_UNWINDS; interpreter frames spend calls too.
#define MAX_TAIL_CALLS 31

struct trace_context {
  struct trace *trace;
  struct unwind_state *state;
};

static __always_inline int trace_context_get(struct trace_context *tc)
{
  __u32 zero = 0;
  tc->trace = bpf_map_lookup_elem(&trace_scratch, &zero);
  tc->state = bpf_map_lookup_elem(&unwind_state, &zero);
  return tc->trace && tc->state ? 0 : -1;
}

_Static_assert(PROG_UNWIND_COUNT <= sizeof(((struct unwind_state *)0)->interpreters_started) * 8,
               "unwind_state.interpreters_started has a bit per unwind program");

// Asks the native unwinder not to hand frames of `program`'s files to it again in this trace: for a
// program that reads the thread's state once (Go's labels) rather than unwinding frames.
static __always_inline void interpreter_done_for_trace(struct unwind_state *state, __u32 program)
{
  state->interpreters_done |= (__u16)(1 << program);
}

// Whether the interpreter unwinder `program` runs for the first time in this trace (and from now on, that
// it has): its per-CPU scratch still holds an earlier trace's walk, which it must start afresh.
static __always_inline int interpreter_walk_begins(struct unwind_state *state, __u32 program)
{
  __u16 bit = 1 << program;
  if (state->interpreters_started & bit)
    return 0;
  state->interpreters_started |= bit;
  return 1;
}

// Whether the ring buffer is more than half full: the host is woken then, and no stack copy is made
// until it has drained (native_unwinder.bpf.c).
static __always_inline int events_over_half_full(void)
{
  return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > bpf_ringbuf_query(&events, BPF_RB_RING_SIZE) / 2;
}

// Copies the used part of the trace into the ring buffer. Called by the stop program, and directly when
// a tail call fails so that the sample is still counted.
static __always_inline void trace_send(struct trace *trace)
{
  __u32 n = trace->num_frames;
  if (n > MAX_FRAMES)
    n = MAX_FRAMES;
  __u64 size = __builtin_offsetof(struct trace, frames) + (__u64)n * sizeof(struct frame);
  __u32 labels = trace->num_labels;
  if (trace->flags & TRACE_FLAG_COPIED_STACK) {
    // Right behind the last frame (copy_stack); copy_room leaves space for it after any number of them.
    struct copied_stack *copy = (struct copied_stack *)&trace->frames[n];
    __u32 length = copy->length;
    if (length > COPIED_STACK_BYTES)
      length = COPIED_STACK_BYTES;
    size = __builtin_offsetof(struct trace, frames) + (__u64)n * sizeof(struct frame) +
           __builtin_offsetof(struct copied_stack, data) + length;
  } else if (labels) {
    // Behind the last frame, where label_room leaves space for them whatever the number of frames.
    __u32 zero = 0;
    struct trace_labels *read = bpf_map_lookup_elem(&trace_labels, &zero);
    if (labels > MAX_TRACE_LABELS)
      labels = MAX_TRACE_LABELS;
    __u64 bytes = (__u64)labels * sizeof(struct trace_label);
    if (read && bytes <= sizeof(read->labels) &&
        !bpf_probe_read_kernel((char *)trace + size, bytes, read->labels))
      size += bytes;
    else
      trace->num_labels = 0;
  }
  // No wakeup: the host drains the ring buffer on a slow timer, so waking it per sample would only cost;
  // but once the buffer is half full it must drain before traces are lost.
  __u64 flags = events_over_half_full() ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
  if (bpf_ringbuf_output(&events, trace, size, flags))
    metric_increment(METRIC_TRACES_LOST);
}

static __always_inline __u64 hash_mix(__u64 hash, __u64 word)
{
  hash ^= word * 0x9e3779b97f4a7c15ULL;
  hash = (hash << 31) | (hash >> 33);
  return hash * 0xbf58476d1ce4e5b9ULL;
}

// A 64-bit hash of what makes the trace one stack for the host: its bytes from pid to the last frame
// (off_cpu_ns, off_cpu_stack and the time are before pid). Never 0, which means "no hash".
static __always_inline __u64 off_cpu_stack_hash(const struct trace *trace)
{
  __u32 n = trace->num_frames;
  // pid, tid, comm, the frame counts, origin, stop reason, labels and flags: four words.
  const __u64 *head = (const __u64 *)&trace->hdr.pid;
  __u64 hash = hash_mix(0x6a09e667f3bcc909ULL, head[0]);
  hash = hash_mix(hash, head[1]);
  hash = hash_mix(hash, head[2]);
  hash = hash_mix(hash, head[3]);
  for (__u32 i = 0; i < MAX_FRAMES; i++) {
    if (i >= n)
      break;
    const __u64 *frame = (const __u64 *)&trace->frames[i];
    hash = hash_mix(hash, frame[0]);
    hash = hash_mix(hash, frame[1]);
    hash = hash_mix(hash, frame[2]);
  }
  return hash ? hash : 1;
}

// Withdraws the request for an id that a kept trace carried (its hdr.off_cpu_stack, 0 for none) when that
// trace will not reach the host: the stack is left without one, so that a later wait of it asks again.
static __always_inline void off_cpu_withdraw_request(__u64 requested)
{
  if (requested)
    bpf_map_delete_elem(&off_cpu_stack_ids, &requested);
}

// Keeps a thread being switched out (TRACE_ORIGIN_OFF_CPU) until it is switched back in (off_cpu.bpf.c).
// A stack the host has given an id needs only the time and that id: its wait is added up in the kernel.
// A stack without one keeps the whole trace, to be sent with its wait; the first such wait of a stack
// also asks the host for an id (hdr.off_cpu_stack). A newer switch-out of the same thread replaces an
// older one it never came back from.
static __always_inline void off_cpu_keep(struct trace *trace)
{
  __u32 tid = trace->hdr.tid;
  struct off_cpu_wait wait = { .since_ns = trace->hdr.ktime, .stack = OFF_CPU_NO_ID };
  __u64 hash = off_cpu_stack_hash(trace);
  __u32 *id = bpf_map_lookup_elem(&off_cpu_stack_ids, &hash);
  if (id) {
    wait.stack = *id;
  } else {
    // Only one wait asks: another CPU may have inserted the hash meanwhile. When the map is full, every
    // wait of the stack is sent whole.
    __u32 pending = OFF_CPU_NO_ID;
    if (!bpf_map_update_elem(&off_cpu_stack_ids, &hash, &pending, BPF_NOEXIST))
      trace->hdr.off_cpu_stack = hash;
  }
  if (wait.stack == OFF_CPU_NO_ID) {
    // A trace still kept here is of a wait whose end was never seen (the session's first switch-in).
    struct off_cpu_trace *old = bpf_map_lookup_elem(&off_cpu_traces, &tid);
    if (old)
      off_cpu_withdraw_request(old->hdr.off_cpu_stack);
    if (bpf_map_update_elem(&off_cpu_traces, &tid, trace, BPF_ANY))
      goto full;
  }
  if (bpf_map_update_elem(&off_cpu_waits, &tid, &wait, BPF_ANY))
    goto full;
  return;
full:
  metric_increment(METRIC_OFF_CPU_STORE_FULL);
  off_cpu_withdraw_request(trace->hdr.off_cpu_stack);
}

// A finished trace goes to the host, or, for a switched-out thread, waits for its switch-in.
static __always_inline void trace_deliver(struct trace *trace)
{
  if (tracer_config.off_cpu && trace->origin == TRACE_ORIGIN_OFF_CPU)
    off_cpu_keep(trace);
  else
    trace_send(trace);
}

static __always_inline void count_stop_reason(__u8 reason)
{
  switch (reason) {
  case UNWIND_STOP_NO_USER_REGS:
    metric_increment(METRIC_NO_USER_REGS);
    break;
  case UNWIND_STOP_READ_FAILED:
    metric_increment(METRIC_UNWIND_READ_FAILED);
    break;
  case UNWIND_STOP_BAD_FRAME_POINTER:
    metric_increment(METRIC_UNWIND_BAD_FRAME_POINTER);
    break;
  case UNWIND_STOP_TRUNCATED:
    metric_increment(METRIC_UNWIND_TRUNCATED);
    break;
  case UNWIND_STOP_TAIL_CALL_FAILED:
    metric_increment(METRIC_TAIL_CALL_FAILED);
    break;
  case UNWIND_STOP_NO_UNWIND_INFO:
    metric_increment(METRIC_UNWIND_NO_INFO);
    break;
  case UNWIND_STOP_BAD_UNWIND_INFO:
    metric_increment(METRIC_UNWIND_BAD_INFO);
    break;
  case UNWIND_STOP_BAD_GO_STACK:
    metric_increment(METRIC_UNWIND_GO_STACK_BAD);
    break;
  }
}

// Ends unwinding: records why, and hands the trace to the stop program.
static __always_inline int trace_finish(void *ctx, struct trace *trace, __u8 reason)
{
  trace->stop_reason = reason;
  count_stop_reason(reason);
  bpf_tail_call(ctx, &progs, PROG_UNWIND_STOP);
  // Only reached when the stop program is missing: still deliver the sample.
  metric_increment(METRIC_TAIL_CALL_FAILED);
  trace_deliver(trace);
  return 0;
}

#endif

// Off-CPU time (record --off-cpu), at every context switch (the sched_switch raw tracepoint, which fires
// in the thread leaving the CPU, before the switch):
// - the thread coming in, if it was kept when switched out (off_cpu_waits), has its wait added to its
//   stack's total in off_cpu_totals, or, for a stack without an id yet, its whole trace (off_cpu_traces)
//   goes to the host with how long it was away, if that is at least the minimum;
// - the thread leaving, if in scope, is unwound like a sample: its stack now is the stack it waits in,
//   user part included, which nothing can read once another thread runs. The stop program keeps the trace
//   (trace.bpf.h off_cpu_keep).
// The unwinders are tail-called, so this program and they are of one type: the host loads them again as
// raw tracepoint programs, with a tail-call table of their own (lib/record/unwinder_flavour.ts). A raw
// tracepoint costs each switch less than the context-switches perf event would (its overflow handling),
// and works the same from 4.17 on.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "kernel.bpf.h"
#include "trace_begin.bpf.h"

// sched_switch(preempt, prev, next[, prev_state]): the raw tracepoint's arguments.
#define SCHED_SWITCH_PREV 1
#define SCHED_SWITCH_NEXT 2

// Sends a kept trace with its wait, or drops it if the wait was short.
static __always_inline void off_cpu_send(struct off_cpu_trace *trace, __u64 away)
{
  int sent = 0;
  if (away < tracer_config.off_cpu_min_ns) {
    metric_increment(METRIC_OFF_CPU_SHORT);
  } else {
    trace->hdr.off_cpu_ns = away;
    __u32 n = trace->num_frames;
    if (n > MAX_FRAMES)
      n = MAX_FRAMES;
    __u64 size = __builtin_offsetof(struct off_cpu_trace, frames) + (__u64)n * sizeof(struct frame);
    // A stack asking for an id wakes the host: until it has one, every wait of it comes whole.
    __u64 flags = trace->hdr.off_cpu_stack || events_over_half_full() ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
    sent = !bpf_ringbuf_output(&events, trace, size, flags);
    metric_increment(sent ? METRIC_OFF_CPU_SENT : METRIC_TRACES_LOST);
  }
  // A request for an id that the host will not see: let a later wait of the stack ask again.
  __u64 hash = trace->hdr.off_cpu_stack;
  if (hash && !sent)
    bpf_map_delete_elem(&off_cpu_stack_ids, &hash);
}

// The thread coming in: ends its wait if it was kept.
static __always_inline void off_cpu_switch_in(__u64 next)
{
  __u32 tid = kernel_read_u32(next, tracer_config.kernel.task_pid);
  if (tid == 0)
    return;
  struct off_cpu_wait *wait = bpf_map_lookup_elem(&off_cpu_waits, &tid);
  if (!wait)
    return;
  __u64 away = bpf_ktime_get_ns() - wait->since_ns;
  __u32 id = wait->stack;
  bpf_map_delete_elem(&off_cpu_waits, &tid);
  if (id == OFF_CPU_NO_ID) {
    struct off_cpu_trace *trace = bpf_map_lookup_elem(&off_cpu_traces, &tid);
    if (trace) {
      off_cpu_send(trace, away);
      bpf_map_delete_elem(&off_cpu_traces, &tid);
    }
    return;
  }
  if (away < tracer_config.off_cpu_min_ns) {
    metric_increment(METRIC_OFF_CPU_SHORT);
    return;
  }
  struct off_cpu_total *total = bpf_map_lookup_elem(&off_cpu_totals, &id);
  if (!total)
    return;
  __sync_fetch_and_add(&total->ns, away);
  __sync_fetch_and_add(&total->waits, 1);
  metric_increment(METRIC_OFF_CPU_COUNTED);
}

SEC("raw_tp/sched_switch")
int off_cpu_switch(struct bpf_raw_tracepoint_args *ctx)
{
  off_cpu_switch_in(ctx->args[SCHED_SWITCH_NEXT]);
  // The thread leaving is the current one.
  __u64 id = bpf_get_current_pid_tgid();
  __u32 pid = id >> 32;
  if (pid == 0 || pid == tracer_config.self_pid || filtered_out(pid))
    return 0;
  // An exiting thread's last switch: it never comes back.
  if (kernel_read_u32(ctx->args[SCHED_SWITCH_PREV], tracer_config.kernel.task_flags) & PF_EXITING)
    return 0;
  metric_increment(METRIC_OFF_CPU_SWITCHES);
  return trace_begin(ctx, NULL, id, TRACE_ORIGIN_OFF_CPU);
}

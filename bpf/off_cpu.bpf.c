// Off-CPU time (record --off-cpu), the switch-in half: when a thread whose switch-out tracer.bpf.c kept
// (off_cpu_waits) is switched back in, its wait is added to its stack's total in off_cpu_totals, or, for
// a stack without an id yet, its whole trace (off_cpu_traces) goes to the host with how long it was away,
// if that is at least the minimum. The switch-out half needs the thread's own registers and memory, so it
// runs as a perf event program in the leaving thread (off_cpu_switch_out), where the unwinders' tail
// calls work; this half needs only the time, so a raw tracepoint serves, on every kernel since 4.17.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "kernel.bpf.h"
#include "trace.bpf.h"

// sched_switch(preempt, prev, next[, prev_state]): the raw tracepoint's arguments.
#define SCHED_SWITCH_NEXT 2

// Sends a kept trace with its wait; whether it went.
static __always_inline int off_cpu_send(struct off_cpu_trace *trace, __u64 away)
{
  trace->hdr.off_cpu_ns = away;
  __u32 n = trace->num_frames;
  if (n > MAX_FRAMES)
    n = MAX_FRAMES;
  __u64 size = __builtin_offsetof(struct off_cpu_trace, frames) + (__u64)n * sizeof(struct frame);
  // A stack asking for an id wakes the host: until it has one, every wait of it comes whole.
  __u64 flags = trace->hdr.off_cpu_stack || events_over_half_full() ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
  int sent = !bpf_ringbuf_output(&events, trace, size, flags);
  metric_increment(sent ? METRIC_OFF_CPU_SENT : METRIC_TRACES_LOST);
  return sent;
}

SEC("raw_tp/sched_switch")
int off_cpu_switch_in(struct bpf_raw_tracepoint_args *ctx)
{
  __u32 tid = kernel_read_u32(ctx->args[SCHED_SWITCH_NEXT], tracer_config.kernel.task_pid);
  if (tid == 0)
    return 0;
  struct off_cpu_wait *wait = bpf_map_lookup_elem(&off_cpu_waits, &tid);
  if (!wait)
    return 0;
  __u64 away = bpf_ktime_get_ns() - wait->since_ns;
  __u32 id = wait->stack;
  bpf_map_delete_elem(&off_cpu_waits, &tid);
  int counted = away >= tracer_config.off_cpu_min_ns;
  if (!counted)
    metric_increment(METRIC_OFF_CPU_SHORT);
  if (id == OFF_CPU_NO_ID) {
    struct off_cpu_trace *trace = bpf_map_lookup_elem(&off_cpu_traces, &tid);
    if (!trace)
      return 0;
    if (!counted || !off_cpu_send(trace, away))
      off_cpu_withdraw_request(trace->hdr.off_cpu_stack);
    bpf_map_delete_elem(&off_cpu_traces, &tid);
    return 0;
  }
  if (!counted)
    return 0;
  struct off_cpu_total *total = bpf_map_lookup_elem(&off_cpu_totals, &id);
  if (!total)
    return 0;
  __sync_fetch_and_add(&total->ns, away);
  __sync_fetch_and_add(&total->waits, 1);
  metric_increment(METRIC_OFF_CPU_COUNTED);
  return 0;
}

// Off-CPU time (record --off-cpu), the switch-in half: when a thread whose switch-out tracer.bpf.c kept
// (off_cpu_traces) is switched back in, its trace goes to the host with how long it was away, if that is
// at least the minimum. The switch-out half needs the thread's own registers and memory, so it runs as a
// perf event program in the leaving thread (off_cpu_switch_out), where the unwinders' tail calls work;
// this half needs only the time, so a raw tracepoint serves, on every kernel since 4.17.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "kernel.bpf.h"
#include "trace.bpf.h"

// sched_switch(preempt, prev, next[, prev_state]): the raw tracepoint's arguments.
#define SCHED_SWITCH_NEXT 2

SEC("raw_tp/sched_switch")
int off_cpu_switch_in(struct bpf_raw_tracepoint_args *ctx)
{
  __u32 tid = kernel_read_u32(ctx->args[SCHED_SWITCH_NEXT], tracer_config.kernel.task_pid);
  if (tid == 0)
    return 0;
  struct off_cpu_trace *trace = bpf_map_lookup_elem(&off_cpu_traces, &tid);
  if (!trace)
    return 0;
  __u64 away = bpf_ktime_get_ns() - trace->hdr.ktime;
  if (away < tracer_config.off_cpu_min_ns) {
    metric_increment(METRIC_OFF_CPU_SHORT);
  } else {
    trace->hdr.off_cpu_ns = away;
    __u32 n = trace->num_frames;
    if (n > MAX_FRAMES)
      n = MAX_FRAMES;
    __u64 size = __builtin_offsetof(struct off_cpu_trace, frames) + (__u64)n * sizeof(struct frame);
    __u64 flags = events_over_half_full() ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
    if (bpf_ringbuf_output(&events, trace, size, flags))
      metric_increment(METRIC_TRACES_LOST);
    else
      metric_increment(METRIC_OFF_CPU_SENT);
  }
  bpf_map_delete_elem(&off_cpu_traces, &tid);
  return 0;
}

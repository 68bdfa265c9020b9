// Entry point of every sample: a cpu-clock perf event fires on each CPU, this program records who was
// running and the kernel stack, finds the user registers, and hands over to the native unwinder. The
// stop program at the end of the tail-call chain sends the trace to the host. With off-CPU time, the same
// happens at each switch-out of a thread in scope, and the stop program keeps the trace for the switch-in.
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>

#include "kernel.bpf.h"
#include "trace_begin.bpf.h"

SEC("perf_event")
int sample_cpu(struct bpf_perf_event_data *ctx)
{
  __u64 id = bpf_get_current_pid_tgid();
  __u32 pid = id >> 32;

  if (pid == 0 && !tracer_config.sample_idle) {
    metric_increment(METRIC_IDLE_SKIPPED);
    return 0;
  }
  if (pid == tracer_config.self_pid) {
    metric_increment(METRIC_SELF_SKIPPED);
    return 0;
  }
  if (filtered_out(pid)) {
    metric_increment(METRIC_FILTERED);
    return 0;
  }
  metric_increment(METRIC_SAMPLES);
  return trace_begin(ctx, (struct pt_regs *)&ctx->regs, id, TRACE_ORIGIN_SAMPLING);
}

// A thread is switched out (the kernel's context-switches software event, counted at every switch, fires
// in the thread that leaves the CPU, before the switch): its stack now is the stack it waits in, user
// part included, which nothing can read once another process runs. It is unwound here like a sample; the
// stop program keeps the trace in off_cpu_traces until off_cpu.bpf.c sees the thread come back.
SEC("perf_event")
int off_cpu_switch_out(struct bpf_perf_event_data *ctx)
{
  __u64 id = bpf_get_current_pid_tgid();
  __u32 pid = id >> 32;
  if (pid == 0 || pid == tracer_config.self_pid || filtered_out(pid))
    return 0;
  // An exiting thread's last switch: it never comes back.
  if (kernel_read_u32(bpf_get_current_task(), tracer_config.kernel.task_flags) & PF_EXITING)
    return 0;
  metric_increment(METRIC_OFF_CPU_SWITCHES);
  return trace_begin(ctx, (struct pt_regs *)&ctx->regs, id, TRACE_ORIGIN_OFF_CPU);
}

// The end of every tail-call chain: sends the finished trace.
SEC("perf_event")
int unwind_stop(struct bpf_perf_event_data *ctx)
{
  struct trace_context tc;
  if (trace_context_get(&tc))
    return 0;
  metric_add(METRIC_UNWIND_NATIVE_FRAMES, tc.state->native_frames);
  metric_add(METRIC_UNWIND_FP_FALLBACK, tc.state->fp_frames);
  trace_deliver(tc.trace);
  return 0;
}

#ifdef OMNIPROF_BROKEN_FOR_TEST
// Never in a normal build: only the test object of `deno task test-kernel VERSION --broken`
// (build.ts --variant OMNIPROF_BROKEN_FOR_TEST) has this program. It reads 512 bytes past the end of an
// 8-byte map value, which every kernel's verifier must reject, so that run shows a refused program
// failing the suite with the verifier's message.
SEC("perf_event")
int broken_for_test(struct bpf_perf_event_data *ctx)
{
  __u32 key = METRIC_SAMPLES;
  __u64 *count = bpf_map_lookup_elem(&metrics, &key);
  if (!count)
    return 0;
  return (int)*(volatile __u64 *)(count + 64);
}
#endif

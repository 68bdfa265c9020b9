// Entry point of every sample: a cpu-clock perf event fires on each CPU, this program records who was
// running and the kernel stack, finds the user registers, and hands over to the native unwinder. The
// stop program at the end of the tail-call chain sends the trace to the host. With off-CPU time, the same
// happens at each switch-out of a thread in scope, and the stop program keeps the trace for the switch-in.
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>

#include "kernel.bpf.h"
#include "trace.bpf.h"

// x86-64 (struct pt_regs is the UAPI layout, fixed by the ABI): the user code segment selector, and the kernel stack size (THREAD_SIZE, 4 pages).
#define USER_CS 0x33
#define KERNEL_STACK_SIZE 16384
// Kernels with FRED (6.9+) leave 16 bytes between the saved user registers and the stack top.
#define FRED_STACK_PADDING 16

static __always_inline int in_user_mode(const struct pt_regs *regs)
{
  return (regs->cs & 3) == 3;
}

// Reads the user registers saved on entry to the kernel at the top of current's kernel stack. Probing
// both layouts and checking the saved code segment avoids depending on the kernel's configuration.
static __always_inline int read_saved_user_regs(struct unwind_state *state)
{
  __u64 task = bpf_get_current_task();
  if (kernel_read_u32(task, tracer_config.kernel.task_flags) & PF_KTHREAD)
    return -1;
  unsigned long top = kernel_read_u64(task, tracer_config.kernel.task_stack) + KERNEL_STACK_SIZE;
  for (int padding = 0; padding <= FRED_STACK_PADDING; padding += FRED_STACK_PADDING) {
    struct pt_regs *regs = (struct pt_regs *)(top - padding - sizeof(struct pt_regs));
    unsigned long cs = 0;
    if (bpf_probe_read_kernel(&cs, sizeof(cs), &regs->cs) || cs != USER_CS)
      continue;
    if (bpf_probe_read_kernel(&state->pc, sizeof(state->pc), &regs->rip) ||
        bpf_probe_read_kernel(&state->sp, sizeof(state->sp), &regs->rsp) ||
        bpf_probe_read_kernel(&state->fp, sizeof(state->fp), &regs->rbp))
      return -1;
    return 0;
  }
  return -1;
}

static __always_inline void collect_kernel_stack(struct bpf_perf_event_data *ctx, struct trace *trace,
                                                 struct unwind_state *state)
{
  long bytes = bpf_get_stack(ctx, state->kernel_stack, sizeof(state->kernel_stack), 0);
  if (bytes < 0) {
    metric_increment(METRIC_KERNEL_STACK_FAILED);
    return;
  }
  __u32 count = bytes / sizeof(__u64);
  for (__u32 i = 0; i < MAX_KERNEL_FRAMES; i++) {
    if (i >= count)
      break;
    struct frame *f = &trace->frames[i];
    f->file_id = 0;
    f->addr_or_line = state->kernel_stack[i];
    f->kind = FRAME_MARKER_KERNEL;
    // The first address is the interrupted instruction, the others are return addresses.
    f->flags = i ? FRAME_FLAG_RETURN_ADDRESS : 0;
    trace->num_frames = i + 1;
    trace->kernel_frames = i + 1;
  }
}

// Starts a trace of the current thread in the per-CPU scratch, from the registers of the perf event
// `ctx` (a CPU sample, or a switch-out for off-CPU time), and hands it to the native unwinder.
static __always_inline int trace_begin(struct bpf_perf_event_data *ctx, __u64 id, __u8 origin)
{
  struct trace_context tc;
  if (trace_context_get(&tc))
    return 0;
  struct trace *trace = tc.trace;
  struct unwind_state *state = tc.state;
  __u32 pid = id >> 32;

  trace->hdr.kind = EVENT_KIND_TRACE;
  trace->hdr.cpu = bpf_get_smp_processor_id();
  trace->hdr.ktime = bpf_ktime_get_ns();
  trace->hdr.off_cpu_ns = 0;
  trace->hdr.pid = pid;
  trace->hdr.tid = (__u32)id;
  bpf_get_current_comm(trace->comm, sizeof(trace->comm));
  trace->num_frames = 0;
  trace->kernel_frames = 0;
  trace->origin = origin;
  trace->stop_reason = UNWIND_STOP_NONE;
  trace->num_labels = 0;
  trace->flags = 0;
  state->return_address = 0;
  state->tail_calls = 0;
  state->mapping_start = 0;
  state->mapping_end = 0;
  state->delta_file_id = 0;
  state->stack_window_end = 0;
  state->native_frames = 0;
  state->fp_frames = 0;
  state->mapping_interpreter = 0;
  state->interpreter_done = 0;
  state->process_reported = 0;
  state->fp_stepped = 0;
  state->interpreters_started = 0;
  state->interpreters_done = 0;

  int user_regs_found;
  if (in_user_mode(&ctx->regs)) {
    state->pc = ctx->regs.rip;
    state->sp = ctx->regs.rsp;
    state->fp = ctx->regs.rbp;
    user_regs_found = 1;
  } else {
    collect_kernel_stack(ctx, trace, state);
    user_regs_found = pid != 0 && read_saved_user_regs(state) == 0;
  }
  if (!user_regs_found)
    return trace_finish(ctx, trace, UNWIND_STOP_NO_USER_REGS);

  bpf_tail_call(ctx, &progs, PROG_UNWIND_NATIVE);
  return trace_finish(ctx, trace, UNWIND_STOP_TAIL_CALL_FAILED);
}

// Whether process `pid` is outside the PID filter (when there is one).
static __always_inline int filtered_out(__u32 pid)
{
  if (!tracer_config.filter_pids)
    return 0;
  struct pid_filter_value *filter = bpf_map_lookup_elem(&pid_filter, &pid);
  return !filter || !(filter->flags & PID_FILTER_SAMPLE);
}

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
  return trace_begin(ctx, id, TRACE_ORIGIN_SAMPLING);
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
  return trace_begin(ctx, id, TRACE_ORIGIN_OFF_CPU);
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

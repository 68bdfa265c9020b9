// The start of a trace, shared by the programs that begin one: CPU samples and switch-outs
// (tracer.bpf.c), and probes (probe.bpf.c).
#ifndef OMNIPROF_TRACE_BEGIN_BPF_H
#define OMNIPROF_TRACE_BEGIN_BPF_H

#include <linux/bpf.h>
#include <linux/ptrace.h>
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

static __always_inline void collect_kernel_stack(void *ctx, struct trace *trace, struct unwind_state *state)
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

// Starts a trace of the current thread in the per-CPU scratch and hands it to the native unwinder. `regs`
// are the registers where the event happened, in `ctx` (a perf event's, a kprobe's or a uprobe's), or
// null for a tracepoint, which always fires in the kernel: then the kernel stack comes from `ctx` and the
// user registers from where the kernel saved them.
static __always_inline int trace_begin(void *ctx, struct pt_regs *regs, __u64 id, __u8 origin)
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
  trace->hdr.off_cpu_stack = 0;
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
  if (regs && in_user_mode(regs)) {
    state->pc = regs->rip;
    state->sp = regs->rsp;
    state->fp = regs->rbp;
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

#endif

// Process lifecycle for the host's process manager: exec (mappings replaced), exit (mappings can be
// forgotten), fork (a child starts with its parent's mappings). With a PID filter, fork also extends the
// filter to the children of processes marked PID_FILTER_FOLLOW_CHILDREN, so `record -- COMMAND` follows
// everything the command starts.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "events.bpf.h"
#include "kernel.bpf.h"

static __always_inline int process_selected(__u32 pid)
{
  if (!tracer_config.filter_pids)
    return 1;
  return bpf_map_lookup_elem(&pid_filter, &pid) != 0;
}

// All three tracepoints run in the thread that execs, exits or forks; a child starts with its parent's
// name, so current's name serves for each.
static __always_inline void emit(__u32 kind, __u32 pid, __u32 tid, __u32 parent_pid)
{
  struct process_event *event = process_event_reserve(kind, pid, tid, bpf_ktime_get_ns());
  if (!event)
    return;
  event->parent_pid = parent_pid;
  bpf_get_current_comm(event->comm, sizeof(event->comm));
  // kind is a constant after inlining, so only one submit call remains.
  if (kind == EVENT_KIND_PROCESS_EXEC)
    process_event_submit(event);
  else
    process_event_submit_quiet(event);
}

SEC("raw_tp/sched_process_exec")
int on_process_exec(struct bpf_raw_tracepoint_args *ctx)
{
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  if (process_selected(pid_tgid >> 32))
    emit(EVENT_KIND_PROCESS_EXEC, pid_tgid >> 32, (__u32)pid_tgid, 0);
  return 0;
}

SEC("raw_tp/sched_process_exit")
int on_process_exit(struct bpf_raw_tracepoint_args *ctx)
{
  __u64 task = ctx->args[0];
  // Threads exit one by one; the process is gone when the last one does.
  __u64 signal = kernel_read_u64(task, tracer_config.kernel.task_signal);
  if (kernel_read_u32(signal, tracer_config.kernel.signal_live) != 0)
    return 0;
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  __u32 pid = pid_tgid >> 32;
  if (!process_selected(pid))
    return 0;
  emit(EVENT_KIND_PROCESS_EXIT, pid, (__u32)pid_tgid, 0);
  if (tracer_config.filter_pids)
    bpf_map_delete_elem(&pid_filter, &pid);
  return 0;
}

SEC("raw_tp/sched_process_fork")
int on_process_fork(struct bpf_raw_tracepoint_args *ctx)
{
  __u64 child = ctx->args[1];
  __u32 child_pid = kernel_read_u32(child, tracer_config.kernel.task_tgid);
  // A new thread joins its process; only new processes matter here.
  if (child_pid == 0 || child_pid != kernel_read_u32(child, tracer_config.kernel.task_pid))
    return 0;
  __u32 parent_pid = bpf_get_current_pid_tgid() >> 32;
  if (tracer_config.filter_pids) {
    struct pid_filter_value *filter = bpf_map_lookup_elem(&pid_filter, &parent_pid);
    if (!filter)
      return 0;
    if (!(filter->flags & PID_FILTER_FOLLOW_CHILDREN))
      return 0;
    struct pid_filter_value value = {.flags = PID_FILTER_SAMPLE | PID_FILTER_FOLLOW_CHILDREN};
    if (bpf_map_update_elem(&pid_filter, &child_pid, &value, BPF_ANY)) {
      metric_increment(METRIC_PID_FILTER_FULL);
      return 0;
    }
  }
  emit(EVENT_KIND_PROCESS_FORK, child_pid, child_pid, parent_pid);
  return 0;
}

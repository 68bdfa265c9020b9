// Process lifecycle for the host's process manager: exec (mappings replaced), exit (mappings can be
// forgotten), fork (a child starts with its parent's mappings). With a PID filter, fork also extends the
// filter to the children of processes marked PID_FILTER_FOLLOW_CHILDREN, so `record -- COMMAND` follows
// everything the command starts.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "events.bpf.h"
#include "kernel.bpf.h"

static __always_inline int process_selected(__u32 pid)
{
  if (!tracer_config.filter_pids)
    return 1;
  return bpf_map_lookup_elem(&pid_filter, &pid) != 0;
}

static __always_inline void emit(__u32 kind, struct task_struct *task, __u32 parent_pid)
{
  struct process_event *event =
    process_event_reserve(kind, BPF_CORE_READ(task, tgid), BPF_CORE_READ(task, pid), bpf_ktime_get_ns());
  if (!event)
    return;
  event->parent_pid = parent_pid;
  bpf_probe_read_kernel_str(event->comm, sizeof(event->comm), &task->comm);
  // kind is a constant after inlining, so only one submit call remains.
  if (kind == EVENT_KIND_PROCESS_EXEC)
    process_event_submit(event);
  else
    process_event_submit_quiet(event);
}

SEC("raw_tp/sched_process_exec")
int on_process_exec(struct bpf_raw_tracepoint_args *ctx)
{
  struct task_struct *task = (struct task_struct *)ctx->args[0];
  if (process_selected(BPF_CORE_READ(task, tgid)))
    emit(EVENT_KIND_PROCESS_EXEC, task, 0);
  return 0;
}

SEC("raw_tp/sched_process_exit")
int on_process_exit(struct bpf_raw_tracepoint_args *ctx)
{
  struct task_struct *task = (struct task_struct *)ctx->args[0];
  // Threads exit one by one; the process is gone when the last one does.
  if (BPF_CORE_READ(task, signal, live.counter) != 0)
    return 0;
  __u32 pid = BPF_CORE_READ(task, tgid);
  if (!process_selected(pid))
    return 0;
  emit(EVENT_KIND_PROCESS_EXIT, task, 0);
  if (tracer_config.filter_pids)
    bpf_map_delete_elem(&pid_filter, &pid);
  return 0;
}

SEC("raw_tp/sched_process_fork")
int on_process_fork(struct bpf_raw_tracepoint_args *ctx)
{
  struct task_struct *parent = (struct task_struct *)ctx->args[0];
  struct task_struct *child = (struct task_struct *)ctx->args[1];
  __u32 child_pid = BPF_CORE_READ(child, tgid);
  // A new thread joins its process; only new processes matter here.
  if (child_pid != (__u32)BPF_CORE_READ(child, pid))
    return 0;
  __u32 parent_pid = BPF_CORE_READ(parent, tgid);
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
  emit(EVENT_KIND_PROCESS_FORK, child, parent_pid);
  return 0;
}

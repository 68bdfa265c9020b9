// Process events for the host, written to the same ring buffer as traces (so they stay in order).
#ifndef OMNIPROF_EVENTS_BPF_H
#define OMNIPROF_EVENTS_BPF_H

#include "maps.bpf.h"

// Reserves a process event with its header filled in and every other field zero; NULL (and counted as
// lost) when the ring buffer is full. The caller fills what its kind needs, then submits.
static __always_inline struct process_event *process_event_reserve(__u32 kind, __u32 pid, __u32 tid, __u64 now)
{
  struct process_event *event = bpf_ringbuf_reserve(&events, sizeof(*event), 0);
  if (!event) {
    metric_increment(METRIC_EVENTS_LOST);
    return 0;
  }
  event->hdr.kind = kind;
  event->hdr.cpu = bpf_get_smp_processor_id();
  event->hdr.ktime = now;
  event->hdr.off_cpu_ns = 0;
  event->hdr.off_cpu_stack = 0;
  event->hdr.pid = pid;
  event->hdr.tid = tid;
  event->parent_pid = 0;
  event->file_id = 0;
  __builtin_memset(event->comm, 0, sizeof(event->comm));
  event->address = 0;
  return event;
}

// Wakes the host: it has to read the process (or file) while it still exists, which for a short-lived
// process can be a few milliseconds; traces alone wait for the host's slow timer.
static __always_inline void process_event_submit(struct process_event *event)
{
  bpf_ringbuf_submit(event, BPF_RB_FORCE_WAKEUP);
}

// No wakeup, for events that can wait for the next drain (fork, exit): samples of a forked child the
// host does not know yet raise their own (waking) event.
static __always_inline void process_event_submit_quiet(struct process_event *event)
{
  bpf_ringbuf_submit(event, BPF_RB_NO_WAKEUP);
}

#endif

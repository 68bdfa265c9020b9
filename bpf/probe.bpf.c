// Stacks at probes (record -e): a uprobe, uretprobe, kprobe or tracepoint of the session fires, and the
// thread that hit it is unwound as a sample is, its trace counting one event. Probe programs are of the
// kprobe type (uprobes, uretprobes and kprobes) or the tracepoint type, and a tail call only reaches
// programs of the caller's type: the host loads the unwinders again as that type, with a `progs` table
// of their own (lib/record/probes.ts), and each probe of the session gets its own entry program, so that
// its traces say which probe they are (their origin) on kernels without BPF cookies (before 5.15).
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>

#include "trace_begin.bpf.h"

static __always_inline int probe_hit(void *ctx, struct pt_regs *regs, __u8 probe)
{
  __u64 id = bpf_get_current_pid_tgid();
  __u32 pid = id >> 32;
  if ((pid == 0 && !tracer_config.sample_idle) || pid == tracer_config.self_pid || filtered_out(pid))
    return 0;
  metric_increment(METRIC_PROBE_HITS);
  return trace_begin(ctx, regs, id, TRACE_ORIGIN_PROBE + probe);
}

#define PROBE_PROGRAMS(i)                                                                                  \
  SEC("kprobe") int probe_kprobe_##i(struct pt_regs *ctx)                                                 \
  {                                                                                                        \
    return probe_hit(ctx, ctx, i);                                                                         \
  }                                                                                                        \
  SEC("tracepoint") int probe_tracepoint_##i(void *ctx)                                                   \
  {                                                                                                        \
    return probe_hit(ctx, 0, i);                                                                           \
  }

PROBE_PROGRAMS(0)
PROBE_PROGRAMS(1)
PROBE_PROGRAMS(2)
PROBE_PROGRAMS(3)
PROBE_PROGRAMS(4)
PROBE_PROGRAMS(5)
PROBE_PROGRAMS(6)
PROBE_PROGRAMS(7)

_Static_assert(MAX_PROBES == 8, "one pair of programs per probe");

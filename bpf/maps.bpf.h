// Declarations of the maps shared by the programs; maps.bpf.c defines them. The types are named so that
// each program file can declare the maps extern and the bitcode linker joins them into one definition.
#ifndef OMNIPROF_MAPS_BPF_H
#define OMNIPROF_MAPS_BPF_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "types.h"

struct events_map {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 4 << 20); // resized by the host before load
};

struct progs_map {
  __uint(type, BPF_MAP_TYPE_PROG_ARRAY);
  __uint(max_entries, PROG_UNWIND_COUNT);
  __type(key, __u32);
  __type(value, __u32);
};

struct trace_scratch_map {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct trace);
};

struct unwind_state_map {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct unwind_state);
};

struct metrics_map {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, METRIC_COUNT);
  __type(key, __u32);
  __type(value, __u64);
};

struct pid_filter_map {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, PID_FILTER_MAX_ENTRIES);
  __type(key, __u32);
  __type(value, struct pid_filter_value);
};

// Ring buffer of every record the host reads: traces and process events, in the order they happened.
extern struct events_map events SEC(".maps");
// Tail-call targets, indexed by enum unwind_program.
extern struct progs_map progs SEC(".maps");
// The trace being built on this CPU (too large for the 512-byte BPF stack).
extern struct trace_scratch_map trace_scratch SEC(".maps");
extern struct unwind_state_map unwind_state SEC(".maps");
extern struct metrics_map metrics SEC(".maps");
// Processes to sample when tracer_config.filter_pids is set, keyed by process id.
extern struct pid_filter_map pid_filter SEC(".maps");

extern const volatile struct tracer_config tracer_config;

static __always_inline void metric_increment(__u32 id)
{
  __u64 *count = bpf_map_lookup_elem(&metrics, &id);
  if (count)
    *count += 1;
}

#endif

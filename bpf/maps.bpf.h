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

// A per-CPU direct-mapped cache of rules found in the stack deltas, keyed by file and looked-up address.
// Most samples unwind return addresses seen before, and a rule found in the tables costs a page lookup,
// a hash-of-maps lookup and a binary search, each touching cache lines that other work evicted since the
// last sample; a hit touches one entry. File ids are never reused and a file's tables never change while
// it is loaded, so an entry never goes stale.
#define RULE_CACHE_BITS 9
#define RULE_CACHE_ENTRIES (1 << RULE_CACHE_BITS)

struct rule_cache_entry {
  __u64 file_id; // 0: empty (no file has id 0)
  __u64 lookup;  // the looked-up ELF virtual address
  struct resolved_rule rule;
  __u32 pad;
};

// Rows the binary search reads with one copy once it has narrowed a page down to that many.
#define DELTA_WINDOW_BITS 5
#define DELTA_WINDOW (1 << DELTA_WINDOW_BITS)

// A row of a file's delta array as the kernel lays it out: array elements are 8-byte aligned.
struct stack_delta_slot {
  struct stack_delta delta;
  __u32 pad;
};

struct rule_cache {
  struct rule_cache_entry entries[RULE_CACHE_ENTRIES];
  // Scratch for the last rows of a binary search (too large for the BPF stack).
  struct stack_delta_slot window[DELTA_WINDOW];
  // The kernel address of the first row of the page being searched (see find_delta_rows).
  __u64 rows_base;
};

struct rule_cache_map {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct rule_cache);
};

// A per-CPU cache of the trie's answers across samples: a sample of a process that ran recently on this
// CPU finds its mappings here instead of walking the trie, whose nodes (one allocation each, as deep as
// the trie of every process's mappings) are mostly out of the cache by the next sample. An entry holds
// only while mapping_generation is what it was when the entry was filled: the host changes it after
// every removal from the trie.
#define MAPPING_CACHE_ENTRIES 8

struct mapping_cache_entry {
  __u64 generation;
  __u32 pid; // 0: empty (the idle task is never unwound)
  __u32 pad;
  __u64 start;
  __u64 end;
  __u64 file_id;
  __u64 bias_and_unwind_program;
};

struct mapping_cache {
  struct mapping_cache_entry entries[MAPPING_CACHE_ENTRIES];
  __u32 next; // the entry to replace next (round robin)
  __u32 pad;
};

struct mapping_cache_map {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct mapping_cache);
};

struct mapping_generation_map {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
};

// The switched-out threads in scope, by thread id (record --off-cpu): when each was switched out and the
// id of the stack it waits in. Keyed by thread rather than per CPU, so that a thread switched back in on
// another CPU finds its own entry (a per-CPU map would pair it with whatever that CPU switched out last).
// Preallocated, as programs of perf events require on older kernels; the host sizes it for the threads in
// scope before load.
struct off_cpu_waits_map {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1); // resized by the host before load
  __type(key, __u32);
  __type(value, struct off_cpu_wait);
};

// The whole trace of a switched-out thread whose stack has no id (struct off_cpu_wait.stack is
// OFF_CPU_NO_ID), by thread id: sent with its duration when the thread is switched back in. Sized as
// off_cpu_waits.
struct off_cpu_traces_map {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1); // resized by the host before load
  __type(key, __u32);
  __type(value, struct off_cpu_trace);
};

// Off-CPU stacks by the hash of their trace (off_cpu_stack_hash): the id the host gave each, or
// OFF_CPU_NO_ID while it has not. Preallocated, as off_cpu_waits; the host sizes it (OFF_CPU_MAX_STACKS)
// for a session with off-CPU time only, as it does off_cpu_totals.
struct off_cpu_stack_ids_map {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1); // resized by the host before load
  __type(key, __u64);
  __type(value, __u32);
};

// The waits of each off-CPU stack with an id, added up: the host maps the array and reads it in place.
struct off_cpu_totals_map {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1); // resized by the host before load
  __uint(map_flags, BPF_F_MMAPABLE);
  __type(key, __u32);
  __type(value, struct off_cpu_total);
};

struct pid_filter_map {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, PID_FILTER_MAX_ENTRIES);
  __type(key, __u32);
  __type(value, struct pid_filter_value);
};

// Written by the host through mmap, a file's new rules at once (a system call per rule cost more than the
// rest of loading a small file).
struct unwind_info_map {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, UNWIND_INFO_MAX_ENTRIES);
  __type(key, __u32);
  __type(value, struct unwind_info);
};

// Hash maps read by perf_event programs must be preallocated before kernel 6.1 ("perf_event programs can
// only use preallocated hash map"), so their sizes are kept modest. On 6.1 and later the host creates the
// large ones with BPF_F_NO_PREALLOC (lib/record/map_allocation.ts).
struct stack_delta_pages_map {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, STACK_DELTA_PAGES_MAX_ENTRIES);
  __type(key, struct stack_delta_page_key);
  __type(value, struct stack_delta_page_info);
};

struct pid_page_mappings_map {
  __uint(type, BPF_MAP_TYPE_LPM_TRIE);
  __uint(max_entries, PID_PAGE_MAPPINGS_MAX_ENTRIES);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, struct pid_page_mapping_key);
  __type(value, struct pid_page_mapping_info);
};

struct known_pids_map {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, KNOWN_PIDS_MAX_ENTRIES);
  __type(key, __u32);
  __type(value, __u8);
};

struct loaded_files_map {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, LOADED_FILES_MAX_ENTRIES);
  __type(key, __u64);
  __type(value, __u8);
};

struct reported_files_map {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 4096);
  __type(key, __u64);
  __type(value, __u64);
};

// Preallocated (see above): read by the native unwinder on every interpreter mapping it enters.
struct interpreter_offsets_map {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, INTERPRETER_OFFSETS_MAX_ENTRIES);
  __type(key, __u64);
  __type(value, struct interpreter_offsets);
};

// Per CPU, as trace_scratch is: the labels of the trace being built (trace.num_labels of them).
struct trace_labels_map {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct trace_labels);
};

struct reported_pids_map {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 8192);
  __type(key, __u32);
  __type(value, __u64);
};

// A file's stack deltas: an array of 2^N entries, created by the host per file and put into the
// bucket's hash-of-maps under the file id. Sizes, not BTF types: kernels before 6.12 refuse an inner map
// whose BTF differs from the template's, and the host creates the arrays without BTF. The template is one entry: BPF_F_INNER_MAP (5.10+) lets the
// real arrays be larger, so loading the object does not allocate a full-size array per bucket.
#define STACK_DELTA_BUCKET(n)                                                                           \
  struct stack_delta_inner_##n {                                                                        \
    __uint(type, BPF_MAP_TYPE_ARRAY);                                                                   \
    __uint(max_entries, 1);                                                                             \
    __uint(map_flags, BPF_F_MMAPABLE | BPF_F_INNER_MAP);                                                \
    __uint(key_size, sizeof(__u32));                                                                    \
    __uint(value_size, sizeof(struct stack_delta));                                                     \
  };                                                                                                    \
  struct stack_delta_outer_##n {                                                                        \
    __uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);                                                            \
    __uint(max_entries, FILES_PER_BUCKET_MAX);                                                          \
    __type(key, __u64);                                                                                 \
    __array(values, struct stack_delta_inner_##n);                                                      \
  };                                                                                                    \
  extern struct stack_delta_outer_##n exe_id_to_##n##_stack_deltas SEC(".maps");

STACK_DELTA_BUCKET(8)
STACK_DELTA_BUCKET(9)
STACK_DELTA_BUCKET(10)
STACK_DELTA_BUCKET(11)
STACK_DELTA_BUCKET(12)
STACK_DELTA_BUCKET(13)
STACK_DELTA_BUCKET(14)
STACK_DELTA_BUCKET(15)
STACK_DELTA_BUCKET(16)
STACK_DELTA_BUCKET(17)
STACK_DELTA_BUCKET(18)
STACK_DELTA_BUCKET(19)
STACK_DELTA_BUCKET(20)
STACK_DELTA_BUCKET(21)
STACK_DELTA_BUCKET(22)
STACK_DELTA_BUCKET(23)

// Rules shared by all files (deduplicated by the host).
extern struct unwind_info_map unwind_info_array SEC(".maps");
// (file id, 64 KiB page) -> where the page's deltas are.
extern struct stack_delta_pages_map stack_delta_page_to_info SEC(".maps");
// (pid, address prefix) -> file id, bias and unwind program.
extern struct pid_page_mappings_map pid_page_to_mapping_info SEC(".maps");
// Processes whose mappings the host has installed.
extern struct known_pids_map known_pids SEC(".maps");
// Files whose stack deltas are loaded (a file is installed in the trie before its deltas are).
extern struct loaded_files_map loaded_files SEC(".maps");
// When a file was last asked for (rate limit).
extern struct reported_files_map reported_files SEC(".maps");
// File id -> where its interpreter loop is (files of interpreters only).
extern struct interpreter_offsets_map interpreter_offsets SEC(".maps");
// The labels a runtime read for this CPU's trace, until the trace is sent.
extern struct trace_labels_map trace_labels SEC(".maps");
// When a process was last reported to the host (rate limit).
extern struct reported_pids_map reported_pids SEC(".maps");

// Ring buffer of every record the host reads: traces and process events, in the order they happened.
extern struct events_map events SEC(".maps");
// Tail-call targets, indexed by enum unwind_program.
extern struct progs_map progs SEC(".maps");
// The trace being built on this CPU (too large for the 512-byte BPF stack).
extern struct trace_scratch_map trace_scratch SEC(".maps");
extern struct unwind_state_map unwind_state SEC(".maps");
extern struct metrics_map metrics SEC(".maps");
extern struct rule_cache_map rule_cache SEC(".maps");
extern struct mapping_cache_map mapping_cache SEC(".maps");
// Changed by the host after it removes entries from pid_page_to_mapping_info (see mapping_cache).
extern struct mapping_generation_map mapping_generation SEC(".maps");
// Processes to sample when tracer_config.filter_pids is set, keyed by process id.
extern struct pid_filter_map pid_filter SEC(".maps");
extern struct off_cpu_traces_map off_cpu_traces SEC(".maps");
extern struct off_cpu_waits_map off_cpu_waits SEC(".maps");
extern struct off_cpu_stack_ids_map off_cpu_stack_ids SEC(".maps");
extern struct off_cpu_totals_map off_cpu_totals SEC(".maps");

extern const volatile struct tracer_config tracer_config;

static __always_inline void metric_add(__u32 id, __u64 amount)
{
  __u64 *count = bpf_map_lookup_elem(&metrics, &id);
  if (count)
    *count += amount;
}

static __always_inline void metric_increment(__u32 id)
{
  metric_add(id, 1);
}

#endif

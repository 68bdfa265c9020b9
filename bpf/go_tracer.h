// What the Go label reader (go_tracer.bpf.c) shares with the host: its slot of the tail-call table, its
// counters, and the per-process record the host writes. support/generate_types.ts exports every enum and
// struct declared in a bpf/*_tracer.h header, so lib/interpreter/go/ reads these values from
// support/types.ts and never copies them.
#ifndef OMNIPROF_GO_TRACER_H
#define OMNIPROF_GO_TRACER_H

#include "types.h"

// Its slot of the `progs` tail-call table (a value of enum unwind_program). Go's frames are native: it
// has no frame marker.
enum go_unwind_program {
  PROG_UNWIND_GO_LABELS = 0x9,
};

// Its counters in the `metrics` array, from the runtimes' range of enum metric_id.
enum go_metric_id {
  METRIC_GO_LABEL_SETS = 36,   // samples whose goroutine had pprof labels
  METRIC_GO_NO_PROC_INFO = 37, // Go code sampled in a process without a go_procs record
  METRIC_GO_READ_FAILED = 38,  // the runtime's memory could not be read: the labels were left out
};

// As ints: clang 19 refuses a comparison of two enum types (-Wenum-compare).
_Static_assert((int)PROG_UNWIND_GO_LABELS > (int)PROG_UNWIND_NATIVE &&
                 (int)PROG_UNWIND_GO_LABELS < (int)PROG_UNWIND_COUNT,
               "a runtime's slot of the tail-call table");
_Static_assert((int)METRIC_GO_LABEL_SETS >= (int)METRIC_RUNTIMES_FIRST &&
                 (int)METRIC_GO_READ_FAILED < (int)METRIC_COUNT,
               "counters in the runtimes' range of enum metric_id");

enum go_limits {
  GO_PROCS_MAX_ENTRIES = 4096,
};

// How a Go version keeps a goroutine's pprof labels (g.labels points at it).
enum go_label_layout {
  GO_LABELS_MAP = 0,   // map[string]string (before 1.24): an hmap of buckets of 8 keys and 8 values
  GO_LABELS_SLICE = 1, // 1.24+: a []label{key, value string}, sorted by key
};

// Everything the Go label reader needs of one process (go_procs, keyed by pid); per Go version, from
// lib/interpreter/go/offsets.ts.
struct go_proc_info {
  __s64 tls_g_offset; // the current g is at fsbase + tls_g_offset
  __u16 g_m;          // g.m (*m)
  __u16 m_curg;       // m.curg (*g): the user goroutine, also when sampled on g0 or gsignal
  __u16 g_labels;     // g.labels (unsafe.Pointer)
  __u8 layout;        // enum go_label_layout
  __u8 pad[1];
};

#endif

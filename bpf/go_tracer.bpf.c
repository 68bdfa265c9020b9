// The Go label reader. Go code is unwound natively (frame pointers); what BPF adds for Go is the pprof
// labels of the sampled goroutine (pprof.Do, pprof.SetGoroutineLabels). The host declares the Go text of
// an executable as its "interpreter loop", and this program runs once per trace: the native unwinder
// tail-calls it at the trace's first frame of Go code; it copies the labels into trace_labels, which
// trace_send() appends to the trace, asks not to be called again in this trace
// (interpreter_done_for_trace), and hands back to the native unwinder.
//
// The walk: the current g from the thread's TLS (fsbase + tls_g_offset), then g.m.curg (the user
// goroutine, also when the thread runs on g0 or gsignal), then curg.labels. Before Go 1.24 that points at
// a map[string]string (an hmap whose buckets hold 8 keys and 8 values); from 1.24 at a slice of
// {key, value string}. lib/interpreter/go/README.md has the offsets per version.
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>

#include "go_tracer.h"
#include "stack_deltas.bpf.h"
#include "kernel.bpf.h"
#include "trace.bpf.h"

// Pid -> where the label reader finds a goroutine's labels (Go processes only).
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, GO_PROCS_MAX_ENTRIES);
  __type(key, __u32);
  __type(value, struct go_proc_info);
} go_procs SEC(".maps");

// Never read: it makes clang emit BTF for the types of go_tracer.h that no code here names as a type,
// so that build.ts can export them (maps.bpf.c does the same for types.h).
struct go_btf_export {
  enum go_unwind_program unwind_program;
  enum go_metric_id metric_id;
  enum go_limits limits;
  enum go_label_layout label_layout;
};
const volatile struct go_btf_export go_btf_export = {};

// Go's runtime.bmap for map[string]string on 64-bit: tophash[8], keys[8], values[8], overflow.
#define GO_BUCKET_SLOTS 8
#define GO_STRING_BYTES 16
#define GO_BUCKET_BYTES (GO_BUCKET_SLOTS + 2 * GO_BUCKET_SLOTS * GO_STRING_BYTES + 8)
// A tophash below this marks an empty or evacuated slot (runtime.minTopHash).
#define GO_MIN_TOP_HASH 5
// hmap fields (unchanged from Go 1.11 to 1.23): count at 0, B (log2 of the bucket count) at 9, buckets
// at 16.
#define GO_HMAP_B 9
#define GO_HMAP_BUCKETS 16
// Where a bucket's overflow pointer is: a bucket holds 8 entries, more of the same bucket go on in an
// overflow bucket.
#define GO_BUCKET_OVERFLOW (GO_BUCKET_SLOTS + 2 * GO_BUCKET_SLOTS * GO_STRING_BYTES)
// Buckets and overflow buckets read: a map of MAX_TRACE_LABELS labels has 2 buckets (6.5 entries per
// bucket at most on average), and one of them may overflow; a bigger set may lose labels past this.
#define GO_MAX_BUCKET_READS 6
// A label of the 1.24+ slice: key and value strings.
#define GO_LABEL_PAIR_BYTES 32

struct go_scratch {
  __u8 bucket[GO_BUCKET_BYTES];
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct go_scratch);
} go_scratch SEC(".maps");

static __always_inline int read_u64(__u64 address, __u64 *out)
{
  return bpf_probe_read_user(out, sizeof(*out), (void *)address);
}

// Copies one string of the goroutine into `out` (zero-filled behind it), cut to TRACE_LABEL_BYTES: its
// length, or -1 when it could not be read.
static __always_inline int copy_go_string(char *out, __u64 pointer, __u64 length)
{
  __builtin_memset(out, 0, TRACE_LABEL_BYTES);
  if (length > TRACE_LABEL_BYTES)
    length = TRACE_LABEL_BYTES;
  if (length == 0)
    return 0;
  if (bpf_probe_read_user(out, length, (void *)pointer))
    return -1;
  return length;
}

// Stores label `index` of the trace from the goroutine's key and value strings: 0, or -1 when they could
// not be read.
//
// A global function (scalars in and out, its maps looked up itself, as kernels since 5.10 take): the
// verifier checks it once rather than at each of the unrolled places that store a label.
// The index is 64 bits wide: clang tests a 32-bit one and then uses a zero-extended copy, whose bound
// the verifier does not know.
__noinline int go_store_label(__u64 index, __u64 key, __u64 key_len, __u64 value, __u64 value_len)
{
  __u32 zero = 0;
  struct trace_labels *labels = bpf_map_lookup_elem(&trace_labels, &zero);
  if (!labels || index >= MAX_TRACE_LABELS)
    return -1;
  struct trace_label *label = &labels->labels[index];
  int k = copy_go_string(label->key, key, key_len);
  int v = copy_go_string(label->value, value, value_len);
  if (k < 0 || v < 0)
    return -1;
  label->key_len = k;
  label->value_len = v;
  return 0;
}

// Stores the labels of the map bucket at `bucket` as labels `stored` on: the number of labels stored
// then, -1 on a failed read. A global function, checked once rather than per unrolled bucket.
__noinline int go_store_bucket(__u64 bucket, __u64 stored)
{
  __u32 zero = 0;
  struct go_scratch *scratch = bpf_map_lookup_elem(&go_scratch, &zero);
  if (!scratch || bpf_probe_read_user(scratch->bucket, sizeof(scratch->bucket), (void *)bucket))
    return -1;
  for (int slot = 0; slot < GO_BUCKET_SLOTS; slot++) {
    if (scratch->bucket[slot] < GO_MIN_TOP_HASH)
      continue;
    if (stored >= MAX_TRACE_LABELS)
      break;
    __u64 *key = (__u64 *)&scratch->bucket[GO_BUCKET_SLOTS + slot * GO_STRING_BYTES];
    __u64 *value = (__u64 *)&scratch->bucket[GO_BUCKET_SLOTS + (GO_BUCKET_SLOTS + slot) * GO_STRING_BYTES];
    if (go_store_label(stored, key[0], key[1], value[0], value[1]))
      return -1;
    stored++;
  }
  return stored;
}

// The labels of a map[string]string (Go before 1.24) at `hmap`: how many were stored, -1 on a failed read.
// The buckets in order, each followed by its overflow buckets, GO_MAX_BUCKET_READS in all. The old
// buckets of a map being grown are not read: a grow from at most 2 buckets (maps under 27 entries) ends
// within the insert that started it, and a label map is never written once built.
static __always_inline int read_label_map(__u64 hmap)
{
  __u32 zero = 0;
  struct go_scratch *scratch = bpf_map_lookup_elem(&go_scratch, &zero);
  __u8 log2_buckets;
  __u64 buckets;
  if (!scratch || bpf_probe_read_user(&log2_buckets, sizeof(log2_buckets), (void *)(hmap + GO_HMAP_B)) ||
      read_u64(hmap + GO_HMAP_BUCKETS, &buckets))
    return -1;
  // A small map gets its bucket with its first entry: none yet, no labels.
  if (buckets == 0)
    return 0;
  __u32 bucket_count = log2_buckets < 8 ? 1u << log2_buckets : 256;
  __u32 next = 1;
  __u64 bucket = buckets;
  int stored = 0;
  for (int i = 0; i < GO_MAX_BUCKET_READS && stored < MAX_TRACE_LABELS; i++) {
    stored = go_store_bucket(bucket, stored);
    if (stored < 0)
      return -1;
    // go_store_bucket() left the bucket in the scratch.
    __u64 overflow = *(__u64 *)&scratch->bucket[GO_BUCKET_OVERFLOW];
    if (overflow) {
      bucket = overflow;
    } else if (next < bucket_count) {
      bucket = buckets + (__u64)next * GO_BUCKET_BYTES;
      next++;
    } else {
      break;
    }
  }
  return stored;
}

// The labels of a []label{key, value string} (Go 1.24+) whose header is at `slice`.
static __always_inline int read_label_slice(__u64 slice)
{
  __u64 header[2]; // array, len
  if (bpf_probe_read_user(header, sizeof(header), (void *)slice))
    return -1;
  int stored = 0;
  for (__u32 i = 0; i < MAX_TRACE_LABELS; i++) {
    if (i >= header[1])
      break;
    __u64 pair[4]; // key pointer, key length, value pointer, value length
    if (bpf_probe_read_user(pair, sizeof(pair), (void *)(header[0] + i * GO_LABEL_PAIR_BYTES)) ||
        go_store_label(i, pair[0], pair[1], pair[2], pair[3]))
      return -1;
    stored++;
  }
  return stored;
}

// Reads the labels of the goroutine the sampled thread runs into trace_labels: how many, 0 when it has
// none, -1 when memory could not be read.
static __always_inline int read_goroutine_labels(const struct go_proc_info *info)
{
  __u64 fsbase = kernel_read_u64(bpf_get_current_task(), tracer_config.kernel.task_fsbase);
  __u64 g, m, curg, labels;
  if (fsbase == 0 || read_u64(fsbase + info->tls_g_offset, &g))
    return -1;
  if (g == 0 || read_u64(g + info->g_m, &m))
    return g == 0 ? 0 : -1;
  if (m == 0 || read_u64(m + info->m_curg, &curg))
    return m == 0 ? 0 : -1;
  // No goroutine on this thread: the scheduler, or a thread of the runtime's own such as sysmon.
  if (curg == 0)
    return 0;
  if (read_u64(curg + info->g_labels, &labels))
    return -1;
  if (labels == 0)
    return 0;
  if (info->layout == GO_LABELS_SLICE)
    return read_label_slice(labels);
  __u64 hmap;
  if (read_u64(labels, &hmap))
    return -1;
  return hmap ? read_label_map(hmap) : 0;
}

SEC("perf_event")
int unwind_go_labels(struct bpf_perf_event_data *ctx)
{
  struct trace_context tc;
  if (trace_context_get(&tc))
    return 0;
  struct trace *trace = tc.trace;
  struct unwind_state *state = tc.state;
  __u32 pid = trace->hdr.pid;
  // Whatever happens here, the native unwinder takes this Go frame next.
  state->interpreter_done = 1;
  interpreter_done_for_trace(state, PROG_UNWIND_GO_LABELS);
  if (interpreter_walk_begins(state, PROG_UNWIND_GO_LABELS)) {
    struct go_proc_info *info = bpf_map_lookup_elem(&go_procs, &pid);
    if (!info) {
      metric_increment(METRIC_GO_NO_PROC_INFO);
      report_process(EVENT_KIND_PROCESS_STALE, pid);
    } else {
      int count = read_goroutine_labels(info);
      if (count < 0) {
        metric_increment(METRIC_GO_READ_FAILED);
      } else if (count > 0) {
        trace->num_labels = count;
        metric_increment(METRIC_GO_LABEL_SETS);
      }
    }
  }
  if (state->tail_calls >= MAX_TAIL_CALLS)
    return trace_finish(ctx, trace, UNWIND_STOP_TRUNCATED);
  state->tail_calls++;
  bpf_tail_call(ctx, &progs, PROG_UNWIND_NATIVE);
  return trace_finish(ctx, trace, UNWIND_STOP_TAIL_CALL_FAILED);
}

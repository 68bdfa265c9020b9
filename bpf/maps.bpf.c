// Definitions of the maps and settings declared in maps.bpf.h.
#include "maps.bpf.h"

struct events_map events SEC(".maps");
struct progs_map progs SEC(".maps");
struct trace_scratch_map trace_scratch SEC(".maps");
struct unwind_state_map unwind_state SEC(".maps");
struct metrics_map metrics SEC(".maps");
struct pid_filter_map pid_filter SEC(".maps");

const volatile struct tracer_config tracer_config = {};

char LICENSE[] SEC("license") = "GPL";

// Never read by the programs: it makes clang emit BTF for every type the host shares with them (enums
// and structs only used in casts or not at all would otherwise be left out), so that build.ts can
// generate the TypeScript side from this object.
struct btf_export {
  enum frame_marker frame_marker;
  enum unwind_program unwind_program;
  enum trace_origin trace_origin;
  enum event_kind event_kind;
  enum frame_flag frame_flag;
  enum unwind_stop_reason unwind_stop_reason;
  enum metric_id metric_id;
  enum limits limits;
  enum pid_filter_flag pid_filter_flag;
  struct process_event process_event;
};
const volatile struct btf_export btf_export = {};

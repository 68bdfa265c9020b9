// Definitions of the maps and settings declared in maps.bpf.h.
#include "maps.bpf.h"

struct events_map events SEC(".maps");
struct progs_map progs SEC(".maps");
struct trace_scratch_map trace_scratch SEC(".maps");
struct unwind_state_map unwind_state SEC(".maps");
struct metrics_map metrics SEC(".maps");
struct rule_cache_map rule_cache SEC(".maps");
struct mapping_cache_map mapping_cache SEC(".maps");
struct mapping_generation_map mapping_generation SEC(".maps");
struct pid_filter_map pid_filter SEC(".maps");
struct off_cpu_traces_map off_cpu_traces SEC(".maps");
struct off_cpu_waits_map off_cpu_waits SEC(".maps");
struct off_cpu_stack_ids_map off_cpu_stack_ids SEC(".maps");
struct off_cpu_totals_map off_cpu_totals SEC(".maps");
struct unwind_info_map unwind_info_array SEC(".maps");
struct stack_delta_pages_map stack_delta_page_to_info SEC(".maps");
struct pid_page_mappings_map pid_page_to_mapping_info SEC(".maps");
struct known_pids_map known_pids SEC(".maps");
struct reported_pids_map reported_pids SEC(".maps");
struct loaded_files_map loaded_files SEC(".maps");
struct reported_files_map reported_files SEC(".maps");
struct interpreter_offsets_map interpreter_offsets SEC(".maps");
struct trace_labels_map trace_labels SEC(".maps");
struct stack_delta_outer_8 exe_id_to_8_stack_deltas SEC(".maps");
struct stack_delta_outer_9 exe_id_to_9_stack_deltas SEC(".maps");
struct stack_delta_outer_10 exe_id_to_10_stack_deltas SEC(".maps");
struct stack_delta_outer_11 exe_id_to_11_stack_deltas SEC(".maps");
struct stack_delta_outer_12 exe_id_to_12_stack_deltas SEC(".maps");
struct stack_delta_outer_13 exe_id_to_13_stack_deltas SEC(".maps");
struct stack_delta_outer_14 exe_id_to_14_stack_deltas SEC(".maps");
struct stack_delta_outer_15 exe_id_to_15_stack_deltas SEC(".maps");
struct stack_delta_outer_16 exe_id_to_16_stack_deltas SEC(".maps");
struct stack_delta_outer_17 exe_id_to_17_stack_deltas SEC(".maps");
struct stack_delta_outer_18 exe_id_to_18_stack_deltas SEC(".maps");
struct stack_delta_outer_19 exe_id_to_19_stack_deltas SEC(".maps");
struct stack_delta_outer_20 exe_id_to_20_stack_deltas SEC(".maps");
struct stack_delta_outer_21 exe_id_to_21_stack_deltas SEC(".maps");
struct stack_delta_outer_22 exe_id_to_22_stack_deltas SEC(".maps");
struct stack_delta_outer_23 exe_id_to_23_stack_deltas SEC(".maps");

const volatile struct tracer_config tracer_config = {};

// The kernel allocates per-CPU map values of at most 32 KiB (PCPU_MIN_UNIT_SIZE).
_Static_assert(sizeof(struct trace) <= 32768, "the per-CPU trace scratch fits a per-CPU allocation");
// A switched-out thread's trace is kept as the prefix of struct trace up to its labels.
_Static_assert(__builtin_offsetof(struct off_cpu_trace, frames) == __builtin_offsetof(struct trace, frames) &&
                   sizeof(struct off_cpu_trace) == __builtin_offsetof(struct trace, label_room),
               "struct off_cpu_trace is the start of struct trace");

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
  enum stack_delta_constants stack_delta_constants;
  enum unwind_command unwind_command;
  enum unwind_opcode unwind_opcode;
  enum unwind_fp_opcode unwind_fp_opcode;
  enum interpreter_constants interpreter_constants;
  enum kernel_name_limits kernel_name_limits;
  enum trace_flag trace_flag;
  enum stack_copy_mode stack_copy_mode;
  enum off_cpu_constants off_cpu_constants;
  struct off_cpu_wait off_cpu_wait;
  struct off_cpu_total off_cpu_total;
  struct copied_stack copied_stack;
  struct process_event process_event;
  struct unwind_info unwind_info;
  struct stack_delta stack_delta;
  struct stack_delta_page_key stack_delta_page_key;
  struct stack_delta_page_info stack_delta_page_info;
  struct pid_page_mapping_key pid_page_mapping_key;
  struct pid_page_mapping_info pid_page_mapping_info;
  struct interpreter_offsets interpreter_offsets;
  struct trace_label trace_label;
};
const volatile struct btf_export btf_export = {};

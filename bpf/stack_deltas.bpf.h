// Looking up how to unwind an address: the process's mapping (LPM trie) gives the file and bias, the
// file's page table and delta array give the rule in force at the address.
#ifndef OMNIPROF_STACK_DELTAS_BPF_H
#define OMNIPROF_STACK_DELTAS_BPF_H

#include <bpf/bpf_endian.h>

#include "events.bpf.h"
#include "maps.bpf.h"

// Binary search steps: a page holds at most 2^16 deltas.
#define DELTA_SEARCH_STEPS 16
#define BIAS_MASK 0x00ffffffffffffffULL
// Report an unknown or stale process at most this often (ns).
#define REPORT_INTERVAL_NS 500000000ULL
// How often a runtime whose record is about to become usable (it is initializing) asks again: a sample
// period at 499 Hz, so that a process started mid-recording loses a sample or two, not half a second.
#define RUNTIME_RETRY_INTERVAL_NS 2000000ULL

static __always_inline struct pid_page_mapping_info *lookup_mapping(__u32 pid, __u64 pc)
{
  struct pid_page_mapping_key key = {
    .prefix_len = BIT_WIDTH_PID + BIT_WIDTH_PAGE,
    .pid_be = bpf_htonl(pid),
    .page_be = bpf_cpu_to_be64(pc),
  };
  return bpf_map_lookup_elem(&pid_page_to_mapping_info, &key);
}

// The mapping of `pid` that holds `pc`, from this CPU's mapping cache or else the trie; copied into
// `out` (the trie's value may be freed once the program ends). Returns -1 when no mapping holds it.
static __always_inline int find_mapping(__u32 pid, __u64 pc, struct pid_page_mapping_info *out)
{
  __u32 zero = 0;
  __u64 *current = bpf_map_lookup_elem(&mapping_generation, &zero);
  struct mapping_cache *cache = bpf_map_lookup_elem(&mapping_cache, &zero);
  if (!current || !cache)
    return -1;
  // Read before the trie: a removal after this read changes it, so an entry filled from the old trie
  // is never used.
  __u64 generation = *(volatile __u64 *)current;
  for (int i = 0; i < MAPPING_CACHE_ENTRIES; i++) {
    struct mapping_cache_entry *entry = &cache->entries[i];
    if (entry->pid == pid && entry->generation == generation && pc >= entry->start && pc < entry->end) {
      out->start = entry->start;
      out->end = entry->end;
      out->file_id = entry->file_id;
      out->bias_and_unwind_program = entry->bias_and_unwind_program;
      return 0;
    }
  }
  struct pid_page_mapping_info *mapping = lookup_mapping(pid, pc);
  if (!mapping)
    return -1;
  *out = *mapping;
  struct mapping_cache_entry *entry = &cache->entries[cache->next & (MAPPING_CACHE_ENTRIES - 1)];
  cache->next++;
  entry->generation = generation;
  entry->pid = pid;
  entry->start = out->start;
  entry->end = out->end;
  entry->file_id = out->file_id;
  entry->bias_and_unwind_program = out->bias_and_unwind_program;
  return 0;
}

// The unwind program sits in the top byte of bias_and_unwind_program.
#define UNWIND_PROGRAM_SHIFT 56

// Called when an unwinder enters a new mapping: an interpreter's file (the host installed its trie
// entries with the interpreter's program) gets its loop ranges cached, so that the per-frame check is
// two compares and other files cost nothing. Anonymous memory (file id 0) installed with a runtime's
// program is that runtime's code throughout: a JIT compiler's code space.
static __always_inline void cache_interpreter_ranges(struct unwind_state *state)
{
  state->mapping_interpreter = 0;
  __u8 program = state->mapping_bias_and_unwind_program >> UNWIND_PROGRAM_SHIFT;
  if (program == PROG_UNWIND_NATIVE || program >= PROG_UNWIND_COUNT)
    return;
  __u64 file_id = state->mapping_file_id;
  if (file_id == 0) {
    state->interpreter_lower[0] = 0;
    state->interpreter_upper[0] = ~0ULL;
    for (int i = 1; i < INTERPRETER_RANGES; i++) {
      state->interpreter_lower[i] = 0;
      state->interpreter_upper[i] = 0;
    }
    state->mapping_interpreter = program;
    return;
  }
  struct interpreter_offsets *offsets = bpf_map_lookup_elem(&interpreter_offsets, &file_id);
  if (!offsets)
    return;
  for (int i = 0; i < INTERPRETER_RANGES; i++) {
    state->interpreter_lower[i] = offsets->lower[i];
    state->interpreter_upper[i] = offsets->upper[i];
  }
  state->mapping_interpreter = offsets->program;
}

// Whether `vaddr` (an address of the cached mapping's file) lies in its interpreter's code.
static __always_inline int in_interpreter(struct unwind_state *state, __u64 vaddr)
{
  // A program that asked not to be called again in this trace: its files' code is native from now on.
  __u8 program = state->mapping_interpreter;
  if (program < PROG_UNWIND_COUNT && (state->interpreters_done & (1u << program)))
    return 0;
  // A return address may be just past the loop's last call: look at the call itself.
  __u64 at = state->return_address ? vaddr - 1 : vaddr;
  for (int i = 0; i < INTERPRETER_RANGES; i++) {
    if (at >= state->interpreter_lower[i] && at < state->interpreter_upper[i])
      return 1;
  }
  return 0;
}

// Makes the mapping that holds state->pc the cached one: 0, or -1 when no mapping of `pid` holds it.
static __always_inline int cache_mapping(__u32 pid, struct unwind_state *state)
{
  if (state->pc >= state->mapping_start && state->pc < state->mapping_end)
    return 0;
  struct pid_page_mapping_info mapping;
  if (find_mapping(pid, state->pc, &mapping))
    return -1;
  state->mapping_start = mapping.start;
  state->mapping_end = mapping.end;
  state->mapping_file_id = mapping.file_id;
  state->mapping_bias_and_unwind_program = mapping.bias_and_unwind_program;
  cache_interpreter_ranges(state);
  return 0;
}

// Stores in cache->rows_base the address of row `first` of the file's array in its bucket's map; returns
// -1 when there is none. An address stored and read back is a plain number to the verifier, where a
// pointer into one bucket's map would make it check the search once per bucket (16 times, 100k+
// instructions); the search reads rows with bpf_probe_read_kernel instead.
static __always_inline int find_delta_rows(struct rule_cache *cache, __u16 map_id, __u64 *rows_id, __u32 first)
{
  void *deltas;
  struct stack_delta_slot *row;
  switch (map_id) {
#define BUCKET_CASE(n)                                                                                  \
  case n:                                                                                               \
    deltas = bpf_map_lookup_elem(&exe_id_to_##n##_stack_deltas, rows_id);                               \
    if (!deltas)                                                                                        \
      return -1;                                                                                        \
    row = bpf_map_lookup_elem(deltas, &first);                                                          \
    if (!row)                                                                                           \
      return -1;                                                                                        \
    cache->rows_base = (__u64)row;                                                                      \
    return 0;
    BUCKET_CASE(8)
    BUCKET_CASE(9)
    BUCKET_CASE(10)
    BUCKET_CASE(11)
    BUCKET_CASE(12)
    BUCKET_CASE(13)
    BUCKET_CASE(14)
    BUCKET_CASE(15)
    BUCKET_CASE(16)
    BUCKET_CASE(17)
    BUCKET_CASE(18)
    BUCKET_CASE(19)
    BUCKET_CASE(20)
    BUCKET_CASE(21)
    BUCKET_CASE(22)
    BUCKET_CASE(23)
#undef BUCKET_CASE
  }
  return -1;
}

// The rule for `vaddr` of file `file_id` from the tables: the unwind_info field of the last delta at or
// before it. Returns -1 when the file has no table for the address.
//
// Each step of a binary search through the file's array reads one row (on a line no other sample touched
// lately), so once the page's range is down to DELTA_WINDOW rows they are copied into `cache->window` at
// once and searched there.
static __always_inline int search_unwind_info(struct rule_cache *cache, __u64 file_id, __u64 vaddr,
                                              __u16 *unwind_info, __u16 *addr_low)
{
  struct stack_delta_page_key key = {.file_id = file_id, .page = vaddr >> STACK_DELTA_PAGE_BITS};
  struct stack_delta_page_info *page = bpf_map_lookup_elem(&stack_delta_page_to_info, &key);
  if (!page || page->num_deltas == 0 || page->map_id > STACK_DELTA_BUCKET_LARGEST)
    return -1;
  __u32 first = page->first_delta;
  __u16 map_id = page->map_id;
  // The page's rows must lie inside the bucket's array: a corrupt entry must not send the reads past it.
  __u32 rows = page->num_deltas;
  __u32 capacity = 1U << map_id;
  if (first >= capacity)
    return -1;
  if (rows > capacity - first)
    rows = capacity - first;
  __u64 rows_id = page->rows_id;
  if (find_delta_rows(cache, map_id, &rows_id, first))
    return -1;
  __u64 base = *(volatile __u64 *)&cache->rows_base;
  __u16 target = vaddr & STACK_DELTA_PAGE_MASK;
  __u64 low = 0;
  __u64 high = rows; // exclusive; both relative to `first`
  // Without branches: every step runs, and one that finds the range already down to DELTA_WINDOW rows
  // changes nothing. A branch per step would be 2^11 paths for the verifier to check.
  for (int i = 0; i < DELTA_SEARCH_STEPS - DELTA_WINDOW_BITS; i++) {
    __u64 middle = (low + high) / 2;
    struct stack_delta_slot slot;
    if (bpf_probe_read_kernel(&slot, sizeof(slot.delta), (void *)(base + middle * sizeof(slot))))
      return -1;
    __u64 active = (__u64)(DELTA_WINDOW - (__s64)(high - low)) >> 63;          // range > DELTA_WINDOW
    __u64 above = (__u64)((__s64)target - (__s64)slot.delta.addr_low) >> 63; // row starts past target
    __u64 move_low = active & (above ^ 1);
    __u64 move_high = active & above;
    // Hidden from the compiler, which would turn the masks back into branches.
    barrier_var(move_low);
    barrier_var(move_high);
    low += (middle - low) & -move_low;
    high -= (high - middle) & -move_high;
  }
  // 1..DELTA_WINDOW rows are left (a page has fewer than 2^16, each step above halves them), so the mask
  // changes nothing; it shows the verifier the bound, which it does not derive from the loop.
  __u32 count = ((__u32)(high - low - 1) & (DELTA_WINDOW - 1)) + 1;
  // Rows low..high-1 are contiguous in the array, which holds every row of the page.
  if (bpf_probe_read_kernel(cache->window, count * sizeof(struct stack_delta_slot),
                            (void *)(base + (__u64)low * sizeof(struct stack_delta_slot))))
    return -1;
  __u32 row = 0;
  __u32 end = count;
  for (int i = 0; i < DELTA_WINDOW_BITS; i++) {
    if (row + 1 >= end)
      break;
    __u32 middle = (row + end) / 2;
    if (cache->window[middle & (DELTA_WINDOW - 1)].delta.addr_low <= target)
      row = middle;
    else
      end = middle;
  }
  struct stack_delta *delta = &cache->window[row & (DELTA_WINDOW - 1)].delta;
  // The host starts every page with the rule in force at its first byte, so this only fails on a
  // corrupt table.
  if (delta->addr_low > target)
    return -1;
  *unwind_info = delta->unwind_info;
  *addr_low = delta->addr_low;
  return 0;
}

enum find_rule_result {
  RULE_FOUND = 0,
  RULE_NO_TABLE = 1, // the file has no table for the address (not loaded yet, or a gap)
  RULE_BAD = 2,      // the row names an unwind_info_array entry that does not exist
};

// Makes the row (unwind_info, addr_low) ready to apply at `vaddr`.
static __always_inline int resolve_rule(__u16 unwind_info, __u16 addr_low, __u64 vaddr,
                                        struct resolved_rule *rule)
{
  rule->unwind_info = unwind_info;
  rule->cfa_opcode = 0;
  rule->fp_opcode = UNWIND_FP_UNCHANGED;
  rule->cfa_param = 0;
  rule->fp_param = 0;
  if (unwind_info & DELTA_COMMAND_FLAG)
    return RULE_FOUND;
  __u32 index = unwind_info;
  struct unwind_info *info = bpf_map_lookup_elem(&unwind_info_array, &index);
  if (!info)
    return RULE_BAD;
  __s32 param = info->param;
  __u8 merge = info->merge_opcode;
  // A merged second rule (a push or pop a few bytes on) applies from addr_low + distance.
  if (merge && (vaddr & STACK_DELTA_PAGE_MASK) >= (__u64)addr_low + (merge & ~MERGE_OPCODE_NEGATIVE))
    param += (merge & MERGE_OPCODE_NEGATIVE) ? -8 : 8;
  rule->cfa_opcode = info->opcode;
  rule->cfa_param = param;
  rule->fp_opcode = info->fp_opcode;
  rule->fp_param = info->fp_param;
  return RULE_FOUND;
}

// The rule for `vaddr` of file `file_id`, from this CPU's cache or else the tables (enum
// find_rule_result). The cache holds rules ready to apply, so a hit touches one entry and no table.
static __always_inline int find_rule(__u64 file_id, __u64 vaddr, struct resolved_rule *rule)
{
  __u32 zero = 0;
  struct rule_cache *cache = bpf_map_lookup_elem(&rule_cache, &zero);
  if (!cache)
    return RULE_NO_TABLE;
  // Fibonacci hashing: the top bits of the product mix every bit of the address and the file.
  __u64 hash = (vaddr ^ (file_id << 40) ^ (file_id >> 24)) * 0x9e3779b97f4a7c15ULL;
  struct rule_cache_entry *slot = &cache->entries[hash >> (64 - RULE_CACHE_BITS)];
  if (slot->file_id == file_id && slot->lookup == vaddr) {
    *rule = slot->rule;
    return RULE_FOUND;
  }
  __u16 unwind_info, addr_low;
  if (search_unwind_info(cache, file_id, vaddr, &unwind_info, &addr_low))
    return RULE_NO_TABLE;
  int result = resolve_rule(unwind_info, addr_low, vaddr, rule);
  if (result != RULE_FOUND)
    return result;
  slot->file_id = file_id;
  slot->lookup = vaddr;
  slot->rule = *rule;
  return RULE_FOUND;
}

// Asks the host to (re)read a process, at most every `interval_ns` per process.
static __always_inline void report_process_within(__u32 kind, __u32 pid, __u64 interval_ns)
{
  __u64 now = bpf_ktime_get_ns();
  __u64 *last = bpf_map_lookup_elem(&reported_pids, &pid);
  if (last && now - *last < interval_ns)
    return;
  bpf_map_update_elem(&reported_pids, &pid, &now, BPF_ANY);
  struct process_event *event = process_event_reserve(kind, pid, 0, now);
  if (event)
    process_event_submit(event);
}

// Asks the host to (re)read a process, at most every REPORT_INTERVAL_NS per process.
static __always_inline void report_process(__u32 kind, __u32 pid)
{
  report_process_within(kind, pid, REPORT_INTERVAL_NS);
}

// Asks the host to load the deltas of a file's page holding `vaddr`, at most every REPORT_INTERVAL_NS
// per page.
static __always_inline void report_file(__u64 file_id, __u64 vaddr, __u32 pid)
{
  __u64 now = bpf_ktime_get_ns();
  // File ids stay far below 2^24 and pages below 2^40: the key is unique in practice, and a collision
  // only delays one request.
  __u64 key = (file_id << 40) ^ (vaddr >> STACK_DELTA_PAGE_BITS);
  __u64 *last = bpf_map_lookup_elem(&reported_files, &key);
  if (last && now - *last < REPORT_INTERVAL_NS)
    return;
  bpf_map_update_elem(&reported_files, &key, &now, BPF_ANY);
  struct process_event *event = process_event_reserve(EVENT_KIND_FILE_NEEDED, pid, 0, now);
  if (!event)
    return;
  event->file_id = (__u32)file_id;
  event->address = vaddr;
  process_event_submit(event);
}

#endif

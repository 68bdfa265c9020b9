// The V8 unwinder (Node.js). The native unwinder tail-calls it when pc is in V8's code: its JIT code
// space (anonymous executable memory the host installs with this program) or the builtins embedded in
// the V8 binary (the interpreter's handlers and trampolines, declared as the file's interpreter ranges).
// Every frame of V8's code keeps a frame pointer, and the frame itself says what runs in it: the
// JSFunction in a fixed slot below fp, or for V8's own frames (entry, exit, stubs) a type marker there.
// It records per frame what identifies the function and the position in it, unwinds through fp, and goes
// on while pc stays in V8's code; it hands back to the native unwinder at the first frame that is not.
//
// A JavaScript frame is recorded as (object | enum v8_frame_type, position) in (file_id, addr_or_line):
// the host reads the function's name, script and line from the process's memory while it lives
// (lib/interpreter/v8/README.md). V8's own frames and anything that does not look like a JavaScript frame
// are recorded as native frames at their absolute address: the host names builtins by their symbols.
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>

#include "stack_deltas.bpf.h"
#include "stack_window.bpf.h"
#include "trace.bpf.h"
#include "v8_tracer.h"

// Frames per program run: the step is a global function, so the verifier checks it once whatever the
// number; with MAX_TAIL_CALLS runs this reaches MAX_FRAME_UNWINDS.
#define V8_FRAMES_PER_RUN 16
#define V8_HEAP_OBJECT_TAG 1
#define V8_HEAP_OBJECT_TAG_MASK 3
#define V8_SMI_TAG_MASK 1
// A Smi is the upper half of a word (64-bit V8 without pointer compression).
#define V8_SMI_VALUE_SHIFT 32
// Frame types V8 marks its own frames with are small numbers; anything above is not a marker.
#define V8_MAX_FRAME_TYPE 64
// Maps a trace remembers the instance type of (a power of two): JSFunctions have several.
#define V8_MAP_CACHE_ENTRIES 8
// Words at the top of the stack searched for the return address of a frameless builtin's caller.
#define V8_CALLEE_STACK_WORDS 4
// The largest V8 frame the unwinder accepts: a saved fp further up is taken as garbage.
#define V8_MAX_FRAME_BYTES 65536
#define V8_ADDRESS_MASK ((1ULL << 47) - 1)

// The per-CPU scratch of one trace: the process's record, and the frame and code object read at once.
// What one trace has learnt so far, reset when its walk begins: objects do not move while their thread
// is stopped on this CPU, and a stack holds the same few maps and, in recursion, the same function again
// and again. Each hit saves reads of the process's memory, the unwinder's main cost.
struct v8_trace_cache {
  __u64 maps[V8_MAP_CACHE_ENTRIES]; // maps whose instance type is known, 0 for an empty entry
  __u16 map_types[V8_MAP_CACHE_ENTRIES];
  __u32 next_map;
  __u64 function; // the last JSFunction identified, 0 for none
  __u64 shared;   // its SharedFunctionInfo
  __u64 code;     // its Code, 0 when it had none of a compiled kind
  __u64 code_start;
  __u32 code_size;
  __u32 code_kind;
};

struct v8_scratch {
  struct v8_proc_info info;
  struct v8_trace_cache cache;
  // The first bytes of a JSFunction and of its Code, read at once; the slack lets a masked offset load 8
  // bytes without leaving the array.
  __u8 object[V8_OBJECT_BYTES + 8];
  __u8 code[V8_CODE_BYTES + 8];
};

// Pid -> V8's layouts in the process (V8 processes only), written by the host.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, V8_PROCS_MAX_ENTRIES);
  __type(key, __u32);
  __type(value, struct v8_proc_info);
} v8_procs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct v8_scratch);
} v8_scratch SEC(".maps");

// Never read: it makes clang emit BTF for the types of v8_tracer.h that no code here names as a type,
// so that build.ts can export them.
struct v8_btf_export {
  enum v8_frame_marker frame_marker;
  enum v8_unwind_program unwind_program;
  enum v8_metric_id metric_id;
  enum v8_limits limits;
  enum v8_frame_type frame_type;
  enum v8_code_cookie code_cookie;
  enum v8_dispatch_table dispatch_table;
};
const volatile struct v8_btf_export v8_btf_export = {};

enum v8_step {
  V8_STEP_MORE = 0,  // the frame is unwound and pc is still in V8's code
  V8_STEP_LEAVE = 1, // the frame is unwound and pc is outside V8's code: the native unwinder goes on
  V8_STEP_DONE = 2,  // the trace is finished (trace->stop_reason says why)
};

// The object a tagged pointer points to, or 0 when the word is not a heap object pointer.
static __always_inline __u64 untag(__u64 word)
{
  return (word & V8_HEAP_OBJECT_TAG_MASK) == V8_HEAP_OBJECT_TAG ? word & ~(__u64)V8_HEAP_OBJECT_TAG_MASK : 0;
}

static __always_inline __u64 read_object(__u64 address)
{
  __u64 word;
  if (bpf_probe_read_user(&word, sizeof(word), (void *)address))
    return 0;
  return untag(word);
}

// The instance type of the heap object at `object`, or 0 (no object type is 0 that the unwinder asks for).
// The instance type of the objects whose map is `map` (a map pointer, its tag cleared), or 0.
static __always_inline __u16 map_type(struct v8_scratch *v8, __u64 map)
{
  if (map == 0)
    return 0;
  struct v8_trace_cache *cache = &v8->cache;
  for (int i = 0; i < V8_MAP_CACHE_ENTRIES; i++) {
    if (cache->maps[i] == map)
      return cache->map_types[i];
  }
  __u16 type;
  if (bpf_probe_read_user(&type, sizeof(type), (void *)(map + v8->info.off_map_instance_type)))
    return 0;
  __u32 slot = cache->next_map++ & (V8_MAP_CACHE_ENTRIES - 1);
  cache->maps[slot] = map;
  cache->map_types[slot] = type;
  return type;
}

// The instance type of the heap object at `object`, or 0 (no object type is 0 that the unwinder asks for).
static __always_inline __u16 object_type(struct v8_scratch *v8, __u64 object)
{
  return object == 0 ? 0 : map_type(v8, read_object(object + v8->info.off_heap_object_map));
}

static __always_inline __u64 object_u64(const struct v8_scratch *v8, __u32 offset)
{
  return *(const __u64 *)&v8->object[offset & (V8_OBJECT_BYTES - 1)];
}

static __always_inline __u32 code_u32(const struct v8_scratch *v8, __u32 offset)
{
  return *(const __u32 *)&v8->code[offset & (V8_CODE_BYTES - 1)];
}

static __always_inline __u64 code_u64(const struct v8_scratch *v8, __u32 offset)
{
  return *(const __u64 *)&v8->code[offset & (V8_CODE_BYTES - 1)];
}

// Records one frame: 0, or -1 when the trace is full.
//
// A global function (scalars in and out, its map looked up itself): each of the places that record a
// frame then checks the bound on the frame count again, where inlined copies made the verifier lose it.
__noinline int v8_push(__u64 kind, __u64 file_id, __u64 addr_or_line, __u64 flags)
{
  __u32 zero = 0;
  struct trace *trace = bpf_map_lookup_elem(&trace_scratch, &zero);
  if (!trace)
    return -1;
  __u32 n = trace->num_frames;
  if (n >= MAX_FRAMES || n - trace->kernel_frames >= MAX_FRAME_UNWINDS)
    return -1;
  struct frame *f = &trace->frames[n];
  f->file_id = file_id;
  f->addr_or_line = addr_or_line;
  f->kind = kind;
  f->flags = flags;
  trace->num_frames = n + 1;
  return 0;
}

// The code object of the JSFunction in v8->object: its field, or with V8 13's JS dispatch table the
// entry its handle names; 0 when unreadable.
static __always_inline __u64 jsfunction_code(const struct v8_scratch *v8)
{
  const struct v8_proc_info *info = &v8->info;
  if (info->dispatch_table == 0)
    return untag(object_u64(v8, info->off_jsfunction_code));
  __u32 handle = (__u32)object_u64(v8, info->off_jsfunction_code);
  __u64 index = handle >> V8_DISPATCH_TABLE_HANDLE_SHIFT;
  if (index >= V8_DISPATCH_TABLE_MAX_ENTRIES)
    return 0;
  __u64 word;
  void *entry = (void *)(info->dispatch_table + index * V8_DISPATCH_TABLE_ENTRY_BYTES);
  if (bpf_probe_read_user(&word, sizeof(word), entry + V8_DISPATCH_TABLE_CODE_WORD))
    return 0;
  // The address, shifted up past marking bits: the object's tag is not kept.
  return untag((word >> V8_DISPATCH_TABLE_CODE_SHIFT) | V8_HEAP_OBJECT_TAG);
}

// What runs in the JavaScript frame whose function and bytecode offset slots hold these words (pc: where it
// runs, and whether that is a
// return address), as (file_id, addr_or_line) of its record; 0, or -1 when the frame holds no JSFunction
// (it is not a JavaScript frame after all).
static __always_inline int identify(struct v8_scratch *v8, __u64 function_slot, __u64 offset_slot, __u64 pc,
                                    __u8 return_address, __u64 sp, __u64 *file_id, __u64 *position,
                                    __u8 *in_callee)
{
  const struct v8_proc_info *info = &v8->info;
  struct v8_trace_cache *cache = &v8->cache;
  __u64 function = untag(function_slot);
  if (function == 0)
    return -1;
  if (function != cache->function) {
    // A function this trace has not met in the frame before: check it, and read what identifies it. Its
    // map, SharedFunctionInfo and code lie in its first bytes: one read.
    if (bpf_probe_read_user(v8->object, V8_OBJECT_BYTES, (void *)function))
      return -1;
    __u16 type = map_type(v8, untag(object_u64(v8, info->off_heap_object_map)));
    if (type < info->type_jsfunction_first || type > info->type_jsfunction_last)
      return -1;
    __u64 shared = untag(object_u64(v8, info->off_jsfunction_shared));
    __u64 code = jsfunction_code(v8);
    if (shared == 0 || object_type(v8, shared) != info->type_shared_function_info)
      return -1;
    cache->function = function;
    cache->shared = shared;
    cache->code = 0;
    // Its current code object, if of a compiled kind. (The slot of the bytecode offset is a spill slot in
    // optimised frames, which may hold anything: the code is asked first.) Its map is in its first bytes.
    if (code != 0 && bpf_probe_read_user(v8->code, V8_CODE_BYTES, (void *)code) == 0 &&
        map_type(v8, untag(code_u64(v8, info->off_heap_object_map))) == info->type_code) {
      __u64 start = code_u64(v8, info->off_code_instruction_start);
      if (!info->code_instructions_is_pointer)
        start = code + info->off_code_instruction_start;
      __u32 kind = (code_u32(v8, info->off_code_flags) & info->codekind_mask) >> info->codekind_shift;
      if (kind >= info->codekind_baseline) {
        cache->code = code;
        cache->code_start = start;
        cache->code_size = code_u32(v8, info->off_code_instruction_size);
        cache->code_kind = kind;
      }
    }
  }
  __u64 shared = cache->shared;
  __u64 code = cache->code;
  if (code != 0) {
    __u64 start = cache->code_start;
    __u32 size = cache->code_size;
    __u32 kind = cache->code_kind;
    if (!return_address && !(pc >= start && pc < start + size)) {
      // Interrupted in a builtin that builds no frame of its own (baseline and optimised code call them for
      // arithmetic, property loads, stack checks): fp is still this function's frame, and the return
      // address into its code lies at the top of the stack.
      __u64 words[V8_CALLEE_STACK_WORDS];
      if (bpf_probe_read_user(words, sizeof(words), (void *)sp) == 0) {
        for (int i = 0; i < V8_CALLEE_STACK_WORDS; i++) {
          if (words[i] >= start && words[i] < start + size) {
            pc = words[i];
            return_address = 1;
            *in_callee = 1;
            break;
          }
        }
      }
    }
    if (pc >= start && pc < start + size) {
      __u64 cookie = ((__u64)size << 4 | (kind & 0xf)) & 0xffffffff;
      // A return address is just past its call: the call's own position is the one to name.
      *position = (pc - start - (return_address ? 1 : 0)) | cookie << V8_CODE_COOKIE_SHIFT;
      *file_id = kind == info->codekind_baseline ? function | V8_FRAME_BASELINE : code | V8_FRAME_CODE;
      return 0;
    }
  }
  // The interpreter keeps the bytecode offset as a Smi in its frame.
  __u64 offset = offset_slot;
  if ((offset & V8_SMI_TAG_MASK) == 0 && (offset >> V8_SMI_VALUE_SHIFT) != 0 &&
      (offset >> V8_SMI_VALUE_SHIFT) < (1ULL << 31)) {
    *file_id = shared | V8_FRAME_BYTECODE;
    *position = offset >> V8_SMI_VALUE_SHIFT;
    return 0;
  }
  metric_increment(METRIC_V8_NO_CODE);
  *file_id = shared | V8_FRAME_FUNCTION;
  *position = 0;
  return 0;
}

// Records the frame at state->pc and unwinds it through fp (enum v8_step).
//
// A global function (scalars in and out, its maps looked up itself, as kernels since 5.10 take): the
// verifier checks it once rather than once per unrolled step.
__noinline int v8_step(void)
{
  struct trace_context tc;
  __u32 zero = 0;
  struct v8_scratch *v8 = bpf_map_lookup_elem(&v8_scratch, &zero);
  if (trace_context_get(&tc) || !v8)
    return V8_STEP_DONE;
  struct trace *trace = tc.trace;
  struct unwind_state *state = tc.state;
  __u64 fp = state->fp;
  __u64 pc = state->pc;
  __u8 ra_flag = state->return_address ? FRAME_FLAG_RETURN_ADDRESS : 0;

  // The slots through the stack window, the lowest first: the window then holds the rest of this frame
  // and usually its callers' (V8's frames are small).
  __u64 base = fp - V8_FRAME_BELOW_FP;
  __u64 offset_slot, function_slot, marker, record[2];
  if (fp == 0 || (fp & 7) || fp < state->sp || fp - state->sp > V8_MAX_FRAME_BYTES ||
      read_stack(state, base + v8->info.fp_bytecode_offset, &offset_slot, 8) ||
      read_stack(state, base + v8->info.fp_function, &function_slot, 8) ||
      read_stack(state, base + v8->info.fp_marker, &marker, 8) || read_stack(state, fp, record, 16)) {
    metric_increment(METRIC_V8_READ_FAILED);
    trace->stop_reason = UNWIND_STOP_READ_FAILED;
    v8_push(FRAME_MARKER_NATIVE, 0, pc, ra_flag | FRAME_FLAG_ABSOLUTE_ADDRESS);
    return V8_STEP_DONE;
  }
  __u64 saved_fp = record[0];
  __u64 return_address = record[1];

  __u64 file_id = 0, position = 0;
  __u8 in_callee = 0;
  int pushed;
  if ((marker & V8_SMI_TAG_MASK) == 0 && (marker >> 1) < V8_MAX_FRAME_TYPE) {
    // One of V8's own frames (entry, exit, a stub): a native frame, named by the builtin's symbol.
    pushed = v8_push(FRAME_MARKER_NATIVE, 0, pc, ra_flag | FRAME_FLAG_ABSOLUTE_ADDRESS);
  } else if (identify(v8, function_slot, offset_slot, pc, state->return_address, state->sp, &file_id, &position,
                      &in_callee) == 0) {
    // The frameless builtin pc is in, then the function that called it.
    pushed = in_callee ? v8_push(FRAME_MARKER_NATIVE, 0, pc, FRAME_FLAG_ABSOLUTE_ADDRESS) : 0;
    if (pushed == 0)
      pushed = v8_push(FRAME_MARKER_V8, file_id, position, in_callee ? FRAME_FLAG_RETURN_ADDRESS : ra_flag);
  } else {
    metric_increment(METRIC_V8_BAD_FRAME);
    pushed = v8_push(FRAME_MARKER_NATIVE, 0, pc, ra_flag | FRAME_FLAG_ABSOLUTE_ADDRESS);
  }
  if (pushed) {
    trace->stop_reason = UNWIND_STOP_TRUNCATED;
    return V8_STEP_DONE;
  }

  if (return_address == 0 || (saved_fp != 0 && saved_fp <= fp)) {
    trace->stop_reason = return_address == 0 ? UNWIND_STOP_END_OF_STACK : UNWIND_STOP_BAD_FRAME_POINTER;
    return V8_STEP_DONE;
  }
  state->pc = return_address & V8_ADDRESS_MASK;
  state->sp = fp + 16;
  state->fp = saved_fp;
  state->return_address = 1;
  if (cache_mapping(trace->hdr.pid, state) == 0 && state->mapping_interpreter == PROG_UNWIND_V8 &&
      in_interpreter(state, state->pc - (state->mapping_bias_and_unwind_program & BIAS_MASK)))
    return V8_STEP_MORE;
  return V8_STEP_LEAVE;
}

SEC("perf_event")
int unwind_v8(struct bpf_perf_event_data *ctx)
{
  struct trace_context tc;
  __u32 zero = 0;
  struct v8_scratch *v8 = bpf_map_lookup_elem(&v8_scratch, &zero);
  if (trace_context_get(&tc) || !v8)
    return 0;
  struct trace *trace = tc.trace;
  struct unwind_state *state = tc.state;
  __u32 pid = trace->hdr.pid;

  struct v8_proc_info *info = bpf_map_lookup_elem(&v8_procs, &pid);
  if (!info) {
    // The host claimed the file but has not attached to the process yet: the frame pointer goes on.
    metric_increment(METRIC_V8_NO_PROC_INFO);
    report_process(EVENT_KIND_PROCESS_STALE, pid);
    state->interpreter_done = 1;
  } else {
    if (interpreter_walk_begins(state, PROG_UNWIND_V8)) {
      v8->info = *info;
      __builtin_memset(&v8->cache, 0, sizeof(v8->cache));
    }
    int result = V8_STEP_MORE;
    __u32 before = trace->num_frames;
    for (int i = 0; i < V8_FRAMES_PER_RUN && result == V8_STEP_MORE; i++)
      result = v8_step();
    metric_add(METRIC_V8_FRAMES, trace->num_frames - before);
    if (result == V8_STEP_DONE)
      return trace_finish(ctx, trace, trace->stop_reason);
    if (result == V8_STEP_MORE && state->tail_calls < MAX_TAIL_CALLS) {
      state->tail_calls++;
      bpf_tail_call(ctx, &progs, PROG_UNWIND_V8);
    }
  }
  if (state->tail_calls >= MAX_TAIL_CALLS)
    return trace_finish(ctx, trace, UNWIND_STOP_TRUNCATED);
  state->tail_calls++;
  bpf_tail_call(ctx, &progs, PROG_UNWIND_NATIVE);
  return trace_finish(ctx, trace, UNWIND_STOP_TAIL_CALL_FAILED);
}

// The native user-space unwinder. For each frame it finds the code's file through the process's
// mappings (the pid_page_to_mapping_info LPM trie, filled by the host) and the rule to unwind it in the
// file's stack deltas (extracted from .eh_frame on the host), so code without frame pointers unwinds
// completely. Code outside every known file (a process the host has not read yet, JIT code) falls back
// to the frame-pointer chain for that frame. A frame in an interpreter's loop (its bytecode eval loop) is
// first handed to that runtime's unwinder, which records the interpreter's own frames and hands back.
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>

#include "stack_deltas.bpf.h"
#include "stack_window.bpf.h"
#include "trace.bpf.h"

// Frames per program run; the program tail-calls itself to go deeper. 4 frames a run reach
// MAX_FRAME_UNWINDS in 32 runs, within the kernel's limit of 33 tail calls per sample; more frames a run
// would need fewer tail calls but multiply the verifier's work (8 frames: ~3x the load time).
#define FRAMES_PER_RUN 4

// x86-64 signal frame: after the handler returns into the trampoline, rsp points at the ucontext,
// whose mcontext (struct sigcontext) starts 40 bytes in (uc_flags, uc_link, uc_stack).
#define UCONTEXT_MCONTEXT 40
#define SIGCONTEXT_RBP 80
#define SIGCONTEXT_RSP 120
#define SIGCONTEXT_RIP 128
#define PAGE_SIZE 4096

// Go's goroutine descriptor g starts with its stack bounds {lo, hi} (runtime.g, in runtime2.go).
#define GO_G_STACK_LO 0
#define GO_G_STACK_HI 8
// With no g saved, runtime.asmcgocall (already on a system stack) saved its entry rsp itself: the call's
// rsp lies below it by the saved slots and their alignment, never more than this.
#define GO_CGO_NOSAVE_MAX_DISTANCE 128

// Pages of the copied stack: the window is read in whole pages past rsp's where it cannot be read at once.
#define COPIED_STACK_PAGES (COPIED_STACK_BYTES / PAGE_SIZE)
_Static_assert(COPIED_STACK_BYTES % PAGE_SIZE == 0, "the stack copy is a whole number of pages");

enum step_result {
  STEP_CONTINUE = 0, // = FRAME_NEXT
  STEP_DONE = 1,     // = FRAME_DONE: trace->stop_reason is set
};

static __always_inline int push_frame(struct trace *trace, __u64 file_id, __u64 address, __u8 flags)
{
  __u32 n = trace->num_frames;
  if (n >= MAX_FRAMES || n - trace->kernel_frames >= MAX_FRAME_UNWINDS)
    return -1;
  struct frame *f = &trace->frames[n];
  f->file_id = file_id;
  f->addr_or_line = address;
  f->kind = FRAME_MARKER_NATIVE;
  f->flags = flags;
  trace->num_frames = n + 1;
  return 0;
}

static __always_inline int stop(struct trace *trace, __u8 reason)
{
  trace->stop_reason = reason;
  return STEP_DONE;
}

// One step along the frame-pointer chain: rbp -> [saved rbp, return address].
static __always_inline int step_frame_pointer(struct trace *trace, struct unwind_state *state)
{
  __u64 fp = state->fp;
  if (fp == 0)
    return stop(trace, UNWIND_STOP_END_OF_STACK);
  if ((fp & 7) || fp < state->sp)
    return stop(trace, UNWIND_STOP_BAD_FRAME_POINTER);
  __u64 record[2];
  if (read_stack(state, fp, record, sizeof(record)))
    return stop(trace, UNWIND_STOP_READ_FAILED);
  if (record[1] == 0)
    return stop(trace, UNWIND_STOP_END_OF_STACK);
  if (record[0] != 0 && record[0] <= fp)
    return stop(trace, UNWIND_STOP_BAD_FRAME_POINTER);
  state->pc = record[1];
  state->sp = fp + sizeof(record);
  state->fp = record[0];
  state->return_address = 1;
  state->fp_stepped = 1;
  return STEP_CONTINUE;
}

static __always_inline int step_signal_frame(struct trace *trace, struct unwind_state *state)
{
  __u64 mcontext = state->sp + UCONTEXT_MCONTEXT;
  __u64 rbp, rsp, rip;
  if (bpf_probe_read_user(&rbp, sizeof(rbp), (void *)(mcontext + SIGCONTEXT_RBP)) ||
      bpf_probe_read_user(&rsp, sizeof(rsp), (void *)(mcontext + SIGCONTEXT_RSP)) ||
      bpf_probe_read_user(&rip, sizeof(rip), (void *)(mcontext + SIGCONTEXT_RIP)))
    return stop(trace, UNWIND_STOP_READ_FAILED);
  metric_increment(METRIC_UNWIND_SIGNAL_FRAMES);
  __u32 last = trace->num_frames - 1;
  if (last < MAX_FRAMES)
    trace->frames[last].flags |= FRAME_FLAG_SIGNAL_TRAMPOLINE;
  state->pc = rip;
  state->sp = rsp;
  state->fp = rbp;
  // The interrupted instruction, not a return address: look it up as it is.
  state->return_address = 0;
  return STEP_CONTINUE;
}

// The frame at pc is runtime.asmcgocall's call of a C function (returned to, or about to run): rsp is
// the call's, on the thread's system stack, and asmcgocall's caller (runtime.cgocall) is on the
// goroutine's stack (see UNWIND_OPCODE_GO_CGO_CALL). Up to Go 1.22 asmcgocall has no frame: its entry
// rsp points at the return address into its caller, and rbp still holds the caller's frame pointer. Later
// releases push rbp first (fp_opcode UNWIND_FP_CFA_OFFSET): the caller's rbp is at the entry rsp, the
// return address above it. Every value read is checked against the goroutine's stack bounds: a bad one
// ends the trace rather than add a wrong frame. The g slot is right above the depth slot (the host marks
// no other call).
//
// Its reads go straight to user memory, not through the stack window: they return the same bytes, and
// each read_stack inlined here cost the verifier some 400 instructions of every load of unwind_native (a
// tenth of its verification), for a frame only cgo calls have. The next frame refills the window.
static __always_inline int step_go_cgo_call(struct trace *trace, struct unwind_state *state, __s32 depth_slot,
                                            __u8 fp_opcode)
{
  __u64 slots[2];
  if (bpf_probe_read_user(slots, sizeof(slots), (void *)(state->sp + depth_slot)))
    return stop(trace, UNWIND_STOP_BAD_GO_STACK);
  __u64 depth = slots[0];
  __u64 g = slots[1];
  __u64 go_sp;
  if (g == 0) {
    // Already on a system stack: no switch, and the depth slot holds the entry rsp itself.
    go_sp = depth;
    if (go_sp <= state->sp || go_sp - state->sp > GO_CGO_NOSAVE_MAX_DISTANCE)
      return stop(trace, UNWIND_STOP_BAD_GO_STACK);
  } else {
    __u64 bounds[2]; // g.stack.lo, g.stack.hi
    _Static_assert(GO_G_STACK_HI == GO_G_STACK_LO + 8, "g.stack is {lo, hi}");
    if ((g & 7) || bpf_probe_read_user(bounds, sizeof(bounds), (void *)(g + GO_G_STACK_LO)))
      return stop(trace, UNWIND_STOP_BAD_GO_STACK);
    if (bounds[0] == 0 || bounds[1] <= bounds[0] || depth == 0 || depth > bounds[1] - bounds[0])
      return stop(trace, UNWIND_STOP_BAD_GO_STACK);
    go_sp = bounds[1] - depth;
  }
  __u64 frame[2]; // the return address; or the caller's rbp, then the return address
  __u64 return_address;
  if (go_sp & 7)
    return stop(trace, UNWIND_STOP_BAD_GO_STACK);
  if (fp_opcode == UNWIND_FP_CFA_OFFSET) {
    if (bpf_probe_read_user(frame, sizeof(frame), (void *)go_sp))
      return stop(trace, UNWIND_STOP_BAD_GO_STACK);
    return_address = frame[1];
    state->fp = frame[0];
    go_sp += 16;
  } else {
    if (bpf_probe_read_user(frame, sizeof(frame[0]), (void *)go_sp))
      return stop(trace, UNWIND_STOP_BAD_GO_STACK);
    return_address = frame[0];
    go_sp += 8;
  }
  if (return_address == 0)
    return stop(trace, UNWIND_STOP_BAD_GO_STACK);
  if (g != 0)
    metric_increment(METRIC_UNWIND_GO_STACK_SWITCHES);
  state->native_frames++;
  state->pc = return_address;
  state->sp = go_sp;
  state->return_address = 1;
  return STEP_CONTINUE;
}

// Copies the user registers and the stack from rsp up (COPIED_STACK_BYTES, or to where the stack ends)
// behind the trace's frames, for the host to unwind with the files it knows: a process too young for the
// trie, or code BPF has no deltas or mapping for yet (a library just mapped), mostly runs without frame
// pointers, which the frame-pointer walk cannot follow. The registers are those of the leaf, or of the
// frame where BPF's own unwinding stopped. Ends the trace.
static __always_inline int copy_stack(struct trace *trace, struct unwind_state *state)
{
  __u32 n = trace->num_frames;
  if (n >= MAX_FRAMES)
    return stop(trace, UNWIND_STOP_TRUNCATED);
  // Right behind the last frame: the record is sent as one run of bytes.
  struct copied_stack *copy = (struct copied_stack *)&trace->frames[n];
  __u64 sp = state->sp;
  __u32 length = COPIED_STACK_BYTES;
  __u32 skipped = 0;
  __u8 last;
  // The whole window when its last byte can be read (the stack is one mapping from rsp up) and then the
  // whole of it; a failed read of the window costs its copy up to the fault, so it is tried only then.
  if (bpf_probe_read_user(&last, sizeof(last), (void *)(sp + length - 1)) ||
      bpf_probe_read_user(copy->data, length, (void *)sp)) {
    // The stack ends within the window (a main thread's, a few KiB above main), or another mapping
    // follows it there (the vdso may sit right above the stack): copy the pages past rsp's that follow
    // each other, each found by reading its last byte.
    __u32 head = PAGE_SIZE - (sp & (PAGE_SIZE - 1));
    __u32 low = 0; // pages past rsp's page, all readable
    for (int i = 1; i < COPIED_STACK_PAGES; i++) {
      if (bpf_probe_read_user(&last, sizeof(last), (void *)(sp + head + i * PAGE_SIZE - 1)))
        break;
      low = i;
    }
    length = head + low * PAGE_SIZE;
    if (length > COPIED_STACK_BYTES)
      length = COPIED_STACK_BYTES;
    barrier_var(length);
    if (bpf_probe_read_user(copy->data, length, (void *)sp)) {
      // rsp's own page is not in memory yet (a frame just made below what the stack ever used, or the
      // page fault that brings it in): its callers' frames are above, from the next page on.
      skipped = head;
      length = low * PAGE_SIZE;
      if (length > COPIED_STACK_BYTES)
        length = COPIED_STACK_BYTES;
      barrier_var(length);
      if (length == 0 || bpf_probe_read_user(copy->data, length, (void *)(sp + skipped))) {
        metric_increment(METRIC_STACK_COPY_FAILED);
        length = 0;
        skipped = 0;
      }
    }
  }
  copy->pc = state->pc;
  copy->sp = sp;
  copy->fp = state->fp;
  copy->length = length;
  copy->skipped = skipped;
  copy->return_address = state->return_address;
  trace->flags |= TRACE_FLAG_COPIED_STACK;
  trace->num_labels = 0;
  metric_increment(METRIC_STACKS_COPIED);
  if (n > trace->kernel_frames)
    metric_increment(METRIC_STACKS_COPIED_ABOVE_LEAF);
  return stop(trace, UNWIND_STOP_STACK_COPIED);
}

// Whether the host may unwind the rest of the stack from a copy, from the frame at state->pc: copies are
// on, no frame-pointer step guessed the registers, no interpreter emitted frames (the host unwinds
// natively only, and would put its loops' native frames where their interpreted frames belong), and the
// ring buffer is at most half full. The ring is sized for plain traces only (lib/record/tracer.ts): the
// half past the wake-up must hold nothing larger, and a burst of copies (a storm of new processes while
// the host is busy) falls back to frame pointers rather than losing traces.
static __always_inline int may_copy_rest(struct trace *trace, struct unwind_state *state)
{
  // A switched-out thread's trace is kept in a map without room for a copy (struct off_cpu_trace).
  if (tracer_config.stack_copy == STACK_COPY_NEVER || state->fp_stepped || state->interpreters_started ||
      trace->origin == TRACE_ORIGIN_OFF_CPU)
    return 0;
  if (events_over_half_full()) {
    metric_increment(METRIC_STACK_COPY_RING_FULL);
    return 0;
  }
  return 1;
}

// One step using the stack deltas of the frame's file.
static __always_inline int step_native(struct trace *trace, struct unwind_state *state, __u64 file_id, __u64 vaddr)
{
  // A return address points after the call, which may be the last instruction of the function.
  __u64 lookup = state->return_address ? vaddr - 1 : vaddr;
  struct resolved_rule rule;
  if (file_id == state->delta_file_id && lookup == state->delta_lookup) {
    rule = state->delta_rule;
  } else {
    int found = find_rule(file_id, lookup, &rule);
    if (found == RULE_BAD)
      return stop(trace, UNWIND_STOP_BAD_UNWIND_INFO);
    if (found == RULE_NO_TABLE) {
      __u8 *loaded = bpf_map_lookup_elem(&loaded_files, &file_id);
      if (loaded && *loaded == LOADED_FILE_COMPLETE)
        return stop(trace, UNWIND_STOP_NO_UNWIND_INFO);
      if (loaded && *loaded == LOADED_FILE_FRAME_POINTERS)
        return step_frame_pointer(trace, state);
      // The host loads a file's deltas (a large file's, page by page) when its code first runs. Until
      // then the host unwinds the rest of this stack from a copy, with those deltas; or, where copies
      // are off, frame pointers.
      report_file(file_id, lookup, trace->hdr.pid);
      metric_increment(METRIC_UNWIND_FILE_PENDING);
      if (may_copy_rest(trace, state)) {
        trace->num_frames--; // the frame at pc is the copy's first
        return copy_stack(trace, state);
      }
      return step_frame_pointer(trace, state);
    }
    state->delta_file_id = file_id;
    state->delta_lookup = lookup;
    state->delta_rule = rule;
  }

  __u64 cfa;
  __u8 fp_opcode = UNWIND_FP_UNCHANGED;
  __s32 fp_param = 0;
  if (rule.unwind_info & DELTA_COMMAND_FLAG) {
    switch (rule.unwind_info & ~DELTA_COMMAND_FLAG) {
    case UNWIND_COMMAND_STOP:
      return stop(trace, UNWIND_STOP_END_OF_STACK);
    case UNWIND_COMMAND_PLT:
      cfa = state->sp + 8 + ((state->pc & 15) >= 11 ? 8 : 0);
      break;
    case UNWIND_COMMAND_SIGNAL:
      return step_signal_frame(trace, state);
    case UNWIND_COMMAND_FRAME_POINTER:
      state->fp_frames++;
      return step_frame_pointer(trace, state);
    default:
      return stop(trace, UNWIND_STOP_NO_UNWIND_INFO);
    }
  } else {
    if (rule.cfa_opcode == UNWIND_OPCODE_BASE_SP)
      cfa = state->sp + rule.cfa_param;
    else if (rule.cfa_opcode == UNWIND_OPCODE_BASE_FP)
      cfa = state->fp + rule.cfa_param;
    else if (rule.cfa_opcode == UNWIND_OPCODE_GO_CGO_CALL)
      return step_go_cgo_call(trace, state, rule.cfa_param, rule.fp_opcode);
    else
      return stop(trace, UNWIND_STOP_BAD_UNWIND_INFO);
    fp_opcode = rule.fp_opcode;
    fp_param = rule.fp_param;
  }

  __u64 return_address;
  if (fp_opcode == UNWIND_FP_CFA_OFFSET && fp_param == -16) {
    // The usual frame record (push rbp right after the call): saved rbp and return address side by side,
    // one read for both.
    __u64 record[2];
    if (read_stack(state, cfa - 16, record, sizeof(record)))
      return stop(trace, UNWIND_STOP_READ_FAILED);
    state->fp = record[0];
    return_address = record[1];
  } else {
    if (read_stack(state, cfa - 8, &return_address, sizeof(return_address)))
      return stop(trace, UNWIND_STOP_READ_FAILED);
    if (fp_opcode == UNWIND_FP_CFA_OFFSET &&
        read_stack(state, cfa + fp_param, &state->fp, sizeof(state->fp)))
      return stop(trace, UNWIND_STOP_READ_FAILED);
  }
  if (return_address == 0)
    return stop(trace, UNWIND_STOP_END_OF_STACK);
  state->native_frames++;
  state->pc = return_address;
  state->sp = cfa;
  state->return_address = 1;
  return STEP_CONTINUE;
}

// What one frame step asks of the program that runs it.
enum frame_result {
  FRAME_NEXT = 0,        // the frame is recorded and pc/sp/fp hold the caller's registers
  FRAME_DONE = 1,        // the trace is finished: trace->stop_reason says why
  FRAME_INTERPRETER = 2, // pc is in an interpreter loop: tail-call state->mapping_interpreter first
};

// Records the frame at state->pc and unwinds it to its caller.
//
// A global function (not static, never inlined): the verifier checks it once, on its own, and each call
// site only against its signature, instead of once per unrolled frame and per path into it; that was
// most of the time spent loading the unwinder. So it takes no pointers and returns a scalar (what
// kernels since 5.10 accept) and keeps its state in the per-CPU maps.
__noinline int unwind_frame(void)
{
  struct trace_context tc;
  if (trace_context_get(&tc))
    return FRAME_DONE;
  struct trace *trace = tc.trace;
  struct unwind_state *state = tc.state;
  __u32 pid = trace->hdr.pid;

  // Tests compare the host's unwinding of copies with this unwinder's: every stack is copied, at its leaf
  // or at the leaf's caller.
  if (tracer_config.stack_copy == STACK_COPY_ALL && trace->num_frames == trace->kernel_frames &&
      trace->origin != TRACE_ORIGIN_OFF_CPU)
    return copy_stack(trace, state);
  if (tracer_config.stack_copy == STACK_COPY_ABOVE_LEAF && trace->num_frames == trace->kernel_frames + 1 &&
      !state->fp_stepped && trace->origin != TRACE_ORIGIN_OFF_CPU)
    return copy_stack(trace, state);

  __u8 ra_flag = state->return_address ? FRAME_FLAG_RETURN_ADDRESS : 0;
  if (cache_mapping(pid, state) == 0) {
    __u64 file_id = state->mapping_file_id;
    __u64 vaddr = state->pc - (state->mapping_bias_and_unwind_program & BIAS_MASK);
    if (state->interpreter_done) {
      state->interpreter_done = 0;
    } else if (state->mapping_interpreter && in_interpreter(state, vaddr)) {
      // The interpreter's unwinder emits the frames this interpreter loop runs, then hands back with
      // interpreter_done set so that this native frame is unwound as usual; a JIT's unwinder unwinds its
      // frames itself and hands back at the first frame that is not its own.
      return FRAME_INTERPRETER;
    }
    if (file_id == 0) {
      // Installed without tables (anonymous memory such as JIT code, the vdso, files without CFI):
      // follow the frame pointer, and let the host resolve the address.
      if (push_frame(trace, 0, state->pc, ra_flag | FRAME_FLAG_ABSOLUTE_ADDRESS))
        return stop(trace, UNWIND_STOP_TRUNCATED);
      state->fp_frames++;
      return step_frame_pointer(trace, state);
    }
    if (push_frame(trace, file_id, vaddr, ra_flag))
      return stop(trace, UNWIND_STOP_TRUNCATED);
    return step_native(trace, state, file_id, vaddr);
  }
  // No mapping holds pc: either the host has not read this process yet, or its mappings changed
  // (dlopen, JIT code). Asked once per trace, not per frame: a hash lookup on a cold line costs as much
  // as unwinding several frames.
  if (!state->process_reported) {
    state->process_reported = 1;
    if (bpf_map_lookup_elem(&known_pids, &pid)) {
      report_process(EVENT_KIND_PROCESS_STALE, pid);
    } else {
      metric_increment(METRIC_PROCESS_UNKNOWN);
      report_process(EVENT_KIND_PROCESS_UNKNOWN, pid);
    }
    // The host learns of new mappings from the kernel's records, in order, before it reads this trace:
    // it can unwind the rest now, where the trie waits for the process to be read again (at most every
    // REPORT_INTERVAL_NS).
    if (may_copy_rest(trace, state))
      return copy_stack(trace, state);
  }
  if (push_frame(trace, 0, state->pc, ra_flag | FRAME_FLAG_ABSOLUTE_ADDRESS))
    return stop(trace, UNWIND_STOP_TRUNCATED);
  state->fp_frames++;
  return step_frame_pointer(trace, state);
}

SEC("perf_event")
int unwind_native(struct bpf_perf_event_data *ctx)
{
  struct trace_context tc;
  if (trace_context_get(&tc))
    return 0;
  struct trace *trace = tc.trace;
  struct unwind_state *state = tc.state;

  for (int i = 0; i < FRAMES_PER_RUN; i++) {
    int result = unwind_frame();
    if (result == FRAME_INTERPRETER) {
      if (state->tail_calls < MAX_TAIL_CALLS) {
        state->tail_calls++;
        bpf_tail_call(ctx, &progs, state->mapping_interpreter);
      }
      metric_increment(METRIC_TAIL_CALL_FAILED);
      // Without the interpreter's frames: unwind the loop's native frame as usual.
      state->interpreter_done = 1;
      result = unwind_frame();
    }
    if (result != FRAME_NEXT)
      return trace_finish(ctx, trace, trace->stop_reason);
  }

  if (state->tail_calls++ < MAX_TAIL_CALLS)
    bpf_tail_call(ctx, &progs, PROG_UNWIND_NATIVE);
  return trace_finish(ctx, trace, UNWIND_STOP_TRUNCATED);
}

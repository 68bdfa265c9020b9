// Layouts and constants shared by the BPF programs and the TypeScript host.
//
// This header is the single source of truth, with each runtime's bpf/<name>_tracer.h for what is only the
// runtime's: build.ts compiles them into the BPF object with -g, reads the BTF of the object back, and
// generates support/types.ts from it (checked for drift in CI). Everything
// the host needs to know is therefore a named enum or a named struct here; plain #defines would not reach
// the BTF. Constants that the OpenTelemetry eBPF profiler also has (its `support` package) keep its values.
#ifndef OMNIPROF_TYPES_H
#define OMNIPROF_TYPES_H

#include <linux/types.h>

// What produced a frame. The error bit marks a frame that records why unwinding stopped. The values left
// out (0x1, 0x2, 0x5-0xa: the OpenTelemetry eBPF profiler's interpreter markers) belong to the runtimes:
// each runtime's header (bpf/<name>_tracer.h) declares the marker of its own frames.
enum frame_marker {
  FRAME_MARKER_UNKNOWN = 0x0,
  FRAME_MARKER_NATIVE = 0x3,
  FRAME_MARKER_KERNEL = 0x4,
  FRAME_MARKER_ERROR_BIT = 0x80,
  FRAME_MARKER_ABORT = 0xff,
};

// Slots of the `progs` tail-call array: the program that ends a trace, the native unwinder, and one slot
// per runtime between them and the count (each runtime's header, bpf/<name>_tracer.h, declares its own,
// numbered as the OpenTelemetry eBPF profiler numbers its interpreters' programs).
enum unwind_program {
  PROG_UNWIND_STOP = 0x0,
  PROG_UNWIND_NATIVE = 0x1,
  // Slots from PROG_UNWIND_NATIVE + 1 to PROG_UNWIND_COUNT - 1 are the runtimes': each runtime's header
  // (bpf/<name>_tracer.h) declares its own.
  PROG_UNWIND_COUNT = 0xa,
};

// What made a trace: a CPU sample, a thread that was switched out (off_cpu.bpf.c), sent when it comes
// back with how long it was away (event_header.off_cpu_ns), or a probe (probe.bpf.c): probe i of the
// session's MAX_PROBES is origin TRACE_ORIGIN_PROBE + i.
enum trace_origin {
  TRACE_ORIGIN_UNKNOWN = 0x0,
  TRACE_ORIGIN_SAMPLING = 0x1,
  TRACE_ORIGIN_OFF_CPU = 0x2,
  TRACE_ORIGIN_PROBE = 0x10,
};

// The first field of every ring buffer record.
enum event_kind {
  EVENT_KIND_TRACE = 0x1,
  EVENT_KIND_PROCESS_EXEC = 0x2,
  EVENT_KIND_PROCESS_EXIT = 0x3,
  EVENT_KIND_PROCESS_FORK = 0x4,
  // A process the unwinder has no mappings for: the host should read it and install them.
  EVENT_KIND_PROCESS_UNKNOWN = 0x5,
  // A known process ran code outside its installed mappings (dlopen, JIT, a new mapping): re-read it.
  EVENT_KIND_PROCESS_STALE = 0x6,
  // Code of a file whose stack deltas are not loaded yet ran: the host should load them.
  EVENT_KIND_FILE_NEEDED = 0x7,
};

enum frame_flag {
  // addr_or_line is a return address: the call instruction is just before it, so symbolizers look up
  // address - 1 (otherwise a call at the very end of a function names the next function).
  FRAME_FLAG_RETURN_ADDRESS = 0x1,
  // file_id is 0 and addr_or_line is an absolute virtual address in the process, to be resolved through
  // the process's mappings on the host. Set by the frame-pointer unwinder, which knows no file ids.
  FRAME_FLAG_ABSOLUTE_ADDRESS = 0x2,
  // The frame is a signal trampoline (the unwinder crossed into the interrupted code's registers).
  FRAME_FLAG_SIGNAL_TRAMPOLINE = 0x4,
};

// Why the user-space unwinder stopped; stored in trace.stop_reason and counted per reason.
enum unwind_stop_reason {
  UNWIND_STOP_NONE = 0x0,
  UNWIND_STOP_END_OF_STACK = 0x1,     // a zero return address or frame pointer: a complete stack
  UNWIND_STOP_NO_USER_REGS = 0x2,     // kernel thread, or the user registers could not be found
  UNWIND_STOP_READ_FAILED = 0x3,      // the frame record could not be read from user memory
  UNWIND_STOP_BAD_FRAME_POINTER = 0x4, // a frame pointer that does not move up the stack
  UNWIND_STOP_TRUNCATED = 0x5,        // MAX_FRAME_UNWINDS reached
  UNWIND_STOP_TAIL_CALL_FAILED = 0x6,
  UNWIND_STOP_NO_UNWIND_INFO = 0x7,   // the stack delta tables have no rule for the address
  UNWIND_STOP_BAD_UNWIND_INFO = 0x8,  // a rule or table entry the unwinder cannot follow
  UNWIND_STOP_BAD_GO_STACK = 0x9,     // what Go saved at a switch of stacks does not lead to a goroutine's stack
  // The process's mappings are not installed yet: the registers and the top of the stack are copied into
  // the trace (struct copied_stack) for the host to unwind.
  UNWIND_STOP_STACK_COPIED = 0xa,
  // Host only: unwinding a copied stack needed a value outside the copy (the stack went deeper).
  UNWIND_STOP_COPY_EXHAUSTED = 0xb,
};

// Bits of trace.flags.
enum trace_flag {
  TRACE_FLAG_NONE = 0x0,
  // The record holds a struct copied_stack behind its frames (and no labels), and no user frames.
  TRACE_FLAG_COPIED_STACK = 0x1,
};

// When the native unwinder copies the user stack for the host rather than walking it (tracer_config).
enum stack_copy_mode {
  STACK_COPY_NEVER = 0,   // frame pointers where the process's mappings are unknown
  // Copy the rest of a stack from where BPF meets code it has no mapping or deltas for yet: a process
  // not installed yet (from its leaf), a library just mapped, a file whose deltas are still loading.
  STACK_COPY_UNKNOWN = 1,
  STACK_COPY_ALL = 2,     // copy every user stack (tests: host and BPF unwinding compared)
  STACK_COPY_ABOVE_LEAF = 3, // copy every user stack from its leaf's caller on (tests: the host goes on
                             // from a frame BPF unwound)
};

// Counters kept in the per-CPU `metrics` array and reported by the host.
enum metric_id {
  METRIC_SAMPLES = 0,            // perf events handled (after the idle and PID filters)
  METRIC_IDLE_SKIPPED = 1,       // samples of the idle task (pid 0), not recorded
  METRIC_FILTERED = 2,           // samples of processes outside the PID filter
  METRIC_TRACES_LOST = 3,        // traces dropped because the ring buffer was full
  METRIC_EVENTS_LOST = 4,        // process events dropped because the ring buffer was full
  METRIC_KERNEL_STACK_FAILED = 5,
  METRIC_NO_USER_REGS = 6,
  METRIC_UNWIND_READ_FAILED = 7,
  METRIC_UNWIND_BAD_FRAME_POINTER = 8,
  METRIC_UNWIND_TRUNCATED = 9,
  METRIC_TAIL_CALL_FAILED = 10,
  METRIC_PID_FILTER_FULL = 11,
  METRIC_UNWIND_NO_INFO = 12,       // stopped: no stack delta for the address
  METRIC_UNWIND_BAD_INFO = 13,      // stopped: a delta or rule that cannot be followed
  METRIC_UNWIND_FP_FALLBACK = 14,   // frames unwound by frame pointer (address outside known files)
  METRIC_UNWIND_NATIVE_FRAMES = 15, // frames unwound from stack deltas
  METRIC_PROCESS_UNKNOWN = 16,      // samples of processes without installed mappings
  METRIC_UNWIND_SIGNAL_FRAMES = 17, // signal frames crossed
  METRIC_SELF_SKIPPED = 18,         // samples of the profiler itself, not recorded
  METRIC_UNWIND_FILE_PENDING = 19,  // frames of files whose deltas were not loaded yet (frame pointers used)
  METRIC_UNWIND_GO_STACK_SWITCHES = 20, // crossings from a thread's system stack back to a goroutine's (cgo)
  METRIC_UNWIND_GO_STACK_BAD = 21,      // stopped: a Go stack switch whose saved values were not usable
  METRIC_STACKS_COPIED = 22,            // user stacks copied into the trace for the host to unwind
  METRIC_STACK_COPY_FAILED = 23,        // a stack to copy could not be read at all (sent without user frames)
  METRIC_STACKS_COPIED_ABOVE_LEAF = 24, // of those copied, ones BPF unwound part of first (a file or mapping new to it)
  METRIC_STACK_COPY_RING_FULL = 25,     // copies not made, the ring buffer being over half full (frame pointers instead)
  METRIC_OFF_CPU_SWITCHES = 26,         // switch-outs of threads in scope, unwound (record --off-cpu)
  METRIC_OFF_CPU_SHORT = 27,            // of those, waits shorter than the minimum when they ended: not sent
  METRIC_OFF_CPU_STORE_FULL = 28,       // switch-outs not kept, the map of switched-out threads being full
  METRIC_OFF_CPU_SENT = 29,             // off-CPU traces sent
  METRIC_PROBE_HITS = 30,               // probe events of processes in scope (record -e)
  METRIC_OFF_CPU_COUNTED = 31,          // off-CPU waits of stacks with an id, added up in the kernel (off_cpu_totals)
  // Ids from here to METRIC_COUNT - 1 are the runtimes' unwinders' counters: each runtime's header
  // (bpf/<name>_tracer.h) declares its own ids in a range no other runtime uses.
  METRIC_RUNTIMES_FIRST = 32,
  METRIC_COUNT = 64,
};

enum limits {
  MAX_FRAME_UNWINDS = 128,       // user-space frames per trace (the OpenTelemetry eBPF profiler's)
  MAX_KERNEL_FRAMES = 64,        // kernel frames per trace
  MAX_FRAMES = 192,              // MAX_FRAME_UNWINDS + MAX_KERNEL_FRAMES
  COMM_LEN = 16,
  MAX_PROBES = 8,                // probes (record -e) in one session
  PID_FILTER_MAX_ENTRIES = 16384,
  STACK_WINDOW_BYTES = 256,      // user stack read at once by the native unwinder (a power of two)
  // The most user stack copied for the host (from rsp up), a whole number of pages: see struct copied_stack.
  // Measured as the bytes from rsp to the end of complete stacks, 16 KiB hold 98% of cc1's (a C compile at
  // -O2; 8 KiB: 93%) and all of the shell's and coreutils'. struct trace, which has room for it, is a
  // per-CPU map value: it must stay below the kernel's 32 KiB per-CPU allocation.
  COPIED_STACK_BYTES = 16384,
};

// The OpenTelemetry eBPF profiler's stack-delta constants: deltas are grouped per 64 KiB page of a file; a
// file's deltas live in an array map of 2^8..2^23 entries, the smallest that fits.
enum stack_delta_constants {
  STACK_DELTA_PAGE_BITS = 16,
  STACK_DELTA_PAGE_MASK = 0xffff,
  STACK_DELTA_BUCKET_SMALLEST = 8,
  STACK_DELTA_BUCKET_LARGEST = 23,
  // stack_delta.unwind_info with this bit set is an unwind_command, not an index into unwind_info_array.
  DELTA_COMMAND_FLAG = 0x8000,
  // loaded_files values: every page of the file is in the tables (a page without rows has no CFI);
  // pages are loaded one at a time as the unwinder meets them; or the host has no tables for it and never
  // will (it could not read the ELF file): frame pointers, without asking again.
  LOADED_FILE_COMPLETE = 1,
  LOADED_FILE_BY_PAGE = 2,
  LOADED_FILE_FRAME_POINTERS = 3,
  // unwind_info.merge_opcode: the low 7 bits are the distance to a second rule merged into this one
  // (a push or pop right after), whose CFA offset is param + 8, or param - 8 with this bit.
  MERGE_OPCODE_NEGATIVE = 0x80,
  // Bits of the LPM trie key: the pid, then the address.
  BIT_WIDTH_PID = 32,
  BIT_WIDTH_PAGE = 64,
  UNWIND_INFO_MAX_ENTRIES = 16384,
  STACK_DELTA_PAGES_MAX_ENTRIES = 65536, // 4 GiB of code in 64 KiB pages
  PID_PAGE_MAPPINGS_MAX_ENTRIES = 524288,
  FILES_PER_BUCKET_MAX = 4096,
  KNOWN_PIDS_MAX_ENTRIES = 32768,
  LOADED_FILES_MAX_ENTRIES = 16384,
  INTERPRETER_OFFSETS_MAX_ENTRIES = 4096,
  // Labels a trace carries (key and value each cut to TRACE_LABEL_BYTES): more than pprof.Do users set.
  MAX_TRACE_LABELS = 10,
  TRACE_LABEL_BYTES = 64,
};

// Special rules, stored in stack_delta.unwind_info with DELTA_COMMAND_FLAG.
enum unwind_command {
  UNWIND_COMMAND_INVALID = 0,       // no rule: a gap between functions, or CFI the unwinder cannot follow
  UNWIND_COMMAND_STOP = 1,          // the outermost frame (_start, thread start): the stack is complete
  UNWIND_COMMAND_PLT = 2,           // a PLT entry: CFA = rsp + 8, + 8 more past the push (rip & 15 >= 11)
  UNWIND_COMMAND_SIGNAL = 3,        // the signal trampoline: registers are in the signal frame's ucontext
  UNWIND_COMMAND_FRAME_POINTER = 4, // follow rbp (code without CFI that keeps frame pointers)
};

// How to find the CFA of a rule.
enum unwind_opcode {
  UNWIND_OPCODE_BASE_SP = 1, // CFA = rsp + param
  UNWIND_OPCODE_BASE_FP = 2, // CFA = rbp + param
  // Go's runtime.asmcgocall calls C code on the thread's system stack, having saved at rsp + param how far
  // its own entry rsp lay below the goroutine's stack top, and at rsp + param + 8 the goroutine's g (its
  // stack may move while C runs, so not the address). Its caller's return address is at that entry rsp;
  // with fp_opcode UNWIND_FP_CFA_OFFSET (releases whose asmcgocall pushes rbp first) the caller's rbp is
  // there and the return address 8 bytes above.
  UNWIND_OPCODE_GO_CGO_CALL = 3,
};

enum unwind_fp_opcode {
  UNWIND_FP_UNCHANGED = 0,  // rbp keeps its value in the caller
  UNWIND_FP_CFA_OFFSET = 1, // the caller's rbp was saved at CFA + fp_param
};

enum pid_filter_flag {
  PID_FILTER_SAMPLE = 0x1,        // record samples of this process
  PID_FILTER_FOLLOW_CHILDREN = 0x2, // add processes it forks to the filter (with both flags)
};

// One frame of a trace, as the OpenTelemetry eBPF profiler models one: marker + file identity + address or
// line.
struct frame {
  __u64 file_id;       // host file id; 0 with FRAME_FLAG_ABSOLUTE_ADDRESS or for kernel frames
  __u64 addr_or_line;  // address (file-relative, absolute, or kernel) or interpreter line data
  __u8 kind;           // enum frame_marker
  __u8 flags;          // enum frame_flag bits
  __u8 pad[6];
};

// Fields every ring buffer record starts with. kind, cpu and ktime come first so that the rest of a
// trace (pid onwards) can be hashed as one run of bytes to find identical stacks.
struct event_header {
  __u32 kind;          // enum event_kind
  __u32 cpu;
  __u64 ktime;         // CLOCK_MONOTONIC ns (of an off-CPU trace: when the thread was switched out)
  // An off-CPU trace: ns from the switch-out to the switch-in. Before pid so that traces that differ only
  // in it still hash as one stack. 0 otherwise.
  __u64 off_cpu_ns;
  // An off-CPU trace of a stack new to the kernel: its hash, for the host to give it an id in
  // off_cpu_stack_ids (off_cpu.bpf.c); later waits of that stack are then only counted in the kernel. 0
  // otherwise. Before pid for the same reason as off_cpu_ns.
  __u64 off_cpu_stack;
  __u32 pid;           // process id (tgid)
  __u32 tid;           // thread id
};

// A key/value label of a trace (a Go pprof label): the lengths say how much of each array is used, the
// rest is zero, so that equal labels are equal bytes.
struct trace_label {
  __u8 key_len;
  __u8 value_len;
  __u8 pad[6];
  char key[TRACE_LABEL_BYTES];
  char value[TRACE_LABEL_BYTES];
};

// The labels a runtime read for the trace being built (per-CPU trace_labels): copied behind the trace's
// frames when it is sent.
struct trace_labels {
  struct trace_label labels[MAX_TRACE_LABELS];
};

// The user registers and the top of the user stack at a sample, for the host to unwind: in the record of
// a trace with TRACE_FLAG_COPIED_STACK, right behind its (kernel) frames, with `length` bytes of data.
struct copied_stack {
  __u64 pc;
  __u64 sp;
  __u64 fp;
  __u32 length;        // bytes of the stack copied from sp + skipped on: the window, or less where it ends
  __u32 skipped;       // bytes above sp not copied: 0, or to the end of sp's page when it could not be read
  __u8 return_address; // pc is a return address (BPF unwound the frames below it), not the interrupted one
  __u8 pad[7];
  __u8 data[COPIED_STACK_BYTES];
};

// A sampled stack. The ring buffer record holds frames[0..num_frames) and right behind them num_labels
// labels (struct trace_label); kernel frames first (leaf first), then user frames (leaf first). Labels
// being part of the record, traces with different labels never count as the same stack. A trace with
// TRACE_FLAG_COPIED_STACK has, behind its frames, a struct copied_stack instead of labels: the host
// unwinds the rest of the stack from it.
struct trace {
  struct event_header hdr;
  char comm[COMM_LEN];
  __u16 num_frames;
  __u16 kernel_frames;
  __u8 origin;         // enum trace_origin
  __u8 stop_reason;    // enum unwind_stop_reason
  __u8 num_labels;     // set by a runtime's program (trace_labels), at most MAX_TRACE_LABELS
  __u8 flags;          // enum trace_flag bits
  struct frame frames[MAX_FRAMES];
  // Room for the labels behind the last frame the trace may have.
  struct trace_label label_room[MAX_TRACE_LABELS];
  // Room for a copied stack behind the last frame (TRACE_FLAG_COPIED_STACK).
  struct copied_stack copy_room;
};

// Process lifecycle: exec (re-read the mappings), exit (forget them), fork (inherit the parent's).
struct process_event {
  struct event_header hdr;
  __u32 parent_pid;    // fork: the parent process; otherwise 0
  __u32 file_id;       // file needed: the file; otherwise 0
  char comm[COMM_LEN];
  __u64 address;       // file needed: the ELF address the unwinder met; otherwise 0
};

struct pid_filter_value {
  __u32 flags;         // enum pid_filter_flag bits
};

// One rule of the unwind table; identical rules of every file share one entry of unwind_info_array.
struct unwind_info {
  __u8 opcode;       // enum unwind_opcode
  __u8 fp_opcode;    // enum unwind_fp_opcode
  __u8 merge_opcode; // see MERGE_OPCODE_NEGATIVE; 0: no merged rule
  __u8 pad;
  __s32 param;       // CFA offset from the base register
  __s32 fp_param;    // where rbp was saved, relative to the CFA
};

// A row's rule made ready for one address: the unwind_info_array entry copied out and a merged push or
// pop already applied, so that a cached rule costs no further lookup.
struct resolved_rule {
  __s32 cfa_param;     // CFA offset from the base register
  __s32 fp_param;      // where rbp was saved, relative to the CFA
  __u16 unwind_info;   // the row's unwind_info: a command (DELTA_COMMAND_FLAG) or an unwind_info_array index
  __u8 cfa_opcode;     // enum unwind_opcode
  __u8 fp_opcode;      // enum unwind_fp_opcode
};

// One row of a file's table: from addr_low (within its page) on, this rule applies.
struct stack_delta {
  __u16 addr_low;    // address & STACK_DELTA_PAGE_MASK
  __u16 unwind_info; // index into unwind_info_array, or DELTA_COMMAND_FLAG | enum unwind_command
};

struct stack_delta_page_key {
  __u64 file_id;
  __u64 page;        // ELF virtual address >> STACK_DELTA_PAGE_BITS
};

struct stack_delta_page_info {
  __u32 first_delta; // index of the page's first row in its delta array
  __u16 num_deltas;
  __u16 map_id;      // bucket: the rows are in exe_id_to_<map_id>_stack_deltas
  __u32 rows_id;     // the array's key there: the file id, or an id of its own for a page loaded alone
};

// LPM trie key: pid and address big-endian, so that prefixes of (pid, address) bits match.
struct pid_page_mapping_key {
  __u32 prefix_len;  // BIT_WIDTH_PID + significant address bits
  __u32 pid_be;
  __u64 page_be;
};

struct pid_page_mapping_info {
  __u64 file_id;
  // Bias in the low 56 bits (ELF virtual address = address - bias), unwind program in the top byte.
  __u64 bias_and_unwind_program;
  // The whole mapping this prefix belongs to: the unwinder reuses the entry for every frame in it.
  __u64 start;
  __u64 end;
};

enum interpreter_constants {
  INTERPRETER_RANGES = 2, // e.g. an interpreter's loop function and its gcc-split .cold part
};

// Where an interpreter's loop lies in one of its files (interpreter_offsets, keyed by file id): when the
// native unwinder reaches an address in one of the ranges, it tail-calls `program` first.
struct interpreter_offsets {
  __u64 lower[INTERPRETER_RANGES]; // ELF virtual addresses; an unused range is [0, 0)
  __u64 upper[INTERPRETER_RANGES];
  __u8 program;                    // enum unwind_program
  __u8 pad[7];
};

// Byte offsets of the kernel fields the programs read, in the running kernel's layout. The host looks
// them up in the kernel's BTF before loading (lib/record/kernel_fields.ts), reading only the few pages
// they need; CO-RE would make libbpf load all of that BTF, which cost every recording about 20 ms.
struct kernel_fields {
  __u32 task_flags;  // task_struct.flags (unsigned int)
  __u32 task_stack;  // task_struct.stack: bottom of the kernel stack (void *)
  __u32 task_pid;    // task_struct.pid: the thread id (pid_t)
  __u32 task_tgid;   // task_struct.tgid: the process id (pid_t)
  __u32 task_signal; // task_struct.signal (struct signal_struct *)
  __u32 task_fsbase; // task_struct.thread.fsbase: x86-64 user thread pointer (unsigned long)
  __u32 signal_live; // signal_struct.live: threads not yet exiting (atomic_t)
};

// Settings written by the host before load (read-only data, so the verifier prunes disabled paths).
struct tracer_config {
  __u8 filter_pids;    // only sample processes in pid_filter
  __u8 sample_idle;    // also record samples of the idle task
  __u8 stack_copy;     // enum stack_copy_mode
  __u8 pad;
  __u32 self_pid;      // the profiler's own process, never sampled (0: sample it too)
  struct kernel_fields kernel;
  __u8 off_cpu;        // record off-CPU time (off_cpu.bpf.c)
  __u8 pad2[7];
  __u64 off_cpu_min_ns; // off-CPU waits shorter than this are not sent
};

// Off-CPU stacks the kernel adds up by itself (off_cpu.bpf.c): at most this many distinct ones per
// session get an id; the waits of the others are sent one by one, as a new stack's are.
enum off_cpu_constants {
  OFF_CPU_MAX_STACKS = 32768,
  // In off_cpu_stack_ids: the host has not given the stack an id yet. In struct off_cpu_wait: the thread's
  // whole trace is kept in off_cpu_traces, to be sent when it comes back.
  OFF_CPU_NO_ID = 0xffffffff,
};

// A switched-out thread in scope (off_cpu_waits): since when, and the id of the stack it waits in.
struct off_cpu_wait {
  __u64 since_ns;      // CLOCK_MONOTONIC ns of the switch-out
  __u32 stack;         // index into off_cpu_totals, or OFF_CPU_NO_ID
  __u32 pad;
};

// The waits of one off-CPU stack so far (off_cpu_totals[id]), added to by every CPU; the host reads them
// through a memory mapping and keeps what it has charged already.
struct off_cpu_total {
  __u64 ns;
  __u64 waits;
};

// A switched-out thread's trace, kept until it is switched back in (off_cpu_traces): struct trace up to
// its room for labels, which off-CPU traces do not carry.
struct off_cpu_trace {
  struct event_header hdr;
  char comm[COMM_LEN];
  __u16 num_frames;
  __u16 kernel_frames;
  __u8 origin;
  __u8 stop_reason;
  __u8 num_labels;
  __u8 flags;
  struct frame frames[MAX_FRAMES];
};

// A batch of kernel addresses for the host to name (kernel_symbols.bpf.c): the host writes count and
// addresses, runs the program, and reads each name as the kernel's %pS prints it.
enum kernel_name_limits {
  KERNEL_NAME_BATCH = 64,  // addresses per run
  KERNEL_NAME_BYTES = 128, // "function+0xoffset/0xsize [module]", cut short if longer
};

struct kernel_name_batch {
  __u32 count;
  __u32 pad;
  __u64 addresses[KERNEL_NAME_BATCH];
  char names[KERNEL_NAME_BATCH][KERNEL_NAME_BYTES];
};

// Where the unwinders of one sample stand; per-CPU scratch shared by the tail-called programs. It holds
// only what every unwinder uses: an interpreter's unwinder keeps its own walk in a per-CPU map of its own
// file, so that adding one leaves this layout alone. Fields that every sample sets or reads come first,
// in the first cache lines: at 100 Hz a sample finds most of this state evicted since the last, and every
// further line it touches costs a memory access.
struct unwind_state {
  __u64 pc;
  __u64 sp;
  __u64 fp;
  __u8 return_address; // pc came from a return address (not the interrupted instruction)
  __u8 tail_calls;
  __u8 mapping_interpreter; // enum unwind_program of the cached mapping's interpreter, or 0
  // The interpreter unwinder has handled the frame at pc: unwind it natively now, without dispatching.
  __u8 interpreter_done;
  __u8 process_reported;    // this trace has reported its process as unknown or stale
  // A frame-pointer step was taken in this trace: the registers from there on may be a guess.
  __u8 fp_stepped;
  // Frames unwound each way in this trace, added to the metrics once when it ends (a map update per
  // frame would cost more than the frame).
  __u16 native_frames;
  __u16 fp_frames;
  // Bit 1 << enum unwind_program for each interpreter unwinder that has begun its walk in this trace:
  // cleared when a trace starts, so that an unwinder knows whether its own scratch is from this trace.
  __u16 interpreters_started;
  // Bit 1 << enum unwind_program for each program that asked not to be called again in this trace: a
  // reader of the thread's state that runs once, at the first frame of its files (Go's labels).
  __u16 interpreters_done;
  __u8 pad1[2];
  // The last mapping found in the trie ([mapping_start, mapping_end), empty at the start of a trace):
  // consecutive frames are mostly in the same file, and a trie lookup costs more than a compare.
  __u64 mapping_start;
  __u64 mapping_end;
  __u64 mapping_file_id;
  __u64 mapping_bias_and_unwind_program;
  // The last rule found (for file delta_file_id at address delta_lookup): recursion and loops unwind
  // the same return address again and again.
  __u64 delta_file_id;
  __u64 delta_lookup;
  struct resolved_rule delta_rule;
  __u32 pad2;
  // A copy of the user stack [stack_window_start, stack_window_end): callers' frames lie just above each
  // other, so one read serves several frames.
  __u64 stack_window_start;
  __u64 stack_window_end;
  __u8 stack_window[STACK_WINDOW_BYTES + 16];
  // The interpreter loop ranges of the cached mapping's file (ELF virtual addresses), when its trie entry
  // names an interpreter's unwind program; mapping_interpreter is 0 otherwise.
  __u64 interpreter_lower[INTERPRETER_RANGES];
  __u64 interpreter_upper[INTERPRETER_RANGES];
  __u64 kernel_stack[MAX_KERNEL_FRAMES]; // bpf_get_stack's output before it becomes frames
};

#endif

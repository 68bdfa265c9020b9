// What the V8 unwinder (v8_tracer.bpf.c) shares with the host: its frame marker, its slot of the
// tail-call table, its counters, how a V8 frame is recorded, and the per-process record the host writes.
// support/generate_types.ts exports every enum and struct declared in a bpf/*_tracer.h header, so
// lib/interpreter/v8/ reads these values from support/types.ts and never copies them.
#ifndef OMNIPROF_V8_TRACER_H
#define OMNIPROF_V8_TRACER_H

#include "types.h"

// The marker of the frames it records (a value of enum frame_marker), the OpenTelemetry eBPF profiler's.
enum v8_frame_marker {
  FRAME_MARKER_V8 = 0x8,
};

// Its slot of the `progs` tail-call table (a value of enum unwind_program), the OpenTelemetry eBPF
// profiler's.
enum v8_unwind_program {
  PROG_UNWIND_V8 = 0x7,
};

// Its counters in the `metrics` array, from the runtimes' range of enum metric_id.
enum v8_metric_id {
  METRIC_V8_FRAMES = 40,        // frames the V8 unwinder recorded (JavaScript, and V8's own as native)
  METRIC_V8_NO_PROC_INFO = 41,  // V8 code ran in a process without a v8_procs record
  METRIC_V8_BAD_FRAME = 42,     // a frame in V8 code that was not a V8 frame: left to the frame pointer
  METRIC_V8_NO_CODE = 43,       // a compiled frame whose code object did not hold pc: named without a line
  METRIC_V8_READ_FAILED = 44,   // the frame or its objects could not be read: the frame pointer went on
};

// As ints: clang 19 refuses a comparison of two enum types (-Wenum-compare).
_Static_assert((int)FRAME_MARKER_V8 < (int)FRAME_MARKER_ERROR_BIT, "a frame marker below the error bit");
_Static_assert((int)PROG_UNWIND_V8 > (int)PROG_UNWIND_NATIVE && (int)PROG_UNWIND_V8 < (int)PROG_UNWIND_COUNT,
               "a runtime's slot of the tail-call table");
_Static_assert((int)METRIC_V8_FRAMES >= (int)METRIC_RUNTIMES_FIRST &&
                 (int)METRIC_V8_READ_FAILED < (int)METRIC_COUNT,
               "counters in the runtimes' range of enum metric_id");

enum v8_limits {
  V8_PROCS_MAX_ENTRIES = 4096,
  // How far below fp the frame slots the unwinder reads may lie (the marker, the
  // function, the bytecode offset) up to the saved fp and the return address.
  V8_FRAME_BELOW_FP = 64,
  // The first bytes of a Code object read at once: every field the unwinder needs of it lies in them.
  V8_CODE_BYTES = 64,
  // The first bytes of a JSFunction read at once: its map, SharedFunctionInfo and code lie in them.
  V8_OBJECT_BYTES = 64,
};

// What a V8 frame holds, in the low 3 bits of frame.file_id (object pointers are 8-byte aligned once
// their tag is cleared; the rest of file_id is the pointer).
enum v8_frame_type {
  // (V8's own frames, which it marks with their type, are recorded as native frames.)
  // Ignition: file_id is the SharedFunctionInfo, addr_or_line the frame's bytecode offset slot as V8
  // keeps it (offset + the BytecodeArray's header size - its tag).
  V8_FRAME_BYTECODE = 1,
  // Compiled code that could not be told by its code object: file_id is the SharedFunctionInfo, and the
  // frame has no line.
  V8_FRAME_FUNCTION = 2,
  // Optimised code (Maglev, TurboFan): file_id is the Code object, addr_or_line is the pc's offset in its
  // instructions, with the cookie above V8_CODE_COOKIE_SHIFT.
  V8_FRAME_CODE = 3,
  // Baseline code (Sparkplug), whose Code object has no way back to its function: file_id is the
  // JSFunction, addr_or_line as for V8_FRAME_CODE.
  V8_FRAME_BASELINE = 4,
  V8_FRAME_TYPE_MASK = 7,
};

// The cookie of a compiled frame, (instruction size << 4 | code kind) above this bit: the host checks
// the code object it reads against it, so that code freed and reused since is not named wrongly.
enum v8_code_cookie {
  V8_CODE_COOKIE_SHIFT = 32,
};

// V8 13's JS dispatch table (leaptiering): a JSFunction holds a handle into it instead of its code. The
// handle shifted down is an entry's index; an entry's second word holds the code object's address shifted
// up (measured in Node 24, V8 13.6: lib/interpreter/v8/dispatch_table.ts).
enum v8_dispatch_table {
  V8_DISPATCH_TABLE_HANDLE_SHIFT = 8,
  V8_DISPATCH_TABLE_ENTRY_BYTES = 16,
  V8_DISPATCH_TABLE_CODE_WORD = 8,
  V8_DISPATCH_TABLE_CODE_SHIFT = 16,
  // Entries the table's reservation holds at most (256 MiB of 16-byte entries).
  V8_DISPATCH_TABLE_MAX_ENTRIES = 1 << 24,
};

// Everything the BPF V8 unwinder needs of one process (v8_procs, keyed by pid): V8's layouts, read from
// the v8dbg_* introspection data of the file (lib/interpreter/v8/README.md). Offsets are in bytes.
struct v8_proc_info {
  __u64 dispatch_table;              // the process's JS dispatch table (V8 13), or 0: JSFunction.code holds it
  __u32 codekind_mask;               // Code.flags & mask >> shift = the code's kind
  __u16 type_jsfunction_first;       // JSFunction instance types: [first, last]
  __u16 type_jsfunction_last;
  __u16 type_shared_function_info;
  __u16 type_code;
  __u16 off_map_instance_type;       // Map.instance_type (u16)
  __u16 off_heap_object_map;         // HeapObject.map
  __u16 off_jsfunction_shared;       // JSFunction.shared
  __u16 off_jsfunction_code;         // JSFunction.code, or its dispatch handle (u32) with dispatch_table
  __u16 off_code_instruction_start;  // Code.instruction_start: the address, or where the code begins
  __u16 off_code_instruction_size;   // Code.instruction_size (u32)
  __u16 off_code_flags;              // Code.flags (u32)
  __u8 fp_marker;                    // the marker or context slot: fp - V8_FRAME_BELOW_FP + fp_marker
  __u8 fp_function;                  // the JSFunction slot, the same way
  __u8 fp_bytecode_offset;           // the bytecode offset slot, the same way
  __u8 codekind_shift;
  __u8 codekind_baseline;            // the kind of Sparkplug code
  __u8 code_instructions_is_pointer; // 1: instruction_start holds an address (V8 11.1+)
};

#endif

// What the HotSpot unwinder (hotspot_tracer.bpf.c) shares with the host: its frame marker, its slot of the
// tail-call table, its counters, how a Java frame is recorded, and the per-process record the host writes.
// support/generate_types.ts exports every enum and struct declared in a bpf/*_tracer.h header, so
// lib/interpreter/hotspot/ reads these values from support/types.ts and never copies them.
#ifndef OMNIPROF_HOTSPOT_TRACER_H
#define OMNIPROF_HOTSPOT_TRACER_H

#include "types.h"

// The marker of the frames it records (a value of enum frame_marker), the OpenTelemetry eBPF profiler's.
enum hotspot_frame_marker {
  FRAME_MARKER_HOTSPOT = 0x5,
};

// Its slot of the `progs` tail-call table (a value of enum unwind_program), the OpenTelemetry eBPF
// profiler's.
enum hotspot_unwind_program {
  PROG_UNWIND_HOTSPOT = 0x2,
};

// Its counters in the `metrics` array, from the runtimes' range of enum metric_id.
enum hotspot_metric_id {
  METRIC_HOTSPOT_FRAMES = 45,        // frames the HotSpot unwinder recorded
  METRIC_HOTSPOT_NO_PROC_INFO = 46,  // code cache code ran in a process without a hotspot_procs record
  METRIC_HOTSPOT_NO_CODE_BLOB = 47,  // a pc in the code cache whose segment map led to no code blob
  METRIC_HOTSPOT_BAD_FRAME = 48,     // a frame that did not unwind to a caller further up the stack
  METRIC_HOTSPOT_READ_FAILED = 49,   // the frame or its code blob could not be read
  METRIC_HOTSPOT_BAD_BCI = 50,       // an interpreted frame whose bytecode pointer was not in its method
};

// As ints: clang 19 refuses a comparison of two enum types (-Wenum-compare).
_Static_assert((int)FRAME_MARKER_HOTSPOT < (int)FRAME_MARKER_ERROR_BIT, "a frame marker below the error bit");
_Static_assert((int)PROG_UNWIND_HOTSPOT > (int)PROG_UNWIND_NATIVE &&
                 (int)PROG_UNWIND_HOTSPOT < (int)PROG_UNWIND_COUNT,
               "a runtime's slot of the tail-call table");
_Static_assert((int)METRIC_HOTSPOT_FRAMES >= (int)METRIC_RUNTIMES_FIRST &&
                 (int)METRIC_HOTSPOT_BAD_BCI < (int)METRIC_COUNT,
               "counters in the runtimes' range of enum metric_id");

enum hotspot_limits {
  HOTSPOT_PROCS_MAX_ENTRIES = 1024,
  // Code heaps a process record holds (JDK 9+ has three with the segmented code cache, one without).
  HOTSPOT_MAX_HEAPS = 4,
  // Hops back through a segment map (each goes back up to 254 segments of 128 bytes: 32 KiB of code).
  HOTSPOT_SEGMAP_HOPS = 16,
  // The first bytes of a code blob read at once: every field the unwinder needs lies in them (JDK 17's
  // nmethod._compile_id is at 304).
  HOTSPOT_BLOB_BYTES = 512,
  // The largest interpreted frame accepted (locals and expression stack): a saved fp further up is
  // taken as garbage.
  HOTSPOT_MAX_FRAME_BYTES = 65536,
};

// What a Java frame holds, in the low 3 bits of frame.file_id (the pointers are 8-byte aligned; the rest
// of file_id is the pointer), and in addr_or_line: a position in its low 32 bits and a cookie above them
// (HOTSPOT_COOKIE_MASK of a value) that the host checks against what it reads, so that code or methods
// freed and reused since are not named wrongly.
enum hotspot_frame_type {
  // An interpreted frame: file_id is the Method, the position its bytecode index (HOTSPOT_BCI_UNKNOWN
  // when the frame's bytecode pointer was not in the method), the cookie its ConstMethod's address >> 3.
  HOTSPOT_FRAME_INTERPRETED = 1,
  // Compiled code (C1, C2): file_id is the nmethod, the position the pc's offset from its code's start,
  // the cookie its compile id.
  HOTSPOT_FRAME_COMPILED = 2,
  // The JNI wrapper of a native method (a "native nmethod"): as HOTSPOT_FRAME_COMPILED.
  HOTSPOT_FRAME_NATIVE_WRAPPER = 3,
  // Any other code blob (stubs, adapters, the call stub into Java): file_id is the blob, the position the
  // pc's offset from its code's start, no cookie.
  HOTSPOT_FRAME_STUB = 4,
  HOTSPOT_FRAME_TYPE_MASK = 7,
  HOTSPOT_BCI_UNKNOWN = 0xffff,
  HOTSPOT_COOKIE_SHIFT = 32,
  // The cookie's bits: 21, so that addr_or_line stays below 2^53, which the host reads exactly.
  HOTSPOT_COOKIE_MASK = 0x1fffff,
};

// The frame of HotSpot's template interpreter on x86-64 (frame_x86.hpp, JDK 9 to 25): slots below fp, in
// words.
enum hotspot_interpreter_frame {
  HOTSPOT_INTERPRETER_SENDER_SP_SLOT = 1, // fp - 8: the caller's sp
  HOTSPOT_INTERPRETER_METHOD_SLOT = 3,    // fp - 24: the Method
  HOTSPOT_INTERPRETER_BCP_SLOT = 8,       // fp - 64: the bytecode pointer, saved at each call
};

// One code heap of a process: its code [low, high), and its segment map (a byte per segment).
struct hotspot_code_heap {
  __u64 low;
  __u64 high;
  __u64 segmap;
};

// Everything the BPF HotSpot unwinder needs of one process (hotspot_procs, keyed by pid): its code heaps,
// and offsets read from libjvm.so's introspection tables (lib/interpreter/hotspot/README.md).
struct hotspot_proc_info {
  struct hotspot_code_heap heaps[HOTSPOT_MAX_HEAPS];
  __u32 num_heaps;
  __u16 blob_name;                // CodeBlob._name (const char*)
  __u16 blob_frame_size;          // CodeBlob._frame_size (int, in words)
  __u16 blob_frame_complete;      // CodeBlob._frame_complete_offset (int, or int16_t from JDK 23)
  __u16 blob_code_begin;          // CodeBlob._code_begin (a pointer), or _code_offset (int, from the blob)
  __u16 nmethod_compile_id;       // nmethod._compile_id (int)
  __u16 method_const_method;      // Method._constMethod
  __u16 const_method_size;        // sizeof(ConstMethod): the bytecodes follow it
  __u8 log2_segment_size;
  __u8 heap_block_size;           // sizeof(HeapBlock): the blob follows it
  __u8 blob_code_begin_is_offset; // 1: blob_code_begin is an int offset from the blob (JDK 23+)
  __u8 blob_frame_complete_short; // 1: _frame_complete_offset is an int16_t (JDK 23+)
  __u8 pad[2];
};

#endif

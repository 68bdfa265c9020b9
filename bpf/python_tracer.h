// What the CPython unwinder (python_tracer.bpf.c) shares with the host: its places in the shared tables,
// its counters, and the per-process record the host writes. support/generate_types.ts exports every enum
// and struct declared in a bpf/*_tracer.h header, so the TypeScript side (lib/interpreter/python/) reads
// these values from support/types.ts and never copies them.
#ifndef OMNIPROF_PYTHON_TRACER_H
#define OMNIPROF_PYTHON_TRACER_H

#include "types.h"

// The marker of the frames it records (a value of enum frame_marker), the OpenTelemetry eBPF profiler's.
enum python_frame_marker {
  FRAME_MARKER_PYTHON = 0x1,
};

// Its slot of the `progs` tail-call table (a value of enum unwind_program), the OpenTelemetry eBPF
// profiler's.
enum python_unwind_program {
  PROG_UNWIND_PYTHON = 0x4,
};

// Its counters in the `metrics` array, from the runtimes' range of enum metric_id.
enum python_metric_id {
  METRIC_PYTHON_FRAMES = 32,          // Python frames recorded
  METRIC_PYTHON_NO_PROC_INFO = 33,    // the eval loop ran in a process without a python_procs record
  METRIC_PYTHON_NO_THREAD_STATE = 34, // a thread in the eval loop whose PyThreadState was not found
  METRIC_PYTHON_READ_FAILED = 35,     // interpreter memory could not be read: the Python walk stopped
};

// As ints: clang 19 refuses a comparison of two enum types (-Wenum-compare).
_Static_assert((int)FRAME_MARKER_PYTHON < (int)FRAME_MARKER_ERROR_BIT, "a frame marker below the error bit");
_Static_assert((int)PROG_UNWIND_PYTHON > (int)PROG_UNWIND_NATIVE &&
                 (int)PROG_UNWIND_PYTHON < (int)PROG_UNWIND_COUNT,
               "a runtime's slot of the tail-call table");
_Static_assert((int)METRIC_PYTHON_FRAMES >= (int)METRIC_RUNTIMES_FIRST &&
                 (int)METRIC_PYTHON_READ_FAILED < (int)METRIC_COUNT,
               "counters in the runtimes' range of enum metric_id");

enum python_limits {
  PYTHON_PROCS_MAX_ENTRIES = 4096,
  // The most of a Python frame the unwinder reads: every field it needs lies in the first 112 bytes of
  // PyFrameObject (3.8-3.10) or _PyInterpreterFrame (3.11+). A power of two (offsets are masked).
  PYTHON_FRAME_BYTES = 128,
};

enum python_proc_flag {
  PYTHON_PROC_TLS_VALID = 0x1,
  PYTHON_PROC_TSD_VALID = 0x2,
  // Neither route is valid yet, but will be soon (the runtime has not created its thread-state key, or
  // the C library is not mapped yet): the unwinder asks the host to publish again at the short interval.
  PYTHON_PROC_NOT_READY = 0x4,
};

// _PyInterpreterFrame.owner of the shim frame the eval loop pushes on entry (3.12+).
enum python_frame_owner {
  PYTHON_FRAME_OWNED_BY_CSTACK = 3,
};

// Everything the BPF Python unwinder needs of one process (python_procs, keyed by pid). Offsets are in
// bytes; 0xffff means "absent in this version". lib/interpreter/python/README.md explains each field.
struct python_proc_info {
  __s64 tls_tstate_offset;    // tstate = *(u64 *)(fsbase + tls_tstate_offset), if flags & TLS_VALID
  __s32 tsd_key;              // the pthread key of _PyRuntime's autoTSSkey, if flags & TSD_VALID
  __s16 tsd_offset;           // C library thread-specific data: tp + offset (+ key * multiplier)
  __u8 tsd_multiplier;
  __u8 tsd_indirect;
  __u16 version;              // major << 8 | minor, e.g. 0x030c
  __u8 frame_model;           // 0: PyFrameObject (3.8-3.10); 1: _PyInterpreterFrame (3.11+)
  __u8 instruction_model;     // 0: f_lasti bytes; 1: f_lasti code units; 2: prev_instr; 3: instr_ptr
  __u16 flags;                // enum python_proc_flag
  __u16 tstate_frame;         // PyThreadState.frame / .cframe / .current_frame
  __u16 cframe_current_frame; // _PyCFrame.current_frame (3.11-3.12), else 0xffff
  __u16 frame_previous;       // f_back / previous
  __u16 frame_code;           // f_code / f_executable
  __u16 frame_instruction;    // f_lasti (int) / prev_instr / instr_ptr (pointer)
  __u16 frame_owner;          // _PyInterpreterFrame.owner (char), 3.11+
  __u16 frame_is_entry;       // _PyInterpreterFrame.is_entry (bool), 3.11 only
  __u16 code_firstlineno;     // PyCodeObject.co_firstlineno (int)
  __u16 code_code_adaptive;   // PyCodeObject.co_code_adaptive, 3.11+
};

#endif

/**
 * CPython's internal struct layouts, per minor version (3.8 to 3.13, x86-64, default non-debug builds):
 * where the runtime keeps its interpreters and thread states, how a thread's current frame is found,
 * where a frame keeps its code object and instruction, and where a code object keeps its names, file
 * and line table. These are not a stable API; they change between minor versions (rarely within one).
 *
 * Sources, in order of trust:
 * 1. The interpreter's own introspection data, where it has it: CPython 3.13 starts `_PyRuntime` with
 *    `_Py_DebugOffsets` (Include/internal/pycore_runtime.h), a table of these very offsets for
 *    out-of-process debuggers, tagged with the cookie "xdebugpy" and the build's PY_VERSION_HEX.
 *    {@linkcode readDebugOffsets} reads it from the target's memory and {@linkcode applyDebugOffsets}
 *    lets it override the table below.
 * 2. The tables below, one per minor version, each entry citing the CPython header that defines the
 *    field. They were checked against `offsetof()` compiled with each version's installed internal
 *    headers (see offsets_test.ts, which recompiles that check where the headers are present).
 *
 * @example
 * ```ts
 * import { pythonOffsets } from "./offsets.ts";
 * const offsets = pythonOffsets({ major: 3, minor: 12, micro: 1 });
 * console.log(offsets.codeQualname); // 128
 * ```
 *
 * @module
 */
import type { Address } from "../../types.ts";
import type { RemoteMemory } from "../remote_memory.ts";
import { RemoteMemoryError } from "../remote_memory.ts";

/** A CPython version. */
export interface PythonVersion {
  readonly major: number;
  readonly minor: number;
  /** The micro (patch) version, or -1 when only major.minor is known (from a file name). */
  readonly micro: number;
}

/** The oldest and newest minor versions of 3.x with a layout table. */
export const MIN_PYTHON_MINOR = 8;
export const MAX_PYTHON_MINOR = 13;

/** How a thread's frames are linked. */
export type FrameModel =
  /** 3.8-3.10: heap `PyFrameObject`s linked by `f_back`; one per `_PyEval_EvalFrameDefault` call. */
  | "frame-object"
  /**
   * 3.11+: `_PyInterpreterFrame`s linked by `previous`; one C call of the eval loop runs several. The
   * frames a C call entered are ended by an entry frame (3.11: `is_entry`; 3.12+: a frame owned by the
   * C stack).
   */
  | "interpreter-frame";

/** What a frame's instruction field holds, and how it becomes a byte offset into the code. */
export type InstructionModel =
  /** 3.8-3.9: `int f_lasti`, a byte offset. */
  | "lasti-bytes"
  /** 3.10: `int f_lasti`, an index of 2-byte code units. */
  | "lasti-units"
  /** 3.11-3.12: `_Py_CODEUNIT *prev_instr`, the last instruction started, into `co_code_adaptive`. */
  | "prev-instr"
  /** 3.13: `_Py_CODEUNIT *instr_ptr`, the instruction executing (or about to), into `co_code_adaptive`. */
  | "instr-ptr";

/** Which line table a code object has (see line_table.ts). */
export type LineTableFormat =
  /** 3.8-3.9: `co_lnotab`. */
  | "lnotab"
  /** 3.10: `co_linetable`, (byte delta, line delta) pairs. */
  | "linetable"
  /** 3.11+: `co_linetable`, the location table (PEP 657). */
  | "locations";

/** Struct offsets in bytes. A null field does not exist in that version. */
export interface PythonOffsets {
  readonly frameModel: FrameModel;
  readonly instructionModel: InstructionModel;
  readonly lineTableFormat: LineTableFormat;

  /** `_PyRuntimeState.interpreters.head`: the newest `PyInterpreterState`. */
  readonly runtimeInterpretersHead: number;
  /** The `Py_tss_t autoTSSkey` in `_PyRuntimeState` (3.8-3.11 inside `gilstate`). */
  readonly runtimeAutoTssKey: number;
  /** `Py_tss_t._is_initialized` (int) and `Py_tss_t._key` (pthread_key_t, unsigned int). */
  readonly tssIsInitialized: number;
  readonly tssKey: number;

  /** `PyInterpreterState.next`. */
  readonly interpNext: number;
  /** `PyInterpreterState.tstate_head` (3.8-3.10) or `threads.head` (3.11+). */
  readonly interpThreadsHead: number;

  /** `PyThreadState.next`. */
  readonly tstateNext: number;
  /** `PyThreadState.interp`. */
  readonly tstateInterp: number;
  /** `PyThreadState.thread_id` (`unsigned long`, glibc's `pthread_self()`, the thread pointer). */
  readonly tstateThreadId: number;
  /** `PyThreadState.native_thread_id` (the kernel thread id), 3.11+. */
  readonly tstateNativeThreadId: number | null;
  /** `PyThreadState.frame` (3.8-3.10), `.cframe` (3.11-3.12) or `.current_frame` (3.13). */
  readonly tstateFrame: number;
  /** `_PyCFrame.current_frame` when the thread state points to a `_PyCFrame` (3.11-3.12). */
  readonly cframeCurrentFrame: number | null;

  /** `f_back` (`PyFrameObject`) or `previous` (`_PyInterpreterFrame`). */
  readonly framePrevious: number;
  /** `f_code` or `f_executable` (3.13): the code object. */
  readonly frameCode: number;
  /** `f_lasti`, `prev_instr` or `instr_ptr`, see {@linkcode InstructionModel}. */
  readonly frameInstruction: number;
  /** `_PyInterpreterFrame.owner` (char), 3.11+. */
  readonly frameOwner: number | null;
  /** `_PyInterpreterFrame.is_entry` (bool), 3.11 only. */
  readonly frameIsEntry: number | null;

  /** `PyCodeObject.co_filename` (str). */
  readonly codeFilename: number;
  /** `PyCodeObject.co_name` (str). */
  readonly codeName: number;
  /** `PyCodeObject.co_qualname` (str), 3.11+. */
  readonly codeQualname: number | null;
  /** `PyCodeObject.co_firstlineno` (int). */
  readonly codeFirstLineNo: number;
  /** `PyCodeObject.co_lnotab` or `co_linetable` (bytes). */
  readonly codeLineTable: number;
  /** `PyCodeObject.co_code_adaptive` (inline code units), 3.11+. */
  readonly codeCodeAdaptive: number | null;
  /** `PyCodeObject.co_argcount` (int). */
  readonly codeArgCount: number;
  /** `PyCodeObject.co_flags` (int). */
  readonly codeFlags: number;

  /** `PyObject.ob_type`. */
  readonly objectType: number;
  /** `PyTypeObject.tp_name` (const char *). */
  readonly typeName: number;
  /** `PyVarObject.ob_size` of a bytes object. */
  readonly bytesSize: number;
  /** `PyBytesObject.ob_sval`. */
  readonly bytesData: number;
  /** `PyASCIIObject.length`. */
  readonly unicodeLength: number;
  /** `PyASCIIObject.state` (bit fields: interned:2, kind:3, compact:1, ascii:1). */
  readonly unicodeState: number;
  /** `sizeof(PyASCIIObject)`: where a compact ASCII string's characters start. */
  readonly unicodeAsciiSize: number;
  /** `sizeof(PyCompactUnicodeObject)`: where other compact strings' characters start. */
  readonly unicodeCompactSize: number;
}

/** `_PyInterpreterFrame.owner` of a frame that marks a C call of the eval loop (3.12+). */
export const FRAME_OWNED_BY_CSTACK = 3;

const COMMON_OBJECTS = {
  // Include/object.h: struct _object { Py_ssize_t ob_refcnt; PyTypeObject *ob_type; }
  objectType: 8,
  // Include/cpython/object.h: struct _typeobject { PyObject_VAR_HEAD; const char *tp_name; ... }
  typeName: 24,
  // Include/object.h: PyVarObject { PyObject ob_base; Py_ssize_t ob_size; }
  bytesSize: 16,
  // Include/cpython/bytesobject.h: PyBytesObject { PyObject_VAR_HEAD; Py_hash_t ob_shash; char ob_sval[1]; }
  bytesData: 32,
  // Include/cpython/unicodeobject.h: PyASCIIObject { PyObject_HEAD; Py_ssize_t length; Py_hash_t hash;
  // struct { ... } state; ... }
  unicodeLength: 16,
  unicodeState: 32,
  // Py_tss_t { int _is_initialized; pthread_key_t _key; } (Include/cpython/pythread.h)
  tssIsInitialized: 0,
  tssKey: 4,
} as const;

/** 3.8-3.11 strings still carry `wchar_t *wstr` (and `wstr_length` when compact). */
const UNICODE_WITH_WSTR = { unicodeAsciiSize: 48, unicodeCompactSize: 72 } as const;
/** 3.12 removed `wstr` (PEP 623). */
const UNICODE_WITHOUT_WSTR = { unicodeAsciiSize: 40, unicodeCompactSize: 56 } as const;

/** 3.8-3.10 frames: Include/frameobject.h (3.8) / Include/cpython/frameobject.h (3.9-3.10). */
const FRAME_OBJECT_FIELDS = {
  frameModel: "frame-object",
  // struct _frame { PyObject_VAR_HEAD; struct _frame *f_back; PyCodeObject *f_code; ... }
  framePrevious: 24,
  frameCode: 32,
  frameOwner: null,
  frameIsEntry: null,
  // struct _ts { struct _ts *prev, *next; PyInterpreterState *interp; struct _frame *frame; ... }
  // (Include/cpython/pystate.h)
  tstateNext: 8,
  tstateInterp: 16,
  tstateFrame: 24,
  // ... unsigned long thread_id; (after the exception and tracing state)
  tstateThreadId: 176,
  tstateNativeThreadId: null,
  cframeCurrentFrame: null,
  // struct _is { struct _is *next; struct _ts *tstate_head; ... } (Include/internal/pycore_pystate.h in
  // 3.8, Include/internal/pycore_interp.h in 3.9-3.10)
  interpNext: 0,
  interpThreadsHead: 8,
  // PyCodeObject (Include/code.h in 3.8, Include/cpython/code.h in 3.9-3.10): int co_argcount at 16,
  // int co_flags at 36, int co_firstlineno at 40; PyObject *co_filename at 104, *co_name at 112, then
  // co_lnotab (3.8-3.9) / co_linetable (3.10) at 120. No co_qualname before 3.11.
  codeArgCount: 16,
  codeFlags: 36,
  codeFirstLineNo: 40,
  codeFilename: 104,
  codeName: 112,
  codeQualname: null,
  codeLineTable: 120,
  codeCodeAdaptive: null,
} as const;

const TABLES: Readonly<Record<number, PythonOffsets>> = {
  8: {
    ...COMMON_OBJECTS,
    ...UNICODE_WITH_WSTR,
    ...FRAME_OBJECT_FIELDS,
    instructionModel: "lasti-bytes",
    lineTableFormat: "lnotab",
    // Include/internal/pycore_pystate.h: struct pyruntimestate { ...; struct pyinterpreters { PyThread_type_lock
    // mutex; PyInterpreterState *head; ... } interpreters; ...; struct _gilstate_runtime_state gilstate; }
    // where _gilstate_runtime_state { int check_enabled; _Py_atomic_address tstate_current;
    // PyThreadFrameGetter getframe; PyInterpreterState *autoInterpreterState; Py_tss_t autoTSSkey; }
    runtimeInterpretersHead: 32,
    runtimeAutoTssKey: 1392,
    // Include/frameobject.h: ... int f_lasti at 104 (after f_valuestack, f_stacktop, f_trace, ...)
    frameInstruction: 104,
  },
  9: {
    ...COMMON_OBJECTS,
    ...UNICODE_WITH_WSTR,
    ...FRAME_OBJECT_FIELDS,
    instructionModel: "lasti-bytes",
    lineTableFormat: "lnotab",
    // Include/internal/pycore_runtime.h: struct pyruntimestate (the ceval and gilstate state moved here)
    runtimeInterpretersHead: 32,
    runtimeAutoTssKey: 584,
    // Include/cpython/frameobject.h: int f_lasti
    frameInstruction: 104,
  },
  10: {
    ...COMMON_OBJECTS,
    ...UNICODE_WITH_WSTR,
    ...FRAME_OBJECT_FIELDS,
    instructionModel: "lasti-units",
    lineTableFormat: "linetable",
    // Include/internal/pycore_runtime.h
    runtimeInterpretersHead: 32,
    runtimeAutoTssKey: 584,
    // Include/cpython/frameobject.h: f_stacktop became int f_stackdepth, moving int f_lasti to 96
    frameInstruction: 96,
  },
  11: {
    ...COMMON_OBJECTS,
    ...UNICODE_WITH_WSTR,
    frameModel: "interpreter-frame",
    instructionModel: "prev-instr",
    lineTableFormat: "locations",
    // Include/internal/pycore_runtime.h: struct pyruntimestate { int _initialized; int preinitializing;
    // int preinitialized; int core_initialized; int initialized; _Py_atomic_address _finalizing;
    // struct pyinterpreters { PyThread_type_lock mutex; PyInterpreterState *head; ... } interpreters; ...
    // struct _gilstate_runtime_state gilstate (... Py_tss_t autoTSSkey); ... }
    runtimeInterpretersHead: 40,
    runtimeAutoTssKey: 592,
    // Include/internal/pycore_interp.h: struct _is { struct _is *next; struct pythreads { uint64_t
    // next_unique_id; PyThreadState *head; ... } threads; ... }
    interpNext: 0,
    interpThreadsHead: 16,
    // Include/cpython/pystate.h: struct _ts { PyThreadState *prev, *next; PyInterpreterState *interp;
    // int _initialized; int _static; int recursion_remaining; int recursion_limit; int recursion_headroom;
    // int tracing; int tracing_what; _PyCFrame *cframe; ...; unsigned long thread_id;
    // unsigned long native_thread_id; ... }
    tstateNext: 8,
    tstateInterp: 16,
    tstateFrame: 56,
    tstateThreadId: 152,
    tstateNativeThreadId: 160,
    // Include/cpython/pystate.h: typedef struct _PyCFrame { uint8_t use_tracing;
    // struct _PyInterpreterFrame *current_frame; struct _PyCFrame *previous; } _PyCFrame;
    cframeCurrentFrame: 8,
    // Include/internal/pycore_frame.h: typedef struct _PyInterpreterFrame { PyFunctionObject *f_func;
    // PyObject *f_globals, *f_builtins, *f_locals; PyCodeObject *f_code; PyFrameObject *frame_obj;
    // struct _PyInterpreterFrame *previous; _Py_CODEUNIT *prev_instr; int stacktop; bool is_entry;
    // char owner; PyObject *localsplus[1]; }
    frameCode: 32,
    framePrevious: 48,
    frameInstruction: 56,
    frameIsEntry: 68,
    frameOwner: 69,
    // Include/cpython/code.h: _PyCode_DEF: PyObject_VAR_HEAD; PyObject *co_consts, *co_names,
    // *co_exceptiontable; int co_flags at 48; short _co_linearray_entry_size; int co_argcount at 56; ...
    // int co_firstlineno at 72; ...; PyObject *co_filename at 112, *co_name at 120, *co_qualname at 128,
    // *co_linetable at 136; ...; char co_code_adaptive[] at 184
    codeFlags: 48,
    codeArgCount: 56,
    codeFirstLineNo: 72,
    codeFilename: 112,
    codeName: 120,
    codeQualname: 128,
    codeLineTable: 136,
    codeCodeAdaptive: 184,
  },
  12: {
    ...COMMON_OBJECTS,
    ...UNICODE_WITHOUT_WSTR,
    frameModel: "interpreter-frame",
    instructionModel: "prev-instr",
    lineTableFormat: "locations",
    // Include/internal/pycore_runtime.h: interpreters.head as in 3.11; Py_tss_t autoTSSkey moved out of
    // gilstate to the top level of struct pyruntimestate (after the ceval and gilstate state)
    runtimeInterpretersHead: 40,
    runtimeAutoTssKey: 1544,
    // Include/internal/pycore_interp.h: struct _is { PyInterpreterState *next; int64_t id; int64_t
    // id_refcount; int requires_idref; PyThread_type_lock id_mutex; int _initialized; int finalizing;
    // uint64_t monitoring_version; uint64_t last_restart_version; struct pythreads { uint64_t
    // next_unique_id; PyThreadState *head; ... } threads; ... }
    interpNext: 0,
    interpThreadsHead: 72,
    // Include/cpython/pystate.h: struct _ts { prev; next; interp; struct { ... } _status; int
    // py_recursion_remaining; int py_recursion_limit; int c_recursion_remaining; int recursion_headroom;
    // int tracing; int what_event; _PyCFrame *cframe at 56; ...; unsigned long thread_id at 136;
    // unsigned long native_thread_id at 144; ... }
    tstateNext: 8,
    tstateInterp: 16,
    tstateFrame: 56,
    tstateThreadId: 136,
    tstateNativeThreadId: 144,
    // Include/cpython/pystate.h: typedef struct _PyCFrame { struct _PyInterpreterFrame *current_frame;
    // struct _PyCFrame *previous; } _PyCFrame;  (use_tracing was removed)
    cframeCurrentFrame: 0,
    // Include/internal/pycore_frame.h: typedef struct _PyInterpreterFrame { PyCodeObject *f_code;
    // struct _PyInterpreterFrame *previous; PyObject *f_funcobj, *f_globals, *f_builtins, *f_locals;
    // PyFrameObject *frame_obj; _Py_CODEUNIT *prev_instr; int stacktop; uint16_t return_offset;
    // char owner; PyObject *localsplus[1]; }
    frameCode: 0,
    framePrevious: 8,
    frameInstruction: 56,
    frameIsEntry: null,
    frameOwner: 70,
    // Include/cpython/code.h: _PyCode_DEF: int co_flags at 48; int co_argcount at 52; ...
    // int co_firstlineno at 68; ...; co_filename 112, co_name 120, co_qualname 128, co_linetable 136;
    // ...; char co_code_adaptive[] at 192
    codeFlags: 48,
    codeArgCount: 52,
    codeFirstLineNo: 68,
    codeFilename: 112,
    codeName: 120,
    codeQualname: 128,
    codeLineTable: 136,
    codeCodeAdaptive: 192,
  },
  13: {
    ...COMMON_OBJECTS,
    ...UNICODE_WITHOUT_WSTR,
    frameModel: "interpreter-frame",
    instructionModel: "instr-ptr",
    lineTableFormat: "locations",
    // Include/internal/pycore_runtime.h: struct pyruntimestate { _Py_DebugOffsets debug_offsets; int
    // _initialized; ...; struct pyinterpreters { PyMutex mutex; PyInterpreterState *head; ... }
    // interpreters; ...; Py_tss_t autoTSSkey; ... } (debug_offsets also carries interpreters_head)
    runtimeInterpretersHead: 632,
    runtimeAutoTssKey: 2160,
    // Include/internal/pycore_interp.h: struct _is { struct _ceval_state ceval; ...;
    // PyInterpreterState *next; ...; struct pythreads { ...; PyThreadState *head; ... } threads; ... }
    interpNext: 7264,
    interpThreadsHead: 7344,
    // Include/cpython/pystate.h: struct _ts { prev; next; interp; uintptr_t eval_breaker; struct
    // { ... } _status; int _whence; int state; int py_recursion_remaining; int py_recursion_limit;
    // int c_recursion_remaining; int recursion_headroom; int tracing; int what_event;
    // struct _PyInterpreterFrame *current_frame at 72; ...; unsigned long thread_id at 152;
    // unsigned long native_thread_id at 160; ... }
    tstateNext: 8,
    tstateInterp: 16,
    tstateFrame: 72,
    tstateThreadId: 152,
    tstateNativeThreadId: 160,
    cframeCurrentFrame: null,
    // Include/internal/pycore_frame.h: typedef struct _PyInterpreterFrame { PyObject *f_executable;
    // struct _PyInterpreterFrame *previous; PyObject *f_funcobj, *f_globals, *f_builtins, *f_locals;
    // PyFrameObject *frame_obj; _Py_CODEUNIT *instr_ptr; int stacktop; uint16_t return_offset;
    // char owner; PyObject *localsplus[1]; }
    frameCode: 0,
    framePrevious: 8,
    frameInstruction: 56,
    frameIsEntry: null,
    frameOwner: 70,
    // Include/cpython/code.h: _PyCode_DEF as in 3.12 plus _co_instrumentation_version and friends before
    // co_code_adaptive, now at 200
    codeFlags: 48,
    codeArgCount: 52,
    codeFirstLineNo: 68,
    codeFilename: 112,
    codeName: 120,
    codeQualname: 128,
    codeLineTable: 136,
    codeCodeAdaptive: 200,
  },
};

/**
 * The layout table of a version.
 *
 * @throws {RangeError} when the version is not 3.8-3.13.
 */
export function pythonOffsets(version: PythonVersion): PythonOffsets {
  const table = version.major === 3 ? TABLES[version.minor] : undefined;
  if (table === undefined) {
    throw new RangeError(
      `Cannot unwind Python ${version.major}.${version.minor}: only 3.${MIN_PYTHON_MINOR} to ` +
        `3.${MAX_PYTHON_MINOR} are supported`,
    );
  }
  return table;
}

/** The PY_VERSION_HEX of a version (release level "final"). */
export function versionHex(version: PythonVersion): number {
  return ((version.major << 24) | (version.minor << 16) | (Math.max(0, version.micro) << 8) | 0xf0) >>> 0;
}

/** Parses a PY_VERSION_HEX (`Py_Version`, `_Py_DebugOffsets.version`). */
export function versionFromHex(hex: number): PythonVersion {
  return { major: (hex >>> 24) & 0xff, minor: (hex >>> 16) & 0xff, micro: (hex >>> 8) & 0xff };
}

/** The fields of `_Py_DebugOffsets` (CPython 3.13) that {@linkcode applyDebugOffsets} uses. */
export interface DebugOffsets {
  /** PY_VERSION_HEX of the running interpreter. */
  readonly version: number;
  readonly freeThreaded: boolean;
  readonly runtimeInterpretersHead: number;
  readonly interpNext: number;
  readonly interpThreadsHead: number;
  readonly tstateNext: number;
  readonly tstateInterp: number;
  readonly tstateFrame: number;
  readonly tstateThreadId: number;
  readonly tstateNativeThreadId: number;
  readonly framePrevious: number;
  readonly frameCode: number;
  readonly frameInstruction: number;
  readonly frameOwner: number;
  readonly codeFilename: number;
  readonly codeName: number;
  readonly codeQualname: number;
  readonly codeLineTable: number;
  readonly codeFirstLineNo: number;
  readonly codeArgCount: number;
  readonly codeCodeAdaptive: number;
  readonly objectType: number;
  readonly typeName: number;
  readonly bytesSize: number;
  readonly bytesData: number;
  readonly unicodeState: number;
  readonly unicodeLength: number;
  readonly unicodeAsciiSize: number;
}

/** `_Py_Debug_Cookie` (Include/internal/pycore_runtime.h, 3.13). */
export const DEBUG_COOKIE = "xdebugpy";

/**
 * The 3.13 `_Py_DebugOffsets` layout: after `char cookie[8]; uint64_t version; uint64_t free_threaded;`
 * come sub-structs of u64 fields, each starting with its struct's `size`. Listed in declaration order
 * with their field counts, so field positions are computed rather than hand-counted.
 */
const DEBUG_SECTIONS = [
  ["runtime_state", ["size", "finalizing", "interpreters_head"]],
  ["interpreter_state", [
    "size",
    "id",
    "next",
    "threads_head",
    "gc",
    "imports_modules",
    "sysdict",
    "builtins",
    "ceval_gil",
    "gil_runtime_state",
    "gil_runtime_state_enabled",
    "gil_runtime_state_locked",
    "gil_runtime_state_holder",
  ]],
  ["thread_state", [
    "size",
    "prev",
    "next",
    "interp",
    "current_frame",
    "thread_id",
    "native_thread_id",
    "datastack_chunk",
    "status",
  ]],
  ["interpreter_frame", ["size", "previous", "executable", "instr_ptr", "localsplus", "owner"]],
  ["code_object", [
    "size",
    "filename",
    "name",
    "qualname",
    "linetable",
    "firstlineno",
    "argcount",
    "localsplusnames",
    "localspluskinds",
    "co_code_adaptive",
  ]],
  ["pyobject", ["size", "ob_type"]],
  ["type_object", ["size", "tp_name", "tp_repr", "tp_flags"]],
  ["tuple_object", ["size", "ob_item", "ob_size"]],
  ["list_object", ["size", "ob_item", "ob_size"]],
  ["dict_object", ["size", "ma_keys", "ma_values"]],
  ["float_object", ["size", "ob_fval"]],
  ["long_object", ["size", "lv_tag", "ob_digit"]],
  ["bytes_object", ["size", "ob_size", "ob_sval"]],
  ["unicode_object", ["size", "state", "length", "asciiobject_size"]],
  ["gc", ["size", "collecting"]],
] as const;

const DEBUG_HEADER_BYTES = 24;
const DEBUG_FIELD_INDEX = (() => {
  const index = new Map<string, number>();
  let at = DEBUG_HEADER_BYTES;
  for (const [section, fields] of DEBUG_SECTIONS) {
    for (const field of fields) {
      index.set(`${section}.${field}`, at);
      at += 8;
    }
  }
  return { index, size: at };
})();

/** The size in bytes of 3.13's `_Py_DebugOffsets`. */
export const DEBUG_OFFSETS_SIZE = DEBUG_FIELD_INDEX.size;

/** Largest plausible struct offset; anything larger means the table is not what we think. */
const MAX_FIELD_OFFSET = 1 << 20;

/**
 * Reads `_Py_DebugOffsets` at the start of `_PyRuntime` (at `runtime` in the process). Returns null when
 * the cookie is not "xdebugpy" (a version without the table, or not a runtime at all).
 *
 * @throws {RemoteMemoryError} when the memory cannot be read, or "invalid" when the cookie matches but an
 * offset is implausible.
 */
export function readDebugOffsets(memory: RemoteMemory, runtime: Address): DebugOffsets | null {
  const bytes = memory.read(runtime, DEBUG_OFFSETS_SIZE);
  for (let i = 0; i < DEBUG_COOKIE.length; i++) {
    if (bytes[i] !== DEBUG_COOKIE.charCodeAt(i)) return null;
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const field = (name: string): number => {
    const at = DEBUG_FIELD_INDEX.index.get(name);
    if (at === undefined) throw new Error(`unknown debug offset ${name}`);
    const high = view.getUint32(at + 4, true);
    const value = view.getUint32(at, true);
    if (high !== 0 || value > MAX_FIELD_OFFSET) {
      throw new RemoteMemoryError(
        memory.pid,
        runtime + at,
        8,
        "invalid",
        `_Py_DebugOffsets.${name} is implausible`,
      );
    }
    return value;
  };
  return {
    version: view.getUint32(8, true),
    freeThreaded: view.getUint32(16, true) !== 0 || view.getUint32(20, true) !== 0,
    runtimeInterpretersHead: field("runtime_state.interpreters_head"),
    interpNext: field("interpreter_state.next"),
    interpThreadsHead: field("interpreter_state.threads_head"),
    tstateNext: field("thread_state.next"),
    tstateInterp: field("thread_state.interp"),
    tstateFrame: field("thread_state.current_frame"),
    tstateThreadId: field("thread_state.thread_id"),
    tstateNativeThreadId: field("thread_state.native_thread_id"),
    framePrevious: field("interpreter_frame.previous"),
    frameCode: field("interpreter_frame.executable"),
    frameInstruction: field("interpreter_frame.instr_ptr"),
    frameOwner: field("interpreter_frame.owner"),
    codeFilename: field("code_object.filename"),
    codeName: field("code_object.name"),
    codeQualname: field("code_object.qualname"),
    codeLineTable: field("code_object.linetable"),
    codeFirstLineNo: field("code_object.firstlineno"),
    codeArgCount: field("code_object.argcount"),
    codeCodeAdaptive: field("code_object.co_code_adaptive"),
    objectType: field("pyobject.ob_type"),
    typeName: field("type_object.tp_name"),
    bytesSize: field("bytes_object.ob_size"),
    bytesData: field("bytes_object.ob_sval"),
    unicodeState: field("unicode_object.state"),
    unicodeLength: field("unicode_object.length"),
    unicodeAsciiSize: field("unicode_object.asciiobject_size"),
  };
}

/**
 * The table's offsets with every field the interpreter published replaced by its value. Fields the
 * debug offsets do not carry (autoTSSkey, `sizeof(PyCompactUnicodeObject)`, `co_flags`) stay from the
 * table.
 */
export function applyDebugOffsets(table: PythonOffsets, debug: DebugOffsets): PythonOffsets {
  return {
    ...table,
    runtimeInterpretersHead: debug.runtimeInterpretersHead,
    interpNext: debug.interpNext,
    interpThreadsHead: debug.interpThreadsHead,
    tstateNext: debug.tstateNext,
    tstateInterp: debug.tstateInterp,
    tstateFrame: debug.tstateFrame,
    tstateThreadId: debug.tstateThreadId,
    tstateNativeThreadId: debug.tstateNativeThreadId,
    framePrevious: debug.framePrevious,
    frameCode: debug.frameCode,
    frameInstruction: debug.frameInstruction,
    frameOwner: debug.frameOwner,
    codeFilename: debug.codeFilename,
    codeName: debug.codeName,
    codeQualname: debug.codeQualname,
    codeLineTable: debug.codeLineTable,
    codeFirstLineNo: debug.codeFirstLineNo,
    codeArgCount: debug.codeArgCount,
    codeCodeAdaptive: debug.codeCodeAdaptive,
    objectType: debug.objectType,
    typeName: debug.typeName,
    bytesSize: debug.bytesSize,
    bytesData: debug.bytesData,
    unicodeState: debug.unicodeState,
    unicodeLength: debug.unicodeLength,
    unicodeAsciiSize: debug.unicodeAsciiSize,
  };
}

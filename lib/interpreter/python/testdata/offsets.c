// Prints CPython's struct offsets as the compiler sees them in the installed internal headers, one
// "<PythonOffsets field> <value>" per line, for offsets_test.ts to compare with the tables.
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#if PY_VERSION_HEX >= 0x03090000
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#else
#include "internal/pycore_pystate.h"
#endif
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#else
#include "frameobject.h"
#endif

#define P(name, expr) printf("%s %ld\n", name, (long)(expr))

int main(void) {
  P("runtimeInterpretersHead", offsetof(_PyRuntimeState, interpreters.head));
#if PY_VERSION_HEX >= 0x030C0000
  P("runtimeAutoTssKey", offsetof(_PyRuntimeState, autoTSSkey));
#else
  P("runtimeAutoTssKey", offsetof(_PyRuntimeState, gilstate.autoTSSkey));
#endif
  P("tssIsInitialized", offsetof(Py_tss_t, _is_initialized));
  P("tssKey", offsetof(Py_tss_t, _key));
  P("interpNext", offsetof(PyInterpreterState, next));
#if PY_VERSION_HEX >= 0x030B0000
  P("interpThreadsHead", offsetof(PyInterpreterState, threads.head));
#else
  P("interpThreadsHead", offsetof(PyInterpreterState, tstate_head));
#endif
  P("tstateNext", offsetof(PyThreadState, next));
  P("tstateInterp", offsetof(PyThreadState, interp));
  P("tstateThreadId", offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX >= 0x030B0000
  P("tstateNativeThreadId", offsetof(PyThreadState, native_thread_id));
#endif
#if PY_VERSION_HEX >= 0x030D0000
  P("tstateFrame", offsetof(PyThreadState, current_frame));
#elif PY_VERSION_HEX >= 0x030B0000
  P("tstateFrame", offsetof(PyThreadState, cframe));
  P("cframeCurrentFrame", offsetof(_PyCFrame, current_frame));
#else
  P("tstateFrame", offsetof(PyThreadState, frame));
#endif
#if PY_VERSION_HEX >= 0x030B0000
  P("framePrevious", offsetof(_PyInterpreterFrame, previous));
#if PY_VERSION_HEX >= 0x030D0000
  P("frameCode", offsetof(_PyInterpreterFrame, f_executable));
  P("frameInstruction", offsetof(_PyInterpreterFrame, instr_ptr));
#else
  P("frameCode", offsetof(_PyInterpreterFrame, f_code));
  P("frameInstruction", offsetof(_PyInterpreterFrame, prev_instr));
#endif
  P("frameOwner", offsetof(_PyInterpreterFrame, owner));
#if PY_VERSION_HEX < 0x030C0000
  P("frameIsEntry", offsetof(_PyInterpreterFrame, is_entry));
#endif
  P("codeQualname", offsetof(PyCodeObject, co_qualname));
  P("codeCodeAdaptive", offsetof(PyCodeObject, co_code_adaptive));
#else
  P("framePrevious", offsetof(PyFrameObject, f_back));
  P("frameCode", offsetof(PyFrameObject, f_code));
  P("frameInstruction", offsetof(PyFrameObject, f_lasti));
#endif
  P("codeFilename", offsetof(PyCodeObject, co_filename));
  P("codeName", offsetof(PyCodeObject, co_name));
  P("codeFirstLineNo", offsetof(PyCodeObject, co_firstlineno));
#if PY_VERSION_HEX >= 0x030A0000
  P("codeLineTable", offsetof(PyCodeObject, co_linetable));
#else
  P("codeLineTable", offsetof(PyCodeObject, co_lnotab));
#endif
  P("codeArgCount", offsetof(PyCodeObject, co_argcount));
  P("codeFlags", offsetof(PyCodeObject, co_flags));
  P("objectType", offsetof(PyObject, ob_type));
  P("typeName", offsetof(PyTypeObject, tp_name));
  P("bytesSize", offsetof(PyVarObject, ob_size));
  P("bytesData", offsetof(PyBytesObject, ob_sval));
  P("unicodeLength", offsetof(PyASCIIObject, length));
  P("unicodeState", offsetof(PyASCIIObject, state));
  P("unicodeAsciiSize", sizeof(PyASCIIObject));
  P("unicodeCompactSize", sizeof(PyCompactUnicodeObject));
  return 0;
}

// A program that links libpython and refers to the interpreter's runtime state and eval loop, as a
// tool built against libpython may: the symbols are libpython's, so this file is not the interpreter's.
// `_PyRuntime` is data, which the link copies into this file's .bss (a copy relocation): the file's
// .dynsym then defines it. The eval loop, code, stays undefined here.
extern char _PyRuntime[];
extern char _PyEval_EvalFrameDefault[];

char *volatile eval_loop = _PyEval_EvalFrameDefault;

int main(void) {
  return _PyRuntime[0] + (eval_loop == _PyRuntime);
}

// A program that embeds CPython: it reads the script named on its command line and runs it with
// PyRun_SimpleString from run_script(), which main calls, so that the script's Python frames lie under
// main and run_script in a profile. Usage: embed SCRIPT
#include <Python.h>
#include <stdio.h>
#include <stdlib.h>

static char *read_script(const char *path) {
  FILE *file = fopen(path, "rb");
  if (file == NULL) return NULL;
  size_t size = 0, capacity = 4096;
  char *text = malloc(capacity);
  for (size_t n; text != NULL && (n = fread(text + size, 1, capacity - size - 1, file)) > 0;) {
    size += n;
    if (size + 1 == capacity) text = realloc(text, capacity *= 2);
  }
  fclose(file);
  if (text != NULL) text[size] = '\0';
  return text;
}

__attribute__((noinline)) int run_script(const char *source) {
  int status = PyRun_SimpleString(source);
  // Work after the call keeps it a call, not a jump that would leave run_script off the stack.
  fflush(stdout);
  return status;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s SCRIPT\n", argv[0]);
    return 2;
  }
  char *source = read_script(argv[1]);
  if (source == NULL) {
    perror(argv[1]);
    return 2;
  }
  Py_Initialize();
  int status = run_script(source);
  free(source);
  return Py_FinalizeEx() < 0 || status != 0 ? 1 : 0;
}

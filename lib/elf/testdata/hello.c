/* Test fixture for the ELF reader: a small program with code, data, bss and debug info. */
#include <stdio.h>

int counter = 42;
static char scratch[4096];

__attribute__((noinline)) int hello_add(int a, int b) { return a + b + counter; }

int main(int argc, char **argv) {
  scratch[argc] = (char)argc;
  printf("%s %d\n", argv[0], hello_add(argc, scratch[argc]));
  return 0;
}

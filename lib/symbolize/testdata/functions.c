/*
 * Test fixture for the symbolizer: functions of every symbol kind the symbol table keeps (global, static,
 * IFUNC, and a zero-size assembly label). Run with an argument, it prints the runtime address of each
 * function ("name address") followed by its own memory map, so a test can turn runtime addresses into
 * file offsets the way the profiler does.
 */
#include <stdio.h>

__attribute__((noinline)) int fixture_alpha(int x) {
  volatile int acc = x;
  for (int i = 0; i < 16; i++) acc = acc * 3 + i;
  return acc;
}

__attribute__((noinline)) static int fixture_static_gamma(int x) {
  volatile int acc = x;
  for (int i = 0; i < 8; i++) acc ^= acc << 1;
  return acc + 7;
}

__attribute__((noinline)) int fixture_beta(int x) { return fixture_static_gamma(x) + fixture_alpha(x); }

static int delta_impl(int x) { return x * 5; }
static int (*resolve_delta(void))(int) { return delta_impl; }
int fixture_delta(int x) __attribute__((ifunc("resolve_delta")));

/* A hand-written label: an STT_NOTYPE symbol of size 0 in .text. */
__asm__(".text\n"
        ".globl fixture_asm_label\n"
        "fixture_asm_label:\n"
        "  nop\n  nop\n  nop\n  nop\n"
        "  ret\n");
extern void fixture_asm_label(void);

int main(int argc, char **argv) {
  (void)argv;
  if (argc < 2) return fixture_beta(argc) & 1;
  printf("fixture_alpha %p\n", (void *)fixture_alpha);
  printf("fixture_beta %p\n", (void *)fixture_beta);
  printf("fixture_static_gamma %p\n", (void *)fixture_static_gamma);
  printf("fixture_asm_label %p\n", (void *)fixture_asm_label);
  printf("main %p\n", (void *)main);
  fflush(stdout);
  FILE *maps = fopen("/proc/self/maps", "r");
  if (maps == NULL) return 2;
  char line[4096];
  while (fgets(line, sizeof line, maps) != NULL) fputs(line, stdout);
  fclose(maps);
  return 0;
}

// Test workload: a callback through libc. main -> sort_rounds -> qsort (glibc, no frame pointers) ->
// ... -> compare, which burns CPU. Usage: qsort_callback SECONDS
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"

static volatile uint64_t sink;

__attribute__((noinline)) int compare(const void *left, const void *right)
{
  uint64_t x = *(const uint32_t *)left;
  for (int i = 0; i < 2000; i++)
    x = x * 6364136223846793005ull + 1442695040888963407ull;
  sink = x;
  uint32_t l = *(const uint32_t *)left, r = *(const uint32_t *)right;
  return l < r ? -1 : l > r;
}

__attribute__((noinline)) void sort_rounds(double end)
{
  static uint32_t values[4096];
  do {
    for (unsigned i = 0; i < 4096; i++)
      values[i] = (i * 2654435761u) ^ (unsigned)sink;
    qsort(values, 4096, sizeof(values[0]), compare);
  } while (cpu_seconds() < end);
}

int main(int argc, char **argv)
{
  sort_rounds(cpu_seconds() + (argc > 1 ? atof(argv[1]) : 5));
  report_cpu_seconds();
  return 0;
}

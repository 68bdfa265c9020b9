// Test workload: burns about MS milliseconds of CPU in short_lived_work, then exits. Started hundreds of
// times during one recording to check that short processes are still symbolized. Prints the CPU time it
// used, and the part of it spent in main (the rest went on exec and the dynamic loader, where no stack
// can show main). Usage: short_lived MS
#include <stdint.h>
#include <stdlib.h>

#include "clock.h"

static volatile uint64_t sink;

__attribute__((noinline)) void short_lived_work(double seconds)
{
  uint64_t x = 7;
  do {
    for (int i = 0; i < 100000; i++)
      x = x * 2862933555777941757ull + 3037000493ull;
    sink = x;
  } while (cpu_seconds() < seconds);
}

int main(int argc, char **argv)
{
  double start = cpu_seconds();
  short_lived_work((argc > 1 ? atof(argv[1]) : 20) / 1000);
  printf("main_cpu_seconds=%.6f\n", cpu_seconds() - start);
  report_cpu_seconds();
  return 0;
}

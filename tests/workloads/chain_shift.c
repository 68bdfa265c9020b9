// Test workload: chain.c with its time moved. main -> a -> b as in chain.c, but b spends a tenth of the
// time in c and the rest in d (the same loop under another name), so a profile diff against chain.c shows
// c shrinking and d growing while main, a and b keep their share. Usage: chain_shift SECONDS
#include <stdlib.h>

#include "spin.h"

__attribute__((noinline)) void c(double end)
{
  spin_until(1, end);
}

__attribute__((noinline)) void d(double end)
{
  spin_until(3, end);
}

__attribute__((noinline)) void b(double end)
{
  double start = cpu_seconds();
  c(start + (end - start) * 0.1);
  d(end);
  sink++;
}

__attribute__((noinline)) void a(double end)
{
  b(end);
  sink++;
}

int main(int argc, char **argv)
{
  double seconds = argc > 1 ? atof(argv[1]) : 5;
  a(cpu_seconds() + seconds);
  report_cpu_seconds();
  return 0;
}

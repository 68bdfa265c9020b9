// Test workload: main -> a -> b -> c where c is a frameless leaf (build with -momit-leaf-frame-pointer
// or -fomit-frame-pointer): frame-pointer unwinders lose b, the caller of the leaf. Usage: leaf SECONDS
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"

static volatile uint64_t sink;

__attribute__((noinline)) uint64_t c(uint64_t x)
{
  for (int i = 0; i < 20000000; i++)
    x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

__attribute__((noinline)) void b(double end)
{
  uint64_t x = 1;
  do
    x = c(x);
  while (cpu_seconds() < end);
  sink = x;
}

__attribute__((noinline)) void a(double end)
{
  b(end);
  sink++;
}

int main(int argc, char **argv)
{
  a(cpu_seconds() + (argc > 1 ? atof(argv[1]) : 5));
  report_cpu_seconds();
  return 0;
}

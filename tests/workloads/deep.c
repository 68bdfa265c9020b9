// Benchmark workload with a deep native stack: main -> level x 28 -> burn, 30 frames, burning CPU in
// burn until the process has used SECONDS of CPU. Usage: deep SECONDS
#include <stdlib.h>

#include "spin.h"

__attribute__((noinline)) void burn(double end)
{
  spin_until(1, end);
}

__attribute__((noinline)) void level(int depth, double end)
{
  if (depth > 0)
    level(depth - 1, end);
  else
    burn(end);
  sink++; // keeps the recursive call a call, not a jump
}

int main(int argc, char **argv)
{
  level(27, cpu_seconds() + (argc > 1 ? atof(argv[1]) : 5));
  report_cpu_seconds();
  return 0;
}

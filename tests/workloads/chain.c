// Test workload with a known call chain: main -> a -> b -> c (chain.h), where c burns CPU for SECONDS of
// the process's CPU time (clock.h). Prints the CPU time it used in all, so tests can compare sample
// counts with it. Usage: chain SECONDS
#include <stdlib.h>

#include "chain.h"

int main(int argc, char **argv)
{
  double seconds = argc > 1 ? atof(argv[1]) : 5;
  a(cpu_seconds() + seconds);
  report_cpu_seconds();
  return 0;
}

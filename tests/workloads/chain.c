// Test workload with a known call chain: main -> a -> b -> c (chain.h), where c burns CPU.
// Prints the CPU time it used, so tests can compare sample counts with the CPU it really got on a busy
// machine. Usage: chain SECONDS
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "chain.h"

int main(int argc, char **argv)
{
  double seconds = argc > 1 ? atof(argv[1]) : 5;
  a(now() + seconds);
  struct timespec cpu;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  printf("cpu_seconds=%.3f\n", cpu.tv_sec + cpu.tv_nsec / 1e9);
  return 0;
}

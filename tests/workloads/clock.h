// cpu_seconds(): the CPU time this process has used, in seconds, the clock every native workload runs
// its time against (the SECONDS of each one's usage). A workload asked for SECONDS does SECONDS of CPU
// work whatever else runs: on a busy machine it takes longer, but it is sampled as often, so a test can
// expect a number of samples of it and a machine's load can neither fail that test nor hide a recorder
// that loses samples. Each workload ends by printing the CPU time it used (report_cpu_seconds).
#ifndef OMNIPROF_WORKLOAD_CLOCK_H
#define OMNIPROF_WORKLOAD_CLOCK_H

#include <stdio.h>
#include <time.h>

static inline double cpu_seconds(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

// Prints `cpu_seconds=S` on standard output: the CPU time a test compares sample counts with.
static inline void report_cpu_seconds(void)
{
  printf("cpu_seconds=%.3f\n", cpu_seconds());
  fflush(stdout);
}

#endif

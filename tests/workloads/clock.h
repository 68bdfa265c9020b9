// now(): CLOCK_MONOTONIC in seconds, the clock every native workload runs its time against.
#ifndef OMNIPROF_WORKLOAD_CLOCK_H
#define OMNIPROF_WORKLOAD_CLOCK_H

#include <time.h>

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

#endif

// The call chain a -> b -> c of the native workloads, where c burns CPU until `end` (CLOCK_MONOTONIC
// seconds). c is not a leaf (it reads the clock), so with frame pointers every frame of the chain is on the
// frame-pointer chain. Definitions, not declarations: each workload is one program built from its one .c
// file, which includes this (the test build rebuilds a workload when a header here changes).
#ifndef OMNIPROF_WORKLOAD_CHAIN_H
#define OMNIPROF_WORKLOAD_CHAIN_H

#include <stdint.h>
#include <time.h>

static volatile uint64_t sink;

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void c(double end)
{
  uint64_t x = 1;
  do {
    for (int i = 0; i < 2000000; i++)
      x = x * 6364136223846793005ull + 1442695040888963407ull;
    sink = x;
  } while (now() < end);
}

__attribute__((noinline)) void b(double end)
{
  c(end);
  sink++;
}

__attribute__((noinline)) void a(double end)
{
  b(end);
  sink++;
}

#endif

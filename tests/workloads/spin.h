// The CPU-burning loop of the native workloads. spin_until is always inlined, so the function that calls
// it is the frame samples land in; that function is not a leaf, since the loop reads the clock.
#ifndef OMNIPROF_WORKLOAD_SPIN_H
#define OMNIPROF_WORKLOAD_SPIN_H

#include <stdint.h>

#include "clock.h"

static volatile uint64_t sink;

// Runs a linear congruential generator from `seed` until the process has used `end` seconds of CPU,
// publishing it to `sink`.
static inline __attribute__((always_inline)) void spin_until(uint64_t seed, double end)
{
  uint64_t x = seed;
  do {
    for (int i = 0; i < 2000000; i++)
      x = x * 6364136223846793005ull + 1442695040888963407ull;
    sink = x;
  } while (cpu_seconds() < end);
}

#endif

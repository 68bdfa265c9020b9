// The library of dlopen_main.c, built -shared -fPIC -fomit-frame-pointer.
#include <stdint.h>

#include "clock.h"

static volatile uint64_t sink;

__attribute__((noinline)) static uint64_t plugin_step(uint64_t x)
{
  for (int i = 0; i < 100000; i++)
    x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

// Burns `seconds` of the process's CPU time (as every workload counts its time: clock.h).
void plugin_work(double seconds)
{
  double end = cpu_seconds() + seconds;
  uint64_t x = 1;
  do
    x = plugin_step(x);
  while (cpu_seconds() < end);
  sink = x;
}

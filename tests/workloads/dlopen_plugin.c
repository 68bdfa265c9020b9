// The library of dlopen_main.c, built -shared -fPIC -fomit-frame-pointer.
#include <stdint.h>
#include <time.h>

static volatile uint64_t sink;

__attribute__((noinline)) static uint64_t plugin_step(uint64_t x)
{
  for (int i = 0; i < 100000; i++)
    x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

void plugin_work(double seconds)
{
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  uint64_t x = 1;
  do {
    x = plugin_step(x);
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
  sink = x;
}

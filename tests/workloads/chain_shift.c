// Test workload: chain.c with its time moved. main -> a -> b as in chain.c, but b spends a tenth of the
// time in c and the rest in d (the same loop under another name), so a profile diff against chain.c shows
// c shrinking and d growing while main, a and b keep their share. Usage: chain_shift SECONDS
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

__attribute__((noinline)) void d(double end)
{
  uint64_t x = 3;
  do {
    for (int i = 0; i < 2000000; i++)
      x = x * 6364136223846793005ull + 1442695040888963407ull;
    sink = x;
  } while (now() < end);
}

__attribute__((noinline)) void b(double end)
{
  double start = now();
  c(start + (end - start) * 0.1);
  d(end);
  sink++;
}

__attribute__((noinline)) void a(double end)
{
  b(end);
  sink++;
}

int main(int argc, char **argv)
{
  double seconds = argc > 1 ? atof(argv[1]) : 5;
  a(now() + seconds);
  return 0;
}

// Benchmark workload with a deep native stack: main -> level x 28 -> burn, 30 frames, burning CPU in
// burn until SECONDS have passed. Usage: deep SECONDS
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void burn(double end)
{
  uint64_t x = 1;
  do {
    for (int i = 0; i < 2000000; i++)
      x = x * 6364136223846793005ull + 1442695040888963407ull;
    sink = x;
  } while (now() < end);
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
  level(27, now() + (argc > 1 ? atof(argv[1]) : 5));
  return 0;
}

// Test workload with a known call chain: main -> a -> b -> c, where c burns CPU. c is not a leaf (it
// reads the clock), so with frame pointers every frame of the chain is on the frame-pointer chain.
// Prints the CPU time it used, so tests can compare sample counts with the CPU it really got on a busy
// machine. Usage: chain SECONDS
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

int main(int argc, char **argv)
{
  double seconds = argc > 1 ? atof(argv[1]) : 5;
  a(now() + seconds);
  struct timespec cpu;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  printf("cpu_seconds=%.3f\n", cpu.tv_sec + cpu.tv_nsec / 1e9);
  return 0;
}

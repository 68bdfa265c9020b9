// Test workload for off-CPU time: main -> wait_a -> wait_b -> wait_c, where wait_c sleeps 10 ms at a time
// (clock_nanosleep) for SECONDS of wall time; with BUSY_MS, it first burns BUSY_MS ms of CPU in busy
// (called by wait_c) before each sleep. Prints "ready PID" once it runs, then at the end the wall and CPU
// seconds it spent, so that tests compare the time recorded with what the process itself measured.
// Usage: sleeper SECONDS [BUSY_MS]
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "spin.h"

static double monotonic_seconds(void)
{
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec + now.tv_nsec / 1e9;
}

__attribute__((noinline)) void busy(double cpu_end)
{
  spin_until(3, cpu_end);
}

__attribute__((noinline)) void wait_c(double end, double busy_seconds)
{
  struct timespec ten_ms = {.tv_sec = 0, .tv_nsec = 10 * 1000 * 1000};
  while (monotonic_seconds() < end) {
    if (busy_seconds > 0)
      busy(cpu_seconds() + busy_seconds);
    clock_nanosleep(CLOCK_MONOTONIC, 0, &ten_ms, NULL);
  }
}

__attribute__((noinline)) void wait_b(double end, double busy_seconds)
{
  wait_c(end, busy_seconds);
  sink++;
}

__attribute__((noinline)) void wait_a(double end, double busy_seconds)
{
  wait_b(end, busy_seconds);
  sink++;
}

int main(int argc, char **argv)
{
  double seconds = argc > 1 ? atof(argv[1]) : 5;
  double busy_seconds = argc > 2 ? atof(argv[2]) / 1000 : 0;
  double start = monotonic_seconds();
  printf("ready %d\n", getpid());
  fflush(stdout);
  wait_a(start + seconds, busy_seconds);
  printf("wall_seconds=%.6f\ncpu_seconds=%.6f\n", monotonic_seconds() - start, cpu_seconds());
  return 0;
}

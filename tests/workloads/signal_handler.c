// Test workload: work inside a signal handler. main -> spin interrupted every 10 ms by SIGPROF, whose
// handler runs handler_work for about 5 ms: its samples must show handler_work, on_signal, the signal
// trampoline (__restore_rt) and the interrupted spin;main below. Usage: signal_handler SECONDS
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

#include "clock.h"

static volatile uint64_t sink;
static volatile int done;

__attribute__((noinline)) void handler_work(void)
{
  double end = cpu_seconds() + 0.005;
  uint64_t x = sink;
  while (cpu_seconds() < end)
    for (int i = 0; i < 10000; i++)
      x = x * 6364136223846793005ull + 1;
  sink = x;
}

__attribute__((noinline)) void on_signal(int signal)
{
  handler_work();
  sink += signal; // keeps the call a call (not a tail jump), so on_signal has a frame
}

__attribute__((noinline)) void spin(double end)
{
  // The CPU clock is a system call: read it rarely enough that samples land in spin, not the kernel.
  while (cpu_seconds() < end)
    for (int i = 0; i < 100000; i++)
      sink += i;
}

int main(int argc, char **argv)
{
  struct sigaction action = {0};
  action.sa_handler = on_signal;
  sigaction(SIGPROF, &action, NULL);
  struct itimerval timer = {{0, 10000}, {0, 10000}};
  setitimer(ITIMER_PROF, &timer, NULL);
  spin(cpu_seconds() + (argc > 1 ? atof(argv[1]) : 5));
  report_cpu_seconds();
  return 0;
}

// Test workload for probes: main -> caller_a -> caller_b, which calls target() and makes the getpgid
// system call exactly COUNT times each, then prints "calls=COUNT". target is noinline and does real work,
// so that it stays a function of its own at -O2. With DELAY_MS, it first sleeps that long (a profiler
// started with it has then read it, as it has a running program). Usage: calls COUNT [DELAY_MS]
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

volatile long sink;

__attribute__((noinline)) long target(long i)
{
  sink += i * 3;
  return sink;
}

__attribute__((noinline)) void caller_b(long count)
{
  for (long i = 0; i < count; i++) {
    target(i);
    syscall(SYS_getpgid, 0);
  }
}

__attribute__((noinline)) void caller_a(long count)
{
  caller_b(count);
  sink++;
}

int main(int argc, char **argv)
{
  long count = argc > 1 ? atol(argv[1]) : 1000;
  if (argc > 2)
    usleep(atol(argv[2]) * 1000);
  caller_a(count);
  printf("calls=%ld\n", count);
  return 0;
}

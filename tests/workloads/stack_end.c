// Test workload: a thread whose stack ends right above its first frames. clone() starts it at the top of
// a stack this program maps itself, with the page above unmapped, so that the unwinder's reads of user
// stack near the thread's outermost frames reach the end of the mapping (the BPF stack window must fall
// back to shorter reads there). The thread runs entry -> a -> b -> c (chain.h), where c burns CPU; the
// main thread waits. Built with -fomit-frame-pointer, so only the stack deltas unwind it.
// Usage: stack_end SECONDS
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chain.h"

#define STACK_BYTES (64 * 1024)
#define PAGE 4096

static volatile int finished;

static int entry(void *arg)
{
  a(*(double *)arg);
  finished = 1;
  return 0;
}

int main(int argc, char **argv)
{
  static double end;
  end = cpu_seconds() + (argc > 1 ? atof(argv[1]) : 5);
  // The stack and one page above it; the page above is unmapped again, so nothing follows the stack.
  char *memory = mmap(NULL, STACK_BYTES + PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED || munmap(memory + STACK_BYTES, PAGE) != 0)
    return 1;
  int flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
  if (clone(entry, memory + STACK_BYTES, flags, &end) == -1)
    return 1;
  while (!finished)
    usleep(10000);
  report_cpu_seconds();
  return 0;
}

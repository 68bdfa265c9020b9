// Test workload: a library loaded with dlopen after start-up (after DELAY seconds, so after the
// recording began): main -> run_plugin -> plugin_work (in the library) burns CPU.
// Usage: dlopen_main LIBRARY DELAY SECONDS
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "clock.h"

__attribute__((noinline)) void run_plugin(void (*work)(double), double seconds)
{
  work(seconds);
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
  if (argc < 4)
    return 2;
  usleep((useconds_t)(atof(argv[2]) * 1e6));
  void *library = dlopen(argv[1], RTLD_NOW);
  if (!library) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  void (*work)(double) = (void (*)(double))dlsym(library, "plugin_work");
  if (!work)
    return 1;
  run_plugin(work, atof(argv[3]));
  report_cpu_seconds();
  return 0;
}

// Test workload that spends its time in the kernel: main -> write_loop -> write(2) on /dev/zero reads
// and /dev/null writes, for SECONDS of its CPU time; prints the CPU time it used. Usage: syscalls SECONDS
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

__attribute__((noinline)) void copy_loop(int in, int out, double end)
{
  static char buffer[1 << 16];
  do {
    for (int i = 0; i < 64; i++) {
      if (read(in, buffer, sizeof(buffer)) < 0 || write(out, buffer, sizeof(buffer)) < 0)
        exit(1);
    }
  } while (cpu_seconds() < end);
}

int main(int argc, char **argv)
{
  double seconds = argc > 1 ? atof(argv[1]) : 5;
  int in = open("/dev/zero", O_RDONLY), out = open("/dev/null", O_WRONLY);
  if (in < 0 || out < 0)
    return 1;
  copy_loop(in, out, cpu_seconds() + seconds);
  report_cpu_seconds();
  return 0;
}

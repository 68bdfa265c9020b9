// Test workload with a known call chain through cgo: main -> a -> b (Go) -> c_middle (C, called through
// runtime.cgocall on the system stack) -> c_spin (C), where c_spin burns CPU for SECONDS of the process's
// CPU time, as the C workloads do (clock.h), and main then prints `cpu_seconds=S`. No function of the
// chain is inlined, and the C functions keep frame pointers. Usage: cgo_chain SECONDS
package main

/*
#cgo CFLAGS: -O2 -fno-omit-frame-pointer
#include <stdint.h>
#include <time.h>

static volatile uint64_t sink;

static double cpu_seconds(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void c_spin(double end)
{
  uint64_t x = 1;
  do {
    for (int i = 0; i < 2000000; i++)
      x = x * 6364136223846793005ull + 1442695040888963407ull;
    sink = x;
  } while (cpu_seconds() < end);
}

__attribute__((noinline)) void c_middle(double end)
{
  c_spin(end);
  sink++;
}

static double c_cpu_seconds(void)
{
  return cpu_seconds();
}
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
)

//go:noinline
func a(end float64) {
	b(end)
}

//go:noinline
func b(end float64) {
	C.c_middle(C.double(end))
}

func main() {
	seconds := 5.0
	if len(os.Args) > 1 {
		parsed, err := strconv.ParseFloat(os.Args[1], 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "usage: cgo_chain SECONDS")
			os.Exit(2)
		}
		seconds = parsed
	}
	a(float64(C.c_cpu_seconds()) + seconds)
	fmt.Printf("cpu_seconds=%.3f\n", float64(C.c_cpu_seconds()))
}

// Test workload with a known call chain through cgo and back: main -> a (Go) -> c_call_back (C, called
// through runtime.cgocall on the system stack) -> spin (Go, exported, called back through crosscall2 and
// runtime.cgocallback on the goroutine's stack), where spin burns CPU until the process has used SECONDS
// of CPU time, and main then prints `cpu_seconds=S`. No function of the chain is inlined, and the C
// function keeps frame pointers. Usage: cgo_callback SECONDS
package main

/*
#cgo CFLAGS: -O2 -fno-omit-frame-pointer
#include <time.h>

extern void spin(double end);

// Static: with an exported Go function, this preamble is compiled into two C files.
static __attribute__((noinline)) void c_call_back(double end)
{
  spin(end);
  __asm__ volatile("" ::: "memory"); // not a tail call: c_call_back stays on the stack
}

static double cpu_seconds(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

var sink uint64

//export spin
func spin(end C.double) {
	x := sink
	for cpuSeconds() < float64(end) {
		for i := 0; i < 2000000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		sink = x
	}
}

// cpuSeconds reads the process's CPU time with a system call, not through cgo: spin's samples stay in Go.
//
//go:noinline
func cpuSeconds() float64 {
	var ts syscall.Timespec
	const clockProcessCputimeID = 2
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockProcessCputimeID, uintptr(unsafe.Pointer(&ts)), 0)
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

//go:noinline
func a(end float64) {
	C.c_call_back(C.double(end))
}

func main() {
	seconds := 5.0
	if len(os.Args) > 1 {
		parsed, err := strconv.ParseFloat(os.Args[1], 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "usage: cgo_callback SECONDS")
			os.Exit(2)
		}
		seconds = parsed
	}
	a(cpuSeconds() + seconds)
	fmt.Printf("cpu_seconds=%.3f\n", float64(C.cpu_seconds()))
}

// Test workload with a known call chain main -> a -> b -> c in Go, where c burns CPU for SECONDS of the
// process's CPU time and main then prints `cpu_seconds=S`, as the C workloads do (clock.h). a and c are
// never inlined; b is small enough that the compiler inlines it into a, unless the build turns inlining
// off (-gcflags=-l), so one source gives both an inlined and a plain chain. Usage: chain SECONDS
package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

var sink uint64

// cpuSeconds is the CPU time the process has used (all its threads), in seconds.
func cpuSeconds() float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		panic(err)
	}
	return float64(usage.Utime.Sec+usage.Stime.Sec) + float64(usage.Utime.Usec+usage.Stime.Usec)/1e6
}

// c runs a linear congruential generator until the process has used `end` seconds of CPU.
//
//go:noinline
func c(end float64) {
	x := uint64(1)
	for {
		for i := 0; i < 2000000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		sink = x
		if cpuSeconds() >= end {
			return
		}
	}
}

func b(end float64) {
	c(end)
	sink++
}

//go:noinline
func a(end float64) {
	b(end)
	sink++
}

func main() {
	seconds := 5.0
	if len(os.Args) > 1 {
		parsed, err := strconv.ParseFloat(os.Args[1], 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "usage: chain SECONDS")
			os.Exit(2)
		}
		seconds = parsed
	}
	a(cpuSeconds() + seconds)
	fmt.Printf("cpu_seconds=%.3f\n", cpuSeconds())
}

// Test workload that spends its time in runtime.duffzero and runtime.duffcopy, the Duff's devices Go's
// compiler calls (amd64) to zero or copy a block of 64 to 1024 bytes, under the chain main -> a -> b, for
// SECONDS of the process's CPU time; main then prints `cpu_seconds=S`, as the other workloads do. b zeroes
// one block and copies it into another, over and over; a and b are never inlined. Usage: duff SECONDS
package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// A block in the Duff's devices' range: larger blocks are zeroed and copied by rep stos and rep movs.
type block [512]byte

var sink byte

// cpuSeconds is the CPU time the process has used (all its threads), in seconds.
func cpuSeconds() float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		panic(err)
	}
	return float64(usage.Utime.Sec+usage.Stime.Sec) + float64(usage.Utime.Usec+usage.Stime.Usec)/1e6
}

// b zeroes two blocks on the heap and copies one onto its own stack, where the two cannot overlap (a copy
// between two pointers' blocks is a memmove), until the process has used `end` seconds of CPU. Zeroing
// is the quicker: it is done twice as often, so that both devices get many samples.
//
//go:noinline
func b(end float64, from, spare *block) {
	var to block
	for {
		for i := 0; i < 200000; i++ {
			*from = block{}
			*spare = block{}
			from[i&511] = byte(i)
			spare[i&511] = byte(i)
			to = *from
			sink += to[i&7] + spare[i&3]
		}
		if cpuSeconds() >= end {
			return
		}
	}
}

//go:noinline
func a(end float64) {
	b(end, new(block), new(block))
	sink++
}

func main() {
	seconds := 5.0
	if len(os.Args) > 1 {
		parsed, err := strconv.ParseFloat(os.Args[1], 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "usage: duff SECONDS")
			os.Exit(2)
		}
		seconds = parsed
	}
	a(cpuSeconds() + seconds)
	fmt.Printf("cpu_seconds=%.3f\n", cpuSeconds())
}

// Test workload with pprof labels: two goroutines run the known chain main.work -> main.a -> main.b ->
// main.c under pprof.Do with labels of their own ("worker" alpha or beta, a shared "phase", and "long",
// a value longer than a trace keeps), until the process has used SECONDS of CPU time; main then prints
// `cpu_seconds=S`. With `many`, one goroutine runs the chain under twelve labels k00=v00 ... k11=v11, more
// than a map bucket holds (8) and than a trace keeps (10). Usage: labels SECONDS [many]
package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

var sink [2]uint64

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
func c(slot int, end float64) {
	x := uint64(1)
	for {
		for i := 0; i < 2000000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		sink[slot] = x
		if cpuSeconds() >= end {
			return
		}
	}
}

//go:noinline
func b(slot int, end float64) {
	c(slot, end)
	sink[slot]++
}

//go:noinline
func a(slot int, end float64) {
	b(slot, end)
	sink[slot]++
}

//go:noinline
func work(slot int, worker string, end float64, done *sync.WaitGroup) {
	defer done.Done()
	labels := pprof.Labels("worker", worker, "phase", "spin", "long", strings.Repeat("x", 100))
	pprof.Do(context.Background(), labels, func(context.Context) { a(slot, end) })
}

//go:noinline
func workMany(end float64, done *sync.WaitGroup) {
	defer done.Done()
	var pairs []string
	for i := 0; i < 12; i++ {
		pairs = append(pairs, fmt.Sprintf("k%02d", i), fmt.Sprintf("v%02d", i))
	}
	pprof.Do(context.Background(), pprof.Labels(pairs...), func(context.Context) { a(0, end) })
}

func main() {
	seconds := 5.0
	if len(os.Args) > 1 {
		parsed, err := strconv.ParseFloat(os.Args[1], 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "usage: labels SECONDS")
			os.Exit(2)
		}
		seconds = parsed
	}
	end := cpuSeconds() + seconds
	var done sync.WaitGroup
	if len(os.Args) > 2 && os.Args[2] == "many" {
		done.Add(1)
		go workMany(end, &done)
	} else {
		done.Add(2)
		go work(0, "alpha", end, &done)
		go work(1, "beta", end, &done)
	}
	done.Wait()
	fmt.Printf("cpu_seconds=%.3f\n", cpuSeconds())
}

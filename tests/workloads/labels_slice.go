// Test workload for the label layout of Go 1.24 and later, built with an older Go: main sets its
// goroutine's labels (g.labels, through the runtime's hook for runtime/pprof) to a value laid out as 1.24's
// labelMap, a sorted []label{key, value string}, and then runs main.a -> main.b -> main.c until the process
// has used SECONDS of CPU time. A profiler told that this process has the 1.24 layout reads these labels:
// eleven of them, one with a key longer than a trace keeps. Nothing in the program reads its labels back
// (the runtime/pprof of the Go that built it would read them as a map). Usage: labels_slice SECONDS
package main

import (
	"fmt"
	"os"
	_ "runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

//go:linkname setProfLabel runtime/pprof.runtime_setProfLabel
func setProfLabel(labels unsafe.Pointer)

type label struct{ key, value string }

// labelMap is Go 1.24's runtime/pprof.labelMap: a LabelSet, whose only field is the sorted list.
type labelMap struct{ list []label }

var sink uint64

func cpuSeconds() float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		panic(err)
	}
	return float64(usage.Utime.Sec+usage.Stime.Sec) + float64(usage.Utime.Usec+usage.Stime.Usec)/1e6
}

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

//go:noinline
func b(end float64) { c(end); sink++ }

//go:noinline
func a(end float64) { b(end); sink++ }

func main() {
	seconds := 5.0
	if len(os.Args) > 1 {
		parsed, err := strconv.ParseFloat(os.Args[1], 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "usage: labels_slice SECONDS")
			os.Exit(2)
		}
		seconds = parsed
	}
	labels := &labelMap{}
	for i := 0; i < 11; i++ {
		labels.list = append(labels.list, label{fmt.Sprintf("k%02d", i), fmt.Sprintf("v%d", i)})
	}
	labels.list[0].key = "a" + strings.Repeat("k", 99)
	setProfLabel(unsafe.Pointer(labels))
	a(cpuSeconds() + seconds)
	fmt.Printf("cpu_seconds=%.3f\n", cpuSeconds())
}

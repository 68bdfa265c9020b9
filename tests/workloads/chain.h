// The call chain a -> b -> c of the native workloads, where c burns CPU until the process has used `end`
// seconds of CPU (clock.h). c is not a leaf (it reads the clock), so with frame pointers every frame of the
// chain is on the frame-pointer chain. Definitions, not declarations: each workload is one program built
// from its one .c file, which includes this (the test build rebuilds a workload when a header here
// changes).
#ifndef OMNIPROF_WORKLOAD_CHAIN_H
#define OMNIPROF_WORKLOAD_CHAIN_H

#include "spin.h"

__attribute__((noinline)) void c(double end)
{
  spin_until(1, end);
}

__attribute__((noinline)) void b(double end)
{
  c(end);
  sink++;
}

__attribute__((noinline)) void a(double end)
{
  b(end);
  sink++;
}

#endif

/* The kernel fixture with an 8-byte pid_t: a layout omniprof's programs cannot read. */
#define KERNEL_FIXTURE_PID_T long
#include "kernel_fixture.bpf.c"

/* BPF side of the kernel fixture: a global in a section no loader reads makes clang emit the structs. */
#include "kernel_fixture.h"

struct task_struct task_anchor __attribute__((section(".omniprof.types"), used));
struct signal_struct signal_anchor __attribute__((section(".omniprof.types"), used));

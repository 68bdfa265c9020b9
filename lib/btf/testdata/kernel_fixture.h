/* Kernel-like structs for KernelBtf's tests, shared by the BPF side (BTF) and the host side (offsetof).
 * task_struct wraps most fields in an anonymous struct, as kernels built with CONFIG_RANDSTRUCT do, and
 * has a bitfield and an anonymous union. KERNEL_FIXTURE_PID_T lets a variant widen pid_t. */
#ifndef KERNEL_FIXTURE_PID_T
#define KERNEL_FIXTURE_PID_T int
#endif

typedef KERNEL_FIXTURE_PID_T pid_t;

typedef struct {
  int counter;
} atomic_t;

struct thread_struct {
  unsigned long sp;
  unsigned short es;
  unsigned long fsbase;
};

struct signal_struct {
  int nr_threads;
  atomic_t live;
};

struct task_struct {
  unsigned int __state;
  struct {
    void *stack;
    unsigned int flags;
    unsigned int in_execve : 1;
    union {
      pid_t pid;
      int pid_alias;
    };
    const volatile pid_t tgid;
  };
  struct signal_struct *signal;
  char comm[16];
  struct thread_struct thread;
};

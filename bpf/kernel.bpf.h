// The few kernel structures the programs read, declared with preserve_access_index so that libbpf
// relocates each field access against the running kernel's BTF (CO-RE). Only the fields used are listed;
// their order and the struct sizes here mean nothing.
#ifndef OMNIPROF_KERNEL_BPF_H
#define OMNIPROF_KERNEL_BPF_H

#include <linux/types.h>

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

typedef struct {
  int counter;
} atomic_t;

struct signal_struct {
  atomic_t live; // threads still alive; 0 once the last one is in do_exit
};

struct mm_struct {
  unsigned long start_stack;
};

struct thread_struct {
  unsigned long fsbase; // x86-64 thread pointer of user space (glibc's pthread_self())
};

struct task_struct {
  unsigned int flags;
  void *stack; // bottom of the kernel stack; user registers sit at its top
  struct mm_struct *mm;
  int pid;
  int tgid;
  struct task_struct *group_leader;
  struct signal_struct *signal;
  char comm[16];
  struct thread_struct thread;
};

#pragma clang attribute pop

#define PF_KTHREAD 0x00200000

#endif

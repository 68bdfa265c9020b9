// Reads of kernel structures at the offsets the host found in the running kernel's BTF
// (tracer_config.kernel, see struct kernel_fields in types.h). The offsets are constants of .rodata, so
// the verifier knows each one; a failed read yields 0.
#ifndef OMNIPROF_KERNEL_BPF_H
#define OMNIPROF_KERNEL_BPF_H

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#include "maps.bpf.h"

#define PF_EXITING 0x00000004
#define PF_KTHREAD 0x00200000

static __always_inline __u64 kernel_read_u64(__u64 base, __u32 offset)
{
  __u64 value = 0;
  bpf_probe_read_kernel(&value, sizeof(value), (const void *)(base + offset));
  return value;
}

static __always_inline __u32 kernel_read_u32(__u64 base, __u32 offset)
{
  __u32 value = 0;
  bpf_probe_read_kernel(&value, sizeof(value), (const void *)(base + offset));
  return value;
}

#endif

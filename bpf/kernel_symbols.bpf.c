// Names kernel addresses with the kernel's own symbol lookup: bpf_snprintf's %pS prints
// "function+0xoffset/0xsize [module]" for any kernel text address (image, modules, BPF programs). The host
// runs this program (BPF_PROG_TEST_RUN of a syscall program) on the few hundred addresses a profile holds
// instead of reading all of /proc/kallsyms, whose 200k formatted lines cost about 0.1 s of CPU.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "types.h"

struct kernel_names_map {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct kernel_name_batch);
};

// The batch being named: written by the host before each run, read back after it.
struct kernel_names_map kernel_names SEC(".maps");

static const char symbol_format[] = "%pS";

SEC("syscall")
int name_kernel_addresses(void *ctx)
{
  __u32 zero = 0;
  struct kernel_name_batch *batch = bpf_map_lookup_elem(&kernel_names, &zero);
  if (!batch)
    return 1;
  __u32 count = batch->count;
  for (__u32 i = 0; i < KERNEL_NAME_BATCH; i++) {
    if (i >= count)
      break;
    __u64 address = batch->addresses[i];
    bpf_snprintf(batch->names[i], KERNEL_NAME_BYTES, symbol_format, &address, sizeof(address));
  }
  return 0;
}

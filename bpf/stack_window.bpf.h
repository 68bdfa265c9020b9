// The window of the user stack the unwinders read frames through: callers' frames lie just above each
// other, so one read of the process's memory serves several frames.
#ifndef OMNIPROF_STACK_WINDOW_BPF_H
#define OMNIPROF_STACK_WINDOW_BPF_H

#include "maps.bpf.h"

#define STACK_WINDOW_PAGE_SIZE 4096

// Reads 8 or 16 bytes of the user stack at `addr`, through the stack window: when the window does not
// hold them, it is refilled from `addr` on (or to the end of addr's page where the stack ends sooner).
static __always_inline int read_stack(struct unwind_state *state, __u64 addr, void *dst, __u32 size)
{
  if (addr < state->stack_window_start || addr + size > state->stack_window_end) {
    __u32 length = STACK_WINDOW_BYTES;
    if (bpf_probe_read_user(state->stack_window, length, (void *)addr)) {
      length = STACK_WINDOW_PAGE_SIZE - (addr & (STACK_WINDOW_PAGE_SIZE - 1));
      if (length > STACK_WINDOW_BYTES)
        length = STACK_WINDOW_BYTES;
      if (length < size || bpf_probe_read_user(state->stack_window, length, (void *)addr)) {
        state->stack_window_end = 0;
        return bpf_probe_read_user(dst, size, (void *)addr);
      }
    }
    state->stack_window_start = addr;
    state->stack_window_end = addr + length;
  }
  __u64 offset = (addr - state->stack_window_start) & (STACK_WINDOW_BYTES - 1);
  ((__u64 *)dst)[0] = *(__u64 *)&state->stack_window[offset];
  if (size == 16)
    ((__u64 *)dst)[1] = *(__u64 *)&state->stack_window[offset + 8];
  return 0;
}

#endif

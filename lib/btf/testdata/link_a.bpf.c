/* First unit of the bitcode-linking fixture: defines shared_s, and a clash_s that link_b.bpf.c defines differently. */
#include "link_shared.h"

enum only_in_a { ONLY_IN_A_VALUE = 1 };
struct clash_s {
  int a;
};
struct {
  enum only_in_a tag;
  struct shared_s shared;
  struct clash_s clash;
} unit_a_anchor SEC(".omniprof.types");

int from_b(int x);

SEC("perf_event") int prog_a(void *ctx) {
  return from_b(1);
}

char LICENSE[] SEC("license") = "GPL";

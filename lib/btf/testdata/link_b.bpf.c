/* Second unit of the bitcode-linking fixture. */
#include "link_shared.h"

enum only_in_b { ONLY_IN_B_VALUE = 2 };
struct clash_s {
  long long a;
};
struct {
  enum only_in_b tag;
  struct shared_s shared;
  struct clash_s clash;
} unit_b_anchor SEC(".omniprof.types");

__attribute__((noinline)) int from_b(int x) {
  return x * 2;
}

SEC("perf_event") int prog_b(void *ctx) {
  return from_b(2);
}

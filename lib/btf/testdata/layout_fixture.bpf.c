/* BPF side of the layout fixture: globals in a section no loader reads make clang emit the shared types. */
#include "layout_fixture.h"

#define ANCHOR __attribute__((section(".omniprof.types"), used))

struct sample sample_anchor ANCHOR;
struct long_names long_names_anchor ANCHOR;

/* An anonymous enum declared with a variable: the way to get such constants into BTF. */
enum { FIXTURE_MAX_FRAMES = 4, FIXTURE_COMM_LEN = 16 } fixture_limits ANCHOR;

__attribute__((section("perf_event"), used)) int on_sample(void *ctx) {
  return UNREFERENCED_CONSTANT;
}

char LICENSE[] __attribute__((section("license"), used)) = "GPL";

/* Host side of the layout fixture: prints what the C compiler says about the shared types, one fact a line. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "layout_fixture.h"

#define SIZEOF(s) printf("sizeof %s %zu\n", #s, sizeof(struct s))
#define MEMBER(s, m) printf("member %s %s %zu %zu\n", #s, #m, offsetof(struct s, m), sizeof(((struct s *)0)->m))
#define ARRAY(s, m)                                                                                         \
  do {                                                                                                      \
    MEMBER(s, m);                                                                                           \
    struct s v;                                                                                             \
    printf("array %s %s %zu %zu\n", #s, #m, sizeof v.m / sizeof v.m[0], sizeof v.m[0]);                     \
  } while (0)
/* offsetof cannot take a bitfield: set its bits in a zeroed struct and find them (little-endian order). */
#define BITFIELD(s, m)                                                                                      \
  do {                                                                                                      \
    struct s v;                                                                                             \
    memset(&v, 0, sizeof v);                                                                                \
    v.m = -1;                                                                                               \
    print_bits(#s, #m, (const unsigned char *)&v, sizeof v);                                                \
  } while (0)
#define ENUMERATOR(e) printf("enum %s %lld\n", #e, (long long)(e))

static void print_bits(const char *s, const char *m, const unsigned char *bytes, size_t size) {
  size_t first = 0, count = 0;
  for (size_t bit = 0; bit < size * 8; bit++) {
    if (bytes[bit / 8] >> (bit % 8) & 1) {
      if (count++ == 0) first = bit;
    }
  }
  printf("bitfield %s %s %zu %zu\n", s, m, first, count);
}

int main(void) {
  SIZEOF(frame);
  MEMBER(frame, address);
  MEMBER(frame, file_id);
  MEMBER(frame, marker);

  SIZEOF(sample);
  MEMBER(sample, kind);
  MEMBER(sample, timestamp);
  MEMBER(sample, pid);
  ARRAY(sample, comm);
  ARRAY(sample, frames);
  BITFIELD(sample, flags);
  BITFIELD(sample, cpu);
  MEMBER(sample, depth);
  BITFIELD(sample, level);
  MEMBER(sample, user_sp);
  ARRAY(sample, raw);
  MEMBER(sample, pair);
  ARRAY(sample, matrix);
  MEMBER(sample, sample_kind);
  MEMBER(sample, status);
  MEMBER(sample, context);
  MEMBER(sample, generation);

  SIZEOF(long_names);
  MEMBER(long_names, member_name_long_enough_that_its_type_comment_would_overflow_the_formatter_line);
  ARRAY(long_names, member_name_so_long_that_its_layout_object_must_break_over_several_lines);

  ENUMERATOR(FRAME_MARKER_UNKNOWN);
  ENUMERATOR(FRAME_MARKER_NATIVE);
  ENUMERATOR(FRAME_MARKER_INTERPRETED);
  ENUMERATOR(FRAME_MARKER_KERNEL_CODE);
  ENUMERATOR(HTTP_STATUS_404_NOT_FOUND);
  ENUMERATOR(HTTP_STATUS_500_INTERNAL);
  ENUMERATOR(SAMPLE_KIND_CPU);
  ENUMERATOR(SAMPLE_KIND_OFF_CPU);
  return 0;
}

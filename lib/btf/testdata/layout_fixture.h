/* Types shared by the layout fixture's BPF object and its host-side twin; x86-64 and BPF lay them out alike. */
#ifndef LAYOUT_FIXTURE_H
#define LAYOUT_FIXTURE_H

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

enum frame_marker {
  FRAME_MARKER_UNKNOWN = 0,
  FRAME_MARKER_NATIVE = 3,
  FRAME_MARKER_INTERPRETED = 6,
  FRAME_MARKER_KERNEL_CODE = 0x20,
};

/* Dropping the whole common prefix would leave names that start with a digit. */
enum http_status { HTTP_STATUS_404_NOT_FOUND = 404, HTTP_STATUS_500_INTERNAL = 500 };

/* An anonymous enum reachable only through its typedef. */
typedef enum { SAMPLE_KIND_CPU = 1, SAMPLE_KIND_OFF_CPU = 2 } sample_kind_t;

/* An anonymous enum nothing refers to: the compiler drops it. */
enum { UNREFERENCED_CONSTANT = 77 };

struct frame {
  u64 address;
  u32 file_id;
  enum frame_marker marker;
};

struct sample {
  u8 kind; /* 7 bytes of padding follow */
  u64 timestamp;
  u32 pid;
  char comm[16];
  struct frame frames[4];
  u32 flags : 3;
  u32 cpu : 12;
  u8 depth;
  u16 level : 5;
  union {
    u64 user_sp;
    u32 raw[2];
  };
  struct {
    u16 low;
    u16 high;
  } pair;
  u64 matrix[2][3];
  sample_kind_t sample_kind;
  enum http_status status;
  void *context;
  const volatile u32 generation;
};

/* Member names long enough that generated lines must drop their comment or break over several lines. */
struct long_names {
  u32 member_name_long_enough_that_its_type_comment_would_overflow_the_formatter_line;
  u64 member_name_so_long_that_its_layout_object_must_break_over_several_lines[2];
};

#endif

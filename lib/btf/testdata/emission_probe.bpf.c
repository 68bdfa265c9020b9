/*
 * Probes which C types clang -g puts into a BPF object's .BTF. A type or enumerator whose name starts with
 * emitted_ / EMITTED_ must be in the BTF; one starting with dropped_ / DROPPED_ must not.
 */
#define SEC(name) __attribute__((section(name), used))

#define DROPPED_DEFINE 5

/* Named enum used only as the type of a member of an emitted struct. */
enum emitted_as_member { AS_MEMBER_A = 1 };
struct emitted_holder {
  enum emitted_as_member kind;
  unsigned int value;
};

/* Used nowhere. */
enum dropped_unused { UNUSED_A = 1 };
enum { DROPPED_ANON_UNUSED = 2 };
struct dropped_unused_struct {
  int a;
};

/* Only their constants are used, in code. */
enum dropped_in_code { IN_CODE_A = 3 };
enum { DROPPED_ANON_IN_CODE = 4 };

/* Only used by locals, casts and sizeof. */
enum dropped_local { LOCAL_A = 5 };
struct dropped_local_struct {
  int a;
  long b;
};
enum dropped_cast { CAST_A = 6 };
struct dropped_sizeof_struct {
  char c[24];
};

/* Ways to force emission. */
enum emitted_const_volatile { CONST_VOLATILE_A = 7 };
const volatile enum emitted_const_volatile const_volatile_var = CONST_VOLATILE_A;

enum emitted_used_attr { USED_ATTR_A = 8 };
enum emitted_used_attr used_attr_var __attribute__((used));

enum emitted_static_used { STATIC_USED_A = 9 };
static const volatile enum emitted_static_used static_used_var __attribute__((used));

enum dropped_static { STATIC_A = 10 };
static enum dropped_static static_var;

enum emitted_custom_section { CUSTOM_SECTION_A = 11 };
enum emitted_custom_section custom_section_var SEC(".omniprof.types");

enum emitted_pointee { POINTEE_A = 12 };
enum emitted_pointee *pointee_var SEC(".omniprof.types");

typedef enum { EMITTED_ANON_TYPEDEF = 13 } anon_typedef_t;
struct emitted_typedef_holder {
  anon_typedef_t kind;
};
struct emitted_typedef_holder typedef_holder_var SEC(".omniprof.types");

enum { EMITTED_ANON_VAR = 14 } anon_var SEC(".omniprof.types");

enum emitted_param { PARAM_A = 15 };
__attribute__((noinline)) int global_subprog(enum emitted_param p) {
  return p + 1;
}

/* What clang does with values a 32-bit BTF enumerator cannot hold. */
enum negative { NEGATIVE_ONE = -1, NEGATIVE_TWO = 2 };
enum wide { WIDE_SMALL = 1, WIDE_BIG = 0x100000002ULL };
struct value_holder {
  enum negative negative;
  enum wide wide;
} value_holder_var SEC(".omniprof.types");

struct {
  int type;
  int max_entries;
  unsigned int *key;
  struct emitted_holder *value;
} holder_map SEC(".maps");

SEC("perf_event") int probe(void *ctx) {
  volatile struct dropped_local_struct local = {.a = 1};
  volatile enum dropped_local local_enum = LOCAL_A;
  int r = IN_CODE_A + DROPPED_ANON_IN_CODE + (int)(enum dropped_cast)CAST_A + sizeof(struct dropped_sizeof_struct);
  static_var = STATIC_A;
  return global_subprog(PARAM_A) + r + local.a + local_enum + DROPPED_DEFINE + const_volatile_var;
}

char LICENSE[] SEC("license") = "GPL";

/* Types both units of the bitcode-linking fixture define. */
#ifndef LINK_SHARED_H
#define LINK_SHARED_H

#define SEC(name) __attribute__((section(name), used))

enum shared_kind { SHARED_KIND_A = 1, SHARED_KIND_B = 2 };
struct shared_s {
  enum shared_kind kind;
  unsigned long long value;
};

#endif

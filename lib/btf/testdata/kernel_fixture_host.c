/* Host side of the kernel fixture: prints "struct path offset size" for each field the tests look up. */
#include <stddef.h>
#include <stdio.h>

#include "kernel_fixture.h"

#define FIELD(s, path) printf("%s %s %zu %zu\n", #s, #path, offsetof(struct s, path), sizeof(((struct s *)0)->path))

int main(void) {
  FIELD(task_struct, flags);
  FIELD(task_struct, stack);
  FIELD(task_struct, pid);
  FIELD(task_struct, pid_alias);
  FIELD(task_struct, tgid);
  FIELD(task_struct, signal);
  FIELD(task_struct, comm);
  FIELD(task_struct, thread);
  FIELD(task_struct, thread.fsbase);
  FIELD(signal_struct, live);
  FIELD(signal_struct, live.counter);
  return 0;
}

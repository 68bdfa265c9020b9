/*
 * A C fixture for the CFI reader's tests, compiled with and without frame pointers: a call chain, a qsort
 * callback, a signal handler (so the binary links the rt_sigreturn path), variable-length frames that need
 * an rbp-based CFA even without frame pointers, and calls through the PLT.
 */
#include <alloca.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile long sink;

__attribute__((noinline)) long c(long n) {
  long sum = 0;
  for (long i = 0; i < n; i++) sum += i * i;
  return sum;
}

__attribute__((noinline)) long b(long n) { return c(n) + 1; }
__attribute__((noinline)) long a(long n) { return b(n) * 2; }

static int compare(const void *x, const void *y) {
  long l = *(const long *)x, r = *(const long *)y;
  return (l > r) - (l < r);
}

__attribute__((noinline)) long variable_frame(long n) {
  long *buffer = alloca((size_t)n * sizeof(long));
  for (long i = 0; i < n; i++) buffer[i] = n - i;
  qsort(buffer, (size_t)n, sizeof(long), compare);
  return buffer[0];
}

__attribute__((noinline)) long many_registers(long n, long m) {
  long values[8];
  for (int i = 0; i < 8; i++) values[i] = n * i + m;
  long total = 0;
  for (int i = 0; i < 8; i++) total += values[i] * b(values[(i + 3) & 7] & 15);
  return total;
}

static void on_signal(int signo) { sink = a(signo); }

int main(int argc, char **argv) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_signal;
  sigaction(SIGUSR1, &action, NULL);
  long n = argc > 1 ? atol(argv[1]) : 10;
  sink = a(n) + variable_frame(n) + many_registers(n, argc);
  printf("%ld\n", (long)sink);
  if (argc > 2) raise(SIGUSR1);
  return 0;
}

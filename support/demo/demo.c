// The built-in demo workload of `omniprof record --demo`: a small program whose profile is easy to
// check by eye. One thread computes checksums (user-space CPU: main -> compute -> checksum_block ->
// mix_round), another writes to /dev/null (kernel CPU under io_worker -> write_block -> write).
// Built with frame pointers by build.ts. Usage: omniprof-demo [SECONDS]
#include <fcntl.h>
#include <sys/prctl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile int running = 1;
static volatile uint64_t sink;

__attribute__((noinline)) static uint64_t mix_round(uint64_t x, uint64_t key)
{
  for (int i = 0; i < 64; i++)
    x = (x ^ key) * 0x9e3779b97f4a7c15ull + (x >> 29);
  return x;
}

__attribute__((noinline)) static uint64_t checksum_block(const uint8_t *block, size_t size)
{
  uint64_t sum = 0;
  for (size_t i = 0; i + 8 <= size; i += 8) {
    uint64_t word;
    memcpy(&word, block + i, sizeof(word));
    sum = mix_round(sum, word);
  }
  return sum;
}

__attribute__((noinline)) static void compute(void)
{
  static uint8_t block[4096];
  for (size_t i = 0; i < sizeof(block); i++)
    block[i] = (uint8_t)i;
  while (running)
    sink += checksum_block(block, sizeof(block));
}

__attribute__((noinline)) static void write_block(int fd, const char *buffer, size_t size)
{
  if (write(fd, buffer, size) < 0)
    abort();
}

static void *io_worker(void *unused)
{
  (void)unused;
  static char buffer[65536];
  int fd = open("/dev/null", O_WRONLY);
  if (fd < 0)
    abort();
  while (running)
    write_block(fd, buffer, sizeof(buffer));
  close(fd);
  return NULL;
}

static void *stopper(void *arg)
{
  unsigned seconds = (unsigned)(uintptr_t)arg;
  sleep(seconds);
  running = 0;
  return NULL;
}

int main(int argc, char **argv)
{
  unsigned seconds = argc > 1 ? (unsigned)atoi(argv[1]) : 5;
  // Run from an in-memory file, the program would be named after its descriptor number.
  prctl(PR_SET_NAME, "omniprof-demo");
  pthread_t io, timer;
  pthread_create(&io, NULL, io_worker, NULL);
  pthread_create(&timer, NULL, stopper, (void *)(uintptr_t)seconds);
  compute();
  pthread_join(io, NULL);
  pthread_join(timer, NULL);
  return 0;
}

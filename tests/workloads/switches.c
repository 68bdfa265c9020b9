// Test workload for off-CPU recording: two threads of one process pass a byte back and forth through two
// pipes, both pinned to the machine's last CPU, and each does a fixed amount of work (WORK iterations of
// `work`) before passing it on. So the process switches context at every handoff, tens of thousands of
// times a second (about 35,000 on a 2-CPU VM with the default WORK), and keeps its CPU busy: whatever a
// profiler adds to each switch, or runs on that CPU, shows as fewer round trips per second, while the
// other CPUs are left to the profiler. Off-CPU, the threads wait under known chains:
//   main -> ping -> wait_ball -> read      (the main thread, which serves and counts the round trips)
//   pong_thread -> pong -> wait_ball -> read
// Every 100 ms the main thread prints `t_ns=NS round_trips=N switches=S cpu_ns=C`: CLOCK_MONOTONIC (the
// clock BPF programs stamp with), the round trips so far, the process's context switches so far
// (voluntary and involuntary, every thread) and its CPU time so far (every thread). A benchmark takes the
// rate of any window from these lines, from the workload itself: how much a profiler attached during that
// window slowed it down, and how much of its threads' time in the window was off-CPU. At the end it
// prints `round_trips=N seconds=S rate=R`. Usage: switches [SECONDS [WORK]] (wall-clock seconds, default
// 10; WORK default 20000)
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int to_pong[2];
static int to_ping[2];

static uint64_t monotonic_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t process_cpu_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static long process_switches(void)
{
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_nvcsw + usage.ru_nivcsw;
}

// Blocks until the other thread's byte arrives; returns it. noinline and the use of the result after each
// call keep every function its own frame (no inlining, no tail call), so the chains above are what a
// stack shows.
__attribute__((noinline)) static char wait_ball(int fd)
{
  char ball;
  if (read(fd, &ball, 1) != 1) {
    perror("switches: read");
    exit(1);
  }
  return ball;
}

__attribute__((noinline)) static void throw_ball(int fd, char ball)
{
  if (write(fd, &ball, 1) != 1) {
    perror("switches: write");
    exit(1);
  }
}

static long work_iterations = 20000;
static volatile uint64_t sink;

// The work each thread does with the ball before passing it on: a fixed number of steps, not a time,
// so that a slower CPU (one a profiler also uses) shows as fewer round trips.
__attribute__((noinline)) static void work(void)
{
  uint64_t x = sink;
  for (long i = 0; i < work_iterations; i++)
    x = x * 2862933555777941757ull + 3037000493ull;
  sink = x;
}

// Sends the ball back until it comes as 0, the end.
__attribute__((noinline)) static int pong(void)
{
  for (;;) {
    char ball = wait_ball(to_pong[0]);
    work();
    throw_ball(to_ping[1], ball);
    if (ball == 0) return 0;
  }
}

// Puts the calling thread on the last online CPU. Both threads there hand the ball over on one CPU,
// without idling in between: left to the scheduler, they run on one CPU in some runs and on two in
// others, where each handoff waits for an idle CPU to wake up, at rates several times apart and faster
// when anything else keeps the CPUs awake (a profiler, say), so a rate could not be compared between
// runs.
static void pin_to_last_cpu(void)
{
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 2) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpus - 1, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) perror("switches: pin");
}

static void *pong_thread(void *unused)
{
  (void)unused;
  pin_to_last_cpu();
  int result = pong();
  return (void *)(intptr_t)result;
}

// One round trip: the ball out and back.
__attribute__((noinline)) static int ping(char ball)
{
  work();
  throw_ball(to_pong[1], ball);
  return wait_ball(to_ping[0]) == ball;
}

int main(int argc, char **argv)
{
  double seconds = argc > 1 ? atof(argv[1]) : 10;
  if (argc > 2) work_iterations = atol(argv[2]);
  if (pipe(to_pong) != 0 || pipe(to_ping) != 0) {
    perror("switches: pipe");
    return 1;
  }
  pin_to_last_cpu();
  pthread_t thread;
  if (pthread_create(&thread, NULL, pong_thread, NULL) != 0) {
    perror("switches: pthread_create");
    return 1;
  }
  uint64_t start = monotonic_ns();
  uint64_t end = start + (uint64_t)(seconds * 1e9);
  uint64_t next_report = start;
  uint64_t round_trips = 0;
  for (;;) {
    // The clock is read through the vDSO, no system call: cheap next to a round trip's four and its work.
    uint64_t now = monotonic_ns();
    if (now >= next_report) {
      printf("t_ns=%llu round_trips=%llu switches=%ld cpu_ns=%llu\n", (unsigned long long)now,
             (unsigned long long)round_trips, process_switches(), (unsigned long long)process_cpu_ns());
      fflush(stdout);
      next_report += 100000000u;
      if (now >= end) break;
    }
    if (!ping(1)) {
      fprintf(stderr, "switches: the ball came back changed\n");
      return 1;
    }
    round_trips++;
  }
  ping(0);
  pthread_join(thread, NULL);
  double elapsed = (monotonic_ns() - start) / 1e9;
  printf("round_trips=%llu seconds=%.3f rate=%.0f\n", (unsigned long long)round_trips, elapsed,
         round_trips / elapsed);
  return 0;
}

// What the kernel charges for the system calls a zero-work proxy cannot avoid,
// on loopback TCP on this machine: µs per write, read and epoll_wait, for
// payloads of the sizes given (bytes). bench/e2e/syscalls.sh compiles and runs
// it and turns the figures into the physical limit of requests per CPU-second.
//
//   cc -O2 -o syscost syscost.c -lpthread && ./syscost 16 4096
//
// Two measurements per size, one output line per call ("name size µs"), and
// getpeername, a system call that does almost nothing (what entering and
// leaving the kernel costs here):
// - batched: one thread, CONNS connected pairs (TCP_NODELAY, as the proxies
//   set), the receiving ends in one epoll set; per round a write on every
//   pair, one epoll_wait that returns all of them, a read on each. Nobody
//   sleeps, so no write pays a wake-up: the cheapest case, a proxy whose
//   every epoll_wait returns a full batch. Each phase is timed as a whole in
//   the thread's CPU time (one clock read per CONNS calls: the clock's own
//   cost stays out, and so does time spent preempted by other tasks).
// - ping-pong: two threads over one pair, each blocked in epoll_wait until the
//   other writes: every write wakes a sleeping thread and every epoll_wait
//   sleeps. CPU time per thread per exchange (CLOCK_THREAD_CPUTIME_ID) =
//   one write + one epoll_wait + one read + a context switch: the costliest
//   case, a proxy that handles one request per wake-up.
// On loopback the sender's write also runs the receiver's TCP input (softirq
// in the sender's context), so "write" is the whole transfer and "read" only
// the copy out; a proxy pays both for each direction it relays. CPU time is
// what /proc charges the task (this kernel: tick accounting, no IRQ time
// accounting, so softirq work in the task's context counts as its own); in a
// VM it includes time the hypervisor stole.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CONNS 64
#define ROUNDS 4000
#define PINGS 40000

static double now_us (clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void die (const char *what) { perror(what); exit(1); }

// a connected loopback TCP pair: fds[0] the connecting end, fds[1] the accepted one
static void tcp_pair (int lst, struct sockaddr_in *addr, int fds[2]) {
  int one = 1;
  fds[0] = socket(AF_INET, SOCK_STREAM, 0);
  if (fds[0] < 0 || connect(fds[0], (struct sockaddr *)addr, sizeof *addr) < 0) die("connect");
  fds[1] = accept(lst, NULL, NULL);
  if (fds[1] < 0) die("accept");
  setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fds[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void read_all (int fd, char *buf, size_t n) {
  while (n > 0) {
    ssize_t r = read(fd, buf, n);
    if (r <= 0) die("read");
    n -= (size_t)r;
  }
}

static void batched (int lst, struct sockaddr_in *addr, size_t size) {
  static int pairs[CONNS][2];
  char *buf = malloc(size);
  memset(buf, 'x', size);
  int ep = epoll_create1(0);
  struct epoll_event evs[CONNS];
  for (int i = 0; i < CONNS; i++) {
    tcp_pair(lst, addr, pairs[i]);
    struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
    epoll_ctl(ep, EPOLL_CTL_ADD, pairs[i][1], &ev);
  }
  double tw = 0, te = 0, tr = 0, tp = 0, t;
  long nw = 0, ne = 0, nr = 0;
  for (int round = 0; round < ROUNDS + 200; round++) {
    int warm = round < 200; // the first rounds grow socket buffers and caches
    t = now_us(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < CONNS; i++) if (write(pairs[i][0], buf, size) != (ssize_t)size) die("write");
    double t1 = now_us(CLOCK_THREAD_CPUTIME_ID);
    int got = 0, n;
    while (got < CONNS) {
      n = epoll_wait(ep, evs, CONNS, -1);
      if (n < 0) die("epoll_wait");
      got += n;
      if (!warm) ne++;
    }
    double t2 = now_us(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < CONNS; i++) read_all(pairs[i][1], buf, size);
    double t3 = now_us(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < CONNS; i++) {
      struct sockaddr_in peer;
      socklen_t plen = sizeof peer;
      getpeername(pairs[i][1], (struct sockaddr *)&peer, &plen);
    }
    double t4 = now_us(CLOCK_THREAD_CPUTIME_ID);
    if (warm) continue;
    tw += t1 - t; te += t2 - t1; tr += t3 - t2; tp += t4 - t3;
    nw += CONNS; nr += CONNS;
  }
  printf("batched_write %zu %.3f\n", size, tw / nw);
  printf("batched_read %zu %.3f\n", size, tr / nr);
  printf("batched_epoll_wait %zu %.3f %.1f\n", size, te / ne, (double)nw / ne); // µs per call, events per call
  printf("getpeername %zu %.3f\n", size, tp / nr); // what uWS's getRemoteAddress costs per call: the price of a cheap syscall
  for (int i = 0; i < CONNS; i++) { close(pairs[i][0]); close(pairs[i][1]); }
  close(ep);
  free(buf);
}

struct side { int fd; size_t size; int first; double cpu_us; };

// one side of the ping-pong: wait, read, write back (the first side writes first)
static void *pong (void *arg) {
  struct side *s = arg;
  char *buf = malloc(s->size);
  memset(buf, 'y', s->size);
  int ep = epoll_create1(0);
  struct epoll_event ev = { .events = EPOLLIN }, out;
  epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &ev);
  double t0 = 0;
  for (int i = 0; i < PINGS + 1000; i++) {
    if (i == 1000) t0 = now_us(CLOCK_THREAD_CPUTIME_ID);
    if (s->first && write(s->fd, buf, s->size) != (ssize_t)s->size) die("write");
    if (epoll_wait(ep, &out, 1, -1) != 1) die("epoll_wait");
    read_all(s->fd, buf, s->size);
    if (!s->first && write(s->fd, buf, s->size) != (ssize_t)s->size) die("write");
  }
  s->cpu_us = (now_us(CLOCK_THREAD_CPUTIME_ID) - t0) / PINGS;
  close(ep);
  free(buf);
  return NULL;
}

static void ping_pong (int lst, struct sockaddr_in *addr, size_t size) {
  int fds[2];
  tcp_pair(lst, addr, fds);
  struct side a = { fds[0], size, 1, 0 }, b = { fds[1], size, 0, 0 };
  pthread_t ta, tb;
  pthread_create(&tb, NULL, pong, &b);
  pthread_create(&ta, NULL, pong, &a);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  // per exchange and thread: write (waking the other) + epoll_wait (sleeping) + read
  printf("pingpong_write_wait_read %zu %.3f\n", size, (a.cpu_us + b.cpu_us) / 2);
  close(fds[0]); close(fds[1]);
}

int main (int argc, char **argv) {
  int lst = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = 0 };
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  setsockopt(lst, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(lst, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(lst, CONNS * 2) < 0) die("listen");
  socklen_t len = sizeof addr;
  getsockname(lst, (struct sockaddr *)&addr, &len);
  for (int i = 1; i < argc; i++) {
    size_t size = (size_t)atol(argv[i]);
    if (size == 0 || size > 1 << 20) { fprintf(stderr, "syscost: bad size %s (bytes, 1..1048576)\n", argv[i]); return 2; }
    batched(lst, &addr, size);
    ping_pong(lst, &addr, size);
  }
  return 0;
}

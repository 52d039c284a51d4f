/* A power stream client of 8 daemons (zeus/power_stream.h), one of them SIGKILLed and started again
 * every few seconds: the client's memory must stay flat (no growth per reconnect) while the other
 * seven stream on. Each daemon is a child process (4 simulated GPUs, the h100 profile's noise, so
 * every GPU sends an event every ~100 ms), so the resident memory measured is the client's alone.
 *
 *   bench_power_stream [SECONDS [RESTART_EVERY_S]]      default 30 s, a restart every 3 s
 *
 * Prints the resident set after the warm-up and at the end, events per second, and the restarted
 * server's connections. Target: growth under 256 KiB. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zeus.h>

#include "zeus/daemon.h"

#define NSERVERS 8

static char dir[] = "/tmp/zeus-bench-stream-XXXXXX";
static char socks[NSERVERS][160];
static pid_t pids[NSERVERS];

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, res = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
    fclose(f);
  }
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* `bench_power_stream --serve PATH`: a daemon on PATH until killed. */
static int serve(const char *path) {
  unlink(path);
  zeus_devices_opts dopts = {.backend = "sim"};
  zeus_daemon_opts o;
  zeus_daemon_opts_init(&o);
  o.socket_path = path;
  o.devices = &dopts;
  zeus_daemon *d;
  if (zeus_daemon_open(&d, &o)) {
    fprintf(stderr, "daemon at %s: %s\n", path, zeus_errmsg());
    return 1;
  }
  for (;;) pause();
}

/* A daemon in a fresh process (exec, not only fork: the client's thread may hold locks that a
 * forked copy would inherit), until it is killed. */
static pid_t spawn(int i) {
  fflush(NULL);
  pid_t p = fork();
  if (p != 0) return p;
  execl("/proc/self/exe", "bench_power_stream", "--serve", socks[i], (char *)NULL);
  _exit(127);
}

static void wait_socket(int i) {
  for (int k = 0; k < 200 && access(socks[i], F_OK) != 0; k++) usleep(10000);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--serve") == 0) return serve(argv[2]);
  double duration = argc > 1 ? atof(argv[1]) : 30, every = argc > 2 ? atof(argv[2]) : 3;
  if (duration < 5 || every < 0.5) {
    fprintf(stderr, "usage: bench_power_stream [SECONDS >= 5 [RESTART_EVERY_S >= 0.5]]\n");
    return 2;
  }
  setenv("ZEUS_SIM_GPUS", "4", 1);
  setenv("ZEUS_SIM_CLOCK", "wall", 1);
  setenv("ZEUS_SIM_HARDWARE", "h100", 1);
  setenv("ZEUS_LOG_LEVEL", "error", 1);
  if (!mkdtemp(dir)) return 1;
  for (int i = 0; i < NSERVERS; i++) {
    snprintf(socks[i], sizeof socks[i], "%s/n%d.sock", dir, i);
    pids[i] = spawn(i);
  }
  for (int i = 0; i < NSERVERS; i++) wait_socket(i);

  char addr[NSERVERS][170];
  zeus_power_stream_server sv[NSERVERS];
  for (int i = 0; i < NSERVERS; i++) {
    snprintf(addr[i], sizeof addr[i], "unix:%s", socks[i]);
    sv[i] = (zeus_power_stream_server){.address = addr[i], .cpu_ids = ""};
  }
  zeus_power_stream_opts o;
  zeus_power_stream_opts_init(&o);
  o.servers = sv;
  o.num_servers = NSERVERS;
  o.reconnect_delay_s = 0.1;
  o.max_reconnect_delay_s = 0.5;
  o.queue_max = 512; /* drained all the time; small, so that its pages are all touched in the warm-up */
  zeus_power_stream *ps;
  if (zeus_power_stream_open(&ps, &o)) {
    fprintf(stderr, "%s\n", zeus_errmsg());
    return 1;
  }
  printf("power stream client of %d daemons (4 simulated GPUs each), daemon 0 SIGKILLed and restarted every "
         "%.1f s, %.0f s:\n",
         NSERVERS, every, duration);
  double t0 = mono(), next_restart = t0 + every, warm = t0 + 5;
  long rss_warm = 0, rss_max = 0;
  unsigned long long events = 0, events_after_warm = 0;
  int restarts = 0;
  zeus_power_stream_event ev;
  while (mono() - t0 < duration) {
    for (double wait = 0.05; zeus_power_stream_next(ps, wait, &ev) == ZEUS_OK; wait = 0) { /* what is queued */
      events++;
      if (rss_warm) events_after_warm++;
    }
    double now = mono();
    if (now >= next_restart) {
      kill(pids[0], SIGKILL);
      waitpid(pids[0], NULL, 0);
      pids[0] = spawn(0);
      restarts++;
      /* the next restart is counted from when this one serves again */
      next_restart += every;
    }
    if (getenv("BENCH_DEBUG")) {
      static double last;
      if (now - last > 0.5) {
        zeus_power_stream_status d;
        zeus_power_stream_server_status(ps, 0, &d);
        fprintf(stderr, "%.1f connected %d connects %llu failures %llu events %llu: %s\n", now - t0, d.connected,
                (unsigned long long)d.connects, (unsigned long long)d.failures, (unsigned long long)d.events,
                d.last_error);
        last = now;
      }
    }
    long r = rss_kib();
    if (!rss_warm && now >= warm) rss_warm = r;
    if (rss_warm && r > rss_max) rss_max = r;
  }
  long rss_end = rss_kib();
  double took = mono() - t0 - 5;
  zeus_power_stream_status s0, s;
  zeus_power_stream_server_status(ps, 0, &s0);
  unsigned long long other_failures = 0;
  for (int i = 1; i < NSERVERS; i++) {
    zeus_power_stream_server_status(ps, (size_t)i, &s);
    other_failures += s.failures;
  }
  uint64_t dropped = zeus_power_stream_dropped(ps);
  zeus_power_stream_close(ps);
  for (int i = 0; i < NSERVERS; i++) {
    kill(pids[i], SIGKILL);
    waitpid(pids[i], NULL, 0);
    unlink(socks[i]);
  }
  rmdir(dir);
  printf("  resident memory after 5 s        %8ld KiB\n", rss_warm);
  printf("  resident memory at the end       %8ld KiB (max %ld KiB, growth %+ld KiB; target < 256)\n", rss_end,
         rss_max, rss_end - rss_warm);
  printf("  events                           %8llu (%.0f/s after the warm-up), %llu dropped\n", events,
         events_after_warm / took, (unsigned long long)dropped);
  printf("  daemon 0: %d restarts, %llu connections, %llu lost; the 7 others: %llu lost\n", restarts,
         (unsigned long long)s0.connects, (unsigned long long)s0.failures, other_failures);
  return rss_end - rss_warm < 256 && other_failures == 0 && s0.connects >= (unsigned long long)restarts ? 0 : 1;
}

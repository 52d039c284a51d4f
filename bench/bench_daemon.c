/* Round trips to zeus daemon: libzeus's client (one persistent socket) against an in-process daemon
 * over simulated GPUs, on the Unix socket and on TCP loopback. Prints median and 99th percentile
 * per call; the same call on the simulated GPU directly is the baseline. Target: a round trip over
 * the Unix socket at most 100 us. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zeus.h>

#include "device/zeusd_client.h"

#define N 20000

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double samples[N];

static void report(const char *what) {
  qsort(samples, N, sizeof samples[0], cmp);
  printf("  %-44s median %7.1f us   p99 %7.1f us\n", what, samples[N / 2], samples[N * 99 / 100]);
}

static void run(zeus__zeusd *z, const char *label) {
  char what[96];
  for (int i = 0; i < 200; i++) zeus__zeusd_get(z, "/time", -1, NULL); /* warm up */
  for (int i = 0; i < N; i++) {
    double t = now_us();
    if (zeus__zeusd_get(z, "/time", -1, NULL)) { fprintf(stderr, "%s\n", zeus_errmsg()); exit(1); }
    samples[i] = now_us() - t;
  }
  snprintf(what, sizeof what, "%s GET /time", label);
  report(what);
  for (int i = 0; i < N; i++) {
    double t = now_us();
    json_t *j;
    if (zeus__zeusd_get(z, "/gpu/get_power_limit?gpu_ids=0", 0, &j)) {
      fprintf(stderr, "%s\n", zeus_errmsg());
      exit(1);
    }
    samples[i] = now_us() - t;
    json_decref(j);
  }
  snprintf(what, sizeof what, "%s GET /gpu/get_power_limit (+ JSON)", label);
  report(what);
  for (int i = 0; i < N; i++) {
    char extra[48];
    snprintf(extra, sizeof extra, "power_limit_mw=%u", i % 2 ? 200000u : 250000u);
    double t = now_us();
    if (zeus__zeusd_write(z, "set_power_limit", 0, extra)) { fprintf(stderr, "%s\n", zeus_errmsg()); exit(1); }
    samples[i] = now_us() - t;
  }
  snprintf(what, sizeof what, "%s POST /gpu/set_power_limit (leased)", label);
  report(what);
  zeus__zeusd_release(z);
}

int main(void) {
  setenv("ZEUS_SIM_GPUS", "1", 1);
  char dir[] = "/tmp/zeus-bench-daemon-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char sock[128];
  snprintf(sock, sizeof sock, "%s/zeusd.sock", dir);
  zeus_devices_opts dopts = {.backend = "sim"};
  zeus_daemon_opts o;
  zeus_daemon_opts_init(&o);
  o.socket_path = sock;
  o.tcp_address = "127.0.0.1:0";
  o.devices = &dopts;
  zeus_daemon *d;
  if (zeus_daemon_open(&d, &o)) { fprintf(stderr, "daemon: %s\n", zeus_errmsg()); return 1; }
  printf("zeus daemon round trips (%d calls each; in-process daemon on 1 simulated GPU):\n", N);
  /* Baseline: the same setting on the simulated GPU, no daemon. */
  zeus_devices *dev;
  if (zeus_devices_open(&dev, &dopts)) return 1;
  for (int i = 0; i < N; i++) {
    double t = now_us();
    zeus_gpu_set_power_limit(dev, 0, i % 2 ? 200000u : 250000u);
    samples[i] = now_us() - t;
  }
  report("direct zeus_gpu_set_power_limit (sim)");
  zeus_devices_close(dev);
  char spec[160];
  snprintf(spec, sizeof spec, "unix:%s", sock);
  zeus__zeusd *z;
  if (zeus__zeusd_open(&z, spec, false, false) || !z) return 1;
  run(z, "unix");
  zeus__zeusd_close(z);
  snprintf(spec, sizeof spec, "tcp:127.0.0.1:%d", zeus_daemon_tcp_port(d));
  if (zeus__zeusd_open(&z, spec, false, false) || !z) return 1;
  run(z, "tcp ");
  zeus__zeusd_close(z);
  zeus_daemon_close(d);
  rmdir(dir);
  return 0;
}

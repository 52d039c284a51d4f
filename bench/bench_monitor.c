/* Benchmark: the cost of a begin+end window pair, on the sim backend and through the fake NVML,
 * against the cost of the backend calls the pair itself makes (two energy reads and two clock
 * reads per GPU), measured in the same run. Prints ns per pair. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zeus.h>

static double now_ns(void) { return (double)zeus_monotonic_ns(); }

/* ns per call of the device reads a window pair performs: per bound, now() + energy of each GPU. */
static double backend_ns(zeus_devices *d, unsigned ngpu, int iters) {
  uint64_t mj, sink = 0;
  double t0 = now_ns();
  for (int i = 0; i < iters; i++) {
    for (int b = 0; b < 2; b++) {
      sink += (uint64_t)zeus_devices_now(d);
      for (unsigned g = 0; g < ngpu; g++) {
        zeus_gpu_total_energy(d, g, &mj);
        sink += mj;
      }
    }
  }
  double ns = (now_ns() - t0) / iters;
  if (sink == 42) puts("");
  return ns;
}

static double pair_ns(zeus_monitor *m, int iters) {
  zeus_measurement r;
  double t0 = now_ns();
  for (int i = 0; i < iters; i++) {
    zeus_monitor_begin_window(m, "bench", false);
    zeus_monitor_end_window(m, "bench", false, &r);
  }
  return (now_ns() - t0) / iters;
}

static int run(const char *label, zeus_devices_opts *o, int iters) {
  zeus_devices *d;
  if (zeus_devices_open(&d, o) != ZEUS_OK) {
    printf("%-28s skipped: %s\n", label, zeus_errmsg());
    return 0;
  }
  static const unsigned none[1];
  zeus_monitor_opts mo = {.devices = d, .cpu_indices = none, .num_cpu_indices = 0};
  zeus_monitor *m;
  if (zeus_monitor_open(&m, &mo) != ZEUS_OK) {
    printf("%-28s failed: %s\n", label, zeus_errmsg());
    zeus_devices_close(d);
    return 1;
  }
  unsigned n = zeus_gpu_count(d);
  pair_ns(m, iters / 10); /* warm up */
  double best_pair = 1e18, best_be = 1e18;
  for (int rep = 0; rep < 5; rep++) {
    double p = pair_ns(m, iters), b = backend_ns(d, n, iters);
    if (p < best_pair) best_pair = p;
    if (b < best_be) best_be = b;
  }
  printf("%-28s GPUs %u  pair %8.1f ns  backend calls %8.1f ns  overhead %7.1f ns per pair (target < 1000)\n", label,
         n, best_pair, best_be, best_pair - best_be);
  zeus_monitor_close(m);
  zeus_devices_close(d);
  return 0;
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 200000;
  setenv("ZEUS_SIM_CLOCK", "virtual", 1);
  setenv("ZEUS_RAPL_ROOT", "/nonexistent", 1);
  printf("monitor begin+end window pair (best of 5 runs of %d pairs)\n", iters);
  int rc = 0;
  for (unsigned g = 1; g <= 4; g *= 4) {
    char label[64];
    char ngpu[8];
    snprintf(ngpu, sizeof ngpu, "%u", g);
    setenv("ZEUS_SIM_GPUS", ngpu, 1);
    zeus_devices_opts sim = {.backend = "sim", .all_devices = true};
    snprintf(label, sizeof label, "sim backend");
    rc |= run(label, &sim, iters);
    zeus_devices_opts nv = {.backend = "nvml", .nvml_library = FAKE_NVML_PATH, .all_devices = true};
    snprintf(label, sizeof label, "nvml backend (fake NVML)");
    rc |= run(label, &nv, iters);
  }
  return rc;
}

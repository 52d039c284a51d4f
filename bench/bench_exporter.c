/* Benchmark: one scrape of `zeus exporter` (read every GPU, bring the energy totals up to date,
 * write the Prometheus text) for 1 and 8 simulated GPUs, against the device reads alone in the
 * same run. The target: at most 1 ms per scrape for 8 GPUs. Prints µs per scrape. */
#include <stdio.h>
#include <stdlib.h>

#include <zeus.h>

static double now_us(void) { return (double)zeus_monotonic_ns() / 1000.0; }

/* The device reads a scrape makes, without the text: µs per round. */
static double reads_us(zeus_devices *d, unsigned n, int iters) {
  unsigned a, b, c;
  uint64_t mj, sink = 0;
  double t0 = now_us();
  for (int i = 0; i < iters; i++) {
    for (unsigned g = 0; g < n; g++) {
      zeus_gpu_total_energy(d, g, &mj);
      zeus_gpu_power(d, g, ZEUS_POWER_INSTANT, &a);
      zeus_gpu_power(d, g, ZEUS_POWER_AVERAGE, &b);
      zeus_gpu_power(d, g, ZEUS_POWER_MEMORY_AVERAGE, &c);
      zeus_gpu_power_limit_constraints(d, g, &a, &b, &c);
      zeus_gpu_get_power_limit(d, g, &a);
      zeus_gpu_current_clocks(d, g, &a, &b);
      zeus_gpu_temperature(d, g, &c);
      sink += mj + a + b + c;
    }
  }
  double us = (now_us() - t0) / iters;
  if (sink == 42) puts("");
  return us;
}

static int run(unsigned ngpus, int iters) {
  zeus_sim_config cfg = {.num_gpus = ngpus, .clock = ZEUS_SIM_CLOCK_WALL};
  zeus_devices_opts o = {.backend = "sim", .sim = &cfg, .all_devices = true};
  zeus_devices *d;
  if (zeus_devices_open(&d, &o) != ZEUS_OK) {
    printf("sim GPUs: %s\n", zeus_errmsg());
    return 1;
  }
  zeus_exporter_opts eo;
  zeus_exporter_opts_init(&eo);
  eo.devices = d;
  eo.no_http = true;
  eo.no_cpus = true;
  zeus_exporter *e;
  if (zeus_exporter_open(&e, &eo) != ZEUS_OK) {
    printf("exporter: %s\n", zeus_errmsg());
    zeus_devices_close(d);
    return 1;
  }
  double best = 1e18, best_reads = 1e18;
  size_t bytes = 0;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = now_us();
    for (int i = 0; i < iters; i++) {
      char *text;
      size_t len;
      if (zeus_exporter_render(e, &text, &len) != ZEUS_OK) return 1;
      bytes = len;
      zeus_free(text);
    }
    double us = (now_us() - t0) / iters, r = reads_us(d, ngpus, iters);
    if (us < best) best = us;
    if (r < best_reads) best_reads = r;
  }
  printf("scrape, %u sim GPU%s: %8.1f us (device reads alone %6.1f us; %zu bytes)%s\n", ngpus,
         ngpus == 1 ? " " : "s", best, best_reads, bytes,
         ngpus == 8 ? (best <= 1000 ? "  [target <= 1000 us: met]" : "  [target <= 1000 us: MISSED]") : "");
  zeus_exporter_close(e);
  zeus_devices_close(d);
  return ngpus == 8 && best > 1000;
}

int main(void) {
  int rc = run(1, 2000);
  rc |= run(8, 1000);
  return rc;
}

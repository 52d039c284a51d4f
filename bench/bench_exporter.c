/* Benchmark: one scrape of `zeus exporter` (read every GPU, bring the energy totals up to date,
 * write the Prometheus text) for 1 and 8 simulated GPUs, against the device reads alone in the
 * same run, on the "sim" backend and through the NVML backend over the fake libnvidia-ml.so.1.
 * The target: at most 1 ms per scrape for 8 simulated GPUs. Prints µs per scrape. */
#include <stdbool.h>
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

/* fake_nvml: through the NVML backend and the fake libnvidia-ml.so.1 (dlopen, field values). */
static int run(unsigned ngpus, int iters, bool fake_nvml) {
  zeus_sim_config cfg = {.num_gpus = ngpus, .clock = ZEUS_SIM_CLOCK_WALL};
  zeus_devices_opts o = {.backend = "sim", .sim = &cfg, .all_devices = true};
  char n[16];
  if (fake_nvml) {
    snprintf(n, sizeof n, "%u", ngpus);
    setenv("ZEUS_SIM_GPUS", n, 1);
    o = (zeus_devices_opts){.backend = "nvml", .nvml_library = FAKE_NVML_PATH, .all_devices = true};
  }
  const char *via = fake_nvml ? "fake NVML" : "sim";
  zeus_devices *d;
  if (zeus_devices_open(&d, &o) != ZEUS_OK) {
    printf("%s GPUs: skipped: %s\n", via, zeus_errmsg());
    return 0;
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
  printf("scrape, %u GPU%s (%-9s): %8.1f us (device reads alone %6.1f us; %zu bytes)%s\n", ngpus,
         ngpus == 1 ? " " : "s", via, best, best_reads, bytes,
         ngpus == 8 ? (best <= 1000 ? "  [target <= 1000 us: met]" : "  [target <= 1000 us: MISSED]") : "");
  zeus_exporter_close(e);
  zeus_devices_close(d);
  return ngpus == 8 && best > 1000;
}

int main(void) {
  int rc = run(1, 2000, false);
  rc |= run(8, 1000, false);
  rc |= run(8, 1000, true);
  return rc;
}

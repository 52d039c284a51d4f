/* Measurement windows against the simulated GPU's ground truth with the power's tick at every
 * phase from the energy counter's (issue 35): for the seeded test (test_window_phase.c) and the
 * benchmark (bench_window_phase.c), which print the same table.
 *
 * One sweep: a hardware profile ("h100", "h200" or a file), `offsets` phases of the power's first
 * tick after the counter's spread over the power's period (each then drifting as the profile's two
 * periods and jitters make it), one GPU at a steady full load on the virtual clock (the sampled
 * source replays its followers' reads there: monitor/sampler.c), windows of each length in
 * WS_LENS at wandering phases; each window's error against the truth, and whether it was within
 * the error bound the monitor stated. Header-only: both programs are single files. */
#ifndef ZEUS_TESTS_WINDOW_SWEEP_H
#define ZEUS_TESTS_WINDOW_SWEEP_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zeus.h>

#define WS_NLENS 6
#define WS_PER_OFFSET 12 /* windows of each length at each offset */
#define WS_MAX_OFFSETS 32
static const double WS_LENS[WS_NLENS] = {0.05, 0.1, 0.2, 0.5, 1.0, 2.0};

typedef struct ws_result {
  /* per length: errors of every window (|measured - truth| / truth), sorted; per offset too */
  double err[WS_NLENS][WS_MAX_OFFSETS * WS_PER_OFFSET];
  double off_median[WS_NLENS][WS_MAX_OFFSETS], off_worst[WS_NLENS][WS_MAX_OFFSETS];
  size_t n[WS_NLENS];
  unsigned offsets;
  size_t outside_bound, windows; /* sampled: windows whose true error exceeded the stated bound */
  char msg[256];                 /* why the sweep could not run */
} ws_result;

static int ws_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double ws_median(const double *v, size_t n) {
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Runs one sweep; 0 on success, else -1 with r->msg set. `seed` varies the tick jitter and the
 * windows' phases. */
static int ws_run(const char *hardware, zeus_energy_source src, unsigned offsets, unsigned seed, ws_result *r) {
  memset(r, 0, sizeof *r);
  if (offsets > WS_MAX_OFFSETS) offsets = WS_MAX_OFFSETS;
  r->offsets = offsets;
  for (unsigned o = 0; o < offsets; o++) {
    zeus_sim_gpu_config g;
    memset(&g, 0, sizeof g);
    if (zeus_sim_hardware_profile(hardware, &g.hw) != ZEUS_OK) {
      snprintf(r->msg, sizeof r->msg, "%s", zeus_errmsg());
      return -1;
    }
    double period = g.hw.power_tick_s > 0 ? g.hw.power_tick_s : g.hw.tick_s;
    g.hw.power_phase_s = period * o / offsets;
    g.hw.seed = seed * 1000 + o + 1;
    zeus_sim_config cfg = {.num_gpus = 1, .gpus = &g, .clock = ZEUS_SIM_CLOCK_VIRTUAL};
    zeus_devices_opts dop = {.backend = "sim", .sim = &cfg, .all_devices = true};
    zeus_devices *dev = NULL;
    if (zeus_devices_open(&dev, &dop) != ZEUS_OK) {
      snprintf(r->msg, sizeof r->msg, "%s", zeus_errmsg());
      return -1;
    }
    zeus_sim_node *node = zeus_devices_sim_node(dev);
    zeus_sim_gpu_set_load(node, 0, true);
    zeus_monitor_opts mo;
    zeus_monitor_opts_init(&mo);
    mo.devices = dev;
    mo.cpu_indices = (const unsigned[]){0};
    mo.num_cpu_indices = 0;
    mo.energy_source = src;
    mo.no_short_window_warning = true;
    zeus_monitor *m = NULL;
    if (zeus_monitor_open(&m, &mo) != ZEUS_OK) {
      snprintf(r->msg, sizeof r->msg, "%s", zeus_errmsg());
      zeus_devices_close(dev);
      return -1;
    }
    zeus_sim_idle(node, 1.0); /* the followers learn the periods */
    uint64_t rng = 0x9E3779B97F4A7C15ull * (seed * 64 + o + 1);
    for (size_t l = 0; l < WS_NLENS; l++) {
      double off_err[WS_PER_OFFSET];
      for (int k = 0; k < WS_PER_OFFSET; k++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        zeus_sim_idle(node, 0.003 + 0.15 * (double)(rng >> 11) / 9007199254740992.0); /* a wandering phase */
        double e0, e1, n0 = zeus_sim_now(node);
        zeus_sim_true_energy(node, 0, &e0);
        zeus_monitor_begin_window(m, "w", false);
        zeus_sim_idle(node, WS_LENS[l]);
        zeus_measurement meas;
        zeus_window_detail d;
        zeus_monitor_end_window_detail(m, "w", false, &meas, &d);
        zeus_sim_true_energy(node, 0, &e1);
        /* a steady load: the truth's mean power over the span times the window's own length (the
         * raw source's counter reads take time of the clock) */
        double want = (e1 - e0) / (zeus_sim_now(node) - n0) * meas.time_s;
        double e = fabs(meas.gpu_energy_j[0] - want) / want;
        off_err[k] = e;
        r->err[l][r->n[l]++] = e;
        if (src == ZEUS_ENERGY_SAMPLED) {
          r->windows++;
          if (fabs(meas.gpu_energy_j[0] - want) > d.error_bound_j[0]) {
            r->outside_bound++;
            if (getenv("WS_DEBUG"))
              fprintf(stderr, "offset %u len %.2f: error %.3f J, bound %.3f J, truth %.3f J\n", o, WS_LENS[l],
                      meas.gpu_energy_j[0] - want, d.error_bound_j[0], want);
          }
        }
      }
      qsort(off_err, WS_PER_OFFSET, sizeof *off_err, ws_cmp);
      r->off_median[l][o] = ws_median(off_err, WS_PER_OFFSET);
      r->off_worst[l][o] = off_err[WS_PER_OFFSET - 1];
    }
    zeus_monitor_close(m);
    zeus_devices_close(dev);
  }
  for (size_t l = 0; l < WS_NLENS; l++) qsort(r->err[l], r->n[l], sizeof r->err[l][0], ws_cmp);
  return 0;
}

/* The worst of the per-offset medians of length l. */
static double ws_worst_median(const ws_result *r, size_t l) {
  double w = 0;
  for (unsigned o = 0; o < r->offsets; o++) w = fmax(w, r->off_median[l][o]);
  return w;
}

/* Prints one row per window length: median and worst over all offsets, the worst offset's median. */
static void ws_print(const char *title, const ws_result *r) {
  printf("%s\n  %-8s %10s %10s %16s\n", title, "window", "median", "worst", "worst offset med");
  for (size_t l = 0; l < WS_NLENS; l++)
    printf("  %5.0f ms %9.3f%% %9.3f%% %15.3f%%\n", WS_LENS[l] * 1e3, 100 * ws_median(r->err[l], r->n[l]),
           100 * r->err[l][r->n[l] - 1], 100 * ws_worst_median(r, l));
  if (r->windows)
    printf("  true error beyond the stated bound: %zu of %zu windows (%.2f %%)\n", r->outside_bound, r->windows,
           100.0 * r->outside_bound / r->windows);
}

#endif

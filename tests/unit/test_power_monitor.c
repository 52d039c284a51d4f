/* power monitor (zeus/power_monitor.h): series per GPU and domain, the sampling thread's period,
 * bounded storage, range queries, integrals, temperature, the epoch time base, the nvml backend. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <time.h>

#include "test_util.h"

#include <zeus.h>

typedef struct fixture {
  zeus_devices *dev;
  zeus_sim_node *node;
  zeus_sim_gpu_config gpus[4];
  zeus_sim_config cfg;
} fixture;

static void fx_open(fixture *f, unsigned n, zeus_sim_clock_kind clock) {
  memset(f, 0, sizeof *f);
  for (unsigned i = 0; i < n; i++) {
    f->gpus[i].model = ZEUS_SIM_DVFS;
    f->gpus[i].time_scale = 1.0 + 0.1 * i;
  }
  f->cfg.num_gpus = n;
  f->cfg.gpus = f->gpus;
  f->cfg.clock = clock;
  zeus_devices_opts o = {.backend = "sim", .sim = &f->cfg, .all_devices = true};
  assert_zeus_ok(zeus_devices_open(&f->dev, &o));
  f->node = zeus_devices_sim_node(f->dev);
  assert_non_null(f->node);
}

static double truth(fixture *f, unsigned g) {
  double j;
  assert_zeus_ok(zeus_sim_true_energy(f->node, g, &j));
  return j;
}

static zeus_power_monitor *pm_open(fixture *f, zeus_power_monitor_opts o) {
  o.devices = f->dev;
  zeus_power_monitor *pm;
  assert_zeus_ok(zeus_power_monitor_open(&pm, &o));
  return pm;
}

#define IDLE_MW 30000u /* the default DVFS model's idle power */
#define D(x) ZEUS_POWER_MONITOR_DOMAIN(x)

/* Auto domains are those every GPU reads: the simulated GPU has instant and 1-second average
 * power, no memory power; each series starts with the sample taken at open. */
static void power_monitor_auto_domains_are_what_every_gpu_reads(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 2, ZEUS_SIM_CLOCK_VIRTUAL);
  zeus_power_monitor *pm = pm_open(&f, (zeus_power_monitor_opts){.no_thread = true});
  assert_int_equal(zeus_power_monitor_domains(pm), D(ZEUS_POWER_INSTANT) | D(ZEUS_POWER_AVERAGE));
  assert_int_equal(zeus_power_monitor_num_gpus(pm), 2);
  assert_int_equal(zeus_power_monitor_gpu_index(pm, 1), 1);
  assert_false(zeus_power_monitor_running(pm));
  assert_false(zeus_power_monitor_has_temperature(pm));
  assert_near(zeus_power_monitor_period(pm), 0.1, 1e-12);
  for (unsigned g = 0; g < 2; g++) {
    zeus_power_sample *tl;
    size_t n;
    assert_zeus_ok(zeus_power_monitor_timeline(pm, ZEUS_POWER_INSTANT, g, -INFINITY, INFINITY, &tl, &n));
    assert_int_equal(n, 1);
    assert_int_equal(tl[0].power_mw, IDLE_MW);
    assert_near(tl[0].time_s, zeus_sim_now(f.node), 1e-12);
    zeus_free(tl);
  }
  zeus_power_sample s;
  assert_zeus_err(zeus_power_monitor_power_at(pm, ZEUS_POWER_MEMORY_AVERAGE, 0, NAN, &s), ZEUS_ENOTSUP,
                  "memory average power is not sampled");
  zeus_power_monitor_close(pm);
  /* Asking for the memory domain explicitly names the GPU that cannot read it. */
  zeus_power_monitor_opts o = {.devices = f.dev, .domains = D(ZEUS_POWER_MEMORY_AVERAGE), .no_thread = true};
  assert_zeus_err(zeus_power_monitor_open(&pm, &o), ZEUS_ENOTSUP, "GPU 0 cannot read its memory average power");
  zeus_devices_close(f.dev);
}

/* On the virtual clock, energy over a range is the trapezoidal integral of the samples, linearly
 * interpolated at bounds that fall between samples; nothing is extrapolated. */
static void power_monitor_energy_integrates_and_interpolates_at_bounds(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_VIRTUAL);
  zeus_power_monitor *pm = pm_open(&f, (zeus_power_monitor_opts){.domains = D(ZEUS_POWER_INSTANT), .no_thread = true});
  double t0 = zeus_power_monitor_now(pm);
  for (int i = 0; i < 4; i++) { /* idle, 30 W, samples at t0 .. t0 + 4 */
    assert_zeus_ok(zeus_sim_idle(f.node, 1.0));
    assert_zeus_ok(zeus_power_monitor_sample(pm));
  }
  zeus_power_energy e;
  assert_zeus_ok(zeus_power_monitor_energy(pm, ZEUS_POWER_INSTANT, 0, t0, t0 + 4, &e));
  assert_near(e.energy_j, 120.0, 1e-9);
  assert_near(e.mean_power_w, 30.0, 1e-9);
  assert_int_equal(e.samples, 5);
  /* Bounds between samples are interpolated. */
  assert_zeus_ok(zeus_power_monitor_energy(pm, ZEUS_POWER_INSTANT, 0, t0 + 0.5, t0 + 2.25, &e));
  assert_near(e.energy_j, 30.0 * 1.75, 1e-9);
  assert_near(e.covered_s, 1.75, 1e-12);
  assert_int_equal(e.samples, 2);
  /* A range inside one gap: both bounds interpolated from the same two samples. */
  assert_zeus_ok(zeus_power_monitor_energy(pm, ZEUS_POWER_INSTANT, 0, t0 + 1.25, t0 + 1.75, &e));
  assert_near(e.energy_j, 15.0, 1e-9);
  assert_int_equal(e.samples, 0);
  /* Beyond the samples: only the covered part counts. */
  assert_zeus_ok(zeus_power_monitor_energy(pm, ZEUS_POWER_INSTANT, 0, t0 - 10, t0 + 100, &e));
  assert_near(e.energy_j, 120.0, 1e-9);
  assert_near(e.start_s, t0, 1e-12);
  assert_near(e.end_s, t0 + 4, 1e-12);
  assert_zeus_err(zeus_power_monitor_energy(pm, ZEUS_POWER_INSTANT, 0, t0 + 50, t0 + 60, &e), ZEUS_ENOENT,
                  "no instant power sample of GPU 0");
  zeus_power_monitor_close(pm);
  zeus_devices_close(f.dev);
}

/* The thread polls at the requested period on the wall clock: no oversampling, no long gaps. */
static void power_monitor_thread_samples_at_its_period(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_WALL);
  zeus_power_monitor *pm = pm_open(&f, (zeus_power_monitor_opts){.domains = D(ZEUS_POWER_INSTANT), .period_s = 0.02});
  assert_true(zeus_power_monitor_running(pm));
  double t0 = zeus_power_monitor_now(pm);
  struct timespec ts = {0, 500000000L};
  nanosleep(&ts, NULL);
  double t1 = zeus_power_monitor_now(pm);
  zeus_power_monitor_stop(pm);
  assert_false(zeus_power_monitor_running(pm));
  zeus_power_sample *tl;
  size_t n;
  assert_zeus_ok(zeus_power_monitor_timeline(pm, ZEUS_POWER_INSTANT, 0, t0 - 1, t1 + 1, &tl, &n));
  print_message("%zu samples in %.3f s at a 0.02 s period\n", n, t1 - t0);
  /* 25 expected; a loaded machine delays polls (then skips the missed ones) but never adds any. */
  assert_true(n >= 8 && n <= 27);
  /* Polls keep to a schedule of deadlines: a late poll is not followed by a burst. After a poll
   * the next deadline lies past the poll's end, so two polls apart are always more than a period
   * apart, however late one of them ran (one apart can be close: a late poll, then an on-time
   * one, which is why the check spans two). */
  for (size_t i = 2; i < n; i++)
    if (tl[i].time_s - tl[i - 2].time_s < 0.018)
      fail_msg("samples %zu and %zu are %.4f s apart: a burst (period 0.02 s)", i - 2, i,
               tl[i].time_s - tl[i - 2].time_s);
  double mean_gap = (tl[n - 1].time_s - tl[0].time_s) / (double)(n - 1);
  assert_true(mean_gap >= 0.0195 && mean_gap <= 0.07);
  zeus_free(tl);
  zeus_power_monitor_stats st;
  zeus_power_monitor_get_stats(pm, &st);
  assert_int_equal(st.polls, n);
  assert_int_equal(st.errors, 0);
  /* Stopped: the samples stay, nothing new arrives, manual samples still work. */
  nanosleep(&ts, NULL);
  assert_zeus_ok(zeus_power_monitor_timeline(pm, ZEUS_POWER_INSTANT, 0, -INFINITY, INFINITY, &tl, &n));
  size_t after = n;
  zeus_free(tl);
  assert_int_equal(after, st.polls);
  assert_zeus_ok(zeus_power_monitor_sample(pm));
  assert_zeus_ok(zeus_power_monitor_timeline(pm, ZEUS_POWER_INSTANT, 0, -INFINITY, INFINITY, &tl, &n));
  assert_int_equal(n, after + 1);
  zeus_free(tl);
  zeus_power_monitor_close(pm);
  zeus_devices_close(f.dev);
}

/* Sampled while the GPU works on the wall clock, the instant-power integral follows the engine's
 * exact energy. */
static void power_monitor_energy_follows_truth_while_working(void **state) {
  (void)state;
  double err = 1;
  for (int attempt = 0; attempt < 3 && err >= 0.03; attempt++) {
    fixture f;
    fx_open(&f, 1, ZEUS_SIM_CLOCK_WALL);
    zeus_power_monitor *pm =
        pm_open(&f, (zeus_power_monitor_opts){.domains = D(ZEUS_POWER_INSTANT), .period_s = 0.002});
    double t0 = zeus_power_monitor_now(pm), e0 = truth(&f, 0);
    assert_zeus_ok(zeus_sim_work(f.node, 0, 6, NULL)); /* ~0.3 s busy */
    assert_zeus_ok(zeus_sim_idle(f.node, 0.1));
    double t1 = zeus_power_monitor_now(pm), e1 = truth(&f, 0);
    struct timespec ts = {0, 20000000L};
    nanosleep(&ts, NULL); /* a sample after t1 */
    zeus_power_energy e;
    assert_zeus_ok(zeus_power_monitor_energy(pm, ZEUS_POWER_INSTANT, 0, t0, t1, &e));
    err = fabs(e.energy_j - (e1 - e0)) / (e1 - e0);
    print_message("try %d: %.3f J measured, %.3f J true (%zu samples), error %.2f%%\n", attempt + 1, e.energy_j,
                  e1 - e0, e.samples, 100 * err);
    assert_true(e.mean_power_w > 30.0);
    zeus_power_monitor_close(pm);
    zeus_devices_close(f.dev);
  }
  assert_true(err < 0.03);
}

/* A full series drops its oldest samples; the count of dropped samples is kept. */
static void power_monitor_bounded_series_drop_oldest(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_VIRTUAL);
  zeus_power_monitor *pm =
      pm_open(&f, (zeus_power_monitor_opts){.domains = D(ZEUS_POWER_INSTANT), .max_samples = 5, .no_thread = true});
  double times[10];
  times[0] = zeus_power_monitor_now(pm);
  for (int i = 1; i < 10; i++) {
    assert_zeus_ok(zeus_sim_idle(f.node, 0.5));
    times[i] = zeus_power_monitor_now(pm);
    assert_zeus_ok(zeus_power_monitor_sample(pm));
  }
  zeus_power_sample *tl;
  size_t n;
  assert_zeus_ok(zeus_power_monitor_timeline(pm, ZEUS_POWER_INSTANT, 0, -INFINITY, INFINITY, &tl, &n));
  assert_int_equal(n, 5);
  for (size_t i = 0; i < 5; i++) assert_near(tl[i].time_s, times[5 + i], 1e-12);
  zeus_free(tl);
  zeus_power_monitor_stats st;
  zeus_power_monitor_get_stats(pm, &st);
  assert_int_equal(st.dropped, 5);
  assert_int_equal(st.polls, 10);
  /* A poll at an unchanged (virtual) time is not stored. */
  assert_zeus_ok(zeus_power_monitor_sample(pm));
  assert_zeus_ok(zeus_power_monitor_timeline(pm, ZEUS_POWER_INSTANT, 0, -INFINITY, INFINITY, &tl, &n));
  assert_int_equal(n, 5);
  zeus_free(tl);
  zeus_power_monitor_close(pm);
  /* Bounds larger than the first allocation grow storage and keep every sample. */
  pm = pm_open(&f, (zeus_power_monitor_opts){.domains = D(ZEUS_POWER_INSTANT), .max_samples = 300, .no_thread = true});
  for (int i = 0; i < 299; i++) {
    assert_zeus_ok(zeus_sim_idle(f.node, 0.01));
    assert_zeus_ok(zeus_power_monitor_sample(pm));
  }
  assert_zeus_ok(zeus_power_monitor_timeline(pm, ZEUS_POWER_INSTANT, 0, -INFINITY, INFINITY, &tl, &n));
  assert_int_equal(n, 300);
  for (size_t i = 1; i < n; i++) assert_true(tl[i].time_s > tl[i - 1].time_s);
  zeus_free(tl);
  zeus_power_monitor_get_stats(pm, &st);
  assert_int_equal(st.dropped, 0);
  zeus_power_monitor_close(pm);
  zeus_devices_close(f.dev);
}

/* Timeline ranges are inclusive; bad ranges, GPUs and domains are named errors. */
static void power_monitor_timeline_ranges_and_errors(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 3, ZEUS_SIM_CLOCK_VIRTUAL);
  unsigned gpus[2] = {2, 0};
  zeus_power_monitor *pm = pm_open(&f, (zeus_power_monitor_opts){.gpu_indices = gpus, .num_gpu_indices = 2,
                                                                .no_thread = true});
  assert_int_equal(zeus_power_monitor_gpu_index(pm, 0), 2);
  double t0 = zeus_power_monitor_now(pm);
  for (int i = 1; i <= 5; i++) {
    assert_zeus_ok(zeus_sim_idle(f.node, 1.0));
    assert_zeus_ok(zeus_power_monitor_sample(pm));
  }
  zeus_power_sample *tl;
  size_t n;
  assert_zeus_ok(zeus_power_monitor_timeline(pm, ZEUS_POWER_INSTANT, 2, t0 + 1, t0 + 3, &tl, &n));
  assert_int_equal(n, 3);
  assert_near(tl[0].time_s, t0 + 1, 1e-12);
  assert_near(tl[2].time_s, t0 + 3, 1e-12);
  zeus_free(tl);
  assert_zeus_ok(zeus_power_monitor_timeline(pm, ZEUS_POWER_AVERAGE, 0, t0 + 10, t0 + 20, &tl, &n));
  assert_int_equal(n, 0);
  assert_null(tl);
  assert_zeus_err(zeus_power_monitor_timeline(pm, ZEUS_POWER_INSTANT, 1, t0, t0 + 1, &tl, &n), ZEUS_ENOENT,
                  "GPU 1 is not sampled (sampled: 2, 0)");
  assert_zeus_err(zeus_power_monitor_timeline(pm, ZEUS_POWER_INSTANT, 0, t0 + 2, t0 + 1, &tl, &n), ZEUS_EINVAL,
                  "time range");
  assert_zeus_err(zeus_power_monitor_timeline(pm, ZEUS_POWER_INSTANT, 0, NAN, t0 + 1, &tl, &n), ZEUS_EINVAL,
                  "time range");
  assert_zeus_err(zeus_power_monitor_timeline(pm, (zeus_power_domain)7, 0, t0, t0 + 1, &tl, &n), ZEUS_EINVAL,
                  "unknown power domain 7");
  zeus_temperature_sample *tt;
  assert_zeus_err(zeus_power_monitor_temperature_timeline(pm, 0, t0, t0 + 1, &tt, &n), ZEUS_ENOTSUP,
                  "temperature is not sampled");
  zeus_power_monitor_close(pm);
  zeus_devices_close(f.dev);
}

/* Dedup keeps the first and last sample of each run of equal readings: fewer points, the same
 * integral. */
static void power_monitor_dedup_keeps_run_endpoints_and_integral(void **state) {
  (void)state;
  fixture f[2];
  zeus_power_monitor *pm[2];
  double t0[2];
  for (int k = 0; k < 2; k++) {
    fx_open(&f[k], 1, ZEUS_SIM_CLOCK_VIRTUAL);
    pm[k] = pm_open(&f[k], (zeus_power_monitor_opts){.domains = D(ZEUS_POWER_INSTANT), .dedup = k == 1,
                                                      .no_thread = true});
    t0[k] = zeus_power_monitor_now(pm[k]);
    /* 7 idle polls at 1 s and 0.5 s steps: one run of equal readings. */
    for (int i = 0; i < 4; i++) {
      assert_zeus_ok(zeus_sim_idle(f[k].node, 1.0));
      assert_zeus_ok(zeus_power_monitor_sample(pm[k]));
    }
    for (int i = 0; i < 3; i++) {
      assert_zeus_ok(zeus_sim_idle(f[k].node, 0.5));
      assert_zeus_ok(zeus_power_monitor_sample(pm[k]));
    }
  }
  zeus_power_sample *a, *b;
  size_t na, nb;
  assert_zeus_ok(zeus_power_monitor_timeline(pm[0], ZEUS_POWER_INSTANT, 0, -INFINITY, INFINITY, &a, &na));
  assert_zeus_ok(zeus_power_monitor_timeline(pm[1], ZEUS_POWER_INSTANT, 0, -INFINITY, INFINITY, &b, &nb));
  assert_int_equal(na, 8);
  assert_int_equal(nb, 2); /* one run of idle power: its two ends */
  assert_near(b[0].time_s - t0[1], 0.0, 1e-12);
  assert_near(b[1].time_s - t0[1], 5.5, 1e-12);
  zeus_free(a);
  zeus_free(b);
  zeus_power_energy ea, eb;
  assert_zeus_ok(zeus_power_monitor_energy(pm[0], ZEUS_POWER_INSTANT, 0, t0[0] + 0.25, t0[0] + 5.25, &ea));
  assert_zeus_ok(zeus_power_monitor_energy(pm[1], ZEUS_POWER_INSTANT, 0, t0[1] + 0.25, t0[1] + 5.25, &eb));
  assert_near(ea.energy_j, 150.0, 1e-9);
  assert_near(eb.energy_j, ea.energy_j, 1e-9);
  for (int k = 0; k < 2; k++) {
    zeus_power_monitor_close(pm[k]);
    zeus_devices_close(f[k].dev);
  }
}

/* A series with distinct values under dedup: every change is kept, runs keep their ends. */
static void power_monitor_dedup_keeps_every_change(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_WALL);
  zeus_power_monitor *pm = pm_open(&f, (zeus_power_monitor_opts){.domains = D(ZEUS_POWER_INSTANT),
                                                                .dedup = true, .period_s = 0.005});
  assert_zeus_ok(zeus_sim_idle(f.node, 0.1));
  assert_zeus_ok(zeus_sim_work(f.node, 0, 3, NULL)); /* ~0.15 s at working power */
  assert_zeus_ok(zeus_sim_idle(f.node, 0.1));
  zeus_power_monitor_stop(pm);
  zeus_power_sample *tl;
  size_t n;
  assert_zeus_ok(zeus_power_monitor_timeline(pm, ZEUS_POWER_INSTANT, 0, -INFINITY, INFINITY, &tl, &n));
  /* idle run, working run, idle run: 2 points each (a run of one poll has one). */
  print_message("%zu points\n", n);
  assert_true(n >= 4 && n <= 6);
  assert_int_equal(tl[0].power_mw, IDLE_MW);
  assert_int_equal(tl[n - 1].power_mw, IDLE_MW);
  bool busy = false;
  for (size_t i = 0; i < n; i++) busy |= tl[i].power_mw > 100000;
  assert_true(busy);
  zeus_free(tl);
  zeus_power_monitor_close(pm);
  zeus_devices_close(f.dev);
}

/* The nearest sample to a time (the earlier one on a tie); NaN gives the latest. */
static void power_monitor_power_at_is_nearest_sample(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_VIRTUAL);
  zeus_power_monitor *pm = pm_open(&f, (zeus_power_monitor_opts){.domains = D(ZEUS_POWER_INSTANT), .no_thread = true});
  double t0 = zeus_power_monitor_now(pm);
  assert_zeus_ok(zeus_sim_idle(f.node, 1.0));
  assert_zeus_ok(zeus_power_monitor_sample(pm));
  assert_zeus_ok(zeus_sim_idle(f.node, 1.0));
  assert_zeus_ok(zeus_power_monitor_sample(pm));
  zeus_power_sample s;
  assert_zeus_ok(zeus_power_monitor_power_at(pm, ZEUS_POWER_INSTANT, 0, t0 + 0.4, &s));
  assert_near(s.time_s, t0, 1e-12);
  assert_zeus_ok(zeus_power_monitor_power_at(pm, ZEUS_POWER_INSTANT, 0, t0 + 0.5, &s));
  assert_near(s.time_s, t0, 1e-12); /* tie: the earlier */
  assert_zeus_ok(zeus_power_monitor_power_at(pm, ZEUS_POWER_INSTANT, 0, t0 + 0.6, &s));
  assert_near(s.time_s, t0 + 1, 1e-12);
  assert_zeus_ok(zeus_power_monitor_power_at(pm, ZEUS_POWER_INSTANT, 0, t0 - 5, &s));
  assert_near(s.time_s, t0, 1e-12);
  assert_zeus_ok(zeus_power_monitor_power_at(pm, ZEUS_POWER_INSTANT, 0, t0 + 50, &s));
  assert_near(s.time_s, t0 + 2, 1e-12);
  assert_zeus_ok(zeus_power_monitor_power_at(pm, ZEUS_POWER_INSTANT, 0, NAN, &s));
  assert_near(s.time_s, t0 + 2, 1e-12);
  assert_int_equal(s.power_mw, IDLE_MW);
  zeus_power_monitor_close(pm);
  zeus_devices_close(f.dev);
}

/* Temperature series at their own period; temperature only (no power) works too. */
static void power_monitor_temperature_series(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 2, ZEUS_SIM_CLOCK_VIRTUAL);
  zeus_power_monitor *pm =
      pm_open(&f, (zeus_power_monitor_opts){.domains = ZEUS_POWER_MONITOR_NO_POWER, .temperature_period_s = 0.5,
                                            .no_thread = true});
  assert_int_equal(zeus_power_monitor_domains(pm), 0);
  assert_true(zeus_power_monitor_has_temperature(pm));
  assert_near(zeus_power_monitor_temperature_period(pm), 0.5, 1e-12);
  double t0 = zeus_power_monitor_now(pm);
  double units[2] = {40, 0};
  assert_zeus_ok(zeus_sim_work_all(f.node, units, NULL)); /* GPU 0 hot, GPU 1 idle */
  assert_zeus_ok(zeus_power_monitor_sample(pm));
  zeus_temperature_sample *tt;
  size_t n;
  assert_zeus_ok(zeus_power_monitor_temperature_timeline(pm, 0, t0, INFINITY, &tt, &n));
  assert_int_equal(n, 2);
  assert_int_equal(tt[0].celsius, 35); /* idle */
  assert_true(tt[1].celsius > 60);
  zeus_free(tt);
  zeus_temperature_sample s;
  assert_zeus_ok(zeus_power_monitor_temperature_at(pm, 1, NAN, &s));
  assert_int_equal(s.celsius, 35);
  zeus_power_sample ps;
  assert_zeus_err(zeus_power_monitor_power_at(pm, ZEUS_POWER_INSTANT, 0, NAN, &ps), ZEUS_ENOTSUP, "not sampled");
  zeus_power_monitor_close(pm);
  zeus_devices_close(f.dev);
}

/* The temperature series keeps its own schedule in the sampling thread. */
static void power_monitor_thread_keeps_both_periods(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_WALL);
  zeus_power_monitor *pm = pm_open(&f, (zeus_power_monitor_opts){.domains = D(ZEUS_POWER_INSTANT), .period_s = 0.01,
                                                                .temperature_period_s = 0.1});
  struct timespec ts = {0, 450000000L};
  nanosleep(&ts, NULL);
  zeus_power_monitor_stop(pm);
  zeus_power_sample *tl;
  zeus_temperature_sample *tt;
  size_t np, nt;
  assert_zeus_ok(zeus_power_monitor_timeline(pm, ZEUS_POWER_INSTANT, 0, -INFINITY, INFINITY, &tl, &np));
  assert_zeus_ok(zeus_power_monitor_temperature_timeline(pm, 0, -INFINITY, INFINITY, &tt, &nt));
  print_message("%zu power samples, %zu temperature samples in 0.45 s\n", np, nt);
  assert_true(nt >= 2 && nt <= 6);  /* 5 expected: at open and 4 polls */
  assert_true(np >= 2 * nt);        /* ten times as often (less under load) */
  /* deadlines every 0.1 s: a late poll is not followed by a burst, and the mean gap is the period */
  for (size_t i = 1; i < nt; i++) assert_true(tt[i].time_s - tt[i - 1].time_s >= 0.01);
  assert_true((tt[nt - 1].time_s - tt[0].time_s) / (double)(nt - 1) >= 0.095);
  zeus_free(tl);
  zeus_free(tt);
  zeus_power_monitor_close(pm);
  zeus_devices_close(f.dev);
}

/* epoch_time: timestamps are Unix seconds that advance with the backend clock. */
static void power_monitor_epoch_time_base(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_VIRTUAL);
  double wall = zeus_wall_s();
  zeus_power_monitor *pm =
      pm_open(&f, (zeus_power_monitor_opts){.domains = D(ZEUS_POWER_INSTANT), .epoch_time = true, .no_thread = true});
  double t0 = zeus_power_monitor_now(pm);
  assert_true(fabs(t0 - wall) < 5.0);
  assert_zeus_ok(zeus_sim_idle(f.node, 100.0));
  assert_near(zeus_power_monitor_now(pm) - t0, 100.0, 1e-6);
  assert_zeus_ok(zeus_power_monitor_sample(pm));
  zeus_power_sample s;
  assert_zeus_ok(zeus_power_monitor_power_at(pm, ZEUS_POWER_INSTANT, 0, NAN, &s));
  assert_near(s.time_s - t0, 100.0, 1e-6);
  zeus_power_monitor_close(pm);
  zeus_devices_close(f.dev);
}

static void power_monitor_bad_options_are_named(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 2, ZEUS_SIM_CLOCK_VIRTUAL);
  zeus_power_monitor *pm;
  zeus_power_monitor_opts o = {.devices = f.dev, .period_s = 0.0001};
  assert_zeus_err(zeus_power_monitor_open(&pm, &o), ZEUS_EINVAL, "period_s 0.0001 s is outside");
  o = (zeus_power_monitor_opts){.devices = f.dev, .temperature_period_s = -1};
  assert_zeus_err(zeus_power_monitor_open(&pm, &o), ZEUS_EINVAL, "temperature_period_s -1");
  o = (zeus_power_monitor_opts){.devices = f.dev, .max_samples = 1};
  assert_zeus_err(zeus_power_monitor_open(&pm, &o), ZEUS_EINVAL, "max_samples 1");
  unsigned bad[1] = {5}, dup[2] = {1, 1};
  o = (zeus_power_monitor_opts){.devices = f.dev, .gpu_indices = bad, .num_gpu_indices = 1};
  assert_zeus_err(zeus_power_monitor_open(&pm, &o), ZEUS_ENOENT, "GPU 5 does not exist (2 visible GPUs");
  o = (zeus_power_monitor_opts){.devices = f.dev, .gpu_indices = dup, .num_gpu_indices = 2};
  assert_zeus_err(zeus_power_monitor_open(&pm, &o), ZEUS_EINVAL, "GPU 1 is listed twice");
  o = (zeus_power_monitor_opts){.devices = f.dev, .gpu_indices = dup, .num_gpu_indices = 0};
  assert_zeus_err(zeus_power_monitor_open(&pm, &o), ZEUS_EINVAL, "no GPU to sample");
  o = (zeus_power_monitor_opts){.devices = f.dev, .domains = ZEUS_POWER_MONITOR_NO_POWER};
  assert_zeus_err(zeus_power_monitor_open(&pm, &o), ZEUS_EINVAL, "nothing to sample");
  o = (zeus_power_monitor_opts){.devices = f.dev, .domains = 0x10};
  assert_zeus_err(zeus_power_monitor_open(&pm, &o), ZEUS_EINVAL, "unknown bits");
  assert_zeus_err(zeus_power_monitor_open(NULL, &o), ZEUS_EINVAL, "out is required");
  zeus_power_monitor_close(NULL); /* no-op */
  zeus_devices_close(f.dev);
}

/* Through the nvml backend (the fake NVML): instant and average domains, no memory domain,
 * temperature, and failed readings counted instead of stored. */
static void power_monitor_nvml_backend_domains_and_read_errors(void **state) {
  (void)state;
  unsetenv("ZEUS_SIM_MODEL_FILE");
  unsetenv("CUDA_VISIBLE_DEVICES");
  setenv("ZEUS_SIM_GPUS", "2", 1);
  setenv("ZEUS_SIM_CLOCK", "virtual", 1);
  /* The temperature of GPU 1 fails after its first two readings (the probe and the first sample). */
  setenv("FAKE_NVML_INJECT", "nvmlDeviceGetTemperature:UNKNOWN:1:2", 1);
  zeus_devices_opts dopts = {.backend = "nvml", .nvml_library = FAKE_NVML_PATH};
  zeus_devices *dev;
  assert_zeus_ok(zeus_devices_open(&dev, &dopts));
  zeus_power_monitor_opts o = {.devices = dev, .temperature_period_s = 1, .no_thread = true};
  zeus_power_monitor *pm;
  assert_zeus_ok(zeus_power_monitor_open(&pm, &o));
  assert_int_equal(zeus_power_monitor_domains(pm), D(ZEUS_POWER_INSTANT) | D(ZEUS_POWER_AVERAGE));
  zeus_power_monitor_stats st;
  zeus_power_monitor_get_stats(pm, &st);
  assert_int_equal(st.errors, 0);
  /* Move the fake's clock through its helper, then poll. */
  void *h = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_NOLOAD);
  assert_non_null(h);
  int (*idle)(double) = (int (*)(double))dlsym(h, "fakeNvmlIdle");
  assert_non_null(idle);
  assert_int_equal(idle(1.0), 0);
  assert_int_equal(zeus_power_monitor_sample(pm), ZEUS_EDEVICE);
  zeus_power_monitor_get_stats(pm, &st);
  assert_int_equal(st.errors, 1);
  zeus_temperature_sample *tt;
  size_t n;
  assert_zeus_ok(zeus_power_monitor_temperature_timeline(pm, 1, -INFINITY, INFINITY, &tt, &n));
  assert_int_equal(n, 1); /* the failed reading stored nothing */
  zeus_free(tt);
  assert_zeus_ok(zeus_power_monitor_temperature_timeline(pm, 0, -INFINITY, INFINITY, &tt, &n));
  assert_int_equal(n, 2);
  zeus_free(tt);
  zeus_power_sample *tl;
  assert_zeus_ok(zeus_power_monitor_timeline(pm, ZEUS_POWER_AVERAGE, 1, -INFINITY, INFINITY, &tl, &n));
  assert_int_equal(n, 2);
  zeus_free(tl);
  zeus_power_monitor_close(pm);
  zeus_devices_close(dev);
  dlclose(h);
  unsetenv("FAKE_NVML_INJECT");
}

/* Queries from other threads while the sampler runs see consistent, ordered timelines. */
typedef struct reader_arg {
  zeus_power_monitor *pm;
  int bad;
} reader_arg;

static void *reader_main(void *p) {
  reader_arg *a = p;
  for (int i = 0; i < 300; i++) {
    zeus_power_sample *tl;
    size_t n;
    if (zeus_power_monitor_timeline(a->pm, ZEUS_POWER_INSTANT, 0, -INFINITY, INFINITY, &tl, &n)) {
      a->bad++;
      continue;
    }
    for (size_t k = 1; k < n; k++)
      if (!(tl[k].time_s > tl[k - 1].time_s)) a->bad++;
    zeus_free(tl);
    zeus_power_energy e;
    if (zeus_power_monitor_energy(a->pm, ZEUS_POWER_INSTANT, 0, -INFINITY, INFINITY, &e) || e.mean_power_w < 29.9)
      a->bad++;
  }
  return NULL;
}

static void power_monitor_queries_race_the_sampler_safely(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_WALL);
  zeus_power_monitor *pm = pm_open(&f, (zeus_power_monitor_opts){.domains = D(ZEUS_POWER_INSTANT), .period_s = 0.001,
                                                                .max_samples = 64});
  pthread_t th[3];
  reader_arg a[3];
  for (int i = 0; i < 3; i++) {
    a[i] = (reader_arg){pm, 0};
    pthread_create(&th[i], NULL, reader_main, &a[i]);
  }
  for (int i = 0; i < 20; i++) assert_zeus_ok(zeus_power_monitor_sample(pm)); /* a second sampler */
  for (int i = 0; i < 3; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(a[i].bad, 0);
  }
  zeus_power_monitor_close(pm);
  zeus_devices_close(f.dev);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(power_monitor_auto_domains_are_what_every_gpu_reads),
      cmocka_unit_test(power_monitor_energy_integrates_and_interpolates_at_bounds),
      cmocka_unit_test(power_monitor_thread_samples_at_its_period),
      cmocka_unit_test(power_monitor_energy_follows_truth_while_working),
      cmocka_unit_test(power_monitor_bounded_series_drop_oldest),
      cmocka_unit_test(power_monitor_timeline_ranges_and_errors),
      cmocka_unit_test(power_monitor_dedup_keeps_run_endpoints_and_integral),
      cmocka_unit_test(power_monitor_dedup_keeps_every_change),
      cmocka_unit_test(power_monitor_power_at_is_nearest_sample),
      cmocka_unit_test(power_monitor_temperature_series),
      cmocka_unit_test(power_monitor_thread_keeps_both_periods),
      cmocka_unit_test(power_monitor_epoch_time_base),
      cmocka_unit_test(power_monitor_bad_options_are_named),
      cmocka_unit_test(power_monitor_nvml_backend_domains_and_read_errors),
      cmocka_unit_test(power_monitor_queries_race_the_sampler_safely),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

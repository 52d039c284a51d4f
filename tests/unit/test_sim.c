/* The simulated-GPU engine (zeus/sim.h) on its own, its configuration loading, and the "sim"
 * device backend. Expected figures follow the DVFS model of zeus/sim.h with the default
 * (A40-like) parameters: 1740..210 MHz in 15 MHz steps, P(f) = 120 + 170 (f/1740)^3 W,
 * t(f) = 0.05 (0.25 + 0.75 * 1740/f) s per unit, idle 30 W, limits 100..300 W. */
#include "test_util.h"

#include <math.h>

#include <zeus.h>


#define REL 1e-9

static double dvfs_power(unsigned f) {
  double x = f / 1740.0;
  return 120 + 170 * x * x * x;
}
static double dvfs_time(unsigned f) { return 0.05 * (0.25 + 0.75 * 1740.0 / f); }

static void unset_sim_env(void) {
  static const char *const vars[] = {"ZEUS_SIM_GPUS",           "ZEUS_SIM_MODEL_FILE",        "ZEUS_SIM_UNITS_PER_ROW",
                                     "ZEUS_SIM_CLOCK",          "ZEUS_SIM_ENERGY_COUNTER",    "ZEUS_SIM_COUNTER_PERIOD_MS", "ZEUS_SIM_HARDWARE",
                                     "ZEUS_SIM_VARIATION",      "CUDA_VISIBLE_DEVICES",       "ZEUS_GPU_BACKEND"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

/* A node of `n` default DVFS GPUs on the given clock. */
static zeus_sim_node *open_default(unsigned n, zeus_sim_clock_kind clock) {
  zeus_sim_config cfg = {.num_gpus = n, .gpus = NULL, .clock = clock};
  zeus_sim_node *node = NULL;
  assert_zeus_ok(zeus_sim_node_open(&node, &cfg));
  return node;
}

static double energy(zeus_sim_node *n, unsigned gpu) {
  double j = NAN;
  assert_zeus_ok(zeus_sim_true_energy(n, gpu, &j));
  return j;
}

/* Runs one unit at the current knobs; returns its energy, and its time in *t. */
static double one_unit(zeus_sim_node *n, unsigned gpu, double *t) {
  double e0 = energy(n, gpu), el = 0;
  assert_zeus_ok(zeus_sim_work(n, gpu, 1, &el));
  if (t) *t = el;
  return energy(n, gpu) - e0;
}

/* ---- the DVFS model ---- */

static void dvfs_energy_per_unit_falls_then_rises_as_the_locked_clock_drops(void **state) {
  (void)state;
  zeus_sim_node *n = open_default(1, ZEUS_SIM_CLOCK_VIRTUAL);
  unsigned clocks[256];
  size_t nc = 256;
  assert_zeus_ok(zeus_sim_gpu_graphics_clocks(n, 0, 7251, clocks, &nc));
  assert_int_equal(nc, 103);
  double e[256];
  size_t best = 0;
  for (size_t k = 0; k < nc; k++) { /* highest clock first */
    assert_zeus_ok(zeus_sim_gpu_set_locked_clocks(n, 0, clocks[k], clocks[k]));
    unsigned at;
    assert_zeus_ok(zeus_sim_operating_point(n, 0, &at, NULL));
    assert_int_equal(at, clocks[k]);
    double t;
    e[k] = one_unit(n, 0, &t);
    assert_near(t, dvfs_time(clocks[k]), REL);
    assert_near(e[k], dvfs_power(clocks[k]) * t, REL);
    if (e[k] < e[best]) best = k;
  }
  assert_true(best > 0 && best < nc - 1); /* strictly inside the range */
  for (size_t k = 1; k <= best; k++) assert_true(e[k] < e[k - 1]);
  for (size_t k = best + 1; k < nc; k++) assert_true(e[k] > e[k - 1]);
  print_message("minimum energy per unit %.4f J at %u MHz (%.4f J at %u MHz)\n", e[best], clocks[best], e[0],
                clocks[0]);
  zeus_sim_node_close(n);
}

static void dvfs_power_limit_caps_the_clock_and_stretches_the_work(void **state) {
  (void)state;
  zeus_sim_node *n = open_default(1, ZEUS_SIM_CLOCK_VIRTUAL);
  static const unsigned limits[] = {300000, 150000, 125000};
  static const unsigned want_clock[] = {1740, 975, 525}; /* highest f with P(f) <= limit */
  unsigned prev_clock = ~0u;
  double prev_t = 0;
  for (size_t k = 0; k < 3; k++) {
    assert_zeus_ok(zeus_sim_gpu_set_power_limit(n, 0, limits[k]));
    unsigned f;
    double p;
    assert_zeus_ok(zeus_sim_operating_point(n, 0, &f, &p));
    assert_int_equal(f, want_clock[k]);
    assert_true(p <= limits[k] / 1000.0);
    assert_true(f < prev_clock);
    double t;
    one_unit(n, 0, &t);
    assert_near(t, dvfs_time(f), REL);
    assert_true(t > prev_t);
    prev_clock = f;
    prev_t = t;
  }
  assert_zeus_err(zeus_sim_gpu_set_power_limit(n, 0, 99999), ZEUS_ERANGE, "99999");
  /* A locked range above the capped clock does not lift the cap: the limit wins over the
   * locked minimum (zeus/sim.h: the highest clock not above the locked maximum that fits). */
  assert_zeus_ok(zeus_sim_gpu_set_locked_clocks(n, 0, 1500, 1740));
  unsigned f;
  double p;
  assert_zeus_ok(zeus_sim_operating_point(n, 0, &f, &p));
  assert_int_equal(f, 525);
  assert_true(p <= 125.0);
  /* Within the limit the lock is honoured. */
  assert_zeus_ok(zeus_sim_gpu_set_locked_clocks(n, 0, 300, 450));
  assert_zeus_ok(zeus_sim_operating_point(n, 0, &f, NULL));
  assert_int_equal(f, 450);
  zeus_sim_node_close(n);
}

static void work_advances_clock_by_units_times_time_and_energy_by_power_times_time(void **state) {
  (void)state;
  zeus_sim_node *n = open_default(1, ZEUS_SIM_CLOCK_VIRTUAL);
  double el = 0;
  assert_zeus_ok(zeus_sim_work(n, 0, 7, &el));
  assert_near(el, 7 * dvfs_time(1740), REL);
  assert_near(zeus_sim_now(n), el, REL);
  assert_near(energy(n, 0), dvfs_power(1740) * el, REL);

  assert_zeus_ok(zeus_sim_idle(n, 1.5));
  assert_near(zeus_sim_now(n), el + 1.5, REL);
  double e_idle = dvfs_power(1740) * el + 30 * 1.5;
  assert_near(energy(n, 0), e_idle, REL);

  assert_zeus_ok(zeus_sim_gpu_set_locked_clocks(n, 0, 1005, 1005));
  double t0 = zeus_sim_now(n), el2;
  assert_zeus_ok(zeus_sim_work(n, 0, 3, &el2));
  assert_near(el2, 3 * dvfs_time(1005), REL);
  assert_near(zeus_sim_now(n) - t0, el2, REL);
  assert_near(energy(n, 0), e_idle + dvfs_power(1005) * el2, REL);
  uint64_t mj;
  assert_zeus_ok(zeus_sim_gpu_total_energy(n, 0, &mj));
  assert_int_equal(mj, (uint64_t)floor(energy(n, 0) * 1000));
  assert_zeus_err(zeus_sim_work(n, 0, -1, NULL), ZEUS_EINVAL, "units");
  assert_zeus_err(zeus_sim_work(n, 1, 1, NULL), ZEUS_ENOENT, "GPU 1");
  zeus_sim_node_close(n);
}

static void work_all_advances_by_the_longest_while_others_idle(void **state) {
  (void)state;
  zeus_sim_node *n = open_default(3, ZEUS_SIM_CLOCK_VIRTUAL);
  const double units[3] = {10, 4, 0};
  double el = 0;
  assert_zeus_ok(zeus_sim_work_all(n, units, &el));
  double t = dvfs_time(1740), p = dvfs_power(1740);
  assert_near(el, 10 * t, REL);
  assert_near(zeus_sim_now(n), 10 * t, REL);
  assert_near(energy(n, 0), p * 10 * t, REL);
  assert_near(energy(n, 1), p * 4 * t + 30 * 6 * t, REL);
  assert_near(energy(n, 2), 30 * 10 * t, REL);
  zeus_sim_node_close(n);
}

static void work_measured_takes_the_given_time_and_energy_while_others_idle(void **state) {
  (void)state;
  zeus_sim_node *n = open_default(2, ZEUS_SIM_CLOCK_VIRTUAL);
  /* Whatever the knobs: a locked clock changes nothing. */
  assert_zeus_ok(zeus_sim_gpu_set_locked_clocks(n, 1, 1005, 1005));
  double el = 0;
  assert_zeus_ok(zeus_sim_work_measured(n, 1, 0.25, 40.0, &el));
  assert_near(el, 0.25, REL);
  assert_near(zeus_sim_now(n), 0.25, REL);
  assert_near(energy(n, 1), 40.0, REL);
  assert_near(energy(n, 0), 30 * 0.25, REL); /* idle meanwhile */
  /* The power in between is energy / time (160 W); a zero-length piece changes nothing. */
  unsigned mw = 0;
  assert_zeus_ok(zeus_sim_work_measured(n, 1, 0, 0, NULL));
  assert_near(zeus_sim_now(n), 0.25, REL);
  assert_zeus_ok(zeus_sim_work_measured(n, 1, 1.0, 160.0, NULL));
  assert_zeus_ok(zeus_sim_gpu_average_power(n, 1, &mw));
  assert_int_equal(mw, 160000);
  assert_zeus_err(zeus_sim_work_measured(n, 1, -1, 1, NULL), ZEUS_EINVAL, "finite duration");
  assert_zeus_err(zeus_sim_work_measured(n, 1, 1, NAN, NULL), ZEUS_EINVAL, "energy");
  assert_zeus_err(zeus_sim_work_measured(n, 2, 1, 1, NULL), ZEUS_ENOENT, "GPU 2");
  zeus_sim_node_close(n);
}

/* ---- the table model ---- */

static void table_model_gives_each_rows_time_and_energy_and_lower_row_between(void **state) {
  (void)state;
  char dir[256], path[300];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/profile.csv", dir);
  zeus_test_write_file(path,
                       "start_time,window_name,elapsed_time,gpu0_energy\n"
                       "0,profile_300,10,2000\n"
                       "10,profile_250,12,1800\n"
                       "22,profile_200,15,1650\n");
  zeus_sim_config *cfg = NULL;
  assert_zeus_ok(zeus_sim_config_load(&cfg, path, 10));
  assert_int_equal(cfg->num_gpus, 1);
  assert_int_equal(cfg->gpus[0].model, ZEUS_SIM_TABLE);
  zeus_sim_node *n = NULL;
  assert_zeus_ok(zeus_sim_node_open(&n, cfg));
  zeus_sim_config_free(cfg);
  unsigned lo, hi, def;
  assert_zeus_ok(zeus_sim_gpu_power_limit_constraints(n, 0, &lo, &hi, &def));
  assert_int_equal(lo, 200000);
  assert_int_equal(hi, 300000);
  assert_int_equal(def, 300000);
  static const struct { unsigned mw; double t, e; } cases[] = {
      {300000, 1.0, 200}, {250000, 1.2, 180}, {200000, 1.5, 165},
      {275000, 1.2, 180}, /* between rows: the lower one */
      {249999, 1.5, 165},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    assert_zeus_ok(zeus_sim_gpu_set_power_limit(n, 0, cases[k].mw));
    double t, e = one_unit(n, 0, &t);
    assert_near(t, cases[k].t, REL);
    assert_near(e, cases[k].e, 1e-7);
  }
  zeus_sim_node_close(n);
  unlink(path);
  rmdir(dir);
}

/* ---- configuration errors ---- */

static int load_text(const char *dir, const char *name, const char *text) {
  char path[400];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  zeus_test_write_file(path, text);
  zeus_sim_config *cfg = NULL;
  int rc = zeus_sim_config_load(&cfg, path, 0);
  zeus_sim_config_free(cfg);
  unlink(path);
  return rc;
}

static void config_load_errors_name_the_file_line_and_field(void **state) {
  (void)state;
  char dir[256];
  zeus_test_tmpdir(dir, sizeof dir);
  assert_zeus_err(load_text(dir, "nocol.csv", "start_time,window_name,gpu0_energy\n0,p_300,10\n"), ZEUS_EPARSE,
                  "missing column 'elapsed_time'");
  assert_zeus_err(load_text(dir, "cell.csv",
                            "start_time,window_name,elapsed_time,gpu0_energy\n0,p_300,10,2000\n1,p_250,fast,1800\n"),
                  ZEUS_EPARSE, "cell.csv:3:3");
  assert_non_null(strstr(zeus_errmsg(), "elapsed_time"));
  assert_zeus_err(load_text(dir, "wn.csv", "start_time,window_name,elapsed_time,gpu0_energy\n0,profile_fast,10,2000\n"),
                  ZEUS_EPARSE, "window_name 'profile_fast'");
  assert_non_null(strstr(zeus_errmsg(), "wn.csv:2"));
  assert_zeus_err(load_text(dir, "field.json", "{\"gpus\": [{\"colour\": \"red\"}]}"), ZEUS_EPARSE,
                  "unknown field 'colour'");
  assert_non_null(strstr(zeus_errmsg(), "gpus[0]"));
  assert_zeus_err(load_text(dir, "clock.json", "{\"clock\": \"sundial\", \"gpus\": [{}]}"), ZEUS_EPARSE, "'clock'");
  assert_non_null(strstr(zeus_errmsg(), "clock.json"));
  assert_zeus_err(load_text(dir, "mhz.json", "{\"gpus\": [{\"max_clock_mhz\": 1500.5}]}"), ZEUS_EPARSE,
                  "max_clock_mhz");
  assert_zeus_err(load_text(dir, "notjson.json", "{\"gpus\": [{}"), ZEUS_EPARSE, "notjson.json");
  /* A file that parses but describes an impossible GPU fails when the node opens. */
  char path[400];
  snprintf(path, sizeof path, "%s/order.json", dir);
  zeus_test_write_file(path, "{\"gpus\": [{\"min_clock_mhz\": 1800, \"max_clock_mhz\": 1500}]}");
  zeus_sim_config *cfg = NULL;
  assert_zeus_ok(zeus_sim_config_load(&cfg, path, 0));
  zeus_sim_node *n = NULL;
  assert_zeus_err(zeus_sim_node_open(&n, cfg), ZEUS_EINVAL, "min_clock_mhz");
  assert_null(n);
  zeus_sim_config_free(cfg);
  unlink(path);
  rmdir(dir);
}

static void sim_gpus_out_of_range_is_erange_naming_the_variable(void **state) {
  (void)state;
  unset_sim_env();
  zeus_sim_config *cfg = NULL;
  setenv("ZEUS_SIM_GPUS", "65", 1);
  assert_zeus_err(zeus_sim_config_from_env(&cfg), ZEUS_ERANGE, "ZEUS_SIM_GPUS");
  setenv("ZEUS_SIM_GPUS", "0", 1);
  zeus_sim_node *n = NULL;
  assert_zeus_err(zeus_sim_node_open(&n, NULL), ZEUS_ERANGE, "ZEUS_SIM_GPUS");
  assert_null(n);
  setenv("ZEUS_SIM_GPUS", "64", 1);
  assert_zeus_ok(zeus_sim_config_from_env(&cfg));
  assert_int_equal(cfg->num_gpus, 64);
  zeus_sim_config_free(cfg);
  unset_sim_env();
}

/* ---- the energy counter and the clocks ---- */

static void counter_period_moves_the_counter_only_at_period_boundaries(void **state) {
  (void)state;
  unset_sim_env();
  setenv("ZEUS_SIM_COUNTER_PERIOD_MS", "100", 1);
  zeus_sim_node *n = NULL;
  assert_zeus_ok(zeus_sim_node_open(&n, NULL));
  unset_sim_env();
  uint64_t mj = 1;
  assert_zeus_ok(zeus_sim_gpu_total_energy(n, 0, &mj));
  assert_int_equal(mj, 0);
  assert_zeus_ok(zeus_sim_idle(n, 0.04));
  assert_zeus_ok(zeus_sim_gpu_total_energy(n, 0, &mj));
  assert_int_equal(mj, 0); /* 1.2 J used, not yet counted */
  assert_zeus_ok(zeus_sim_idle(n, 0.05)); /* t = 0.09 */
  assert_zeus_ok(zeus_sim_gpu_total_energy(n, 0, &mj));
  assert_int_equal(mj, 0);
  assert_zeus_ok(zeus_sim_idle(n, 0.03)); /* t = 0.12: the counter shows the energy at 0.1 s */
  assert_zeus_ok(zeus_sim_gpu_total_energy(n, 0, &mj));
  assert_near((double)mj, 3000, 1);
  uint64_t at_100ms = mj;
  assert_zeus_ok(zeus_sim_idle(n, 0.05)); /* t = 0.17 */
  assert_zeus_ok(zeus_sim_gpu_total_energy(n, 0, &mj));
  assert_int_equal(mj, at_100ms);
  assert_true(energy(n, 0) > 5.0); /* the truth moved on */
  assert_zeus_ok(zeus_sim_work(n, 0, 2, NULL)); /* 0.1 s at 290 W: t = 0.27 */
  assert_zeus_ok(zeus_sim_gpu_total_energy(n, 0, &mj));
  assert_near((double)mj, (30 * 0.17 + 290 * 0.03) * 1000, 1); /* the energy at 0.2 s */
  zeus_sim_node_close(n);
}

static void wall_clock_work_takes_real_time_and_energy_is_power_times_time(void **state) {
  (void)state;
  zeus_sim_node *n = open_default(1, ZEUS_SIM_CLOCK_WALL);
  double e0 = energy(n, 0), s0 = zeus_sim_now(n), r0 = zeus_monotonic_s();
  double el = 0;
  assert_zeus_ok(zeus_sim_work(n, 0, 1, &el)); /* 0.05 s at 290 W */
  double r1 = zeus_monotonic_s(), s1 = zeus_sim_now(n), e1 = energy(n, 0);
  assert_near(el, 0.05, REL);
  assert_true(r1 - r0 >= 0.05);
  assert_true(s1 - s0 >= 0.05);
  double work_j = 290 * 0.05;
  assert_true(e1 - e0 >= work_j - 1e-9);
  /* The rest is idle power over whatever time the calls around the work took. */
  assert_near(e1 - e0, work_j + 30 * ((s1 - s0) - 0.05), 0.5);
  zeus_sim_node_close(n);
}

/* ---- the "sim" device backend ---- */

/* The average-power domain is the exact mean over the last second, whether that second started
 * after the last bookkeeping event or lies between checkpoints; temperature follows it. */
static void average_power_is_the_mean_over_the_last_second(void **state) {
  (void)state;
  zeus_sim_node *n = open_default(1, ZEUS_SIM_CLOCK_VIRTUAL);
  unsigned mw, c;
  assert_zeus_ok(zeus_sim_gpu_average_power(n, 0, &mw));
  assert_int_equal(mw, 30000); /* at t = 0: the power now */
  assert_zeus_ok(zeus_sim_work(n, 0, 6, NULL)); /* 0.3 s at 290 W */
  assert_zeus_ok(zeus_sim_gpu_average_power(n, 0, &mw));
  assert_int_equal(mw, 290000); /* the node is 0.3 s old: the mean since it opened */
  assert_zeus_ok(zeus_sim_idle(n, 2.0));
  assert_zeus_ok(zeus_sim_gpu_average_power(n, 0, &mw));
  assert_int_equal(mw, 30000);
  assert_zeus_ok(zeus_sim_gpu_temperature(n, 0, &c));
  assert_int_equal(c, 35);
  assert_zeus_ok(zeus_sim_work(n, 0, 4, NULL)); /* 0.2 s at 290 W */
  assert_zeus_ok(zeus_sim_gpu_average_power(n, 0, &mw));
  assert_int_equal(mw, (unsigned)lround((0.2 * 290 + 0.8 * 30) * 1000));
  /* Readings every 0.1 s through a second of work: each answer is the window's exact mean. */
  for (int k = 1; k <= 10; k++) {
    assert_zeus_ok(zeus_sim_work(n, 0, 2, NULL)); /* 0.1 s */
    double busy = fmin(1.0, 0.2 + 0.1 * k);
    assert_zeus_ok(zeus_sim_gpu_average_power(n, 0, &mw));
    if (labs((long)mw - lround((busy * 290 + (1 - busy) * 30) * 1000)) > 1)
      fail_msg("after %d steps: %u mW, expected %.0f", k, mw, (busy * 290 + (1 - busy) * 30) * 1000);
  }
  assert_zeus_ok(zeus_sim_gpu_temperature(n, 0, &c));
  assert_int_equal(c, 83); /* 290 W on a 300 W GPU idling at 30 W: 35 + 50 * 260 / 270 */
  unsigned arch, sm, mem;
  assert_zeus_ok(zeus_sim_gpu_architecture(n, 0, &arch));
  assert_int_equal(arch, 7);
  assert_zeus_ok(zeus_sim_gpu_set_locked_clocks(n, 0, 900, 900));
  assert_zeus_ok(zeus_sim_gpu_current_clocks(n, 0, &sm, &mem));
  assert_int_equal(sm, 900);
  assert_int_equal(mem, 7251);
  zeus_sim_node_close(n);
}

/* An outside load (zeus_sim_gpu_set_load) makes idle time draw the working power of the knobs
 * in place, following a power-limit change, and stops drawing it when cleared. */
static void outside_load_draws_working_power_that_follows_the_knobs(void **state) {
  (void)state;
  zeus_sim_node *n = open_default(2, ZEUS_SIM_CLOCK_VIRTUAL);
  bool busy = true;
  assert_zeus_ok(zeus_sim_gpu_get_load(n, 0, &busy));
  assert_false(busy);
  assert_zeus_ok(zeus_sim_gpu_set_load(n, 0, true));
  assert_zeus_ok(zeus_sim_gpu_get_load(n, 0, &busy));
  assert_true(busy);
  assert_zeus_ok(zeus_sim_idle(n, 2.0));
  assert_near(energy(n, 0), 2.0 * dvfs_power(1740), 1e-6);
  assert_near(energy(n, 1), 2.0 * 30, 1e-6); /* the other GPU idles */
  unsigned mw;
  assert_zeus_ok(zeus_sim_gpu_instant_power(n, 0, &mw));
  assert_int_equal(mw, (unsigned)lround(dvfs_power(1740) * 1000));
  /* 200 W: the highest clock with 120 + 170 x^3 <= 200 */
  assert_zeus_ok(zeus_sim_gpu_set_power_limit(n, 0, 200000));
  unsigned f;
  double p;
  assert_zeus_ok(zeus_sim_operating_point(n, 0, &f, &p));
  assert_true(p <= 200.0 && f < 1740);
  double before = energy(n, 0);
  assert_zeus_ok(zeus_sim_idle(n, 1.0));
  assert_near(energy(n, 0) - before, dvfs_power(f), 1e-6);
  assert_zeus_ok(zeus_sim_gpu_set_load(n, 0, false));
  before = energy(n, 0);
  assert_zeus_ok(zeus_sim_idle(n, 1.0));
  assert_near(energy(n, 0) - before, 30.0, 1e-6);
  assert_zeus_err(zeus_sim_gpu_set_load(n, 2, true), ZEUS_ENOENT, "does not exist");
  zeus_sim_node_close(n);
}

static void sim_backend_maps_visible_devices_and_restores_settings(void **state) {
  (void)state;
  unset_sim_env();
  zeus_sim_config cfg = {.num_gpus = 4, .gpus = NULL, .clock = ZEUS_SIM_CLOCK_VIRTUAL};
  zeus_devices_opts o = {0};
  o.backend = "sim";
  o.sim = &cfg;
  o.visible_devices = "2,0";
  zeus_devices *d = NULL;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  assert_string_equal(zeus_devices_backend(d), "sim");
  assert_int_equal(zeus_gpu_count(d), 2);
  zeus_sim_node *n = zeus_devices_sim_node(d);
  assert_non_null(n);
  assert_int_equal(zeus_sim_node_gpu_count(n), 4);
  unsigned phys;
  assert_zeus_ok(zeus_devices_sim_index(d, 0, &phys));
  assert_int_equal(phys, 2);
  assert_zeus_ok(zeus_devices_sim_index(d, 1, &phys));
  assert_int_equal(phys, 0);
  char uuid[ZEUS_NAME_LEN];
  assert_zeus_ok(zeus_gpu_uuid(d, 0, uuid, sizeof uuid));
  assert_string_equal(uuid, "GPU-5a1a0000-0000-4000-8000-000000000002");

  assert_zeus_ok(zeus_gpu_set_power_limit(d, 0, 200000));
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 1, 600, 900));
  assert_zeus_ok(zeus_gpu_set_persistence_mode(d, 1, true));
  unsigned mw, lo, hi;
  bool pm;
  assert_zeus_ok(zeus_sim_gpu_get_power_limit(n, 2, &mw));
  assert_int_equal(mw, 200000);
  assert_zeus_ok(zeus_sim_gpu_get_power_limit(n, 0, &mw));
  assert_int_equal(mw, 300000);
  assert_zeus_ok(zeus_sim_gpu_get_locked_clocks(n, 0, &lo, &hi, NULL, NULL));
  assert_int_equal(lo, 600);
  assert_int_equal(hi, 900);
  /* Visible time and energy are the node's. */
  assert_zeus_ok(zeus_sim_work(n, 2, 4, NULL));
  assert_near(zeus_devices_now(d), zeus_sim_now(n), 0);
  uint64_t mj;
  assert_zeus_ok(zeus_gpu_total_energy(d, 0, &mj));
  assert_int_equal(mj, (uint64_t)floor(energy(n, 2) * 1000));

  assert_zeus_ok(zeus_devices_restore(d));
  assert_zeus_ok(zeus_sim_gpu_get_power_limit(n, 2, &mw));
  assert_int_equal(mw, 300000);
  assert_zeus_ok(zeus_sim_gpu_get_locked_clocks(n, 0, &lo, &hi, NULL, NULL));
  assert_int_equal(lo, 0);
  assert_int_equal(hi, 0);
  assert_zeus_ok(zeus_sim_gpu_get_persistence_mode(n, 0, &pm));
  assert_false(pm);
  assert_zeus_err(zeus_gpu_set_power_limit(d, 2, 200000), ZEUS_ENOENT, "GPU 2");
  zeus_devices_close(d);
}

/* The sim backend has no operation for both locks: zeus_gpu_reset_all_clocks makes its two resets,
 * which the device itself reads back as unlocked. */
static void sim_backend_reset_all_clocks_unlocks_sm_and_memory(void **state) {
  (void)state;
  unset_sim_env();
  zeus_sim_config cfg = {.num_gpus = 2, .gpus = NULL, .clock = ZEUS_SIM_CLOCK_VIRTUAL};
  zeus_devices_opts o = {0};
  o.backend = "sim";
  o.sim = &cfg;
  zeus_devices *d = NULL;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  zeus_sim_node *n = zeus_devices_sim_node(d);
  unsigned mem[16];
  size_t nm = 16;
  assert_zeus_ok(zeus_gpu_supported_memory_clocks(d, 1, mem, &nm));
  assert_true(nm >= 1);
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 1, 600, 900));
  assert_zeus_ok(zeus_gpu_set_memory_locked_clocks(d, 1, mem[nm - 1], mem[nm - 1]));
  unsigned lo, hi, mlo, mhi;
  assert_zeus_ok(zeus_sim_gpu_get_locked_clocks(n, 1, &lo, &hi, &mlo, &mhi));
  assert_int_equal(hi, 900);
  assert_int_equal(mhi, mem[nm - 1]);
  assert_zeus_ok(zeus_gpu_reset_all_clocks(d, 1));
  assert_zeus_ok(zeus_sim_gpu_get_locked_clocks(n, 1, &lo, &hi, &mlo, &mhi));
  assert_int_equal(lo + hi + mlo + mhi, 0);
  zeus_clock_lock l;
  for (int m = 0; m < 2; m++) {
    assert_zeus_ok(zeus_gpu_get_locked_clocks(d, 1, m == 1, &l));
    assert_int_equal(l.state, ZEUS_CLOCK_UNLOCKED);
    assert_string_equal(l.source, "device");
  }
  assert_zeus_err(zeus_gpu_reset_all_clocks(d, 2), ZEUS_ENOENT, "GPU 2");
  zeus_devices_close(d);
}

int main(int argc, char **argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(dvfs_energy_per_unit_falls_then_rises_as_the_locked_clock_drops),
      cmocka_unit_test(dvfs_power_limit_caps_the_clock_and_stretches_the_work),
      cmocka_unit_test(work_advances_clock_by_units_times_time_and_energy_by_power_times_time),
      cmocka_unit_test(work_all_advances_by_the_longest_while_others_idle),
      cmocka_unit_test(work_measured_takes_the_given_time_and_energy_while_others_idle),
      cmocka_unit_test(table_model_gives_each_rows_time_and_energy_and_lower_row_between),
      cmocka_unit_test(config_load_errors_name_the_file_line_and_field),
      cmocka_unit_test(sim_gpus_out_of_range_is_erange_naming_the_variable),
      cmocka_unit_test(counter_period_moves_the_counter_only_at_period_boundaries),
      cmocka_unit_test(wall_clock_work_takes_real_time_and_energy_is_power_times_time),
      cmocka_unit_test(average_power_is_the_mean_over_the_last_second),
      cmocka_unit_test(outside_load_draws_working_power_that_follows_the_knobs),
      cmocka_unit_test(sim_backend_maps_visible_devices_and_restores_settings),
      cmocka_unit_test(sim_backend_reset_all_clocks_unlocks_sm_and_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

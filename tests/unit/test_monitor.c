/* monitor: windows against the simulated GPU's ground truth. */
#include <math.h>

#include "core/core.h"
#include "test_util.h"

#include <zeus.h>

typedef struct fixture {
  zeus_devices *dev;
  zeus_sim_node *node;
  zeus_sim_gpu_config gpus[4];
  zeus_sim_config cfg;
} fixture;

/* Opens `n` simulated GPUs on the given clock; GPU i runs 10% slower per index. */
static void fx_open(fixture *f, unsigned n, zeus_sim_clock_kind clock, bool counter) {
  memset(f, 0, sizeof *f);
  for (unsigned i = 0; i < n; i++) {
    f->gpus[i].model = ZEUS_SIM_DVFS;
    f->gpus[i].time_scale = 1.0 + 0.1 * i;
    f->gpus[i].no_energy_counter = !counter;
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

static zeus_monitor *mon_open(fixture *f, const zeus_monitor_opts *extra) {
  zeus_monitor_opts o = extra ? *extra : (zeus_monitor_opts){0};
  o.devices = f->dev;
  static const unsigned none[1] = {0};
  if (!o.cpu_indices) { o.cpu_indices = none; o.num_cpu_indices = 0; }
  zeus_monitor *m;
  assert_zeus_ok(zeus_monitor_open(&m, &o));
  return m;
}

/* Counter granularity is 1 mJ, floored at both ends. */
#define MJ 0.0011

static void monitor_window_matches_ground_truth(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 2, ZEUS_SIM_CLOCK_VIRTUAL, true);
  zeus_monitor *m = mon_open(&f, NULL);
  assert_int_equal(zeus_monitor_num_gpus(m), 2);
  double t0 = zeus_sim_now(f.node), e0 = truth(&f, 0), e1 = truth(&f, 1);
  assert_zeus_ok(zeus_monitor_begin_window(m, "step", false));
  double units[2] = {10, 4};
  double el;
  assert_zeus_ok(zeus_sim_work_all(f.node, units, &el));
  assert_zeus_ok(zeus_sim_idle(f.node, 0.25));
  zeus_measurement r;
  assert_zeus_ok(zeus_monitor_end_window(m, "step", false, &r));
  assert_true(el > 0.4);
  assert_true(fabs(r.time_s - (zeus_sim_now(f.node) - t0)) < 1e-9);
  assert_true(fabs(r.time_s - (el + 0.25)) < 1e-9);
  assert_int_equal(r.num_gpus, 2);
  assert_true(fabs(r.gpu_energy_j[0] - (truth(&f, 0) - e0)) < MJ);
  assert_true(fabs(r.gpu_energy_j[1] - (truth(&f, 1) - e1)) < MJ);
  assert_true(r.gpu_energy_j[0] > r.gpu_energy_j[1]); /* GPU 0 worked more */
  assert_true(fabs(r.total_energy_j - r.gpu_energy_j[0] - r.gpu_energy_j[1]) < 1e-9);
  zeus_monitor_close(m);
  zeus_devices_close(f.dev);
}

static void monitor_overlapping_windows_each_match_truth(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_VIRTUAL, true);
  zeus_monitor *m = mon_open(&f, NULL);
  double a0 = truth(&f, 0);
  assert_zeus_ok(zeus_monitor_begin_window(m, "outer", false));
  assert_zeus_ok(zeus_sim_work(f.node, 0, 5, NULL));
  double b0 = truth(&f, 0);
  assert_zeus_ok(zeus_monitor_begin_window(m, "overlap", false));
  assert_zeus_ok(zeus_monitor_begin_window(m, "nested", false));
  assert_zeus_ok(zeus_sim_work(f.node, 0, 3, NULL));
  double c1 = truth(&f, 0);
  zeus_measurement nested, outer, overlap;
  assert_zeus_ok(zeus_monitor_end_window(m, "nested", false, &nested));
  assert_zeus_ok(zeus_sim_work(f.node, 0, 2, NULL));
  double a1 = truth(&f, 0);
  assert_zeus_ok(zeus_monitor_end_window(m, "outer", false, &outer));
  assert_zeus_ok(zeus_sim_idle(f.node, 1.0));
  double b1 = truth(&f, 0);
  assert_zeus_ok(zeus_monitor_end_window(m, "overlap", false, &overlap));
  assert_true(fabs(outer.gpu_energy_j[0] - (a1 - a0)) < MJ);
  assert_true(fabs(overlap.gpu_energy_j[0] - (b1 - b0)) < MJ);
  assert_true(fabs(nested.gpu_energy_j[0] - (c1 - b0)) < MJ);
  assert_true(overlap.time_s > nested.time_s);
  zeus_monitor_close(m);
  zeus_devices_close(f.dev);
}

static void monitor_cancel_discards_window(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_VIRTUAL, true);
  zeus_monitor *m = mon_open(&f, NULL);
  assert_zeus_ok(zeus_monitor_begin_window(m, "w", false));
  assert_true(zeus_monitor_is_open(m, "w"));
  zeus_measurement r = {.time_s = -7};
  assert_zeus_ok(zeus_monitor_end_window(m, "w", true, &r));
  assert_true(r.time_s == -7); /* nothing written on cancel */
  assert_false(zeus_monitor_is_open(m, "w"));
  assert_zeus_err(zeus_monitor_end_window(m, "w", false, &r), ZEUS_ENOENT, "'w'");
  zeus_monitor_close(m);
  zeus_devices_close(f.dev);
}

static void monitor_duplicate_key_is_error_unless_restart(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_VIRTUAL, true);
  zeus_monitor *m = mon_open(&f, NULL);
  assert_zeus_ok(zeus_monitor_begin_window(m, "w", false));
  assert_zeus_err(zeus_monitor_begin_window(m, "w", false), ZEUS_EEXIST, "already open");
  assert_zeus_ok(zeus_sim_work(f.node, 0, 5, NULL));
  double t_restart = zeus_sim_now(f.node), e_restart = truth(&f, 0);
  assert_zeus_ok(zeus_monitor_begin_window(m, "w", true));
  assert_zeus_ok(zeus_sim_work(f.node, 0, 2, NULL));
  zeus_measurement r;
  assert_zeus_ok(zeus_monitor_end_window(m, "w", false, &r));
  assert_true(fabs(r.time_s - (zeus_sim_now(f.node) - t_restart)) < 1e-9);
  assert_true(fabs(r.gpu_energy_j[0] - (truth(&f, 0) - e_restart)) < MJ);
  zeus_monitor_close(m);
  zeus_devices_close(f.dev);
}

static void monitor_unknown_key_names_it_and_open_windows(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_VIRTUAL, true);
  zeus_monitor *m = mon_open(&f, NULL);
  assert_zeus_ok(zeus_monitor_begin_window(m, "train", false));
  zeus_measurement r;
  assert_zeus_err(zeus_monitor_end_window(m, "eval", false, &r), ZEUS_ENOENT, "no open window named 'eval'");
  assert_true(strstr(zeus_errmsg(), "'train'") != NULL);
  assert_zeus_err(zeus_monitor_begin_window(m, "", false), ZEUS_EINVAL, "non-empty");
  zeus_monitor_close(m);
  zeus_devices_close(f.dev);
}

static void monitor_many_windows_grow_and_close_cleanly(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_VIRTUAL, true);
  zeus_monitor *m = mon_open(&f, NULL);
  char key[32];
  for (int i = 0; i < 100; i++) {
    snprintf(key, sizeof key, "w%d", i);
    assert_zeus_ok(zeus_monitor_begin_window(m, key, false));
    assert_zeus_ok(zeus_sim_work(f.node, 0, 0.1, NULL));
  }
  zeus_measurement r0, r99;
  assert_zeus_ok(zeus_monitor_end_window(m, "w99", false, &r99));
  assert_zeus_ok(zeus_monitor_end_window(m, "w0", false, &r0));
  assert_true(r0.gpu_energy_j[0] > 50 * r99.gpu_energy_j[0]);
  zeus_monitor_close(m); /* 98 windows still open: freed */
  zeus_devices_close(f.dev);
}

/* A GPU without an energy counter is measured by integrating sampled power; on the wall clock
 * with power stepping between levels, the result agrees with the engine's truth within 1%. */
static void monitor_power_polling_agrees_with_truth_within_1pct(void **state) {
  (void)state;
  /* The sampling thread runs on the wall clock; on a loaded machine it can be descheduled across
   * a power step, so the measurement gets three tries. A wrong integration fails all three. */
  double err = 1.0;
  for (int attempt = 0; attempt < 3 && err >= 0.01; attempt++) {
    fixture f;
    fx_open(&f, 1, ZEUS_SIM_CLOCK_WALL, false);
    zeus_monitor_opts o = {.poll_interval_s = 0.001};
    zeus_monitor *m = mon_open(&f, &o);
    assert_true(zeus_monitor_gpu_polled(m, 0));
    double e0 = truth(&f, 0);
    assert_zeus_ok(zeus_monitor_begin_window(m, "w", false));
    /* ~0.3 s at full power, 0.2 s idle, ~0.3 s at a 150 W limit. */
    assert_zeus_ok(zeus_sim_work(f.node, 0, 6, NULL));
    assert_zeus_ok(zeus_sim_idle(f.node, 0.2));
    assert_zeus_ok(zeus_gpu_set_power_limit(f.dev, 0, 150000));
    assert_zeus_ok(zeus_sim_work(f.node, 0, 3, NULL));
    zeus_measurement r;
    assert_zeus_ok(zeus_monitor_end_window(m, "w", false, &r));
    double want = truth(&f, 0) - e0;
    err = fabs(r.gpu_energy_j[0] - want) / want;
    print_message("power polling (try %d): measured %.3f J, truth %.3f J, error %.3f%%\n", attempt + 1,
                  r.gpu_energy_j[0], want, 100 * err);
    zeus_monitor_close(m);
    zeus_devices_close(f.dev);
  }
  assert_true(err < 0.01);
}

static void monitor_forced_polling_on_virtual_clock_is_exact_at_bounds(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_VIRTUAL, true);
  zeus_monitor_opts o = {.force_power_polling = true, .poll_interval_s = 10};
  zeus_monitor *m = mon_open(&f, &o);
  assert_true(zeus_monitor_gpu_polled(m, 0));
  double e0 = truth(&f, 0);
  assert_zeus_ok(zeus_monitor_begin_window(m, "idle", false));
  assert_zeus_ok(zeus_sim_idle(f.node, 2.0));
  zeus_measurement r;
  assert_zeus_ok(zeus_monitor_end_window(m, "idle", false, &r));
  /* Constant idle power: the trapezoid between the two bound samples is exact. */
  assert_true(fabs(r.gpu_energy_j[0] - (truth(&f, 0) - e0)) < 1e-6);
  zeus_monitor_close(m);
  zeus_devices_close(f.dev);
}

static void monitor_approx_instant_energy_fills_short_windows(void **state) {
  (void)state;
  for (int approx = 0; approx <= 1; approx++) {
    fixture f;
    fx_open(&f, 1, ZEUS_SIM_CLOCK_VIRTUAL, true);
    zeus_devices_close(f.dev);
    f.gpus[0].counter_period_s = 0.1; /* the counter moves every 100 ms */
    zeus_devices_opts dopts = {.backend = "sim", .sim = &f.cfg, .all_devices = true};
    assert_zeus_ok(zeus_devices_open(&f.dev, &dopts));
    f.node = zeus_devices_sim_node(f.dev);
    assert_zeus_ok(zeus_sim_idle(f.node, 0.01));
    zeus_monitor_opts o = {.approx_instant_energy = approx};
    zeus_monitor *m = mon_open(&f, &o);
    assert_zeus_ok(zeus_monitor_begin_window(m, "short", false));
    assert_zeus_ok(zeus_sim_idle(f.node, 0.02));
    zeus_measurement r;
    assert_zeus_ok(zeus_monitor_end_window(m, "short", false, &r));
    if (approx)
      assert_true(fabs(r.gpu_energy_j[0] - 30.0 * 0.02) < 1e-6); /* idle power x time */
    else
      assert_true(r.gpu_energy_j[0] == 0.0);
    zeus_monitor_close(m);
    zeus_devices_close(f.dev);
  }
}

static void monitor_csv_log_has_one_row_per_ended_window(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 2, ZEUS_SIM_CLOCK_VIRTUAL, true);
  char dir[256], path[512];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/log.csv", dir);
  zeus_monitor_opts o = {.log_file = path};
  zeus_monitor *m = mon_open(&f, &o);
  assert_zeus_ok(zeus_monitor_begin_window(m, "a,b", false));
  assert_zeus_ok(zeus_sim_work(f.node, 1, 2, NULL));
  zeus_measurement r;
  assert_zeus_ok(zeus_monitor_end_window(m, "a,b", false, &r));
  assert_zeus_ok(zeus_monitor_begin_window(m, "gone", false));
  assert_zeus_ok(zeus_monitor_end_window(m, "gone", true, NULL));
  assert_zeus_ok(zeus_monitor_begin_window(m, "second", false));
  assert_zeus_ok(zeus_monitor_end_window(m, "second", false, NULL));
  zeus_monitor_close(m);
  FILE *fp = fopen(path, "r");
  assert_non_null(fp);
  char line[512];
  assert_non_null(fgets(line, sizeof line, fp));
  assert_string_equal(line, "start_time,window_name,elapsed_time,gpu0_energy,gpu1_energy\n");
  assert_non_null(fgets(line, sizeof line, fp));
  assert_non_null(strstr(line, ",\"a,b\","));
  double t0, el, g0, g1;
  char *q = strstr(line, "\",");
  assert_int_equal(sscanf(line, "%lf", &t0), 1);
  assert_int_equal(sscanf(q + 2, "%lf,%lf,%lf", &el, &g0, &g1), 3);
  assert_true(fabs(el - r.time_s) < 1e-6 && fabs(g1 - r.gpu_energy_j[1]) < 1e-5 && fabs(g0 - r.gpu_energy_j[0]) < 1e-5);
  assert_non_null(fgets(line, sizeof line, fp));
  assert_non_null(strstr(line, ",second,"));
  assert_null(fgets(line, sizeof line, fp));
  fclose(fp);
  /* Appending to an existing log does not repeat the header. */
  m = mon_open(&f, &o);
  assert_zeus_ok(zeus_monitor_begin_window(m, "third", false));
  assert_zeus_ok(zeus_monitor_end_window(m, "third", false, NULL));
  zeus_monitor_close(m);
  fp = fopen(path, "r");
  int lines = 0, headers = 0;
  while (fgets(line, sizeof line, fp)) {
    lines++;
    headers += strncmp(line, "start_time", 10) == 0;
  }
  fclose(fp);
  assert_int_equal(lines, 4);
  assert_int_equal(headers, 1);
  zeus_devices_close(f.dev);
}

static void monitor_gpu_subset_and_bad_indices(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 3, ZEUS_SIM_CLOCK_VIRTUAL, true);
  unsigned one[] = {2};
  zeus_monitor_opts o = {.gpu_indices = one, .num_gpu_indices = 1};
  zeus_monitor *m = mon_open(&f, &o);
  assert_int_equal(zeus_monitor_num_gpus(m), 1);
  assert_zeus_ok(zeus_monitor_begin_window(m, "w", false));
  assert_zeus_ok(zeus_sim_work(f.node, 2, 1, NULL));
  zeus_measurement r;
  assert_zeus_ok(zeus_monitor_end_window(m, "w", false, &r));
  assert_int_equal(r.num_gpus, 1);
  assert_int_equal(r.gpu_indices[0], 2);
  assert_true(r.gpu_energy_j[0] > 1.0);
  zeus_monitor_close(m);
  unsigned bad[] = {5};
  zeus_monitor_opts ob = {.devices = f.dev, .gpu_indices = bad, .num_gpu_indices = 1, .cpu_indices = one};
  assert_zeus_err(zeus_monitor_open(&m, &ob), ZEUS_ENOENT, "GPU 5 does not exist");
  unsigned dup[] = {1, 1};
  zeus_monitor_opts od = {.devices = f.dev, .gpu_indices = dup, .num_gpu_indices = 2, .cpu_indices = one};
  assert_zeus_err(zeus_monitor_open(&m, &od), ZEUS_EINVAL, "listed twice");
  zeus_devices_close(f.dev);
}

static void write_rapl(const char *root, unsigned pkg, const char *sub, const char *name, unsigned long long uj,
                       unsigned long long range) {
  char dir[512], path[600], buf[64];
  snprintf(dir, sizeof dir, "%s/intel-rapl:%u%s", root, pkg, sub);
  mkdir(dir, 0755);
  snprintf(path, sizeof path, "%s/energy_uj", dir);
  snprintf(buf, sizeof buf, "%llu\n", uj);
  zeus_test_write_file(path, buf);
  snprintf(path, sizeof path, "%s/max_energy_range_uj", dir);
  snprintf(buf, sizeof buf, "%llu\n", range);
  zeus_test_write_file(path, buf);
  snprintf(path, sizeof path, "%s/name", dir);
  zeus_test_write_file(path, name);
}

static void monitor_cpu_rapl_counters_with_wraparound(void **state) {
  (void)state;
  char root[256];
  zeus_test_tmpdir(root, sizeof root);
  setenv("ZEUS_RAPL_ROOT", root, 1);
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_VIRTUAL, true);
  unsigned none[1];
  zeus_monitor *m;
  unsigned cpu0[] = {0};
  zeus_monitor_opts bad = {.devices = f.dev, .gpu_indices = none, .num_gpu_indices = 0, .cpu_indices = cpu0,
                           .num_cpu_indices = 1};
  assert_zeus_err(zeus_monitor_open(&m, &bad), ZEUS_ENOENT, "CPU package 0 was asked for");
  write_rapl(root, 0, "", "package-0\n", 999000000ull, 1000000000ull); /* 1 s before wrapping at 1000 J */
  write_rapl(root, 0, ":0", "dram\n", 5000000ull, 1000000000ull);
  zeus_monitor_opts o = {.devices = f.dev, .gpu_indices = none, .num_gpu_indices = 0};
  assert_zeus_ok(zeus_monitor_open(&m, &o)); /* auto: every readable package */
  assert_int_equal(zeus_monitor_num_cpus(m), 1);
  assert_zeus_ok(zeus_monitor_begin_window(m, "w", false));
  write_rapl(root, 0, "", "package-0\n", 4000000ull, 1000000000ull); /* wrapped: +5 J */
  write_rapl(root, 0, ":0", "dram\n", 7500000ull, 1000000000ull);    /* +2.5 J */
  zeus_measurement r;
  assert_zeus_ok(zeus_monitor_end_window(m, "w", false, &r));
  assert_int_equal(r.num_cpus, 1);
  assert_true(fabs(r.cpu_energy_j[0] - 5.0) < 1e-9);
  assert_true(r.dram_valid[0]);
  assert_true(fabs(r.dram_energy_j[0] - 2.5) < 1e-9);
  assert_true(fabs(r.total_energy_j - 5.0) < 1e-9);
  zeus_monitor_close(m);
  zeus_devices_close(f.dev);
  unsetenv("ZEUS_RAPL_ROOT");
}

/* The readings a window began with, the open windows in the order they were begun, and
 * reset_windows discarding them all. */
static void monitor_window_state_keys_and_reset(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 2, ZEUS_SIM_CLOCK_VIRTUAL, true);
  zeus_monitor *m = mon_open(&f, NULL);
  assert_int_equal(zeus_monitor_num_windows(m), 0);
  assert_zeus_ok(zeus_sim_work(f.node, 0, 2, NULL));
  double t_a = zeus_sim_now(f.node), e_a0 = truth(&f, 0);
  assert_zeus_ok(zeus_monitor_begin_window(m, "a", false));
  assert_zeus_ok(zeus_sim_idle(f.node, 1.5));
  assert_zeus_ok(zeus_monitor_begin_window(m, "b", false));
  assert_zeus_ok(zeus_monitor_begin_window(m, "c", false));
  zeus_measurement st;
  assert_zeus_ok(zeus_monitor_window_state(m, "a", &st));
  assert_near(st.start_time_s, t_a, 1e-12);
  assert_near(st.time_s, 1.5, 1e-9);
  assert_int_equal(st.num_gpus, 2);
  assert_near(st.gpu_energy_j[0], e_a0, MJ);
  assert_true(st.total_energy_j == 0);
  assert_zeus_err(zeus_monitor_window_state(m, "zz", &st), ZEUS_ENOENT, "'zz'");
  /* Ending the middle one keeps the order of the others. */
  zeus_measurement r;
  assert_zeus_ok(zeus_monitor_end_window(m, "b", false, &r));
  assert_near(r.start_time_s, t_a + 1.5, 1e-12);
  assert_int_equal(zeus_monitor_num_windows(m), 2);
  char key[8];
  assert_zeus_ok(zeus_monitor_window_key(m, 0, key, sizeof key));
  assert_string_equal(key, "a");
  assert_zeus_ok(zeus_monitor_window_key(m, 1, key, sizeof key));
  assert_string_equal(key, "c");
  assert_zeus_err(zeus_monitor_window_key(m, 2, key, sizeof key), ZEUS_ENOENT, "not open");
  assert_zeus_ok(zeus_monitor_begin_window(m, "a-much-longer-key", false));
  assert_zeus_err(zeus_monitor_window_key(m, 2, key, sizeof key), ZEUS_ERANGE, "does not fit");
  zeus_monitor_reset_windows(m);
  assert_int_equal(zeus_monitor_num_windows(m), 0);
  assert_false(zeus_monitor_is_open(m, "a"));
  assert_zeus_ok(zeus_monitor_begin_window(m, "a", false)); /* the key is free again */
  zeus_monitor_close(m);
  zeus_devices_close(f.dev);
}

typedef struct replay_ctx {
  int calls;
  char last_key[32];
  int fail_at;
} replay_ctx;

static int replay_hook(void *ctx, const char *key, zeus_measurement *m) {
  replay_ctx *c = ctx;
  c->calls++;
  snprintf(c->last_key, sizeof c->last_key, "%s", key);
  if (c->calls == c->fail_at) return zeus_set_errmsg(ZEUS_EIO, "replay log exhausted at window '%s'", key);
  m->time_s = 12.5;
  m->gpu_energy_j[0] = 100.0 * c->calls;
  return ZEUS_OK;
}

/* The end hook replaces the measurement (and the logged row); its failure is end_window's, and
 * the window is closed all the same. Cancelled windows do not reach it. */
static void monitor_end_hook_replaces_measurements(void **state) {
  (void)state;
  char dir[256], path[300];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/log.csv", dir);
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_VIRTUAL, true);
  replay_ctx c = {.fail_at = 3};
  zeus_monitor_opts o = {.end_hook = replay_hook, .end_hook_ctx = &c, .log_file = path};
  zeus_monitor *m = mon_open(&f, &o);
  zeus_measurement r;
  assert_zeus_ok(zeus_monitor_begin_window(m, "w1", false));
  assert_zeus_ok(zeus_monitor_end_window(m, "w1", false, &r));
  assert_near(r.time_s, 12.5, 0);
  assert_near(r.gpu_energy_j[0], 100.0, 0);
  assert_zeus_ok(zeus_monitor_begin_window(m, "w2", false));
  assert_zeus_ok(zeus_monitor_end_window(m, "w2", true, &r));
  assert_int_equal(c.calls, 1);
  assert_zeus_ok(zeus_monitor_begin_window(m, "w3", false));
  assert_zeus_ok(zeus_monitor_end_window(m, "w3", false, &r));
  assert_string_equal(c.last_key, "w3");
  assert_zeus_ok(zeus_monitor_begin_window(m, "w4", false));
  assert_zeus_err(zeus_monitor_end_window(m, "w4", false, &r), ZEUS_EIO, "replay log exhausted at window 'w4'");
  assert_false(zeus_monitor_is_open(m, "w4"));
  zeus_monitor_close(m);
  char *text;
  size_t len;
  assert_zeus_ok(zeus__read_file(path, &text, &len));
  assert_non_null(strstr(text, ",w1,12.5,100\n"));
  assert_non_null(strstr(text, ",w3,12.5,200\n"));
  assert_null(strstr(text, ",w4,"));
  free(text);
  zeus_devices_close(f.dev);
}

static int count_lines;
static void count_sink(int level, const char *module, const char *msg, void *ud) {
  (void)level;
  (void)module;
  (void)ud;
  if (strstr(msg, "too short")) count_lines++;
}

/* A window too short for the counter logs a warning, unless no_short_window_warning. */
static void monitor_short_window_warning_can_be_silenced(void **state) {
  (void)state;
  fixture f;
  memset(&f, 0, sizeof f);
  f.gpus[0].model = ZEUS_SIM_DVFS;
  f.gpus[0].counter_period_s = 1.0; /* the counter moves once a second */
  f.cfg.num_gpus = 1;
  f.cfg.gpus = f.gpus;
  f.cfg.clock = ZEUS_SIM_CLOCK_VIRTUAL;
  zeus_devices_opts dopts = {.backend = "sim", .sim = &f.cfg, .all_devices = true};
  assert_zeus_ok(zeus_devices_open(&f.dev, &dopts));
  f.node = zeus_devices_sim_node(f.dev);
  zeus_set_log_callback(count_sink, NULL);
  for (int quiet = 0; quiet < 2; quiet++) {
    count_lines = 0;
    zeus_monitor_opts o = {.no_short_window_warning = quiet == 1};
    zeus_monitor *m = mon_open(&f, &o);
    assert_zeus_ok(zeus_sim_idle(f.node, 1.01));
    assert_zeus_ok(zeus_monitor_begin_window(m, "w", false));
    assert_zeus_ok(zeus_sim_idle(f.node, 0.01));
    zeus_measurement r;
    assert_zeus_ok(zeus_monitor_end_window(m, "w", false, &r));
    assert_true(r.gpu_energy_j[0] == 0.0);
    assert_int_equal(count_lines, quiet ? 0 : 1);
    zeus_monitor_close(m);
  }
  zeus_set_log_callback(NULL, NULL);
  zeus_devices_close(f.dev);
}

/* The zone list is read once, at open: a package that appears later is not measured, and the
 * readings go on through the files opened then even when ZEUS_RAPL_ROOT points elsewhere. */
static void monitor_reads_rapl_zone_list_once_per_monitor(void **state) {
  (void)state;
  char root[256];
  zeus_test_tmpdir(root, sizeof root);
  setenv("ZEUS_RAPL_ROOT", root, 1);
  write_rapl(root, 0, "", "package-0\n", 1000000ull, 1000000000ull);
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_VIRTUAL, true);
  unsigned none[1];
  zeus_monitor_opts o = {.devices = f.dev, .gpu_indices = none, .num_gpu_indices = 0};
  zeus_monitor *m;
  assert_zeus_ok(zeus_monitor_open(&m, &o));
  assert_int_equal(zeus_monitor_num_cpus(m), 1);
  write_rapl(root, 1, "", "package-1\n", 1000000ull, 1000000000ull);
  assert_int_equal(zeus_cpu_count(), 2); /* a new scan sees it ... */
  setenv("ZEUS_RAPL_ROOT", "/nonexistent-rapl-root", 1);
  for (int i = 0; i < 3; i++) {
    assert_zeus_ok(zeus_monitor_begin_window(m, "w", false));
    write_rapl(root, 0, "", "package-0\n", 1000000ull + 250000ull * (2 * i + 1), 1000000000ull);
    zeus_measurement r;
    assert_zeus_ok(zeus_monitor_end_window(m, "w", false, &r));
    assert_int_equal(r.num_cpus, 1); /* ... the monitor does not */
    assert_false(r.dram_valid[0]);
    assert_true(fabs(r.cpu_energy_j[0] - 0.25) < 1e-9);
    write_rapl(root, 0, "", "package-0\n", 1000000ull + 250000ull * (2 * i + 2), 1000000000ull);
  }
  zeus_monitor_close(m);
  zeus_devices_close(f.dev);
  unsetenv("ZEUS_RAPL_ROOT");
}

/* zeus_cpu_zone_info: the files each package is read from, its DRAM zone, and why there is none. */
static void rapl_zone_info_names_files_and_why_none(void **state) {
  (void)state;
  char root[256];
  zeus_test_tmpdir(root, sizeof root);
  setenv("ZEUS_RAPL_ROOT", root, 1);
  zeus_cpu_zone z;
  assert_zeus_err(zeus_cpu_zone_info(0, &z), ZEUS_ENOENT, "no RAPL zone (intel-rapl:N) in");
  write_rapl(root, 1, "", "package-1\n", 7ull, 1000ull);
  write_rapl(root, 1, ":0", "core\n", 7ull, 1000ull); /* not DRAM */
  write_rapl(root, 1, ":1", "dram\n", 9ull, 1000ull);
  write_rapl(root, 0, "", "package-0\n", 5ull, 1000ull);
  char other[600];
  snprintf(other, sizeof other, "%s/intel-rapl-mmio:0", root); /* not a package zone */
  mkdir(other, 0755);
  assert_int_equal(zeus_cpu_count(), 2);
  assert_zeus_ok(zeus_cpu_zone_info(0, &z));
  assert_int_equal(z.zone, 0);
  assert_string_equal(z.name, "package-0");
  assert_false(z.has_dram);
  assert_string_equal(z.dram_path, "");
  char want[700];
  snprintf(want, sizeof want, "%s/intel-rapl:0/energy_uj", root);
  assert_string_equal(z.energy_path, want);
  assert_zeus_ok(zeus_cpu_zone_info(1, &z));
  assert_int_equal(z.zone, 1);
  assert_true(z.has_dram);
  snprintf(want, sizeof want, "%s/intel-rapl:1:1/energy_uj", root);
  assert_string_equal(z.dram_path, want);
  uint64_t pkg_mj = 0, dram_mj = 0;
  bool has_dram = false;
  assert_zeus_ok(zeus_cpu_energy(1, &pkg_mj, &has_dram, &dram_mj));
  assert_true(has_dram);
  assert_zeus_err(zeus_cpu_zone_info(2, &z), ZEUS_ENOENT, "(2 readable)");
  setenv("ZEUS_RAPL_ROOT", "/nonexistent-rapl-root", 1);
  assert_zeus_err(zeus_cpu_zone_info(0, &z), ZEUS_ENOENT, "cannot read the folder /nonexistent-rapl-root");
  unsetenv("ZEUS_RAPL_ROOT");
}

int main(int argc, char **argv) {
  setenv("ZEUS_RAPL_ROOT", "/nonexistent-rapl-root", 1); /* tests choose their CPUs */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(monitor_window_matches_ground_truth),
      cmocka_unit_test(monitor_overlapping_windows_each_match_truth),
      cmocka_unit_test(monitor_cancel_discards_window),
      cmocka_unit_test(monitor_duplicate_key_is_error_unless_restart),
      cmocka_unit_test(monitor_unknown_key_names_it_and_open_windows),
      cmocka_unit_test(monitor_many_windows_grow_and_close_cleanly),
      cmocka_unit_test(monitor_power_polling_agrees_with_truth_within_1pct),
      cmocka_unit_test(monitor_forced_polling_on_virtual_clock_is_exact_at_bounds),
      cmocka_unit_test(monitor_approx_instant_energy_fills_short_windows),
      cmocka_unit_test(monitor_csv_log_has_one_row_per_ended_window),
      cmocka_unit_test(monitor_gpu_subset_and_bad_indices),
      cmocka_unit_test(monitor_cpu_rapl_counters_with_wraparound),
      cmocka_unit_test(monitor_window_state_keys_and_reset),
      cmocka_unit_test(monitor_end_hook_replaces_measurements),
      cmocka_unit_test(monitor_short_window_warning_can_be_silenced),
      cmocka_unit_test(monitor_reads_rapl_zone_list_once_per_monitor),
      cmocka_unit_test(rapl_zone_info_names_files_and_why_none),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

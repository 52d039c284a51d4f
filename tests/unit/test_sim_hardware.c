/* The simulated GPU's hardware profiles (zeus_sim_hardware, ZEUS_SIM_HARDWARE): the measured
 * H100's sensor tick, read costs and actuation delays, and the ground truth that lets a test
 * assert the error of a measurement. Default DVFS model (zeus/sim.h): working power at the
 * highest clock 290 W, idle 30 W. */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>

#include <zeus.h>

static void unset_sim_env(void) {
  static const char *const vars[] = {"ZEUS_SIM_GPUS", "ZEUS_SIM_MODEL_FILE", "ZEUS_SIM_CLOCK",
                                     "ZEUS_SIM_COUNTER_PERIOD_MS", "ZEUS_SIM_HARDWARE", "ZEUS_GPU_BACKEND"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

/* A node of n default GPUs with the h100 profile, on the given clock. */
static zeus_sim_node *open_h100(unsigned n, zeus_sim_clock_kind clock) {
  zeus_sim_gpu_config g[4] = {{0}};
  for (unsigned i = 0; i < n; i++) assert_zeus_ok(zeus_sim_hardware_profile("h100", &g[i].hw));
  zeus_sim_config cfg = {.num_gpus = n, .gpus = g, .clock = clock};
  zeus_sim_node *node = NULL;
  assert_zeus_ok(zeus_sim_node_open(&node, &cfg));
  return node;
}

static double truth(zeus_sim_node *n, unsigned gpu) {
  double j = NAN;
  assert_zeus_ok(zeus_sim_true_energy(n, gpu, &j));
  return j;
}

static double counter_j(zeus_sim_node *n, unsigned gpu) {
  uint64_t mj = 0;
  assert_zeus_ok(zeus_sim_gpu_total_energy(n, gpu, &mj));
  return mj / 1000.0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- the profiles ---- */

static void h100_profile_has_the_measured_figures_and_ideal_is_all_zero(void **state) {
  (void)state;
  zeus_sim_hardware h;
  assert_zeus_ok(zeus_sim_hardware_profile("h100", &h));
  assert_string_equal(h.name, "h100");
  assert_near(h.tick_s, 0.0999, 1e-12);
  assert_true(h.tick_jitter_s > 0 && h.tick_jitter_s < 0.005);
  assert_true(h.power_at_ticks);
  assert_near(h.energy_read_s, 3.3e-3, 1e-12);
  assert_near(h.power_read_s, 3.3e-6, 1e-12);
  assert_near(h.power_limit_read_s, 142e-6, 1e-12);
  assert_near(h.clock_lock_call_s, 11.4e-3, 1e-12);
  assert_near(h.clock_lock_effect_s, 8.1e-3, 1e-12);
  assert_near(h.power_limit_call_s, 8.6e-3, 1e-12);
  assert_true(h.power_limit_down_effect_s >= 0.075 && h.power_limit_down_effect_s <= 0.126);
  assert_true(h.power_limit_up_effect_s >= 0.034 && h.power_limit_up_effect_s <= 0.043);
  assert_zeus_ok(zeus_sim_hardware_profile("ideal", &h));
  assert_string_equal(h.name, "ideal");
  assert_true(h.tick_s == 0 && h.energy_read_s == 0 && h.clock_lock_effect_s == 0 && !h.power_at_ticks);
  /* the H200 (../shared/gpu/H200.md): the power on a clock of its own beside the counter's */
  assert_zeus_ok(zeus_sim_hardware_profile("h200", &h));
  assert_string_equal(h.name, "h200");
  assert_near(h.tick_s, 0.1, 1e-12);
  assert_true(h.power_tick_s >= 0.1013 && h.power_tick_s <= 0.1019);
  assert_near(h.energy_read_s, 2.3e-3, 1e-12);
  assert_true(h.gpu.min_power_limit_w == 200 && h.gpu.max_power_limit_w == 700 && h.gpu.min_clock_mhz == 345 &&
              h.gpu.max_clock_mhz == 1980);
  assert_zeus_err(zeus_sim_hardware_profile("h300", &h), ZEUS_EINVAL, "'h300'");
}

/* A measured GPU as a file (gpu-check's hardware-model.json): its two clocks, limits and clocks
 * reach the simulated GPU and the readings; the power's clock ticks apart from the counter's. */
static void a_measured_model_file_sets_the_clocks_limits_and_power_tick(void **state) {
  (void)state;
  char dir[512], path[600];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/hardware-model.json", dir);
  zeus_test_write_file(path, "{\"name\": \"NVIDIA H200\", \"tick_s\": 0.1, \"tick_jitter_s\": 0.0002, "
                             "\"power_at_ticks\": true, \"power_tick_s\": 0.1016, \"power_phase_s\": 0.03, "
                             "\"energy_read_s\": 0.0023, \"min_power_limit_w\": 200, \"max_power_limit_w\": 700, "
                             "\"default_power_limit_w\": 650, \"min_clock_mhz\": 345, \"max_clock_mhz\": 1980, "
                             "\"clock_step_mhz\": 15, \"mem_clock_mhz\": 3201, \"idle_power_w\": 130}");
  unset_sim_env();
  setenv("ZEUS_SIM_HARDWARE", path, 1);
  zeus_sim_node *n = NULL;
  assert_zeus_ok(zeus_sim_node_open(&n, NULL));
  zeus_sim_hardware h;
  assert_zeus_ok(zeus_sim_gpu_hardware(n, 0, &h));
  assert_string_equal(h.name, "NVIDIA H200");
  unsigned lo, hi, def, sm, mem;
  assert_zeus_ok(zeus_sim_gpu_power_limit_constraints(n, 0, &lo, &hi, &def));
  assert_true(lo == 200000 && hi == 700000 && def == 650000);
  assert_zeus_ok(zeus_sim_gpu_current_clocks(n, 0, &sm, &mem));
  assert_true(mem == 3201);
  unsigned clocks[512];
  size_t nc = 512;
  assert_zeus_ok(zeus_sim_gpu_graphics_clocks(n, 0, 3201, clocks, &nc));
  assert_true(nc == 110 && clocks[0] == 1980 && clocks[nc - 1] == 345);
  /* the two clocks: over 3 s the power ticks ~29.5 times, the counter 30, never at one instant
   * for long (their phase drifts 1.6 ms a tick) */
  assert_zeus_ok(zeus_sim_idle(n, 3.0));
  zeus_sim_tick c[64], p[64];
  size_t ncnt = zeus_sim_gpu_ticks_since(n, 0, 0, c, 64), npow = zeus_sim_gpu_power_ticks_since(n, 0, 0, p, 64);
  assert_true(ncnt >= 29 && ncnt <= 31 && npow >= 28 && npow <= 30);
  size_t j = 0; /* the first power tick after the counter's first */
  while (j < npow && p[j].t_s <= c[0].t_s) j++;
  assert_true(j < npow);
  assert_near(p[j].t_s - c[0].t_s, 0.03, 1e-9);
  assert_near((p[npow - 1].t_s - p[0].t_s) / (double)(npow - 1), 0.1016, 1e-9); /* no jitter given */
  double phase_last = p[j + 20].t_s - c[20].t_s;
  assert_near(phase_last - 0.03, 20 * 0.0016, 0.0015); /* drifted ~1.6 ms a tick */
  zeus_sim_node_close(n);
  /* the second clock needs the first, and a phase within its period */
  zeus_test_write_file(path, "{\"power_tick_s\": 0.1}");
  assert_zeus_err(zeus_sim_node_open(&n, NULL), ZEUS_EINVAL, "power_tick_s");
  zeus_test_write_file(path, "{\"tick_s\": 0.1, \"power_at_ticks\": true, \"power_phase_s\": 0.2}");
  assert_zeus_err(zeus_sim_node_open(&n, NULL), ZEUS_EINVAL, "power_phase_s");
  zeus_test_write_file(path, "{\"max_clock_mhz\": 1980.5}");
  assert_zeus_err(zeus_sim_node_open(&n, NULL), ZEUS_EPARSE, "max_clock_mhz");
  unset_sim_env();
}

static void a_profile_file_starts_from_a_base_and_names_bad_fields(void **state) {
  (void)state;
  char dir[512], path[600];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/slow.json", dir);
  zeus_test_write_file(path, "{\"base\": \"h100\", \"tick_s\": 0.05, \"energy_read_s\": 0.001, \"seed\": 7}");
  zeus_sim_hardware h;
  assert_zeus_ok(zeus_sim_hardware_profile(path, &h));
  assert_string_equal(h.name, "slow.json");
  assert_near(h.tick_s, 0.05, 1e-12);
  assert_near(h.energy_read_s, 0.001, 1e-12);
  assert_near(h.clock_lock_effect_s, 8.1e-3, 1e-12); /* from the base */
  assert_int_equal(h.seed, 7);
  zeus_test_write_file(path, "{\"tick_s\": 0.05, \"tick_speed\": 1}");
  assert_zeus_err(zeus_sim_hardware_profile(path, &h), ZEUS_EPARSE, "tick_speed");
  zeus_test_write_file(path, "{\"energy_read_s\": -1}");
  assert_zeus_err(zeus_sim_hardware_profile(path, &h), ZEUS_EPARSE, "energy_read_s");
  /* ZEUS_SIM_HARDWARE takes names and files; a jitter of half the tick is refused at open */
  unset_sim_env();
  zeus_test_write_file(path, "{\"tick_s\": 0.01, \"tick_jitter_s\": 0.006}");
  setenv("ZEUS_SIM_HARDWARE", path, 1);
  zeus_sim_node *n = NULL;
  assert_zeus_err(zeus_sim_node_open(&n, NULL), ZEUS_EINVAL, "tick_jitter_s");
  setenv("ZEUS_SIM_HARDWARE", "h101", 1);
  assert_zeus_err(zeus_sim_node_open(&n, NULL), ZEUS_EINVAL, "ZEUS_SIM_HARDWARE");
  setenv("ZEUS_SIM_HARDWARE", "h100", 1);
  setenv("ZEUS_SIM_COUNTER_PERIOD_MS", "50", 1); /* one knob of the profile */
  assert_zeus_ok(zeus_sim_node_open(&n, NULL));
  assert_zeus_ok(zeus_sim_gpu_hardware(n, 0, &h));
  assert_string_equal(h.name, "h100");
  assert_near(h.tick_s, 0.05, 1e-12);
  assert_true(h.tick_jitter_s < 0.025);
  zeus_sim_node_close(n);
  unset_sim_env();
  assert_zeus_ok(zeus_sim_node_open(&n, NULL)); /* unset: the ideal GPU */
  assert_zeus_ok(zeus_sim_gpu_hardware(n, 0, &h));
  assert_true(h.tick_s == 0 && h.energy_read_s == 0);
  zeus_sim_node_close(n);
  unlink(path);
  rmdir(dir);
}

/* ---- sensors ---- */

/* The counter moves only at ticks ~100 ms apart (each GPU at its own phase), and between ticks
 * every reading stays at its tick's value. */
static void h100_readings_move_only_at_ticks_with_jitter(void **state) {
  (void)state;
  zeus_sim_node *n = open_h100(2, ZEUS_SIM_CLOCK_VIRTUAL);
  assert_zeus_ok(zeus_sim_gpu_set_load(n, 0, true));
  double first[2];
  for (unsigned g = 0; g < 2; g++) { /* advance past the first tick */
    assert_zeus_ok(zeus_sim_idle(n, 0.11));
    assert_zeus_ok(zeus_sim_gpu_last_tick(n, g, &first[g]));
    assert_true(first[g] > 0);
  }
  assert_true(fabs(fmod(first[0], 0.0999) - fmod(first[1], 0.0999)) > 1e-6); /* own phases */
  double ticks[64], prev;
  size_t nt = 0;
  assert_zeus_ok(zeus_sim_gpu_last_tick(n, 0, &prev));
  double c_prev = counter_j(n, 0);
  while (nt < 40) {
    assert_zeus_ok(zeus_sim_idle(n, 0.001));
    double t;
    assert_zeus_ok(zeus_sim_gpu_last_tick(n, 0, &t));
    double c = counter_j(n, 0); /* costs 3.3 ms of the node's time */
    if (t == prev) {
      assert_near(c, c_prev, 1e-9); /* no tick: no change */
      continue;
    }
    ticks[nt++] = t - prev;
    assert_true(c > c_prev + 0.09 * 290); /* a tick's worth of 290 W */
    prev = t;
    c_prev = c;
  }
  double lo = 1, hi = 0;
  for (size_t k = 0; k < nt; k++) lo = fmin(lo, ticks[k]), hi = fmax(hi, ticks[k]);
  assert_true(lo >= 0.0999 - 0.003 - 1e-9 && hi <= 0.0999 + 0.003 + 1e-9);
  assert_true(hi - lo > 0.001); /* jitter */
  assert_near(median(ticks, nt), 0.0999, 0.0015);
  /* instant power: the tick's power within the sensor's noise; the SM clock read-back too */
  unsigned mw, sm;
  assert_zeus_ok(zeus_sim_gpu_instant_power(n, 0, &mw));
  assert_near(mw / 1000.0, 290, 290 * 0.0021);
  assert_zeus_ok(zeus_sim_gpu_current_clocks(n, 0, &sm, NULL));
  assert_int_equal(sm, 1740);
  zeus_sim_node_close(n);
}

/* Each call costs its measured time: on the virtual clock the node's time moves on. */
static void h100_reads_cost_their_measured_time(void **state) {
  (void)state;
  zeus_sim_node *n = open_h100(1, ZEUS_SIM_CLOCK_VIRTUAL);
  double t0 = zeus_sim_now(n);
  uint64_t mj;
  assert_zeus_ok(zeus_sim_gpu_total_energy(n, 0, &mj));
  assert_near(zeus_sim_now(n) - t0, 3.3e-3, 1e-12);
  t0 = zeus_sim_now(n);
  unsigned mw;
  assert_zeus_ok(zeus_sim_gpu_instant_power(n, 0, &mw));
  assert_near(zeus_sim_now(n) - t0, 3.3e-6, 1e-12);
  t0 = zeus_sim_now(n);
  assert_zeus_ok(zeus_sim_gpu_get_power_limit(n, 0, &mw));
  assert_near(zeus_sim_now(n) - t0, 142e-6, 1e-12);
  t0 = zeus_sim_now(n);
  double j;
  assert_zeus_ok(zeus_sim_true_energy(n, 0, &j)); /* the truth is free */
  assert_near(zeus_sim_now(n) - t0, 0, 1e-15);
  zeus_sim_node_close(n);
  /* on the wall clock, a real wait */
  n = open_h100(1, ZEUS_SIM_CLOCK_WALL);
  double r0 = zeus_monotonic_s();
  for (int k = 0; k < 3; k++) assert_zeus_ok(zeus_sim_gpu_total_energy(n, 0, &mj));
  assert_true(zeus_monotonic_s() - r0 >= 3 * 3.3e-3);
  zeus_sim_node_close(n);
}

/* The raw counter difference of a short window against the ground truth: a 50 ms window reads
 * 0 J as often as not, and the worst is off by nearly all of it; the tick-phase correction
 * (counter + power at the tick x time since the tick, at each end) is within 1 %. */
static void h100_raw_counter_windows_err_and_the_tick_phase_correction_does_not(void **state) {
  (void)state;
  zeus_sim_node *n = open_h100(1, ZEUS_SIM_CLOCK_VIRTUAL);
  assert_zeus_ok(zeus_sim_gpu_set_load(n, 0, true));
  assert_zeus_ok(zeus_sim_idle(n, 1.0));
  enum { N = 40 };
  double raw_err[N], cor_err[N];
  unsigned zeros = 0;
  for (int k = 0; k < N; k++) {
    assert_zeus_ok(zeus_sim_idle(n, 0.0137 * (k % 7))); /* wander over the tick's phase */
    double e[2], tr[2], est[2];
    for (int end = 0; end < 2; end++) {
      double t = zeus_sim_now(n), last;
      tr[end] = truth(n, 0);
      assert_zeus_ok(zeus_sim_gpu_last_tick(n, 0, &last));
      unsigned mw;
      assert_zeus_ok(zeus_sim_gpu_instant_power(n, 0, &mw));
      e[end] = counter_j(n, 0);
      est[end] = e[end] + mw / 1000.0 * (t - last);
      if (!end) assert_zeus_ok(zeus_sim_idle(n, 0.05 - 3.3e-3 - 3.3e-6));
    }
    double want = tr[1] - tr[0];
    assert_near(want, 290 * 0.05, 1e-6);
    raw_err[k] = fabs((e[1] - e[0]) - want) / want;
    cor_err[k] = fabs((est[1] - est[0]) - want) / want;
    if (e[1] == e[0]) zeros++;
  }
  assert_true(zeros >= N / 4);
  double raw_med = median(raw_err, N), cor_med = median(cor_err, N);
  assert_true(raw_err[N - 1] > 0.9);
  assert_true(cor_err[N - 1] < 0.01);
  print_message("h100, 50 ms windows: raw median %.1f %% worst %.1f %%, corrected median %.3f %% worst %.3f %%\n",
                100 * raw_med, 100 * raw_err[N - 1], 100 * cor_med, 100 * cor_err[N - 1]);
  zeus_sim_node_close(n);
}

/* ---- actuators ---- */

/* A clock lock returns after 11.4 ms and the work shows it 8.1 ms after the call started; the
 * read-back shows it only at the next tick. */
static void h100_clock_lock_takes_effect_after_its_latency(void **state) {
  (void)state;
  zeus_sim_node *n = open_h100(1, ZEUS_SIM_CLOCK_VIRTUAL);
  assert_zeus_ok(zeus_sim_gpu_set_load(n, 0, true));
  assert_zeus_ok(zeus_sim_idle(n, 0.3));
  double last;
  assert_zeus_ok(zeus_sim_gpu_last_tick(n, 0, &last));
  assert_zeus_ok(zeus_sim_idle(n, last + 0.0999 - 0.003 - zeus_sim_now(n) - 0.025)); /* >= 22 ms before a tick */
  unsigned clock;
  double p_hi, p_lo;
  assert_zeus_ok(zeus_sim_operating_point(n, 0, &clock, &p_hi));
  assert_int_equal(clock, 1740);
  double t0 = zeus_sim_now(n), e0 = truth(n, 0);
  assert_zeus_ok(zeus_sim_gpu_set_locked_clocks(n, 0, 870, 870));
  assert_near(zeus_sim_now(n) - t0, 11.4e-3, 1e-12); /* the call's latency */
  unsigned lo, hi;
  assert_zeus_ok(zeus_sim_gpu_get_locked_clocks(n, 0, &lo, &hi, NULL, NULL));
  assert_int_equal(hi, 870); /* shown at once */
  assert_zeus_ok(zeus_sim_operating_point(n, 0, &clock, &p_lo));
  assert_int_equal(clock, 870);
  /* the energy drawn: the old power for 8.1 ms, the new one after */
  assert_near(truth(n, 0) - e0, p_hi * 8.1e-3 + p_lo * 3.3e-3, 1e-9);
  unsigned sm;
  assert_zeus_ok(zeus_sim_gpu_current_clocks(n, 0, &sm, NULL));
  assert_int_equal(sm, 1740); /* the read-back waits for the tick */
  assert_zeus_ok(zeus_sim_idle(n, 0.11));
  assert_zeus_ok(zeus_sim_gpu_current_clocks(n, 0, &sm, NULL));
  assert_int_equal(sm, 870);
  zeus_sim_node_close(n);
}

/* A power limit returns after 8.6 ms; a lower one takes effect 100 ms after the call, a higher
 * one 38 ms after. */
static void h100_power_limit_takes_effect_after_its_latency(void **state) {
  (void)state;
  zeus_sim_node *n = open_h100(1, ZEUS_SIM_CLOCK_VIRTUAL);
  assert_zeus_ok(zeus_sim_gpu_set_load(n, 0, true));
  double p_max, p_min;
  unsigned clock;
  assert_zeus_ok(zeus_sim_operating_point(n, 0, &clock, &p_max));
  double t0 = zeus_sim_now(n), e0 = truth(n, 0);
  assert_zeus_ok(zeus_sim_gpu_set_power_limit(n, 0, 150000));
  assert_near(zeus_sim_now(n) - t0, 8.6e-3, 1e-12);
  unsigned mw;
  assert_zeus_ok(zeus_sim_gpu_get_power_limit(n, 0, &mw));
  assert_int_equal(mw, 150000);
  double p;
  assert_zeus_ok(zeus_sim_operating_point(n, 0, &clock, &p));
  assert_near(p, p_max, 1e-9); /* not yet */
  assert_zeus_ok(zeus_sim_idle(n, 0.2 - (zeus_sim_now(n) - t0)));
  assert_zeus_ok(zeus_sim_operating_point(n, 0, &clock, &p_min));
  assert_true(p_min <= 150 && clock < 1740);
  assert_near(truth(n, 0) - e0, p_max * 0.100 + p_min * 0.100, 1e-6);
  t0 = zeus_sim_now(n);
  e0 = truth(n, 0);
  assert_zeus_ok(zeus_sim_gpu_set_power_limit(n, 0, 300000));
  assert_zeus_ok(zeus_sim_idle(n, 0.1 - (zeus_sim_now(n) - t0)));
  assert_near(truth(n, 0) - e0, p_min * 0.038 + p_max * 0.062, 1e-6);
  zeus_sim_node_close(n);
}

/* The ideal GPU is untouched: readings current and free, settings at once. */
static void without_a_profile_the_gpu_stays_ideal(void **state) {
  (void)state;
  zeus_sim_config cfg = {.num_gpus = 1, .clock = ZEUS_SIM_CLOCK_VIRTUAL};
  zeus_sim_node *n = NULL;
  assert_zeus_ok(zeus_sim_node_open(&n, &cfg));
  assert_zeus_ok(zeus_sim_gpu_set_load(n, 0, true));
  assert_zeus_ok(zeus_sim_idle(n, 0.0123));
  double t0 = zeus_sim_now(n);
  assert_near(counter_j(n, 0), 290 * 0.0123, 1e-3);
  assert_zeus_ok(zeus_sim_gpu_set_locked_clocks(n, 0, 870, 870));
  assert_near(zeus_sim_now(n), t0, 0);
  unsigned clock;
  assert_zeus_ok(zeus_sim_operating_point(n, 0, &clock, NULL));
  assert_int_equal(clock, 870);
  zeus_sim_node_close(n);
}

int main(int argc, char **argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(h100_profile_has_the_measured_figures_and_ideal_is_all_zero),
      cmocka_unit_test(a_profile_file_starts_from_a_base_and_names_bad_fields),
      cmocka_unit_test(a_measured_model_file_sets_the_clocks_limits_and_power_tick),
      cmocka_unit_test(h100_readings_move_only_at_ticks_with_jitter),
      cmocka_unit_test(h100_reads_cost_their_measured_time),
      cmocka_unit_test(h100_raw_counter_windows_err_and_the_tick_phase_correction_does_not),
      cmocka_unit_test(h100_clock_lock_takes_effect_after_its_latency),
      cmocka_unit_test(h100_power_limit_takes_effect_after_its_latency),
      cmocka_unit_test(without_a_profile_the_gpu_stays_ideal),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

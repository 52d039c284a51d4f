/* The power-limit optimizer's selectors: parameters checked, each picks its optimum (ties go to
 * the measurement listed first), and a custom selector is called and its answer checked. */
#include "plo_testutil.h"

static void selector_parameters_out_of_range_are_einval_naming_them(void **state) {
  (void)state;
  zeus_selector s;
  assert_zeus_err(zeus_selector_zeus_cost(&s, -0.1, 1), ZEUS_EINVAL, "eta -0.1 is outside the allowed range [0, 1]");
  assert_zeus_err(zeus_selector_zeus_cost(&s, 1.01, 1), ZEUS_EINVAL, "eta 1.01 is outside the allowed range [0, 1]");
  assert_zeus_err(zeus_selector_zeus_cost(&s, NAN, 1), ZEUS_EINVAL, "eta nan is outside");
  assert_zeus_err(zeus_selector_zeus_cost(&s, 0.5, 0), ZEUS_EINVAL, "world_size 0 is outside the allowed range [1,");
  assert_zeus_err(zeus_selector_max_slowdown(&s, 0.99), ZEUS_EINVAL, "factor 0.99 is outside the allowed range [1,");
  assert_zeus_err(zeus_selector_max_slowdown(&s, NAN), ZEUS_EINVAL, "factor nan");
  assert_zeus_err(zeus_selector_max_slowdown(&s, INFINITY), ZEUS_EINVAL, "factor inf");
  assert_zeus_err(zeus_selector_custom(&s, NULL, NULL), ZEUS_EINVAL, "fn is NULL");
  assert_zeus_ok(zeus_selector_zeus_cost(&s, 0, 1));
  assert_zeus_ok(zeus_selector_zeus_cost(&s, 1, 8));
  assert_zeus_ok(zeus_selector_max_slowdown(&s, 1.0));
  unsigned w;
  assert_zeus_err(zeus_selector_select(&s, (zeus_plo_measurement[1]){{300, 1, 1}}, 0, &w), ZEUS_EINVAL,
                  "no measurements");
}

/* Small tables worked out by hand. */
static void selectors_pick_each_optimum_and_break_ties_to_the_first(void **state) {
  (void)state;
  const zeus_plo_measurement m[] = {
      {300, 1000, 10.0}, {250, 900, 10.5}, {200, 850, 12.0}, {150, 880, 16.0}, {100, 1200, 30.0},
  };
  zeus_selector s;
  unsigned w;
  assert_zeus_ok(zeus_selector_energy(&s));
  assert_zeus_ok(zeus_selector_select(&s, m, 5, &w));
  assert_int_equal(w, 200);
  assert_zeus_ok(zeus_selector_time(&s));
  assert_zeus_ok(zeus_selector_select(&s, m, 5, &w));
  assert_int_equal(w, 300);
  /* eta 1: energy; eta 0: time; eta 0.5, world 1: 0.5*E + 150*T: 300->2000, 250->2025, 200->2225 */
  assert_zeus_ok(zeus_selector_zeus_cost(&s, 1, 1));
  assert_zeus_ok(zeus_selector_select(&s, m, 5, &w));
  assert_int_equal(w, 200);
  assert_zeus_ok(zeus_selector_zeus_cost(&s, 0, 1));
  assert_zeus_ok(zeus_selector_select(&s, m, 5, &w));
  assert_int_equal(w, 300);
  assert_zeus_ok(zeus_selector_zeus_cost(&s, 0.5, 1));
  assert_zeus_ok(zeus_selector_select(&s, m, 5, &w));
  assert_int_equal(w, 300);
  /* An exact tie (0.5E + 150T = 2000 for both): the one listed first wins, as in the original. */
  const zeus_plo_measurement cost_tie[] = {{300, 1000, 10}, {200, 1300, 9}, {250, 1200, 10}};
  assert_zeus_ok(zeus_selector_zeus_cost(&s, 0.5, 1));
  assert_zeus_ok(zeus_selector_select(&s, cost_tie, 3, &w));
  assert_int_equal(w, 300);
  const zeus_plo_measurement cost_tie_rev[] = {{200, 1300, 9}, {300, 1000, 10}, {250, 1200, 10}};
  assert_zeus_ok(zeus_selector_select(&s, cost_tie_rev, 3, &w));
  assert_int_equal(w, 200);
  /* world_size scales max power: eta 0.95, world 1: 950+15*10=1100, 855+157.5=1012.5, 807.5+180=987.5, 836+240=1076
   * -> 200; world 4: 950+600=1550, 855+630=1485, 807.5+720=1527.5 -> 250 */
  assert_zeus_ok(zeus_selector_zeus_cost(&s, 0.95, 1));
  assert_zeus_ok(zeus_selector_select(&s, m, 5, &w));
  assert_int_equal(w, 200);
  assert_zeus_ok(zeus_selector_zeus_cost(&s, 0.95, 4));
  assert_zeus_ok(zeus_selector_select(&s, m, 5, &w));
  assert_int_equal(w, 250);
  assert_near(zeus_cost(807.5 / 0.95, 12.0, 0.95, 1200), 807.5 + 720, 1e-9);
  /* max slowdown against 10 s at 300 W: 1.0 -> 300, 1.06 -> 250, 1.25 -> 200, 1.625 -> 150, 3 -> 100 */
  static const struct { double f; unsigned w; } sl[] = {{1.0, 300}, {1.04, 300}, {1.06, 250}, {1.25, 200},
                                                         {1.625, 150}, {2.99, 150}, {3.0, 100}, {100, 100}};
  for (size_t i = 0; i < sizeof sl / sizeof sl[0]; i++) {
    assert_zeus_ok(zeus_selector_max_slowdown(&s, sl[i].f));
    assert_zeus_ok(zeus_selector_select(&s, m, 5, &w));
    if (w != sl[i].w) fail_msg("factor %g: %u W, expected %u W", sl[i].f, w, sl[i].w);
  }
  /* Ties go to the measurement listed first; max slowdown takes the lowest qualifying limit. */
  const zeus_plo_measurement tie[] = {{150, 500, 2}, {300, 500, 1}, {200, 500, 1}};
  assert_zeus_ok(zeus_selector_energy(&s));
  assert_zeus_ok(zeus_selector_select(&s, tie, 3, &w));
  assert_int_equal(w, 150);
  assert_zeus_ok(zeus_selector_time(&s));
  assert_zeus_ok(zeus_selector_select(&s, tie, 3, &w));
  assert_int_equal(w, 300);
  assert_zeus_ok(zeus_selector_max_slowdown(&s, 1.0));
  assert_zeus_ok(zeus_selector_select(&s, tie, 3, &w));
  assert_int_equal(w, 200);
}

static int pick_second(void *ctx, const zeus_plo_measurement *m, size_t n, unsigned *out) {
  int *calls = ctx;
  (*calls)++;
  if (n < 2) return zeus_set_errmsg(ZEUS_EINVAL, "pick_second: need two measurements, got %zu", n);
  *out = m[1].power_limit_w;
  return ZEUS_OK;
}

static int pick_bogus(void *ctx, const zeus_plo_measurement *m, size_t n, unsigned *out) {
  (void)ctx, (void)m, (void)n;
  *out = 123;
  return ZEUS_OK;
}

static void custom_selector_is_called_and_its_answer_checked(void **state) {
  (void)state;
  const zeus_plo_measurement m[] = {{300, 10, 1}, {275, 9, 1.1}, {250, 8, 1.3}};
  int calls = 0;
  zeus_selector s;
  unsigned w;
  assert_zeus_ok(zeus_selector_custom(&s, pick_second, &calls));
  assert_zeus_ok(zeus_selector_select(&s, m, 3, &w));
  assert_int_equal(w, 275);
  assert_int_equal(calls, 1);
  assert_zeus_err(zeus_selector_select(&s, m, 1, &w), ZEUS_EINVAL, "pick_second: need two measurements, got 1");
  assert_zeus_ok(zeus_selector_custom(&s, pick_bogus, NULL));
  assert_zeus_err(zeus_selector_select(&s, m, 3, &w), ZEUS_EINVAL, "custom selector chose 123 W, which is not one of");

  /* Through the optimizer. */
  zeus_devices *d = open_sim_dvfs(1);
  zeus_monitor *m1 = open_monitor(d);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  o.warmup_steps = 1;
  o.profile_steps = 2;
  o.pl_step_w = 100;
  assert_zeus_ok(zeus_selector_custom(&s, pick_second, &calls));
  o.selector = &s;
  zeus_plo *p;
  assert_zeus_ok(zeus_plo_open(&p, m1, &o));
  work w1 = {.node = zeus_devices_sim_node(d), .ngpu = 1};
  one_epoch(p, &w1, 2 + 3 * 3);
  assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_DONE);
  assert_int_equal(zeus_plo_optimal_power_limit_w(p), 200);
  zeus_plo_close(p);
  zeus_monitor_close(m1);
  zeus_devices_close(d);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(selector_parameters_out_of_range_are_einval_naming_them),
      cmocka_unit_test(selectors_pick_each_optimum_and_break_ties_to_the_first),
      cmocka_unit_test(custom_selector_is_called_and_its_answer_checked),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Measurement windows with the power's tick at every phase from the energy counter's (issue 35):
 * on the measured models (h100, whose phase was never measured, at 16 fixed offsets; h200, whose
 * power ticks on its own ~101.6 ms clock against the counter's 100.0 ms, at 16 starting offsets,
 * each drifting a whole period every ~6 s), one GPU at a steady full load, windows of 50 ms to 2 s
 * against the simulated ground truth (tests/window_sweep.h). The sampled source meets the issue's
 * targets at every offset: 50 ms to 1 s median <= 0.5 % and worst <= 2 %, 1 s and more within
 * 0.2 %; its stated error bound holds in at least 99 % of windows; the raw counter's difference is
 * far off. Virtual clock and seeded: the figures are exact, so these cannot flake. The sampler that
 * took the counter's value as of the power's tick failed the h200 sweep's 200 ms worst (tens of %). */
#include "test_util.h"
#include "window_sweep.h"

static ws_result res; /* large: not on the stack */

static void check_targets(const char *hw) {
  const char *seed = getenv("WS_SEED"); /* for trying other seeds by hand; the test's is 1 */
  assert_int_equal(ws_run(hw, ZEUS_ENERGY_SAMPLED, 16, seed ? (unsigned)atoi(seed) : 1, &res), 0);
  char title[64];
  snprintf(title, sizeof title, "%s, sampled, 16 offsets:", hw);
  ws_print(title, &res);
  for (size_t l = 0; l < WS_NLENS; l++) {
    const double *e = res.err[l];
    size_t n = res.n[l];
    if (WS_LENS[l] >= 1.0) {
      assert_true(e[n - 1] <= 0.002); /* every window of 1 s and more within 0.2 % */
    } else {
      for (unsigned o = 0; o < res.offsets; o++) {
        if (res.off_median[l][o] > 0.005 || res.off_worst[l][o] > 0.02)
          print_message("%s: %.0f ms windows at offset %u: median %.3f %%, worst %.3f %%\n", hw, WS_LENS[l] * 1e3,
                        o, 100 * res.off_median[l][o], 100 * res.off_worst[l][o]);
        assert_true(res.off_median[l][o] <= 0.005);
        assert_true(res.off_worst[l][o] <= 0.02);
      }
    }
  }
  assert_true(res.outside_bound * 100 <= res.windows); /* the bound holds in >= 99 % of windows */
}

static void h100_sampled_meets_the_targets_at_every_phase(void **state) {
  (void)state;
  check_targets("h100");
}

static void h200_sampled_meets_the_targets_at_every_phase(void **state) {
  (void)state;
  check_targets("h200");
}

/* The raw counter's difference on the same windows: a window shorter than a tick reads 0 J or a
 * whole tick, so its worst error is tens of % up to 100 %. */
static void raw_counter_is_far_off_on_short_windows(void **state) {
  (void)state;
  assert_int_equal(ws_run("h200", ZEUS_ENERGY_RAW, 4, 1, &res), 0);
  ws_print("h200, raw counter difference, 4 offsets:", &res);
  assert_true(res.err[0][res.n[0] - 1] >= 0.5); /* 50 ms */
  assert_true(res.err[2][res.n[2] - 1] >= 0.2); /* 200 ms */
}

int main(int argc, char **argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(h100_sampled_meets_the_targets_at_every_phase),
      cmocka_unit_test(h200_sampled_meets_the_targets_at_every_phase),
      cmocka_unit_test(raw_counter_is_far_off_on_short_windows),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

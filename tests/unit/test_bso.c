/* bso: random numbers, Gaussian Thompson sampling, pruning exploration, the optimizer's state,
 * and the learning-rate rules. */
#include <math.h>

#include "test_util.h"

#include <zeus.h>

#include "bso/bso_internal.h"

/* ---- random numbers ---- */

static void rng_splitmix_seeding_matches_reference_vectors(void **state) {
  (void)state;
  zeus_rng r;
  zeus_rng_seed(&r, 0);
  /* splitmix64 from 0: the published reference sequence. */
  assert_true(r.s[0] == 0xe220a8397b1dcdafULL);
  assert_true(r.s[1] == 0x6e789e6aa1b965f4ULL);
  assert_true(r.s[2] == 0x06c45d188009454fULL);
  assert_true(r.s[3] == 0xf88bb8a8724c81ecULL);
  /* xoshiro256** first output: rotl(s1 * 5, 7) * 9. */
  uint64_t x = r.s[1] * 5;
  uint64_t want = ((x << 7) | (x >> 57)) * 9;
  assert_true(zeus_rng_next(&r) == want);
  /* Golden values: any change to the generator changes these (and every seeded run). */
  assert_true(zeus_rng_next(&r) == 0xbf6e1f784956452aULL);
  assert_true(zeus_rng_next(&r) == 0x1a5f849d4933e6e0ULL);
}

static void rng_normals_are_golden_and_standard(void **state) {
  (void)state;
  zeus_rng r;
  zeus_rng_seed(&r, 123456);
  assert_true(zeus_rng_normal(&r) == 0.90950673123709525);
  assert_true(zeus_rng_normal(&r) == -0.28624110206065789);
  assert_true(zeus_rng_normal(&r) == 1.7306942892310078);
  zeus_rng_seed(&r, 7);
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; i++) {
    double z = zeus_rng_normal(&r);
    sum += z;
    sq += z * z;
  }
  double mean = sum / n, var = sq / n - mean * mean;
  assert_near(mean, 0.0, 0.01);
  assert_near(var, 1.0, 0.01);
}

static void rng_same_seed_same_stream_other_seed_differs(void **state) {
  (void)state;
  zeus_rng a, b, c;
  zeus_rng_seed(&a, 42);
  zeus_rng_seed(&b, 42);
  zeus_rng_seed(&c, 43);
  int same_c = 0;
  for (int i = 0; i < 1000; i++) {
    uint64_t x = zeus_rng_next(&a);
    assert_true(x == zeus_rng_next(&b));
    same_c += x == zeus_rng_next(&c);
  }
  assert_int_equal(same_c, 0);
}

static void rng_uniform_and_below_stay_in_range(void **state) {
  (void)state;
  zeus_rng r;
  zeus_rng_seed(&r, 1);
  int counts[3] = {0};
  for (int i = 0; i < 30000; i++) {
    double u = zeus_rng_uniform(&r);
    assert_true(u >= 0.0 && u < 1.0);
    uint64_t k = zeus_rng_below(&r, 3);
    assert_true(k < 3);
    counts[k]++;
  }
  for (int k = 0; k < 3; k++) assert_true(counts[k] > 9500 && counts[k] < 10500);
  assert_true(zeus_rng_below(&r, 0) == 0);
  assert_true(zeus_rng_below(&r, 1) == 0);
}

static void rng_own_log_matches_libm(void **state) {
  (void)state;
  double xs[] = {1e-300, 1e-10, 0.001, 0.3, 0.5, 0.7071, 0.99999, 1.0, 1.00001, 2.0, 3.14159, 1e10, 1e300};
  for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
    double want = log(xs[i]), got = zeus__det_log(xs[i]);
    assert_near(got, want, fabs(want) * 4e-16 + 1e-300);
  }
  assert_true(zeus__det_log(1.0) == 0.0);
}

/* ---- Gaussian Thompson sampling ---- */

static void gts_posterior_matches_hand_computation(void **state) {
  (void)state;
  long arms[] = {10, 20};
  zeus_gts_opts o;
  zeus_gts_opts_init(&o);
  o.prior_mean = 1.0;
  o.prior_precision = 2.0;
  o.reward_precision = 0.5;
  zeus_gts *g;
  assert_zeus_ok(zeus_gts_open(&g, arms, 2, &o));
  /* precision' = 2 + 2 * 0.5 = 3; mean' = (2 * 1 + 0.5 * (3 + 5)) / 3 = 2. */
  double r1[] = {3.0, 5.0};
  assert_zeus_ok(zeus_gts_fit_arm(g, 10, r1, 2, false));
  zeus_gts_arm a;
  assert_zeus_ok(zeus_gts_get_arm(g, 10, &a));
  assert_near(a.precision, 3.0, 1e-12);
  assert_near(a.mean, 2.0, 1e-12);
  assert_int_equal(a.num_observations, 2);
  /* Without reset: precision'' = 3.5; mean'' = (3 * 2 + 0.5 * 9) / 3.5 = 3. */
  double r2[] = {9.0};
  assert_zeus_ok(zeus_gts_fit_arm(g, 10, r2, 1, false));
  assert_zeus_ok(zeus_gts_get_arm(g, 10, &a));
  assert_near(a.precision, 3.5, 1e-12);
  assert_near(a.mean, 3.0, 1e-12);
  assert_int_equal(a.num_observations, 3);
  /* Reset: back to the prior, then the new rewards only: (2 * 1 + 0.5 * 9) / 2.5 = 2.6. */
  assert_zeus_ok(zeus_gts_fit_arm(g, 10, r2, 1, true));
  assert_zeus_ok(zeus_gts_get_arm(g, 10, &a));
  assert_near(a.precision, 2.5, 1e-12);
  assert_near(a.mean, 2.6, 1e-12);
  assert_int_equal(a.num_observations, 1);
  /* The other arm was untouched. */
  assert_zeus_ok(zeus_gts_get_arm(g, 20, &a));
  assert_near(a.mean, 1.0, 0);
  assert_near(a.precision, 2.0, 0);
  /* fit() over both arms with reset: arm 20 gets rewards {4}: (2 + 0.5 * 4) / 2.5 = 1.6. */
  long dec[] = {20, 10, 10};
  double rew[] = {4.0, 1.0, 3.0};
  assert_zeus_ok(zeus_gts_fit(g, dec, rew, 3, true));
  assert_zeus_ok(zeus_gts_get_arm(g, 20, &a));
  assert_near(a.mean, 1.6, 1e-12);
  assert_zeus_ok(zeus_gts_get_arm(g, 10, &a));
  assert_near(a.mean, (2.0 + 0.5 * 4.0) / 3.0, 1e-12);
  assert_zeus_err(zeus_gts_fit_arm(g, 30, r1, 2, false), ZEUS_ENOENT, "no arm 30");
  double bad[] = {NAN};
  assert_zeus_err(zeus_gts_fit_arm(g, 10, bad, 1, false), ZEUS_EINVAL, "finite");
  zeus_gts_close(g);
}

static void gts_infinite_precision_samples_the_mean(void **state) {
  (void)state;
  long arms[] = {1, 2, 3};
  zeus_gts_opts o;
  zeus_gts_opts_init(&o);
  o.reward_precision = INFINITY;
  o.num_exploration = 1;
  zeus_gts *g;
  assert_zeus_ok(zeus_gts_open(&g, arms, 3, &o));
  double r1[] = {-4.0, -6.0}, r2[] = {-3.0}, r3[] = {-3.5};
  assert_zeus_ok(zeus_gts_fit_arm(g, 1, r1, 2, false));
  assert_zeus_ok(zeus_gts_fit_arm(g, 2, r2, 1, false));
  assert_zeus_ok(zeus_gts_fit_arm(g, 3, r3, 1, false));
  zeus_gts_arm a;
  assert_zeus_ok(zeus_gts_get_arm(g, 1, &a));
  assert_true(isinf(a.precision));
  assert_near(a.mean, -5.0, 0);
  for (int i = 0; i < 50; i++) {
    long arm;
    assert_zeus_ok(zeus_gts_predict(g, &arm));
    assert_int_equal(arm, 2); /* the largest mean, with no uncertainty */
  }
  zeus_gts_close(g);
}

static void gts_explores_each_arm_before_sampling(void **state) {
  (void)state;
  long arms[] = {8, 16, 32, 64};
  zeus_gts_opts o;
  zeus_gts_opts_init(&o);
  o.reward_precision = 1.0;
  o.num_exploration = 2;
  zeus_gts *g;
  assert_zeus_ok(zeus_gts_open(&g, arms, 4, &o));
  int pulls[4] = {0};
  for (int i = 0; i < 8; i++) {
    long arm;
    assert_zeus_ok(zeus_gts_predict(g, &arm));
    int k = arm == 8 ? 0 : arm == 16 ? 1 : arm == 32 ? 2 : 3;
    pulls[k]++;
    assert_true(pulls[k] <= 2);
    double r = -(double)arm;
    assert_zeus_ok(zeus_gts_fit_arm(g, arm, &r, 1, false));
  }
  for (int k = 0; k < 4; k++) assert_int_equal(pulls[k], 2);
  /* Now sampling: arm 8 (reward -8, precision 2) beats 64 (-64) essentially always. */
  int eights = 0;
  for (int i = 0; i < 100; i++) {
    long arm;
    assert_zeus_ok(zeus_gts_predict(g, &arm));
    eights += arm == 8;
  }
  assert_true(eights >= 95);
  zeus_gts_close(g);
}

static void gts_sampling_follows_the_posterior(void **state) {
  (void)state;
  /* Two arms with means 0 and 1 and precision 1 each: P(arm 2 wins) = P(N(1, 2) > 0) = 0.760. */
  long arms[] = {1, 2};
  zeus_gts_opts o;
  zeus_gts_opts_init(&o);
  o.num_exploration = 0;
  o.prior_precision = 1.0;
  zeus_gts *g;
  assert_zeus_ok(zeus_gts_open(&g, arms, 2, &o));
  zeus_gts_arm a = {.arm = 2, .mean = 1.0, .precision = 1.0, .reward_precision = 1.0, .num_observations = 1};
  assert_zeus_ok(zeus__gts_set_arm_state(g, &a));
  int wins = 0;
  const int n = 20000;
  for (int i = 0; i < n; i++) {
    long arm;
    assert_zeus_ok(zeus_gts_predict(g, &arm));
    wins += arm == 2;
  }
  assert_near((double)wins / n, 0.7602, 0.015);
  zeus_gts_close(g);
}

static void gts_rejects_bad_options_and_cold_arms(void **state) {
  (void)state;
  long arms[] = {1, 1};
  zeus_gts *g;
  assert_zeus_err(zeus_gts_open(&g, arms, 2, NULL), ZEUS_EINVAL, "arm 1 is listed twice");
  assert_zeus_err(zeus_gts_open(&g, arms, 0, NULL), ZEUS_EINVAL, "at least one arm");
  zeus_gts_opts o;
  zeus_gts_opts_init(&o);
  o.prior_precision = -1;
  assert_zeus_err(zeus_gts_open(&g, arms, 1, &o), ZEUS_EINVAL, "prior_precision");
  zeus_gts_opts_init(&o);
  o.reward_precision = NAN;
  assert_zeus_err(zeus_gts_open(&g, arms, 1, &o), ZEUS_EINVAL, "reward_precision");
  zeus_gts_opts_init(&o);
  o.num_exploration = 0; /* no prior, no information: sampling cannot start */
  assert_zeus_ok(zeus_gts_open(&g, arms, 1, &o));
  long arm;
  assert_zeus_err(zeus_gts_predict(g, &arm), ZEUS_ESTATE, "no information");
  assert_zeus_err(zeus_gts_set_reward_precision(g, 1, -2), ZEUS_EINVAL, "precision");
  zeus_gts_close(g);
}

/* ---- the optimizer: pruning, then Thompson sampling ---- */

typedef struct step {
  long bs;
  double cost;
  bool reached;
} step;

/* Drives b through the script: each predict must return the scripted batch size. */
static void drive(zeus_bso *b, const step *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    long bs;
    assert_zeus_ok(zeus_bso_predict(b, &bs));
    if (bs != s[i].bs) fail_msg("step %zu: predicted %ld, script says %ld", i, bs, s[i].bs);
    assert_int_equal(zeus_bso_get_phase(b), ZEUS_BSO_PRUNING);
    assert_zeus_ok(zeus_bso_observe(b, s[i].bs, s[i].cost, s[i].reached));
  }
}

static const long BS5[] = {128, 8, 64, 16, 32}; /* unsorted on purpose */

static void bso_pruning_follows_the_scripted_order(void **state) {
  (void)state;
  zeus_bso *b;
  assert_zeus_ok(zeus_bso_open(&b, BS5, 5, 32, NULL));
  /* Round 1 from 32: down 32, 16, 8; up 64 fails, so 128 is never tried. The default moves to
   * 16 (least cost). Round 2 over {8, 16, 32} from 16: down 16, 8 fails; up 32. */
  const step script[] = {
      {32, 10, true}, {16, 8, true}, {8, 12, true}, {64, 30, false},
      {16, 9, true},  {8, 50, false}, {32, 11, true},
  };
  drive(b, script, sizeof script / sizeof script[0]);
  long bs;
  assert_zeus_ok(zeus_bso_predict(b, &bs));
  assert_int_equal(zeus_bso_get_phase(b), ZEUS_BSO_THOMPSON);
  assert_true(bs == 16 || bs == 32);
  const zeus_gts *g = zeus_bso_bandit(b);
  assert_non_null(g);
  assert_int_equal(zeus_gts_num_arms(g), 2);
  /* Arm 16: rewards {-8, -9}: variance 0.25, reward precision 4, posterior precision
   * 0 + 2 * 4 = 8, mean (4 * -17) / 8 = -8.5. Arm 32: {-10, -11}: precision 8, mean -10.5. */
  zeus_gts_arm a;
  assert_zeus_ok(zeus_gts_get_arm(g, 16, &a));
  assert_near(a.reward_precision, 4.0, 1e-12);
  assert_near(a.precision, 8.0, 1e-12);
  assert_near(a.mean, -8.5, 1e-12);
  assert_int_equal(a.num_observations, 2);
  assert_zeus_ok(zeus_gts_get_arm(g, 32, &a));
  assert_near(a.precision, 8.0, 1e-12);
  assert_near(a.mean, -10.5, 1e-12);
  assert_zeus_err(zeus_gts_get_arm(g, 8, &a), ZEUS_ENOENT, NULL);
  /* A later observation of 16 refits it on {-8, -9, -8.5}: variance 1/6, precision 6,
   * posterior 18, mean -8.5. */
  assert_zeus_ok(zeus_bso_observe(b, 16, 8.5, true));
  g = zeus_bso_bandit(b);
  assert_zeus_ok(zeus_gts_get_arm(g, 16, &a));
  assert_near(a.reward_precision, 6.0, 1e-9);
  assert_near(a.precision, 18.0, 1e-9);
  assert_near(a.mean, -8.5, 1e-12);
  /* A pruned batch size observed now stays in the history only. */
  assert_zeus_ok(zeus_bso_observe(b, 128, 5, true));
  assert_int_equal(zeus_bso_num_observations(b), 9);
  assert_int_equal(zeus_gts_num_arms(zeus_bso_bandit(b)), 2);
  zeus_bso_close(b);
}

static void bso_default_failing_first_goes_upwards(void **state) {
  (void)state;
  zeus_bso *b;
  assert_zeus_ok(zeus_bso_open(&b, BS5, 5, 32, NULL));
  /* 32 fails at once: the downward direction ends; upwards 64, 128. Round 2 from 64 over
   * {64, 128}: down 64 (then nothing below), up 128. */
  const step script[] = {{32, 10, false}, {64, 6, true}, {128, 7, true}, {64, 6, true}, {128, 8, true}};
  drive(b, script, sizeof script / sizeof script[0]);
  long bs;
  assert_zeus_ok(zeus_bso_predict(b, &bs));
  const zeus_gts *g = zeus_bso_bandit(b);
  assert_int_equal(zeus_gts_num_arms(g), 2);
  zeus_gts_arm a;
  assert_zeus_ok(zeus_gts_get_arm(g, 64, &a));
  assert_true(isinf(a.precision)); /* both rewards -6: no spread, exact belief */
  assert_near(a.mean, -6.0, 0);
  zeus_bso_close(b);
}

static void bso_everything_pruned_is_an_error(void **state) {
  (void)state;
  long bss[] = {16, 32};
  zeus_bso *b;
  assert_zeus_ok(zeus_bso_open(&b, bss, 2, 16, NULL));
  const step script[] = {{16, 1, false}, {32, 1, false}};
  drive(b, script, 2);
  long bs;
  assert_zeus_err(zeus_bso_predict(b, &bs), ZEUS_ESTATE, "every batch size was pruned");
  zeus_bso_close(b);
}

static void bso_unexpected_observation_needs_concurrency(void **state) {
  (void)state;
  zeus_bso *b;
  assert_zeus_ok(zeus_bso_open(&b, BS5, 5, 32, NULL));
  assert_int_equal(zeus_bso_expecting(b), 32);
  assert_zeus_err(zeus_bso_observe(b, 64, 3, true), ZEUS_ESTATE, "expected the result of batch size 32, got 64");
  assert_int_equal(zeus_bso_num_observations(b), 0);
  assert_zeus_err(zeus_bso_observe(b, 48, 3, true), ZEUS_EINVAL, "not one of the job's batch sizes");
  assert_zeus_err(zeus_bso_observe(b, 32, -1, true), ZEUS_EINVAL, "cost");
  assert_zeus_err(zeus_bso_observe(b, 32, NAN, true), ZEUS_EINVAL, "cost");
  zeus_bso_close(b);

  zeus_bso_opts o;
  zeus_bso_opts_init(&o);
  o.concurrency = true;
  assert_zeus_ok(zeus_bso_open(&b, BS5, 5, 32, &o));
  assert_zeus_ok(zeus_bso_observe(b, 64, 3, true)); /* a concurrent submission finished first */
  assert_int_equal(zeus_bso_num_observations(b), 1);
  assert_int_equal(zeus_bso_expecting(b), 32);       /* the explorer did not move */
  assert_zeus_ok(zeus_bso_observe(b, 32, 4, true));
  assert_int_equal(zeus_bso_expecting(b), 16);
  long bs;
  double r;
  assert_zeus_ok(zeus_bso_observation(b, 0, &bs, &r));
  assert_int_equal(bs, 64);
  assert_near(r, -3.0, 0);
  zeus_bso_close(b);
}

static void bso_window_keeps_latest_observations(void **state) {
  (void)state;
  long bss[] = {16};
  zeus_bso_opts o;
  zeus_bso_opts_init(&o);
  o.window_size = 2;
  zeus_bso *b;
  assert_zeus_ok(zeus_bso_open(&b, bss, 1, 16, &o));
  const step script[] = {{16, 1, true}, {16, 3, true}};
  drive(b, script, 2);
  assert_zeus_ok(zeus_bso_observe(b, 16, 100, true)); /* observe() builds the bandit first */
  assert_zeus_ok(zeus_bso_observe(b, 16, 104, true));
  zeus_gts_arm a;
  assert_zeus_ok(zeus_gts_get_arm(zeus_bso_bandit(b), 16, &a));
  /* Window {-100, -104}: variance 4, precision 1/4, posterior 1/2, mean -102. */
  assert_near(a.reward_precision, 0.25, 1e-12);
  assert_near(a.precision, 0.5, 1e-12);
  assert_near(a.mean, -102.0, 1e-12);
  assert_int_equal(a.num_observations, 2);
  zeus_bso_close(b);
}

static const step SIX[] = {
    {32, 10, true}, {16, 8, true}, {8, 12, true}, {64, 9, true}, {128, 30, false},
    {16, 9, true},  {8, 11, true}, {32, 11, true}, {64, 10, true},
};

/* Runs a BSO with costs from a deterministic function of the batch size and a noise stream. */
static void run_thompson(zeus_bso *b, zeus_rng *noise, long *picks, int n) {
  for (int i = 0; i < n; i++) {
    long bs;
    assert_zeus_ok(zeus_bso_predict(b, &bs));
    picks[i] = bs;
    double cost = (double)(bs == 16 ? 8 : bs == 64 ? 9 : 11) + zeus_rng_uniform(noise);
    assert_zeus_ok(zeus_bso_observe(b, bs, cost, true));
  }
}

static void bso_same_seed_same_decisions(void **state) {
  (void)state;
  long p1[60], p2[60], p3[60];
  zeus_bso_opts o;
  zeus_bso_opts_init(&o);
  o.seed = 99;
  for (int k = 0; k < 3; k++) {
    if (k == 2) o.seed = 100;
    zeus_bso *b;
    assert_zeus_ok(zeus_bso_open(&b, BS5, 5, 32, &o));
    drive(b, SIX, sizeof SIX / sizeof SIX[0]);
    zeus_rng noise;
    zeus_rng_seed(&noise, 5);
    run_thompson(b, &noise, k == 0 ? p1 : k == 1 ? p2 : p3, 60);
    zeus_bso_close(b);
  }
  assert_memory_equal(p1, p2, sizeof p1);
  assert_memory_not_equal(p1, p3, sizeof p1);
  /* Thompson sampling settles on the cheapest batch size (16). */
  int sixteen = 0;
  for (int i = 30; i < 60; i++) sixteen += p1[i] == 16;
  assert_true(sixteen >= 20);
}

static void bso_saved_state_continues_identically(void **state) {
  (void)state;
  zeus_bso_opts o;
  zeus_bso_opts_init(&o);
  o.window_size = 5;
  zeus_bso *a, *b;
  assert_zeus_ok(zeus_bso_open(&a, BS5, 5, 32, &o));
  /* Save in the middle of pruning and again during sampling. */
  drive(a, SIX, 4);
  char *text;
  assert_zeus_ok(zeus_bso_save_state(a, &text));
  assert_zeus_ok(zeus_bso_load_state(&b, text));
  free(text);
  drive(b, SIX + 4, 5);
  drive(a, SIX + 4, 5);
  zeus_rng n1, n2;
  zeus_rng_seed(&n1, 3);
  zeus_rng_seed(&n2, 3);
  long pa[20], pb[20];
  run_thompson(a, &n1, pa, 20);
  assert_zeus_ok(zeus_bso_save_state(b, &text));
  zeus_bso_close(b);
  assert_zeus_ok(zeus_bso_load_state(&b, text));
  free(text);
  run_thompson(b, &n2, pb, 10);
  assert_zeus_ok(zeus_bso_save_state(b, &text));
  zeus_bso_close(b);
  assert_zeus_ok(zeus_bso_load_state(&b, text));
  free(text);
  run_thompson(b, &n2, pb + 10, 10);
  assert_memory_equal(pa, pb, sizeof pa);
  char *ta, *tb;
  assert_zeus_ok(zeus_bso_save_state(a, &ta));
  assert_zeus_ok(zeus_bso_save_state(b, &tb));
  assert_string_equal(ta, tb);
  free(ta);
  free(tb);
  zeus_bso_close(a);
  zeus_bso_close(b);
}

static void bso_rejects_bad_options_and_bad_state(void **state) {
  (void)state;
  zeus_bso *b;
  long dup[] = {8, 16, 8};
  assert_zeus_err(zeus_bso_open(&b, dup, 3, 8, NULL), ZEUS_EINVAL, "listed twice");
  assert_zeus_err(zeus_bso_open(&b, BS5, 5, 48, NULL), ZEUS_EINVAL, "default batch size 48 is not among");
  long neg[] = {-8, 16};
  assert_zeus_err(zeus_bso_open(&b, neg, 2, 16, NULL), ZEUS_EINVAL, "positive");
  zeus_bso_opts o;
  zeus_bso_opts_init(&o);
  o.num_pruning_rounds = 0;
  assert_zeus_err(zeus_bso_open(&b, BS5, 5, 32, &o), ZEUS_EINVAL, "num_pruning_rounds");
  zeus_bso_opts_init(&o);
  o.window_size = -1;
  assert_zeus_err(zeus_bso_open(&b, BS5, 5, 32, &o), ZEUS_EINVAL, "window_size");
  assert_zeus_err(zeus_bso_load_state(&b, "{"), ZEUS_EPARSE, NULL);
  assert_zeus_err(zeus_bso_load_state(&b, "{\"version\": 7}"), ZEUS_EPARSE, "version 7");
  /* A valid state with one field broken. */
  assert_zeus_ok(zeus_bso_open(&b, BS5, 5, 32, NULL));
  char *text;
  assert_zeus_ok(zeus_bso_save_state(b, &text));
  zeus_bso_close(b);
  char *p = strstr(text, "\"default_batch_size\":32");
  assert_non_null(p);
  memcpy(p, "\"default_batch_size\":33", 23);
  assert_zeus_err(zeus_bso_load_state(&b, text), ZEUS_EPARSE, "default batch size 33");
  free(text);
}

static void rules_scale_learning_rate(void **state) {
  (void)state;
  double lr;
  assert_zeus_ok(zeus_bso_scale_lr("Adam", 0.1, 32, 128, &lr));
  assert_near(lr, 0.2, 1e-15);
  assert_zeus_ok(zeus_bso_scale_lr("adamw", 0.1, 32, 8, &lr));
  assert_near(lr, 0.05, 1e-15);
  assert_zeus_ok(zeus_bso_scale_lr("AdaDelta", 1.0, 1024, 256, &lr));
  assert_near(lr, 0.5, 1e-15);
  assert_zeus_ok(zeus_bso_scale_lr("sgd", 0.1, 32, 128, &lr));
  assert_near(lr, 0.4, 1e-15);
  assert_zeus_ok(zeus_bso_scale_lr("SGD", 0.1, 32, 32, &lr));
  assert_near(lr, 0.1, 0);
  assert_zeus_err(zeus_bso_scale_lr("lamb", 0.1, 32, 64, &lr), ZEUS_EINVAL, "no rule for optimizer 'lamb'");
  assert_zeus_err(zeus_bso_scale_lr(NULL, 0.1, 32, 64, &lr), ZEUS_EINVAL, "give the learning rate");
  assert_zeus_err(zeus_bso_scale_lr("sgd", 0.1, 0, 64, &lr), ZEUS_EINVAL, "positive");
  assert_zeus_err(zeus_bso_scale_lr("sgd", NAN, 32, 64, &lr), ZEUS_EINVAL, "learning rate");
}

static void rules_cost_and_variance(void **state) {
  (void)state;
  /* eta 0.5, 1000 J, 10 s, 2 GPUs x 300 W: 500 + 0.5 * 600 * 10 = 3500. */
  assert_near(zeus_cost(1000, 10, 0.5, 600), 3500, 1e-9);
  assert_near(zeus_cost(1000, 10, 1.0, 600), 1000, 0);
  assert_near(zeus_cost(1000, 10, 0.0, 600), 6000, 0);
  double x[] = {1, 2, 3, 4};
  assert_near(zeus__variance(x, 4), 1.25, 1e-15);
  assert_near(zeus__variance(x, 1), 0, 0);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rng_splitmix_seeding_matches_reference_vectors),
      cmocka_unit_test(rng_normals_are_golden_and_standard),
      cmocka_unit_test(rng_same_seed_same_stream_other_seed_differs),
      cmocka_unit_test(rng_uniform_and_below_stay_in_range),
      cmocka_unit_test(rng_own_log_matches_libm),
      cmocka_unit_test(gts_posterior_matches_hand_computation),
      cmocka_unit_test(gts_infinite_precision_samples_the_mean),
      cmocka_unit_test(gts_explores_each_arm_before_sampling),
      cmocka_unit_test(gts_sampling_follows_the_posterior),
      cmocka_unit_test(gts_rejects_bad_options_and_cold_arms),
      cmocka_unit_test(bso_pruning_follows_the_scripted_order),
      cmocka_unit_test(bso_default_failing_first_goes_upwards),
      cmocka_unit_test(bso_everything_pruned_is_an_error),
      cmocka_unit_test(bso_unexpected_observation_needs_concurrency),
      cmocka_unit_test(bso_window_keeps_latest_observations),
      cmocka_unit_test(bso_same_seed_same_decisions),
      cmocka_unit_test(bso_saved_state_continues_identically),
      cmocka_unit_test(bso_rejects_bad_options_and_bad_state),
      cmocka_unit_test(rules_scale_learning_rate),
      cmocka_unit_test(rules_cost_and_variance),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

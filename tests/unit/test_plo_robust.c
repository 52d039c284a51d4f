/* Robust profiling of the power-limit optimizer (issue 30), on the simulated GPU replaying each
 * measured profile with issue 30's noise (5 % step jitter, first window 5 % slow, 2 % drift,
 * counter ticking every 100 ms; wait 1, warm-up 3, profile 10): how often each selector chooses
 * right, beside the original's profiling; the step budget; the epoch bound; the original's
 * behaviour on noiseless replays. Seeded: the figures are exact, so the test cannot flake. */
#include <math.h>

#include "plo/plo_internal.h"
#include "plo_testutil.h"

#define RUNS 20

static void make_selector(int k, zeus_selector *s) {
  switch (k) {
    case 0: zeus_selector_zeus_cost(s, 0.5, 1); s->world_size = 0; break; /* the replay's GPUs */
    case 1: zeus_selector_max_slowdown(s, 1.1); break;
    case 2: zeus_selector_energy(s); break;
    default: zeus_selector_time(s); break;
  }
}
static const char *const sel_names[] = {"ZeusCost(0.5)", "MaxSlowdown(1.1)", "Energy", "Time"};

/* Right choices out of 20 with robust profiling, as measured when this test was written (profiles
 * sorted by name; selectors as above). The test holds every cell at least there. */
static const int floor_robust[6][4] = {
    {20, 20, 20, 20}, /* bert-base-uncased */
    {20, 11, 20, 20}, /* resnet18 x4 */
    {20, 20, 20, 18}, /* resnet18 */
    {20, 20, 20, 13}, /* resnet50 x4 */
    {19, 20, 19, 20}, /* resnet50 */
    {18, 20, 20, 17}, /* shufflenetv2 */
};

/* Every profile x selector with issue 30's noise (on `hardware`, NULL: the plain 100 ms counter),
 * robust and original; each cell printed and held at its floor (floors may be NULL); the totals and
 * the largest ratio of profiling steps to the original's out. */
static void robustness_table(const char *hardware, const int (*floors)[4], int total[2], double *worst_ratio) {
  char paths[16][1024];
  size_t np = list_profiles(paths, 16);
  assert_int_equal(np, 6);
  total[0] = total[1] = 0;
  *worst_ratio = 0;
  print_message("%-34s %-17s %7s %9s   (%s)\n", "profile", "selector", "robust", "original",
                hardware ? hardware : "100 ms counter");
  for (size_t i = 0; i < np; i++) {
    for (int k = 0; k < 4; k++) {
      zeus_selector s;
      make_selector(k, &s);
      zeus__plo_noise nz;
      zeus__plo_noise_issue30(&nz);
      nz.seed = 1;
      if (hardware) {
        nz.counter_period_s = 0;
        nz.hardware = hardware;
      }
      int right[2];
      double ratio = 0;
      assert_zeus_ok(zeus__plo_robustness(paths[i], &s, &nz, 0, RUNS, &right[0], &ratio));
      assert_zeus_ok(zeus__plo_robustness(paths[i], &s, &nz, 1, RUNS, &right[1], NULL));
      print_message("%-34s %-17s %4d/%d %6d/%d\n", strrchr(paths[i], '/') + 1, sel_names[k], right[0], RUNS,
                    right[1], RUNS);
      if (floors) assert_true(right[0] >= floors[i][k]);
      total[0] += right[0];
      total[1] += right[1];
      *worst_ratio = fmax(*worst_ratio, ratio);
    }
  }
  print_message("total: robust %d/%d, original %d/%d; profiling steps at most %.2fx the original's\n", total[0],
                24 * RUNS, total[1], 24 * RUNS, *worst_ratio);
}

static void plo_robust_choices_beat_the_original_under_noise_within_the_step_budget(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  int total[2];
  double worst_ratio;
  robustness_table(NULL, floor_robust, total, &worst_ratio);
  assert_true(total[0] >= 455);
  assert_true(total[1] <= total[0] - 20);
  assert_true(worst_ratio <= 1.5);
}

/* The same on the `h100` hardware model (its own ~100 ms sensor tick with jitter, read costs,
 * power-limit effect delays): the totals as measured when this test was written. 455 when the
 * sampled source read the simulated GPU's exact tick times on the virtual clock; 454 since it
 * replays its followers' reads (issue 35: what a follower finds on a real GPU, to a fraction of a
 * ms), one run of 480 on a margin below the noise. */
static void plo_robust_beats_the_original_on_the_h100_model(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  int total[2];
  double worst_ratio;
  robustness_table("h100", NULL, total, &worst_ratio);
  assert_true(total[0] >= 454);
  assert_true(total[1] <= total[0] - 25);
  assert_true(worst_ratio <= 1.5);
}

/* Noiseless replays: robust profiling is the original's (same choice, same measurements, same
 * steps), on every profile and selector; and the switch gives the original too. */
static void plo_robust_is_the_original_on_noiseless_replays(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  char paths[16][1024];
  size_t np = list_profiles(paths, 16);
  for (size_t i = 0; i < np; i++) {
    for (int k = 0; k < 4; k++) {
      zeus_selector s;
      make_selector(k, &s);
      zeus__plo_noise nz;
      zeus__plo_noise_init(&nz);
      zeus__plo_replay_result a, b, c;
      assert_zeus_ok(zeus__plo_noisy_replay(paths[i], &s, &nz, 0, &a));
      assert_zeus_ok(zeus__plo_noisy_replay(paths[i], &s, &nz, 1, &b));
      setenv("ZEUS_PLO_PROFILING", "original", 1);
      assert_zeus_ok(zeus__plo_noisy_replay(paths[i], &s, &nz, -1, &c));
      unsetenv("ZEUS_PLO_PROFILING");
      assert_int_equal(a.chosen_w, b.chosen_w);
      assert_int_equal(c.chosen_w, b.chosen_w);
      assert_int_equal(a.steps, b.steps);
      assert_int_equal(a.steps, a.original_steps);
      assert_int_equal(a.n, b.n);
      for (size_t j = 0; j < a.n; j++) {
        assert_int_equal(a.meas[j].power_limit_w, b.meas[j].power_limit_w);
        assert_near(a.meas[j].time_s, b.meas[j].time_s, 1e-9 * b.meas[j].time_s);
        assert_near(a.meas[j].energy_j, b.meas[j].energy_j, 1e-9 * b.meas[j].energy_j);
      }
    }
  }
  setenv("ZEUS_PLO_PROFILING", "bogus", 1);
  zeus_selector s;
  zeus_selector_energy(&s);
  zeus__plo_noise nz;
  zeus__plo_noise_init(&nz);
  zeus__plo_replay_result r;
  int rc = zeus__plo_noisy_replay(paths[0], &s, &nz, -1, &r);
  unsetenv("ZEUS_PLO_PROFILING");
  assert_int_equal(rc, ZEUS_EINVAL);
  assert_non_null(strstr(zeus_errmsg(), "ZEUS_PLO_PROFILING"));
}

/* An epoch just long enough for the original's profiling: robust profiling does not go past it
 * (no longer windows, no measuring again), and, unknown epoch length, no window is lengthened. */
static void plo_robust_never_goes_past_the_first_epoch(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  char paths[16][1024];
  size_t np = list_profiles(paths, 16);
  for (size_t i = 0; i < np; i++) {
    for (int k = 0; k < 4; k++) {
      zeus_selector s;
      make_selector(k, &s);
      zeus__plo_noise nz;
      zeus__plo_noise_issue30(&nz);
      nz.seed = 7;
      nz.steps_per_epoch = nz.wait_steps + 1 + 9 * (nz.warmup_steps + nz.profile_steps);
      zeus__plo_replay_result r;
      assert_zeus_ok(zeus__plo_noisy_replay(paths[i], &s, &nz, 0, &r));
      assert_int_equal(r.original_steps, nz.steps_per_epoch);
      assert_true(r.steps <= nz.steps_per_epoch);
      /* Two epochs' worth: measuring again fits, within 1.5x. */
      nz.steps_per_epoch *= 2;
      assert_zeus_ok(zeus__plo_noisy_replay(paths[i], &s, &nz, 0, &r));
      assert_true(r.steps <= 1.5 * (double)r.original_steps);
    }
  }
}

/* Measuring again in a palindrome (A B B A): the middle pair is one limit twice, so its second
 * window starts without warm-up, and the room whole windows leave lengthens every new window.
 * A made-up profile (no data needed) with two limits 1 % apart in energy, the rest far off:
 * the sweep (119 steps), then 4 windows of L steps and 3 warm-ups (not 4) within 1.5x. */
static void plo_remeasuring_warms_up_once_for_the_middle_pair(void **state) {
  (void)state;
  scratch s;
  scratch_init(&s);
  char csv[700];
  snprintf(csv, sizeof csv, "%s/two_close.csv", s.dir);
  FILE *fp = fopen(csv, "w");
  assert_non_null(fp);
  fprintf(fp, "start_time,window_name,elapsed_time,gpu0_energy\n");
  static const double energy[9] = {3000, 2900, 2800, 2700, 2000, 2020, 2600, 2800, 3200};
  for (int i = 0; i < 9; i++) fprintf(fp, "%d,__GlobalPowerLimitOptimizer_%d,%g,%g\n", i, 300 - 25 * i, 10.0 + i, energy[i]);
  fclose(fp);
  zeus_selector sel;
  zeus_selector_energy(&sel);
  zeus__plo_noise nz;
  zeus__plo_noise_issue30(&nz);
  nz.seed = 3;
  nz.profile_path = s.profile;
  zeus__plo_replay_result r;
  assert_zeus_ok(zeus__plo_noisy_replay(csv, &sel, &nz, 0, &r));
  /* Room after the sweep: 1.5 x 119 - 119 = 59.5 steps; 3 warm-ups leave 50.5: L = 12. */
  long sweep = nz.wait_steps + 1 + 9 * (nz.warmup_steps + nz.profile_steps), len = 12;
  assert_int_equal(r.original_steps, sweep);
  assert_int_equal(r.steps, sweep + 4 * len + 3 * nz.warmup_steps);
  assert_true(r.chosen_w == 200 || r.chosen_w == 175);
  /* The file: the two limits measured in three windows, 10 + 2 x 12 steps each. */
  fp = fopen(s.profile, "r");
  assert_non_null(fp);
  char buf[16384] = {0};
  assert_true(fread(buf, 1, sizeof buf - 1, fp) > 0);
  fclose(fp);
  int thrice = 0;
  for (const char *q = buf; (q = strstr(q, "\"windows\": 3")); q++) thrice++;
  assert_int_equal(thrice, 2);
  int long_ones = 0;
  for (const char *q = buf; (q = strstr(q, "\"steps\": 34")); q++) long_ones++;
  assert_int_equal(long_ones, 2);
  scratch_free(&s);
}

/* The profile file records what each measurement is; files without those fields still load. */
static void plo_profile_records_steps_duration_and_spread(void **state) {
  (void)state;
  scratch s;
  scratch_init(&s);
  const zeus_plo_measurement m[] = {{300, 100, 2.0}, {250, 90, 2.1}};
  const zeus_plo_window_info info[] = {{10, 2.0, 0.05, 1, 0}, {20, 4.2, 0.04, 2, 1}};
  assert_zeus_ok(zeus__plo_profile_save_info(s.profile, m, info, 2, NULL));
  FILE *fp = fopen(s.profile, "r");
  char buf[4096] = {0};
  assert_true(fread(buf, 1, sizeof buf - 1, fp) > 0);
  fclose(fp);
  assert_non_null(strstr(buf, "\"steps\": 20"));
  assert_non_null(strstr(buf, "\"duration_s\": 4.2"));
  assert_non_null(strstr(buf, "\"step_time_cv\": 0.04"));
  assert_non_null(strstr(buf, "\"windows\": 2"));
  assert_non_null(strstr(buf, "\"outlier_steps\": 1"));
  zeus_plo_measurement *back;
  size_t n;
  assert_zeus_ok(zeus_plo_profile_load(s.profile, &back, &n));
  assert_int_equal(n, 2);
  assert_near(back[1].time_s, 2.1, 0);
  free(back);
  scratch_free(&s);
}

/* A profile's "choice" is checked like the rest of the file: a malformed one is refused with an
 * error naming it, by the public loader and the optimizer's alike; a good one loads. */
static void plo_profile_with_a_malformed_choice_is_refused(void **state) {
  (void)state;
  scratch s;
  scratch_init(&s);
  static const char *const bad[][2] = {
      {"[1]", "'choice' must be"},
      {"{\"among_w\": [300, 250]}", "'choice' must be"},
      {"{\"selector\": \"Fastest\", \"among_w\": [300, 250]}", "'choice' must be"},
      {"{\"selector\": \"ZeusCost\", \"eta\": \"0.5\", \"among_w\": [300, 250]}", "'choice' must be"},
      {"{\"selector\": \"ZeusCost\", \"eta\": 1.5, \"among_w\": [300, 250]}", "'choice' must be"},
      {"{\"selector\": \"Energy\", \"among_w\": 300}", "'choice' must be"},
      {"{\"selector\": \"Energy\", \"among_w\": [300, \"250\"]}", "choice.among_w[1]"},
      {"{\"selector\": \"Energy\", \"among_w\": [300, 237]}", "choice.among_w[1]"},
      {"{\"selector\": \"Energy\", \"among_w\": [-300]}", "choice.among_w[0]"},
      {"{\"selector\": \"Energy\", \"among_w\": [250, 250]}", "choice.among_w[1]"},
      {"{\"selector\": \"Energy\", \"among_w\": [300, 250]}", NULL},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    FILE *fp = fopen(s.profile, "w");
    assert_non_null(fp);
    fprintf(fp,
            "{\"measurements\": [{\"power_limit\": 300, \"energy\": 100, \"time\": 2.0}, "
            "{\"power_limit\": 250, \"energy\": 90, \"time\": 2.1}], \"choice\": %s}\n",
            bad[i][0]);
    fclose(fp);
    zeus_plo_measurement *m = NULL;
    size_t n = 0;
    int rc = zeus_plo_profile_load(s.profile, &m, &n);
    if (!bad[i][1]) {
      assert_zeus_ok(rc);
      assert_int_equal(n, 2);
      free(m);
      continue;
    }
    assert_int_equal(rc, ZEUS_EPARSE);
    assert_non_null(strstr(zeus_errmsg(), bad[i][1]));
    assert_non_null(strstr(zeus_errmsg(), s.profile));
  }
  scratch_free(&s);
}

/* A noisy run that re-measured chose among the re-measured limits; its saved profile, loaded with
 * the same selector, makes the same choice (the file's "choice"), though choosing over every
 * limit of the file would differ in some runs; another selector, or the original's profiling,
 * chooses over every limit. */
static void plo_loaded_profile_makes_the_live_runs_choice(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  char paths[16][1024];
  size_t np = list_profiles(paths, 16);
  scratch sc;
  scratch_init(&sc);
  int runs = 0, restricted = 0, differs = 0;
  for (size_t i = 0; i < np; i++) {
    for (int k = 0; k < 4; k++) {
      if (k == 1) continue; /* MaxSlowdownConstraint chooses over every limit live too */
      for (uint64_t seed = 1; seed <= 5; seed++) {
        zeus_selector s;
        make_selector(k, &s);
        zeus__plo_noise nz;
        zeus__plo_noise_issue30(&nz);
        nz.seed = seed;
        nz.profile_path = sc.profile;
        unlink(sc.profile);
        zeus__plo_replay_result live, loaded, orig;
        assert_zeus_ok(zeus__plo_noisy_replay(paths[i], &s, &nz, 0, &live));
        assert_zeus_ok(zeus__plo_noisy_replay(paths[i], &s, &nz, 0, &loaded));
        assert_int_equal(loaded.steps, 0); /* loaded, not profiled */
        assert_int_equal(loaded.chosen_w, live.chosen_w);
        runs++;
        zeus_selector all = s;
        if (all.kind == ZEUS_SELECTOR_ZEUS_COST) all.world_size = loaded.ngpu;
        unsigned w_all;
        assert_zeus_ok(zeus_selector_select(&all, loaded.meas, loaded.n, &w_all));
        FILE *fp = fopen(sc.profile, "r");
        char buf[16384] = {0};
        assert_true(fread(buf, 1, sizeof buf - 1, fp) > 0);
        fclose(fp);
        if (strstr(buf, "\"choice\"")) restricted++;
        if (w_all != live.chosen_w) differs++;
        /* The original's profiling loads the file as the original: over every limit. */
        assert_zeus_ok(zeus__plo_noisy_replay(paths[i], &s, &nz, 1, &orig));
        assert_int_equal(orig.chosen_w, w_all);
        if (k == 0) {
          /* Another selector than the live run's chooses over every limit of the file. */
          zeus_selector e;
          zeus_selector_energy(&e);
          unsigned we;
          assert_zeus_ok(zeus_selector_select(&e, loaded.meas, loaded.n, &we));
          assert_zeus_ok(zeus__plo_noisy_replay(paths[i], &e, &nz, 0, &orig));
          assert_int_equal(orig.chosen_w, we);
        }
      }
    }
  }
  print_message("loaded profiles: %d runs, %d recorded a choice among re-measured limits, %d of which choosing "
                "over every limit would have changed\n", runs, restricted, differs);
  assert_true(restricted > 0);
  assert_true(differs > 0); /* the case the file's "choice" is for occurs */
  scratch_free(&sc);
}

/* GPUs with few limits (issue 37): every profile cut to 250-100 W (7 limits, a V100's range). The
 * 1.5x budget then leaves room for three more windows, and the re-measuring palindrome needs four:
 * before, nothing was measured again and the Time selector, whose best is the first window's limit
 * (measured 5 % slow), chose wrong in 19 or 20 of 20 runs on bert and resnet50. Now the two limits
 * that decide (the first window's among them when it is within the noise) are measured once more.
 * Right choices out of 20 as measured when this test was written (profiles sorted by name). */
static const int floor_few[6][4] = {
    {19, 12, 18, 19}, /* bert-base-uncased */
    {14, 20, 19, 19}, /* resnet18 x4 */
    {20, 0, 20, 14},  /* resnet18 (MaxSlowdown: its noiseless choice is judged wrong) */
    {20, 20, 20, 17}, /* resnet50 x4 */
    {20, 20, 20, 15}, /* resnet50 */
    {20, 20, 20, 20}, /* shufflenetv2 */
};

/* Every measured profile cut to 250-100 W (7 limits, a V100's range) in sc's folder: cut[i] for
 * paths[i]; returns how many (6). */
static size_t cut_profiles(char (*paths)[1024], char (*cut)[1100], const scratch *sc) {
  size_t np = list_profiles(paths, 16);
  assert_int_equal(np, 6);
  for (size_t i = 0; i < np; i++) {
    snprintf(cut[i], sizeof cut[i], "%s/%s", sc->dir, strrchr(paths[i], '/') + 1);
    size_t kept = 0;
    assert_zeus_ok(zeus__plo_cut_profile(paths[i], cut[i], 250, 100, &kept));
    assert_int_equal(kept, 7);
  }
  return np;
}

/* The noiseless replay of profile under s (*t), the selector as the judge sees it (*js: ZeusCost
 * over the replay's GPUs) and whether its noiseless choice is judged right. */
static bool noiseless_truth(const char *profile, const zeus_selector *s, zeus__plo_replay_result *t,
                            zeus_selector *js) {
  zeus__plo_noise clean;
  zeus__plo_noise_init(&clean);
  assert_zeus_ok(zeus__plo_noisy_replay(profile, s, &clean, 1, t));
  *js = *s;
  if (js->kind == ZEUS_SELECTOR_ZEUS_COST) js->world_size = t->ngpu;
  bool ok;
  assert_zeus_ok(zeus__plo_judge(js, t->meas, t->n, t->chosen_w, &ok, NULL));
  return ok;
}

static void plo_few_limits_remeasure_what_decides(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  char paths[16][1024], cut[16][1100];
  scratch sc;
  scratch_init(&sc);
  size_t np = cut_profiles(paths, cut, &sc);
  int total[2] = {0, 0}, must = 0, must_ok = 0, out_of_reach = 0;
  double worst = 0;
  for (size_t i = 0; i < np; i++) {
    for (int k = 0; k < 4; k++) {
      zeus_selector s;
      make_selector(k, &s);
      zeus__plo_noise nz;
      zeus__plo_noise_issue30(&nz);
      nz.seed = 1;
      int right[2];
      double ratio = 0;
      assert_zeus_ok(zeus__plo_robustness(cut[i], &s, &nz, 0, RUNS, &right[0], &ratio));
      assert_zeus_ok(zeus__plo_robustness(cut[i], &s, &nz, 1, RUNS, &right[1], NULL));
      /* The noiseless choice, its judgement and the best limit's lead over the next. */
      zeus__plo_replay_result t;
      zeus_selector js;
      bool clean_ok = noiseless_truth(cut[i], &s, &t, &js);
      assert_int_equal(t.n, 7);
      double lead;
      assert_zeus_ok(zeus__plo_lead(&js, t.meas, t.n, &lead));
      /* Issue 37 asks 95 % of every cell whose best leads by > 1.5 %; within the 1.5x budget a
       * profiling that sweeps every limit first cannot reach it where the swept oracle bound is
       * below 95 % (the three cells with leads of 1.54-1.71 %): those are counted apart. */
      bool m = clean_ok && lead > 0.015;
      double swept = m ? zeus__plo_oracle_bound(cut[i], &s, &nz, 4000, true) : 1;
      assert_true(swept >= 0);
      bool reach = m && swept >= 0.95;
      must += reach;
      must_ok += reach && right[0] >= 19;
      out_of_reach += m && !reach;
      print_message("%-34s %-17s %4d/%d %6d/%d  lead %.2f%%%s\n", strrchr(paths[i], '/') + 1, sel_names[k], right[0],
                    RUNS, right[1], RUNS, 100 * lead,
                    reach ? (right[0] >= 19 ? " (>= 95 %)" : " (below 95 %)") : m ? " (swept bound below 95 %)" : "");
      assert_true(right[0] >= floor_few[i][k]);
      total[0] += right[0];
      total[1] += right[1];
      worst = fmax(worst, ratio);
    }
    unlink(cut[i]);
  }
  print_message("few limits: robust %d/%d, original %d/%d; %d of %d cells whose best leads by > 1.5 %% (swept bound "
                ">= 95 %%) at >= 95 %%, %d out of reach; steps at most %.2fx\n",
                total[0], 24 * RUNS, total[1], 24 * RUNS, must_ok, must, out_of_reach, worst);
  assert_true(total[0] >= 426);
  assert_true(total[1] <= 354);
  assert_int_equal(must, 13);
  assert_int_equal(out_of_reach, 4);
  assert_int_equal(must_ok, must); /* every cell within reach at >= 95 % */
  assert_true(worst <= 1.5);
  scratch_free(&sc);
}

/* The oracle bounds against their arithmetic: resnet18 cut to 7 limits, Time, whose contenders at
 * every width that holds a wrong limit are 175 W and 225 W (1.54 % apart). With per-limit steps s
 * and jitter j, the oracle is right when t175 (1 + j z1 / sqrt(s)) < t225 (1 + j z2 / sqrt(s)):
 * Phi((t225 - t175) / (j / sqrt(s) * hypot(t175, t225))). Unswept, s is the 1.5x budget less the
 * wait, halved; swept, profile_steps plus half what the sweep (7 x (warm-up + window)) leaves. */
static void plo_oracle_bounds_follow_their_arithmetic(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  char paths[16][1024], cut[1100];
  size_t np = list_profiles(paths, 16);
  assert_int_equal(np, 6);
  scratch sc;
  scratch_init(&sc);
  snprintf(cut, sizeof cut, "%s/A40+resnet18+gpu0.csv", sc.dir);
  size_t kept = 0;
  assert_zeus_ok(zeus__plo_cut_profile(paths[2], cut, 250, 100, &kept));
  assert_non_null(strstr(paths[2], "A40+resnet18+gpu0.csv"));
  zeus_selector s;
  zeus_selector_time(&s);
  zeus__plo_noise nz, clean;
  zeus__plo_noise_issue30(&nz);
  zeus__plo_noise_init(&clean);
  zeus__plo_replay_result t;
  assert_zeus_ok(zeus__plo_noisy_replay(cut, &s, &clean, 1, &t));
  double a = 0, b = 0;
  for (size_t i = 0; i < t.n; i++) {
    if (t.meas[i].power_limit_w == 175) a = t.meas[i].time_s;
    if (t.meas[i].power_limit_w == 225) b = t.meas[i].time_s;
  }
  assert_true(a > 0 && b > a);
  double budget = 1.5 * (double)t.original_steps - nz.wait_steps - 1;
  double per[2] = {budget / 2, nz.profile_steps + (budget - 7.0 * (nz.warmup_steps + nz.profile_steps)) / 2};
  for (int sw = 0; sw < 2; sw++) {
    double sd = nz.jitter / sqrt(per[sw]);
    double want = 0.5 * erfc(-(b - a) / (sd * hypot(a, b)) / sqrt(2.0));
    double got = zeus__plo_oracle_bound(cut, &s, &nz, 4000, sw == 1);
    print_message("%s bound: %.1f %% (arithmetic %.1f %%)\n", sw ? "swept" : "unswept", 100 * got, 100 * want);
    assert_true(fabs(got - want) < 0.02);
  }
  assert_true(zeus__plo_oracle_bound(cut, &s, &nz, 4000, true) < 0.95);
  unlink(cut);
  scratch_free(&sc);
}

/* The short plan on made-up keys: the two best candidates, the first window's limit in place of
 * the second when it is a candidate and measured last; none without two windows or candidates. */
static void plo_short_plan_takes_the_first_windows_limit_when_it_can_decide(void **state) {
  (void)state;
  size_t seq[16], nc;
  const double k1[7] = {1.03, 1.00, 1.01, 1.2, 1.3, 1.5, 2.0}; /* 0 is third best, within the noise */
  assert_int_equal(zeus__robust_short_plan(k1, 7, 0.05, 2, seq, &nc), 2);
  assert_int_equal(nc, 3);
  assert_int_equal(seq[0], 1);
  assert_int_equal(seq[1], 0);
  const double k2[7] = {1.10, 1.00, 1.01, 1.2, 1.3, 1.5, 2.0}; /* 0 outside the noise: the two best */
  assert_int_equal(zeus__robust_short_plan(k2, 7, 0.05, 3, seq, &nc), 2);
  assert_int_equal(nc, 2);
  assert_int_equal(seq[0], 2); /* the best last */
  assert_int_equal(seq[1], 1);
  const double k3[7] = {1.00, 1.02, 1.2, 1.2, 1.3, 1.5, 2.0}; /* 0 the best */
  assert_int_equal(zeus__robust_short_plan(k3, 7, 0.05, 2, seq, &nc), 2);
  assert_int_equal(seq[0], 1);
  assert_int_equal(seq[1], 0);
  assert_int_equal(zeus__robust_short_plan(k1, 7, 0.05, 1, seq, &nc), 0); /* one window: nothing */
  assert_int_equal(zeus__robust_short_plan(k2, 7, 0.001, 2, seq, &nc), 0); /* one candidate */
}

/* Issue 37: every choice is reported with its contenders (limits within the measured noise) and
 * the confidence reached. On the seeded noisy table (20 runs per cell): every wrong choice has a
 * right limit among its contenders, and the choices reported at >= 0.95 are right in >= 95 %;
 * noiseless replays report confidence 1 and no contender. */
static void plo_report_names_the_contenders_of_every_wrong_choice(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  char paths[16][1024];
  size_t np = list_profiles(paths, 16);
  int wrong = 0, wrong_covered = 0, sure = 0, sure_right = 0, runs = 0, with_cont = 0;
  for (size_t i = 0; i < np; i++) {
    for (int k = 0; k < 4; k++) {
      zeus_selector s;
      make_selector(k, &s);
      zeus__plo_noise clean;
      zeus__plo_noise_init(&clean);
      zeus__plo_replay_result t, r;
      assert_zeus_ok(zeus__plo_noisy_replay(paths[i], &s, &clean, 0, &t));
      assert_true(t.confidence == 1.0);
      assert_int_equal(t.ncontenders, 0);
      zeus_selector js = s;
      if (js.kind == ZEUS_SELECTOR_ZEUS_COST) js.world_size = t.ngpu;
      for (uint64_t seed = 1; seed <= RUNS; seed++) {
        zeus__plo_noise nz;
        zeus__plo_noise_issue30(&nz);
        nz.seed = seed;
        assert_zeus_ok(zeus__plo_noisy_replay(paths[i], &s, &nz, 0, &r));
        assert_true(r.confidence >= 0 && r.confidence <= 1);
        bool ok;
        assert_zeus_ok(zeus__plo_judge(&js, t.meas, t.n, r.chosen_w, &ok, NULL));
        runs++;
        with_cont += r.ncontenders > 0;
        for (size_t c = 0; c < r.ncontenders; c++) assert_true(r.contenders_w[c] != r.chosen_w);
        if (r.confidence >= 0.95) {
          sure++;
          sure_right += ok;
        }
        if (ok) continue;
        wrong++;
        for (size_t c = 0; c < r.ncontenders; c++) {
          bool right;
          assert_zeus_ok(zeus__plo_judge(&js, t.meas, t.n, r.contenders_w[c], &right, NULL));
          if (right) {
            wrong_covered++;
            break;
          }
        }
      }
    }
  }
  print_message("report: %d runs, %d with contenders; %d wrong, %d of them with a right limit among the contenders; "
                "%d reported at >= 0.95, %d of them right\n", runs, with_cont, wrong, wrong_covered, sure, sure_right);
  assert_int_equal(runs, 480);
  assert_true(wrong > 0);
  assert_int_equal(wrong_covered, wrong);
  assert_true(sure_right * 100 >= 95 * sure);
  assert_true(sure >= 300);
}

/* The report's arithmetic on made-up keys: a contender within two standard errors of a difference;
 * the confidence the product of P(key_c <= 1.01 key_j). */
static void plo_report_arithmetic(void **state) {
  (void)state;
  const double key[3] = {100, 101, 110}, sd[3] = {1, 1, 1};
  bool cont[3];
  double conf = zeus__robust_decide_min(key, sd, 3, 0, 0.01, 2.0, cont, NULL);
  /* 101 - 100 = 1 <= 2 sqrt(2): a contender; 10 > 2.83: not. P: phi((102.01 - 100) / sqrt 2) x ~1. */
  assert_false(cont[0]);
  assert_true(cont[1]);
  assert_false(cont[2]);
  double p1 = 0.5 * erfc(-(1.01 * 101 - 100) / sqrt(2.0) / sqrt(2.0));
  double p2 = 0.5 * erfc(-(1.01 * 110 - 100) / sqrt(2.0) / sqrt(2.0));
  assert_near(conf, p1 * p2, 1e-12);
  const double zero[3] = {0, 0, 0};
  assert_near(zeus__robust_decide_min(key, zero, 3, 0, 0.01, 2.0, cont, NULL), 1.0, 0);
  assert_false(cont[1]);
  /* MaxSlowdown(1.1): c = 1 (ratio 1.05), limit 2 (ratio 1.11, 5 % less energy) might qualify. */
  const double ratio[3] = {1.0, 1.05, 1.11}, rsd[3] = {0, 0.01, 0.01}, energy[3] = {100, 90, 85};
  conf = zeus__robust_decide_slowdown(ratio, rsd, energy, 3, 1, 1.1, 2.0, cont, NULL);
  assert_false(cont[0]);
  assert_false(cont[1]);
  assert_true(cont[2]);
  double q1 = 0.5 * erfc(-(1.1 * 1.005 - 1.05) / 0.01 / sqrt(2.0));
  double q2 = 0.5 * erfc(-(1.11 - 1.1) / 0.01 / sqrt(2.0));
  assert_near(conf, q1 * q2, 1e-12);
}

/* The profile file's "decision" is written only where steps were noisy, loads back, and a
 * malformed one is refused naming it. */
static void plo_profile_decision_round_trips_and_is_checked(void **state) {
  (void)state;
  scratch s;
  scratch_init(&s);
  const zeus_plo_measurement m[] = {{300, 100, 2.0}, {250, 90, 2.1}, {200, 85, 2.3}};
  unsigned cw[] = {250};
  zeus__plo_choice ch = {.decided = true, .optimal_w = 200, .confidence = 0.875, .contenders_w = cw, .ncontenders = 1};
  assert_zeus_ok(zeus__plo_profile_save_info(s.profile, m, NULL, 3, &ch));
  zeus_plo_measurement *back;
  size_t n;
  zeus__plo_choice got;
  assert_zeus_ok(zeus__plo_profile_load_choice(s.profile, &back, &n, &got));
  free(back);
  assert_true(got.decided);
  assert_int_equal(got.optimal_w, 200);
  assert_near(got.confidence, 0.875, 0);
  assert_int_equal(got.ncontenders, 1);
  assert_int_equal(got.contenders_w[0], 250);
  free(got.contenders_w);
  free(got.among_w);
  static const char *const bad[] = {
      "[1]",
      "{\"optimal_power_limit_w\": 200, \"contenders_w\": [250], \"confidence\": 1.5}",
      "{\"optimal_power_limit_w\": 200, \"contenders_w\": [237], \"confidence\": 0.5}",
      "{\"optimal_power_limit_w\": 199, \"contenders_w\": [], \"confidence\": 0.5}",
      "{\"optimal_power_limit_w\": 200, \"contenders_w\": 250, \"confidence\": 0.5}",
      "{\"contenders_w\": [], \"confidence\": 0.5}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    FILE *fp = fopen(s.profile, "w");
    assert_non_null(fp);
    fprintf(fp,
            "{\"measurements\": [{\"power_limit\": 300, \"energy\": 100, \"time\": 2.0}, "
            "{\"power_limit\": 250, \"energy\": 90, \"time\": 2.1}, {\"power_limit\": 200, \"energy\": 85, "
            "\"time\": 2.3}], \"decision\": %s}\n",
            bad[i]);
    fclose(fp);
    assert_zeus_err(zeus_plo_profile_load(s.profile, &back, &n), ZEUS_EPARSE, "'decision' must be");
  }
  scratch_free(&s);
}

/* The confidence mode (issue 37) at 0.95 with a cap of 12x the original's steps
 * (max_profile_steps): every cell right in >= 19 of 20 seeded runs (the default profiling has five
 * cells below, three of them below the fixed-allocation oracle's 95 %). */
static void plo_confidence_mode_is_right_in_every_cell_at_095(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  char paths[16][1024];
  size_t np = list_profiles(paths, 16);
  assert_int_equal(np, 6);
  int total = 0;
  double worst = 0;
  for (size_t i = 0; i < np; i++) {
    for (int k = 0; k < 4; k++) {
      zeus_selector s;
      make_selector(k, &s);
      zeus__plo_noise nz;
      zeus__plo_noise_issue30(&nz);
      nz.seed = 1;
      nz.confidence = 0.95;
      long orig = nz.wait_steps + 1 + 9 * (nz.warmup_steps + nz.profile_steps);
      nz.max_profile_steps = 12 * orig;
      nz.steps_per_epoch = nz.max_profile_steps + 1;
      int right;
      double ratio;
      assert_zeus_ok(zeus__plo_robustness(paths[i], &s, &nz, 0, RUNS, &right, &ratio));
      print_message("%-34s %-17s %4d/%d  steps <= %.2fx\n", strrchr(paths[i], '/') + 1, sel_names[k], right, RUNS, ratio);
      assert_true(right >= 19);
      assert_true(ratio <= 12.0);
      total += right;
      worst = fmax(worst, ratio);
    }
  }
  print_message("confidence 0.95, cap 12x: %d/480 right, steps at most %.2fx the original's\n", total, worst);
  assert_true(total >= 477);
}

/* What the confidence mode claims holds on GPUs with few limits too (every profile cut to 7 limits,
 * 0.95, a cap of 12x the original's steps): of the runs that end settled (confidence >= 0.95), at
 * most 5 % choose wrong, and no cell has more than 2 of its 20 settled wrong. Looking after every
 * round at a fixed share of the error settled resnet50's Time cell wrong in 4 of 20 (51 of 60 right
 * with 60 seeds, every wrong run settled); the looks now come each time the steps have doubled and
 * the r-th may settle only at 1 - (1 - target) / (r (r + 1)). The cell whose noiseless choice is judged
 * wrong (resnet18 MaxSlowdown) is left out. */
static void confidence_settles_wrong_rarely(const char *hw) {
  char paths[16][1024], cut[16][1100];
  scratch sc;
  scratch_init(&sc);
  size_t np = cut_profiles(paths, cut, &sc);
  int settled = 0, settled_wrong = 0, right_all = 0, worst_cell = 0;
  for (size_t i = 0; i < np; i++) {
    for (int k = 0; k < 4; k++) {
      zeus_selector s, js;
      make_selector(k, &s);
      zeus__plo_noise nz;
      zeus__plo_noise_issue30(&nz);
      if (hw) {
        nz.hardware = hw;
        nz.counter_period_s = 0;
      }
      zeus__plo_replay_result t;
      if (!noiseless_truth(cut[i], &s, &t, &js)) continue;
      nz.confidence = 0.95;
      nz.max_profile_steps = 12 * (nz.wait_steps + 1 + 7 * (nz.warmup_steps + nz.profile_steps));
      nz.steps_per_epoch = nz.max_profile_steps + 1;
      int cell_wrong = 0, cell_right = 0;
      for (int r = 0; r < RUNS; r++) {
        nz.seed = 1 + (uint64_t)r;
        zeus__plo_replay_result res;
        assert_zeus_ok(zeus__plo_noisy_replay(cut[i], &s, &nz, 0, &res));
        bool ok;
        assert_zeus_ok(zeus__plo_judge(&js, t.meas, t.n, res.chosen_w, &ok, NULL));
        cell_right += ok;
        if (res.confidence >= 0.95) {
          settled++;
          settled_wrong += !ok;
          cell_wrong += !ok;
        }
      }
      print_message("%-34s %-17s %4d/%d right, %d settled wrong\n", strrchr(paths[i], '/') + 1, sel_names[k],
                    cell_right, RUNS, cell_wrong);
      right_all += cell_right;
      if (cell_wrong > worst_cell) worst_cell = cell_wrong;
    }
    unlink(cut[i]);
  }
  print_message("few limits (%s), confidence 0.95, cap 12x: %d right; %d of %d settled runs wrong; at most %d in a "
                "cell\n", hw ? hw : "100 ms counter", right_all, settled_wrong, settled, worst_cell);
  assert_true(settled > 0);
  assert_true(settled_wrong * 20 <= settled);
  assert_true(worst_cell <= 2);
  scratch_free(&sc);
}

static void plo_confidence_mode_settles_wrong_rarely_on_few_limits(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  confidence_settles_wrong_rarely(NULL);
}

/* The same on the measured hardware models (their own sensor ticks, read costs, limit delays). */
static void plo_confidence_mode_settles_wrong_rarely_on_the_h100_and_h200_models(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  confidence_settles_wrong_rarely("h100");
  confidence_settles_wrong_rarely("h200");
}

/* At the cap (the default: the end of the first epoch) an unsettled choice takes the higher of the
 * contenders: never below the selector's choice on the measurements, and reported below the
 * target; a settled one at or above it. Noiseless steps: the original's steps and choice. */
static void plo_confidence_mode_takes_the_safer_limit_at_the_cap(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  char paths[16][1024];
  size_t np = list_profiles(paths, 16);
  scratch sc;
  scratch_init(&sc);
  int capped = 0, raised = 0, reloaded = 0;
  for (size_t i = 0; i < np; i++) {
    for (int k = 0; k < 4; k++) {
      zeus_selector s;
      make_selector(k, &s);
      zeus__plo_noise nz;
      zeus__plo_noise_init(&nz);
      nz.confidence = 0.95;
      zeus__plo_replay_result a, b;
      assert_zeus_ok(zeus__plo_noisy_replay(paths[i], &s, &nz, 0, &a));
      assert_zeus_ok(zeus__plo_noisy_replay(paths[i], &s, &nz, 1, &b));
      assert_int_equal(a.chosen_w, b.chosen_w);
      assert_int_equal(a.steps, a.original_steps);
      for (uint64_t seed = 1; seed <= 5; seed++) {
        zeus__plo_noise_issue30(&nz);
        nz.seed = seed;
        nz.confidence = 0.95;
        nz.profile_path = sc.profile;
        unlink(sc.profile);
        assert_zeus_ok(zeus__plo_noisy_replay(paths[i], &s, &nz, 0, &a));
        /* The saved profile, loaded with the same selector, makes the live run's choice and
         * tells its report again, a choice at the cap too. */
        zeus__plo_replay_result loaded;
        assert_zeus_ok(zeus__plo_noisy_replay(paths[i], &s, &nz, 0, &loaded));
        assert_int_equal(loaded.steps, 0);
        assert_int_equal(loaded.chosen_w, a.chosen_w);
        assert_near(loaded.confidence, a.confidence, 1e-6);
        reloaded++;
        assert_true(a.steps <= 3 * a.original_steps); /* the first epoch: 3x in the replay */
        zeus_selector js = s;
        if (js.kind == ZEUS_SELECTOR_ZEUS_COST) js.world_size = a.ngpu;
        unsigned w;
        assert_zeus_ok(zeus_selector_select(&js, a.meas, a.n, &w));
        if (a.confidence >= 0.95 * 0.999) {
          assert_int_equal(a.chosen_w, w);
          continue;
        }
        capped++;
        assert_true(a.chosen_w >= w);
        raised += a.chosen_w > w;
      }
    }
  }
  print_message("at the cap: %d runs unsettled, %d of them raised to a higher contender; %d reloaded alike\n",
                capped, raised, reloaded);
  assert_true(capped > 0);
  assert_true(raised > 0);
  scratch_free(&sc);
}

/* The mode's options: out of range refused naming them; ZEUS_PLO_CONFIDENCE read at open. */
static void plo_confidence_options_are_checked(void **state) {
  (void)state;
  scratch s;
  scratch_init(&s);
  char csv[700];
  snprintf(csv, sizeof csv, "%s/three.csv", s.dir);
  FILE *fp = fopen(csv, "w");
  assert_non_null(fp);
  fprintf(fp, "start_time,window_name,elapsed_time,gpu0_energy\n0,__GlobalPowerLimitOptimizer_300,10,3000\n"
              "1,__GlobalPowerLimitOptimizer_275,11,2900\n2,__GlobalPowerLimitOptimizer_250,12,2950\n");
  fclose(fp);
  zeus_selector sel;
  zeus_selector_energy(&sel);
  zeus__plo_noise nz;
  zeus__plo_noise_init(&nz);
  zeus__plo_replay_result r;
  nz.confidence = 1.0;
  assert_zeus_err(zeus__plo_noisy_replay(csv, &sel, &nz, 0, &r), ZEUS_EINVAL, "confidence 1");
  nz.confidence = -0.5;
  assert_zeus_err(zeus__plo_noisy_replay(csv, &sel, &nz, 0, &r), ZEUS_EINVAL, "confidence -0.5");
  nz.confidence = 0.9;
  nz.max_profile_steps = -1;
  assert_zeus_err(zeus__plo_noisy_replay(csv, &sel, &nz, 0, &r), ZEUS_EINVAL, "max_profile_steps -1");
  nz.max_profile_steps = 0;
  nz.confidence = 0;
  setenv("ZEUS_PLO_CONFIDENCE", "2", 1);
  int rc = zeus__plo_noisy_replay(csv, &sel, &nz, 0, &r);
  bool named = strstr(zeus_errmsg(), "ZEUS_PLO_CONFIDENCE") != NULL;
  setenv("ZEUS_PLO_CONFIDENCE", "0.95", 1);
  /* Through the environment the mode acts: 5 % jitter on two limits 1.7 % apart measures more. */
  zeus__plo_noise_issue30(&nz);
  nz.seed = 2;
  zeus__plo_replay_result withenv;
  int rc2 = zeus__plo_noisy_replay(csv, &sel, &nz, 0, &withenv);
  unsetenv("ZEUS_PLO_CONFIDENCE");
  assert_true(rc != ZEUS_OK); /* out of range: refused, naming the variable */
  assert_true(named);
  assert_zeus_ok(rc2);
  assert_false(isnan(withenv.confidence));
  zeus__plo_replay_result plain;
  assert_zeus_ok(zeus__plo_noisy_replay(csv, &sel, &nz, 0, &plain));
  assert_true(withenv.steps > plain.steps);
  scratch_free(&s);
}

/* The judge of a choice, on a made-up profile. */
static void plo_judge_follows_issue_30s_rule(void **state) {
  (void)state;
  const zeus_plo_measurement t[] = {{300, 100, 1.00}, {250, 90, 1.05}, {200, 80, 1.099}, {175, 80.5, 1.104}, {150, 79.5, 1.2}};
  zeus_selector s;
  bool ok;
  zeus_selector_energy(&s);
  assert_zeus_ok(zeus__plo_judge(&s, t, 5, 200, &ok, NULL));
  assert_true(ok); /* 80 within 1 % of 79.5 */
  assert_zeus_ok(zeus__plo_judge(&s, t, 5, 250, &ok, NULL));
  assert_false(ok);
  zeus_selector_max_slowdown(&s, 1.1);
  assert_zeus_ok(zeus__plo_judge(&s, t, 5, 200, &ok, NULL)); /* the least energy within the factor */
  assert_true(ok);
  assert_zeus_ok(zeus__plo_judge(&s, t, 5, 175, &ok, NULL)); /* 1.104 <= 1.1 * 1.005, 80.5 <= 1.01 * 80 */
  assert_true(ok);
  assert_zeus_ok(zeus__plo_judge(&s, t, 5, 250, &ok, NULL)); /* within the factor but 90 > 1.01 * 80 */
  assert_false(ok);
  assert_zeus_ok(zeus__plo_judge(&s, t, 5, 150, &ok, NULL)); /* too slow */
  assert_false(ok);
  assert_zeus_err(zeus__plo_judge(&s, t, 5, 225, &ok, NULL), ZEUS_EINVAL, "225 W");
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(plo_robust_choices_beat_the_original_under_noise_within_the_step_budget),
      cmocka_unit_test(plo_robust_beats_the_original_on_the_h100_model),
      cmocka_unit_test(plo_robust_is_the_original_on_noiseless_replays),
      cmocka_unit_test(plo_robust_never_goes_past_the_first_epoch),
      cmocka_unit_test(plo_remeasuring_warms_up_once_for_the_middle_pair),
      cmocka_unit_test(plo_profile_records_steps_duration_and_spread),
      cmocka_unit_test(plo_profile_with_a_malformed_choice_is_refused),
      cmocka_unit_test(plo_loaded_profile_makes_the_live_runs_choice),
      cmocka_unit_test(plo_judge_follows_issue_30s_rule),
      cmocka_unit_test(plo_few_limits_remeasure_what_decides),
      cmocka_unit_test(plo_oracle_bounds_follow_their_arithmetic),
      cmocka_unit_test(plo_report_names_the_contenders_of_every_wrong_choice),
      cmocka_unit_test(plo_report_arithmetic),
      cmocka_unit_test(plo_confidence_mode_is_right_in_every_cell_at_095),
      cmocka_unit_test(plo_confidence_mode_settles_wrong_rarely_on_few_limits),
      cmocka_unit_test(plo_confidence_mode_settles_wrong_rarely_on_the_h100_and_h200_models),
      cmocka_unit_test(plo_confidence_mode_takes_the_safer_limit_at_the_cap),
      cmocka_unit_test(plo_confidence_options_are_checked),
      cmocka_unit_test(plo_profile_decision_round_trips_and_is_checked),
      cmocka_unit_test(plo_short_plan_takes_the_first_windows_limit_when_it_can_decide),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The power-limit optimizer's state machine against the fake NVML (every set-power-limit call
 * checked through FAKE_NVML_LOG): the grid and the GPUs' ranges, bad options, the states and the
 * hooks, restoring on close.
 *
 * The acceptance tests replay every measured profile of ../shared/data/plo-profiles on simulated
 * GPUs whose table model is that profile, for every eta and four patterns of epoch ends, and
 * compare against a reference computed here from the CSV on its own (its own CSV reader, its own
 * cost function and its own model of which limits the GPUs must go through). */
#include "plo_testutil.h"

static zeus_devices *open_fake_nvml(void) {
  zeus_devices_opts o = {0};
  o.backend = "nvml";
  o.nvml_library = FAKE_NVML_PATH;
  zeus_devices *d = NULL;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  return d;
}

/* The calls a sequence of targets must produce: each change is one call per GPU, in GPU order,
 * at the target's point; a target equal to the current limit calls nothing, the first one (the
 * limit set at open) included, since the NVML backend does not write the limit a GPU already has.
 * initial_mw: the GPUs' limit before the first target. */
static size_t expected_calls(unsigned initial_mw, const target *t, size_t nt, unsigned ngpu, set_call *out,
                             size_t cap) {
  size_t n = 0;
  unsigned cur = initial_mw;
  for (size_t i = 0; i < nt; i++) {
    if (t[i].mw == cur) continue;
    for (unsigned g = 0; g < ngpu; g++) {
      assert_true(n < cap);
      out[n++] = (set_call){(int)g, t[i].mw, t[i].epoch, t[i].step};
    }
    cur = t[i].mw;
  }
  return n;
}

static void assert_calls_equal(const char *what, const set_call *got, size_t ngot, const set_call *want, size_t nwant,
                               bool check_when) {
  for (size_t i = 0; i < ngot || i < nwant; i++) {
    if (i >= ngot || i >= nwant || got[i].gpu != want[i].gpu || got[i].mw != want[i].mw ||
        (check_when && (got[i].epoch != want[i].epoch || got[i].step != want[i].step))) {
      fprintf(stderr, "%s: set-power-limit calls differ at #%zu (got %zu calls, expected %zu)\n", what, i, ngot, nwant);
      for (size_t k = 0; k < ngot || k < nwant; k++) {
        if (k < ngot) fprintf(stderr, "  #%zu got GPU %d %u mW at epoch %d step %ld", k, got[k].gpu, got[k].mw,
                              got[k].epoch, got[k].step);
        else fprintf(stderr, "  #%zu got nothing", k);
        if (k < nwant) fprintf(stderr, "   expected GPU %d %u mW at epoch %d step %ld\n", want[k].gpu, want[k].mw,
                               want[k].epoch, want[k].step);
        else fprintf(stderr, "   expected nothing\n");
      }
      fail_msg("%s: set-power-limit calls differ", what);
    }
  }
}

typedef enum pattern {
  PAT_NEVER = 0,             /* one epoch long enough for everything */
  PAT_IN_WARMUP,             /* the first attempt at every limit ends during its warmup */
  PAT_IN_PROFILING,          /* ... in the middle of its profiling window */
  PAT_LAST_PROFILING_STEP,   /* ... right after the last step of its profiling window */
} pattern;

static const char *const pattern_names[] = {"never", "in warmup", "in profiling", "on the last profiling step"};

/* Drives the loop with epoch lengths chosen from the pattern alone (W wait, K warmup, P profile
 * steps, n limits), and appends to `targets` the limits the GPUs must go through and where, from
 * the specification: the first limit is set at step begin W + 1; an attempt at a limit starts at
 * the step begin that sets it, its window begins K step begins later and ends P after that, at
 * the step begin that sets the next limit (or the optimum after the last one). An epoch end
 * during an attempt puts the maximum back; the next step begin starts the same limit again.
 * Interrupted patterns end the epoch `off` steps after an attempt starts. */
static void drive(zeus_plo *p, const work *w, pattern pat, long W, long K, long P, const unsigned *grid_mw, size_t n,
                  unsigned opt_mw, target *targets, size_t *nt) {
  unsigned max_mw = grid_mw[0];
  T(max_mw, 0, 0); /* at open */
  if (pat == PAT_NEVER) {
    for (size_t i = 0; i < n; i++) T(grid_mw[i], 1, W + 1 + (long)i * (K + P));
    T(opt_mw, 1, W + 1 + (long)n * (K + P));
    one_epoch(p, w, W + 1 + (long)n * (K + P) + 5);
    one_epoch(p, w, 7);
    return;
  }
  long off = pat == PAT_IN_WARMUP ? K / 2 : pat == PAT_IN_PROFILING ? K + P / 2 : K + P - 1;
  one_epoch(p, w, W + 1 + off); /* the first attempt at limit 0 is interrupted */
  T(grid_mw[0], 1, W + 1);
  T(max_mw, 1, AT_EPOCH_END);
  for (size_t i = 0; i < n; i++) {
    int e = (int)i + 2;
    T(grid_mw[i], e, 1); /* the same limit again, from the next step begin */
    if (i + 1 < n) {
      one_epoch(p, w, 1 + K + P + off); /* the retry completes; limit i+1 starts and is interrupted */
      T(grid_mw[i + 1], e, 1 + K + P);
      T(max_mw, e, AT_EPOCH_END);
    } else {
      one_epoch(p, w, 1 + K + P + 5); /* the last retry completes: DONE */
      T(opt_mw, e, 1 + K + P);
    }
  }
}
#undef T

static const double etas[] = {0, 0.25, 0.5, 0.75, 1};

/* One replay of profile r through the fake NVML; checks the calls, the measurements and the
 * optimum. With `save_to`, the optimizer writes its profile there. */
static void replay_case(fake *f, const ref_profile *r, const zeus_selector *sel, unsigned want_opt_w, pattern pat,
                        long W, long K, long P, const char *log, const char *save_to) {
  char what[1400];
  snprintf(what, sizeof what, "%s, %s selector (eta %g), epoch ends %s, wait %ld warmup %ld profile %ld", r->path,
           sel ? (sel->kind == ZEUS_SELECTOR_ZEUS_COST ? "ZeusCost" : "other") : "default", sel ? sel->eta : 0.5,
           pattern_names[pat], W, K, P);
  reset_env();
  setenv("ZEUS_SIM_MODEL_FILE", r->path, 1);
  setenv("FAKE_NVML_LOG", log, 1);
  unlink(log);
  zeus_devices *d = open_fake_nvml();
  assert_int_equal(zeus_gpu_count(d), r->ngpu);
  zeus_monitor *m = open_monitor(d);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  o.selector = sel;
  o.wait_steps = W;
  o.warmup_steps = K;
  o.profile_steps = P;
  o.profile_path = save_to;
  zeus_plo *p = NULL;
  assert_zeus_ok(zeus_plo_open(&p, m, &o));
  assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_READY);

  /* The grid is the profile's limits (300 down to 100 W in 25 W steps). */
  const unsigned *grid_w;
  size_t n = zeus_plo_power_limits(p, &grid_w);
  assert_int_equal(n, r->n);
  unsigned grid_mw[REF_MAX_ROWS] = {0};
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(grid_w[i], r->limit_w[i]);
    grid_mw[i] = r->limit_w[i] * 1000;
  }

  static recorder rec;
  memset(&rec, 0, sizeof rec);
  rec.log = log;
  record(&rec); /* calls made by open: epoch 0 */
  target targets[4 * REF_MAX_ROWS + 8];
  size_t nt = 0;
  work w = {.f = f, .ngpu = r->ngpu, .rec = &rec};
  drive(p, &w, pat, W, K, P, grid_mw, n, want_opt_w * 1000, targets, &nt);
  if (zeus_plo_get_state(p) != ZEUS_PLO_DONE) fail_msg("%s: not DONE at the end", what);
  if (zeus_plo_optimal_power_limit_w(p) != want_opt_w)
    fail_msg("%s: optimum %u W, expected %u W", what, zeus_plo_optimal_power_limit_w(p), want_opt_w);
  assert_int_equal(zeus_plo_current_power_limit_w(p), want_opt_w);

  /* Each measurement is exactly P steps at its limit: P/40 of the CSV row. */
  const zeus_plo_measurement *meas;
  assert_int_equal(zeus_plo_measurements(p, &meas), n);
  double scale = (double)P / 40.0;
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(meas[i].power_limit_w, r->limit_w[i]);
    assert_near(meas[i].time_s, r->time_s[i] * scale, 1e-9 * r->time_s[i] + 1e-12);
    assert_near(meas[i].energy_j, r->energy_j[i] * scale, 0.002 * r->ngpu + 1e-9 * r->energy_j[i]);
  }
  /* The GPUs hold the optimum now. */
  for (unsigned g = 0; g < r->ngpu; g++) {
    unsigned mw = 0;
    assert_zeus_ok(zeus_gpu_get_power_limit(d, g, &mw));
    assert_int_equal(mw, want_opt_w * 1000);
  }
  rec.epoch = CLOSE_EPOCH;
  rec.step = 0;
  zeus_plo_close(p);
  record(&rec);
  targets[nt++] = (target){grid_mw[0], CLOSE_EPOCH, 0}; /* close: the limit from before (the default, the maximum) */
  zeus_monitor_close(m);
  zeus_devices_close(d);

  set_call got[MAX_CALLS], want[MAX_CALLS];
  size_t ngot = read_set_calls(log, got, MAX_CALLS);
  assert_int_equal(ngot, rec.seen); /* closing the devices called nothing more */
  size_t nwant = expected_calls(grid_mw[0], targets, nt, r->ngpu, want, MAX_CALLS);
  assert_calls_equal(what, rec.calls, rec.seen, want, nwant, true);
  /* The grid never goes below the device minimum. */
  for (size_t i = 0; i < ngot; i++) assert_true(got[i].mw >= r->limit_w[r->n - 1] * 1000);
}

static void acceptance(pattern pat) {
  ZEUS_SKIP_WITHOUT_DATA();
  char paths[16][1024];
  size_t nfiles = list_profiles(paths, 16);
  fake f;
  fake_load(&f);
  scratch s;
  scratch_init(&s);
  size_t cases = 0;
  for (size_t fi = 0; fi < nfiles; fi++) {
    ref_profile r;
    ref_load(paths[fi], &r);
    for (size_t e = 0; e < sizeof etas / sizeof etas[0]; e++) {
      unsigned want = ref_optimum(&r, REF_COST, etas[e], r.ngpu);
      zeus_selector sel;
      assert_zeus_ok(zeus_selector_zeus_cost(&sel, etas[e], r.ngpu));
      /* eta 0.5 goes through the default selector (NULL): ZeusCost(0.5, number of GPUs). */
      replay_case(&f, &r, etas[e] == 0.5 ? NULL : &sel, want, pat, 1, 3, 6, s.log, NULL);
      cases++;
    }
  }
  print_message("%zu profiles x %zu etas, epoch ends %s: %zu cases\n", nfiles, sizeof etas / sizeof etas[0],
                pattern_names[pat], cases);
  scratch_free(&s);
  fake_unload(&f);
}

static void plo_acceptance_epoch_never_ends_early(void **state) {
  (void)state;
  acceptance(PAT_NEVER);
}
static void plo_acceptance_epoch_ends_during_warmup(void **state) {
  (void)state;
  acceptance(PAT_IN_WARMUP);
}
static void plo_acceptance_epoch_ends_during_profiling(void **state) {
  (void)state;
  acceptance(PAT_IN_PROFILING);
}
static void plo_acceptance_epoch_ends_on_last_profiling_step(void **state) {
  (void)state;
  acceptance(PAT_LAST_PROFILING_STEP);
}

/* warmup_steps 0 goes straight to profiling; wait_steps 0 starts at the first step; the
 * defaults (1, 10, 40) work too. */
static void plo_zero_warmup_and_zero_wait_profile_straight_away(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  char paths[16][1024];
  list_profiles(paths, 16);
  ref_profile r;
  ref_load(paths[0], &r);
  unsigned want = ref_optimum(&r, REF_COST, 0.5, r.ngpu);
  fake f;
  fake_load(&f);
  scratch s;
  scratch_init(&s);
  static const long params[][3] = {{0, 0, 4}, {1, 0, 3}, {0, 2, 1}, {3, 0, 1}, {1, 10, 40}};
  for (size_t i = 0; i < sizeof params / sizeof params[0]; i++)
    for (int pat = 0; pat < 4; pat++) {
      if (pat == PAT_IN_WARMUP && params[i][1] == 0) continue; /* no warmup to interrupt */
      replay_case(&f, &r, NULL, want, (pattern)pat, params[i][0], params[i][1], params[i][2], s.log, NULL);
    }
  scratch_free(&s);
  fake_unload(&f);
}

/* A saved profile, reloaded, starts DONE at each selector's optimum with one change at most. */
static void plo_reloaded_profile_gives_each_selectors_optimum(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  char paths[16][1024];
  size_t nfiles = list_profiles(paths, 16);
  fake f;
  fake_load(&f);
  scratch s;
  scratch_init(&s);
  static const double factors[] = {1.0, 1.1, 1.2, 1.5, 2.0, 3.0, 5.0, 100.0};
  for (size_t fi = 0; fi < nfiles; fi++) {
    ref_profile r;
    ref_load(paths[fi], &r);
    unlink(s.profile);
    replay_case(&f, &r, NULL, ref_optimum(&r, REF_COST, 0.5, r.ngpu), PAT_NEVER, 1, 2, 40, s.log, s.profile);
    zeus_plo_measurement *saved;
    size_t nsaved;
    assert_zeus_ok(zeus_plo_profile_load(s.profile, &saved, &nsaved));
    assert_int_equal(nsaved, r.n);

    for (size_t k = 0; k < 3 + sizeof factors / sizeof factors[0]; k++) {
      zeus_selector sel;
      unsigned want;
      if (k == 0) {
        assert_zeus_ok(zeus_selector_energy(&sel));
        want = ref_optimum(&r, REF_ENERGY, 0, 1);
      } else if (k == 1) {
        assert_zeus_ok(zeus_selector_time(&sel));
        want = ref_optimum(&r, REF_TIME, 0, 1);
      } else if (k == 2) {
        assert_zeus_ok(zeus_selector_zeus_cost(&sel, 0.5, r.ngpu));
        want = ref_optimum(&r, REF_COST, 0.5, r.ngpu);
      } else {
        assert_zeus_ok(zeus_selector_max_slowdown(&sel, factors[k - 3]));
        want = ref_optimum(&r, REF_SLOWDOWN, factors[k - 3], 1);
      }
      reset_env();
      setenv("ZEUS_SIM_MODEL_FILE", r.path, 1);
      setenv("FAKE_NVML_LOG", s.log, 1);
      unlink(s.log);
      zeus_devices *d = open_fake_nvml();
      zeus_monitor *m = open_monitor(d);
      zeus_plo_opts o;
      zeus_plo_opts_init(&o);
      o.selector = &sel;
      o.profile_path = s.profile;
      zeus_plo *p;
      assert_zeus_ok(zeus_plo_open(&p, m, &o));
      assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_DONE);
      if (zeus_plo_optimal_power_limit_w(p) != want)
        fail_msg("%s: selector %zu: optimum %u W, expected %u W", r.path, k, zeus_plo_optimal_power_limit_w(p), want);
      const zeus_plo_measurement *meas;
      assert_int_equal(zeus_plo_measurements(p, &meas), nsaved);
      for (size_t i = 0; i < nsaved; i++)
        assert_true(meas[i].power_limit_w == saved[i].power_limit_w && meas[i].energy_j == saved[i].energy_j &&
                    meas[i].time_s == saved[i].time_s);
      work w = {.f = &f, .ngpu = r.ngpu};
      one_epoch(p, &w, 20);
      assert_int_equal(zeus_plo_current_power_limit_w(p), want);
      zeus_plo_close(p);
      zeus_monitor_close(m);
      zeus_devices_close(d);
      const target targets[] = {{want * 1000, 0, 0}, {r.limit_w[0] * 1000, CLOSE_EPOCH, 0}};
      set_call got[MAX_CALLS], exp[MAX_CALLS];
      size_t ngot = read_set_calls(s.log, got, MAX_CALLS);
      size_t nexp = expected_calls(r.limit_w[0] * 1000, targets, 2, r.ngpu, exp, MAX_CALLS);
      assert_calls_equal(r.path, got, ngot, exp, nexp, false);
    }
    free(saved);
  }
  scratch_free(&s);
  fake_unload(&f);
}

/* A device minimum that is not on the stride: the original's range(max, min - step, -step) went
 * below it; ours stops at the last limit >= the minimum. */
static void plo_grid_never_goes_below_the_device_minimum(void **state) {
  (void)state;
  fake f;
  fake_load(&f);
  scratch s;
  scratch_init(&s);
  char model[700];
  snprintf(model, sizeof model, "%s/model.json", s.dir);
  zeus_test_write_file(model, "{\"gpus\": [{\"min_power_limit_w\": 110}, {\"min_power_limit_w\": 110}]}");
  static const struct { unsigned step; size_t n; unsigned last; } cases[] = {
      {25, 8, 125}, {30, 7, 120}, {100, 2, 200}, {190, 2, 110}, {191, 1, 300}, {1000, 1, 300}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    reset_env();
    setenv("ZEUS_SIM_MODEL_FILE", model, 1);
    setenv("FAKE_NVML_LOG", s.log, 1);
    unlink(s.log);
    zeus_devices *d = open_fake_nvml();
    zeus_monitor *m = open_monitor(d);
    zeus_plo_opts o;
    zeus_plo_opts_init(&o);
    o.pl_step_w = cases[c].step;
    o.warmup_steps = 1;
    o.profile_steps = 2;
    zeus_plo *p;
    assert_zeus_ok(zeus_plo_open(&p, m, &o));
    const unsigned *grid;
    size_t n = zeus_plo_power_limits(p, &grid);
    assert_int_equal(n, cases[c].n);
    assert_int_equal(grid[0], 300);
    assert_int_equal(grid[n - 1], cases[c].last);
    for (size_t i = 0; i < n; i++) assert_true(grid[i] >= 110 && grid[i] == 300 - i * cases[c].step);
    work w = {.f = &f, .ngpu = 2};
    one_epoch(p, &w, 2 + (long)n * 3 + 2);
    assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_DONE);
    zeus_plo_close(p);
    zeus_monitor_close(m);
    zeus_devices_close(d);
    set_call got[MAX_CALLS];
    size_t ngot = read_set_calls(s.log, got, MAX_CALLS);
    for (size_t i = 0; i < ngot; i++) assert_true(got[i].mw >= 110000);
    /* every grid limit below the maximum was set on both GPUs */
    assert_true(ngot >= 2 * (n - 1));
  }
  scratch_free(&s);
  fake_unload(&f);
}

static void plo_nonuniform_power_limit_ranges_are_einval_naming_the_gpus(void **state) {
  (void)state;
  zeus_sim_gpu_config g[2];
  memset(g, 0, sizeof g);
  g[1].dvfs.max_power_limit_w = 250;
  zeus_sim_config cfg = {.num_gpus = 2, .gpus = g};
  zeus_devices *d = open_sim_cfg(&cfg);
  zeus_monitor *m = open_monitor(d);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  zeus_plo *p = (zeus_plo *)1;
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EINVAL,
                  "ranges differ across GPUs: GPU 0 has [100000, 300000] mW but GPU 1 has [100000, 250000] mW");
  assert_null(p);
  /* One of them alone is fine. */
  unsigned one = 1;
  static const unsigned no_cpu[1];
  zeus_monitor_opts mo = {.devices = d, .gpu_indices = &one, .num_gpu_indices = 1, .cpu_indices = no_cpu};
  zeus_monitor *m1;
  assert_zeus_ok(zeus_monitor_open(&m1, &mo));
  assert_zeus_ok(zeus_plo_open(&p, m1, &o));
  const unsigned *grid;
  assert_int_equal(zeus_plo_power_limits(p, &grid), 7);
  assert_int_equal(grid[0], 250);
  zeus_plo_close(p);
  zeus_monitor_close(m1);
  zeus_monitor_close(m);
  zeus_devices_close(d);
}

static void plo_bad_options_are_einval_naming_the_option(void **state) {
  (void)state;
  zeus_devices *d = open_sim_dvfs(1);
  zeus_monitor *m = open_monitor(d);
  zeus_plo *p = NULL;
  zeus_plo_opts o;
#define BAD(field, value, needle)                                  \
  do {                                                             \
    zeus_plo_opts_init(&o);                                        \
    o.field = value;                                               \
    assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EINVAL, needle); \
    assert_null(p);                                                \
  } while (0)
  BAD(wait_steps, -1, "wait_steps -1 is outside the allowed range [0,");
  BAD(warmup_steps, -5, "warmup_steps -5 is outside the allowed range [0,");
  BAD(profile_steps, 0, "profile_steps 0 is outside the allowed range [1,");
  BAD(profile_steps, -3, "profile_steps -3 is outside the allowed range [1,");
  BAD(pl_step_w, 0, "pl_step_w 0 is outside the allowed range [1,");
  BAD(profile_path, "", "profile_path is empty");
#undef BAD
  /* A zeroed struct is rejected: profile_steps 0. */
  memset(&o, 0, sizeof o);
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EINVAL, "profile_steps 0");
  /* A selector whose fields were set by hand is checked too. */
  zeus_plo_opts_init(&o);
  zeus_selector sel = {.kind = ZEUS_SELECTOR_ZEUS_COST, .eta = 1.5, .world_size = 1};
  o.selector = &sel;
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EINVAL, "eta 1.5 is outside the allowed range [0, 1]");
  sel = (zeus_selector){.kind = ZEUS_SELECTOR_MAX_SLOWDOWN, .factor = 0.5};
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EINVAL, "factor 0.5 is outside the allowed range");
  sel = (zeus_selector){.kind = (zeus_selector_kind)42};
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EINVAL, "selector kind 42");
  assert_zeus_err(zeus_plo_open(&p, NULL, &o), ZEUS_EINVAL, "monitor");
  assert_zeus_err(zeus_plo_open(&p, m, NULL), ZEUS_EINVAL, "zeus_plo_opts_init");
  /* A bad collective is named. */
  zeus_plo_opts_init(&o);
  zeus_collective c = {.world_size = 2, .rank = 0};
  o.collective = &c;
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EINVAL, "allreduce callback is NULL");
  /* No GPU to optimize. */
  static const unsigned none[1];
  zeus_monitor_opts mo = {.devices = d, .gpu_indices = none, .num_gpu_indices = 0, .cpu_indices = none};
  zeus_monitor *m0;
  assert_zeus_ok(zeus_monitor_open(&m0, &mo));
  zeus_plo_opts_init(&o);
  assert_zeus_err(zeus_plo_open(&p, m0, &o), ZEUS_EINVAL, "measures no GPU");
  zeus_monitor_close(m0);
  /* Nothing was changed by the failed opens. */
  unsigned mw;
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 0, &mw));
  assert_int_equal(mw, 300000);
  zeus_monitor_close(m);
  zeus_devices_close(d);
  /* NULL handles. */
  assert_int_equal(zeus_plo_on_step_begin(NULL), ZEUS_EINVAL);
  assert_int_equal(zeus_plo_on_epoch_end(NULL), ZEUS_EINVAL);
  zeus_plo_close(NULL);
}

static void plo_states_follow_the_step_counts_and_hooks_are_noops_elsewhere(void **state) {
  (void)state;
  zeus_devices *d = open_sim_dvfs(1);
  zeus_monitor *m = open_monitor(d);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  o.wait_steps = 2;
  o.warmup_steps = 3;
  o.profile_steps = 4;
  o.pl_step_w = 100; /* 300, 200, 100 */
  zeus_plo *p;
  assert_zeus_ok(zeus_plo_open(&p, m, &o));
  zeus_sim_node *node = zeus_devices_sim_node(d);
  /* step begins 1, 2: READY; 3: WARMUP (300); 3+3=6: PROFILING; 6+4=10: WARMUP at 200 */
  static const zeus_plo_state want[] = {ZEUS_PLO_READY,     ZEUS_PLO_READY,     ZEUS_PLO_WARMUP,    ZEUS_PLO_WARMUP,
                                        ZEUS_PLO_WARMUP,    ZEUS_PLO_PROFILING, ZEUS_PLO_PROFILING, ZEUS_PLO_PROFILING,
                                        ZEUS_PLO_PROFILING, ZEUS_PLO_WARMUP};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    assert_zeus_ok(zeus_plo_on_step_begin(p));
    if (zeus_plo_get_state(p) != want[i])
      fail_msg("after step begin %zu: state %d, expected %d", i + 1, zeus_plo_get_state(p), want[i]);
    assert_zeus_ok(zeus_sim_work(node, 0, 1, NULL));
    /* step end and epoch begin do nothing */
    assert_zeus_ok(zeus_plo_on_step_end(p));
    assert_zeus_ok(zeus_plo_on_epoch_begin(p));
    assert_int_equal(zeus_plo_get_state(p), want[i]);
  }
  assert_int_equal(zeus_plo_current_power_limit_w(p), 200);
  assert_true(zeus_monitor_is_open(m, "__GlobalPowerLimitOptimizer_300") == false);
  const zeus_plo_measurement *meas;
  assert_int_equal(zeus_plo_measurements(p, &meas), 1);
  assert_int_equal(meas[0].power_limit_w, 300);
  assert_near(meas[0].time_s, 4 * 0.05, 1e-9); /* 4 steps of 0.05 s at the top clock */
  assert_int_equal(zeus_plo_optimal_power_limit_w(p), 0);
  /* Through to PROFILING at 200 W: the window's name carries the limit. */
  for (int i = 0; i < 3; i++) assert_zeus_ok(zeus_plo_on_step_begin(p));
  assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_PROFILING);
  assert_true(zeus_monitor_is_open(m, "__GlobalPowerLimitOptimizer_200"));
  /* An epoch end cancels it and puts the maximum back. */
  assert_zeus_ok(zeus_plo_on_epoch_end(p));
  assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_READY);
  assert_false(zeus_monitor_is_open(m, "__GlobalPowerLimitOptimizer_200"));
  assert_int_equal(zeus_plo_current_power_limit_w(p), 300);
  /* An epoch end in READY does nothing. */
  assert_zeus_ok(zeus_plo_on_epoch_end(p));
  assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_READY);
  assert_zeus_ok(zeus_plo_on_step_begin(p));
  assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_WARMUP);
  assert_int_equal(zeus_plo_current_power_limit_w(p), 200);
  /* Closing mid-window discards the window. */
  for (int i = 0; i < 3; i++) assert_zeus_ok(zeus_plo_on_step_begin(p));
  assert_true(zeus_monitor_is_open(m, "__GlobalPowerLimitOptimizer_200"));
  zeus_plo_close(p);
  assert_false(zeus_monitor_is_open(m, "__GlobalPowerLimitOptimizer_200"));
  zeus_monitor_close(m);
  zeus_devices_close(d);
}

/* GPUs that were not at the maximum get back what they had, persistence mode included. */
static void plo_close_restores_the_limits_from_before_the_optimizer(void **state) {
  (void)state;
  fake f;
  fake_load(&f);
  scratch s;
  scratch_init(&s);
  reset_env();
  setenv("ZEUS_SIM_GPUS", "3", 1);
  setenv("FAKE_NVML_LOG", s.log, 1);
  /* Someone else set GPU 1 to 175 W and GPU 2 to 250 W before (a handle of our own, kept open). */
  assert_int_equal(f.Init(), NVML_SUCCESS);
  nvmlDevice_t h;
  assert_int_equal(f.GetHandleByIndex(1, &h), NVML_SUCCESS);
  assert_int_equal(f.SetPowerManagementLimit(h, 175000), NVML_SUCCESS);
  assert_int_equal(f.GetHandleByIndex(2, &h), NVML_SUCCESS);
  assert_int_equal(f.SetPowerManagementLimit(h, 250000), NVML_SUCCESS);
  zeus_devices *d = open_fake_nvml();
  zeus_monitor *m = open_monitor(d);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  o.warmup_steps = 1;
  o.profile_steps = 1;
  o.pl_step_w = 50;
  zeus_plo *p;
  assert_zeus_ok(zeus_plo_open(&p, m, &o));
  work w = {.f = &f, .ngpu = 3};
  one_epoch(p, &w, 2 + 5 * 2 + 1);
  assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_DONE);
  unsigned opt = zeus_plo_optimal_power_limit_w(p);
  zeus_plo_close(p);
  static const unsigned before[] = {300000, 175000, 250000};
  for (unsigned g = 0; g < 3; g++) {
    unsigned mw;
    assert_zeus_ok(zeus_gpu_get_power_limit(d, g, &mw));
    assert_int_equal(mw, before[g]);
    assert_int_equal(last_logged(s.log, "nvmlDeviceSetPowerManagementLimit", (int)g), (long)before[g]);
    assert_int_equal(last_logged(s.log, "nvmlDeviceSetPersistenceMode", (int)g), 0);
    bool pm = true;
    assert_zeus_ok(zeus_gpu_get_persistence_mode(d, g, &pm));
    assert_false(pm);
  }
  /* At open, every GPU goes to the maximum first (the optimizer, as the original's, starts with
   * an unknown current limit and sets all); GPU 0 was there already, so NVML wrote nothing for it,
   * as the original's NVML class does not. */
  set_call got[MAX_CALLS];
  size_t n = read_set_calls(s.log, got, MAX_CALLS);
  assert_true(n >= 5);
  for (int g = 1; g < 3; g++) {
    assert_int_equal(got[1 + g].gpu, g);
    assert_int_equal(got[1 + g].mw, 300000);
  }
  assert_true(got[4].gpu != 0 || got[4].mw != 300000);
  (void)opt;
  zeus_monitor_close(m);
  zeus_devices_close(d);
  f.Shutdown();
  scratch_free(&s);
  fake_unload(&f);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(plo_acceptance_epoch_never_ends_early),
      cmocka_unit_test(plo_acceptance_epoch_ends_during_warmup),
      cmocka_unit_test(plo_acceptance_epoch_ends_during_profiling),
      cmocka_unit_test(plo_acceptance_epoch_ends_on_last_profiling_step),
      cmocka_unit_test(plo_zero_warmup_and_zero_wait_profile_straight_away),
      cmocka_unit_test(plo_reloaded_profile_gives_each_selectors_optimum),
      cmocka_unit_test(plo_grid_never_goes_below_the_device_minimum),
      cmocka_unit_test(plo_nonuniform_power_limit_ranges_are_einval_naming_the_gpus),
      cmocka_unit_test(plo_bad_options_are_einval_naming_the_option),
      cmocka_unit_test(plo_states_follow_the_step_counts_and_hooks_are_noops_elsewhere),
      cmocka_unit_test(plo_close_restores_the_limits_from_before_the_optimizer),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

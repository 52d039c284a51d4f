/* job: the training side of recurring jobs (zeus_job) on the simulated GPU: every ZEUS_*
 * setting, power-limit profiling in the first epoch, the profile and result files, stopping rules
 * (target, max epochs, cost threshold predicted one epoch ahead), observer mode, data parallel. */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>

#include "test_util.h"

#include <jansson.h>
#include <zeus.h>

static const char *const VARS[] = {"ZEUS_TARGET_METRIC",  "ZEUS_LOG_DIR",        "ZEUS_JOB_ID",
                                   "ZEUS_COST_THRESH",    "ZEUS_ETA_KNOB",       "ZEUS_PROFILE_PARAMS",
                                   "ZEUS_USE_OPTIMAL_PL", NULL};

typedef struct fixture {
  zeus_devices *dev;
  zeus_sim_node *node;
  zeus_monitor *mon;
  zeus_sim_gpu_config gpus[2];
  zeus_sim_config cfg;
  char dir[256];
} fixture;

/* n simulated GPUs (DVFS: 100-300 W limits) on the virtual clock, a fresh log folder, and the
 * ZEUS_* settings cleared except a target and the folder. */
/* The simulated hardware of the fixture's GPUs: NULL (ideal) or a profile name ("h100"). */
static const char *fx_hardware;
/* The fixture's GPUs' highest power limit in W (0: the model's 300 W; 250: 7 limits, a V100's). */
static double fx_max_w;

static void fx_open(fixture *f, unsigned n) {
  memset(f, 0, sizeof *f);
  for (unsigned i = 0; i < n; i++) {
    f->gpus[i].model = ZEUS_SIM_DVFS;
    if (fx_max_w > 0) f->gpus[i].dvfs.max_power_limit_w = fx_max_w;
    if (fx_hardware) assert_zeus_ok(zeus_sim_hardware_profile(fx_hardware, &f->gpus[i].hw));
  }
  f->cfg.num_gpus = n;
  f->cfg.gpus = f->gpus;
  f->cfg.clock = ZEUS_SIM_CLOCK_VIRTUAL;
  zeus_devices_opts o = {.backend = "sim", .sim = &f->cfg, .all_devices = true};
  assert_zeus_ok(zeus_devices_open(&f->dev, &o));
  f->node = zeus_devices_sim_node(f->dev);
  static const unsigned none[1] = {0};
  zeus_monitor_opts mo = {.devices = f->dev, .cpu_indices = none, .num_cpu_indices = 0};
  assert_zeus_ok(zeus_monitor_open(&f->mon, &mo));
  for (int i = 0; VARS[i]; i++) unsetenv(VARS[i]);
  zeus_test_tmpdir(f->dir, sizeof f->dir);
  setenv("ZEUS_TARGET_METRIC", "0.6", 1);
  setenv("ZEUS_LOG_DIR", f->dir, 1);
}

static void fx_close(fixture *f) {
  zeus_monitor_close(f->mon);
  zeus_devices_close(f->dev);
}

static zeus_job_opts job_opts(fixture *f, long bs, long steps) {
  return (zeus_job_opts){.batch_size = bs, .max_epochs = 10, .steps_per_epoch = steps, .eval_steps_per_epoch = 10,
                         .monitor = f->mon, .no_signal_handlers = true};
}

static double truth(fixture *f, unsigned g) {
  double j;
  assert_zeus_ok(zeus_sim_true_energy(f->node, g, &j));
  return j;
}

static unsigned limit_w(fixture *f, unsigned g) {
  unsigned mw;
  assert_zeus_ok(zeus_gpu_get_power_limit(f->dev, g, &mw));
  return mw / 1000;
}

/* Runs the training loop: `steps` training steps of 1 unit of work and 10 evaluation steps of 0.5
 * units per epoch; the metric after epoch e (1-based) is metric0 + 0.1 e (higher is better).
 * Returns the epochs run. */
static long train(fixture *f, zeus_job *j, long steps, double metric0, unsigned *limit_in_epoch1) {
  bool more;
  long epoch, ran = 0;
  for (;;) {
    assert_zeus_ok(zeus_job_next_epoch(j, &more, &epoch));
    if (!more) break;
    assert_int_equal(epoch, ran);
    assert_zeus_ok(zeus_job_train_begin(j));
    if (ran == 0 && limit_in_epoch1) *limit_in_epoch1 = limit_w(f, 0);
    for (long s = 0; s < steps; s++) {
      assert_zeus_ok(zeus_job_train_step_begin(j));
      assert_zeus_ok(zeus_sim_work(f->node, 0, 1.0, NULL));
      assert_zeus_ok(zeus_job_train_step_end(j));
    }
    assert_zeus_ok(zeus_job_train_end(j));
    assert_zeus_ok(zeus_job_eval_begin(j));
    for (int s = 0; s < 10; s++) {
      assert_zeus_ok(zeus_job_eval_step_begin(j));
      assert_zeus_ok(zeus_sim_work(f->node, 0, 0.5, NULL));
      assert_zeus_ok(zeus_job_eval_step_end(j));
    }
    assert_zeus_ok(zeus_job_eval_end(j));
    ran++;
    assert_zeus_ok(zeus_job_report_metric(j, metric0 + 0.1 * (double)ran, true));
  }
  return ran;
}

static json_t *load_json(const char *path) {
  json_error_t err;
  json_t *v = json_load_file(path, 0, &err);
  if (!v) fail_msg("%s: %s", path, err.text);
  return v;
}

static double num(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  if (!json_is_number(v)) fail_msg("field '%s' is not a number", key);
  return json_number_value(v);
}


/* The job's file paths, copied (zeus_job_info's strings die with the job). */
typedef struct paths {
  char train[512], power[512];
} paths;

static paths paths_of(zeus_job *j) {
  zeus_job_info in;
  zeus_job_get_info(j, &in);
  paths p;
  snprintf(p.train, sizeof p.train, "%s", in.train_json);
  snprintf(p.power, sizeof p.power, "%s", in.power_json);
  return p;
}

/* ---- settings ---- */

static void job_requires_target_metric(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1);
  unsetenv("ZEUS_TARGET_METRIC");
  zeus_job_opts o = job_opts(&f, 32, 100);
  zeus_job *j;
  assert_zeus_err(zeus_job_open(&j, &o), ZEUS_EINVAL, "ZEUS_TARGET_METRIC is not set");
  fx_close(&f);
}

static void job_rejects_bad_settings_by_name(void **state) {
  (void)state;
  static const struct {
    const char *var, *value, *needle;
    int code;
  } cases[] = {
      {"ZEUS_TARGET_METRIC", "high", "ZEUS_TARGET_METRIC", ZEUS_EINVAL},
      {"ZEUS_TARGET_METRIC", "nan", "ZEUS_TARGET_METRIC", ZEUS_EINVAL},
      {"ZEUS_COST_THRESH", "-5", "ZEUS_COST_THRESH", ZEUS_ERANGE},
      {"ZEUS_COST_THRESH", "0", "ZEUS_COST_THRESH", ZEUS_ERANGE},
      {"ZEUS_COST_THRESH", "lots", "ZEUS_COST_THRESH", ZEUS_EINVAL},
      {"ZEUS_ETA_KNOB", "1.5", "ZEUS_ETA_KNOB", ZEUS_ERANGE},
      {"ZEUS_ETA_KNOB", "half", "ZEUS_ETA_KNOB", ZEUS_EINVAL},
      {"ZEUS_PROFILE_PARAMS", "10", "ZEUS_PROFILE_PARAMS='10': expected 'warmup,measure'", ZEUS_EINVAL},
      {"ZEUS_PROFILE_PARAMS", "10,40,1", "ZEUS_PROFILE_PARAMS", ZEUS_EINVAL},
      {"ZEUS_PROFILE_PARAMS", "10,0", "measure steps", ZEUS_ERANGE},
      {"ZEUS_PROFILE_PARAMS", "-1,40", "warmup steps", ZEUS_ERANGE},
      {"ZEUS_PROFILE_PARAMS", "a,40", "warmup steps", ZEUS_EINVAL},
      {"ZEUS_USE_OPTIMAL_PL", "maybe", "ZEUS_USE_OPTIMAL_PL", ZEUS_EINVAL},
      {"ZEUS_JOB_ID", "a/b", "ZEUS_JOB_ID='a/b'", ZEUS_EINVAL},
      {"ZEUS_LOG_DIR", "/proc/zeus-cannot-create/x", "/proc/zeus-cannot-create", ZEUS_EIO},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fixture f;
    fx_open(&f, 1);
    setenv(cases[i].var, cases[i].value, 1);
    zeus_job_opts o = job_opts(&f, 32, 100);
    zeus_job *j = NULL;
    int rc = zeus_job_open(&j, &o);
    if (rc == ZEUS_OK) fail_msg("%s=%s was accepted", cases[i].var, cases[i].value);
    if (!strstr(zeus_errmsg(), cases[i].needle))
      fail_msg("%s=%s: message '%s' lacks '%s'", cases[i].var, cases[i].value, zeus_errmsg(), cases[i].needle);
    if (cases[i].var[5] != 'L' && rc != cases[i].code) /* the folder's code depends on the OS */
      fail_msg("%s=%s: code %d, expected %d", cases[i].var, cases[i].value, rc, cases[i].code);
    fx_close(&f);
  }
}

static void job_reads_every_setting(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1);
  char sub[300];
  snprintf(sub, sizeof sub, "%s/deeper/logs", f.dir);
  setenv("ZEUS_LOG_DIR", sub, 1);
  setenv("ZEUS_TARGET_METRIC", "-2.5", 1);
  setenv("ZEUS_JOB_ID", "rec01+try02", 1);
  setenv("ZEUS_COST_THRESH", "1234.5", 1);
  setenv("ZEUS_ETA_KNOB", "0.3", 1);
  setenv("ZEUS_PROFILE_PARAMS", "2,5", 1);
  setenv("ZEUS_USE_OPTIMAL_PL", "False", 1);
  zeus_job_opts o = job_opts(&f, 64, 100);
  zeus_job *j;
  assert_zeus_ok(zeus_job_open(&j, &o));
  zeus_job_info in;
  zeus_job_get_info(j, &in);
  assert_near(in.target_metric, -2.5, 0);
  assert_near(in.cost_threshold, 1234.5, 0);
  assert_near(in.eta, 0.3, 0);
  assert_int_equal(in.warmup_steps, 2);
  assert_int_equal(in.measure_steps, 5);
  assert_false(in.use_optimal_pl);
  assert_string_equal(in.log_dir, sub);
  assert_string_equal(in.job_id, "rec01+try02");
  char want[400];
  snprintf(want, sizeof want, "%s/rec01+try02+bs64.train.json", sub);
  assert_string_equal(in.train_json, want);
  snprintf(want, sizeof want, "%s/bs64.power.json", sub);
  assert_string_equal(in.power_json, want);
  struct stat st;
  assert_int_equal(stat(sub, &st), 0); /* created */
  assert_int_equal(in.num_gpus, 1);
  assert_near(in.max_power_w, 300, 0);
  assert_true(in.profiling);
  zeus_job_close(j);

  /* Defaults (the folder "zeus_log" is made in the working directory). */
  for (int i = 0; VARS[i]; i++) unsetenv(VARS[i]);
  setenv("ZEUS_TARGET_METRIC", "1", 1);
  char cwd[512];
  assert_non_null(getcwd(cwd, sizeof cwd));
  assert_int_equal(chdir(f.dir), 0);
  o.steps_per_epoch = 1000;
  assert_zeus_ok(zeus_job_open(&j, &o));
  zeus_job_get_info(j, &in);
  assert_string_equal(in.log_dir, "zeus_log");
  assert_string_equal(in.job_id, "zeus");
  assert_true(isinf(in.cost_threshold));
  assert_near(in.eta, 0.5, 0);
  assert_int_equal(in.warmup_steps, 10);
  assert_int_equal(in.measure_steps, 40);
  assert_true(in.use_optimal_pl);
  assert_string_equal(in.train_json, "zeus_log/zeus+bs64.train.json");
  assert_int_equal(stat("zeus_log", &st), 0);
  zeus_job_close(j);
  assert_int_equal(chdir(cwd), 0);
  fx_close(&f);
}

static void job_scales_profiling_windows_or_refuses(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1);
  /* 9 limits x (10 + 40) steps do not fit in 99: scaled by 99/450 to 2 + 8. */
  zeus_job_opts o = job_opts(&f, 32, 100);
  zeus_job *j;
  assert_zeus_ok(zeus_job_open(&j, &o));
  zeus_job_info in;
  zeus_job_get_info(j, &in);
  assert_int_equal(in.warmup_steps, 2);
  assert_int_equal(in.measure_steps, 8);
  zeus_job_close(j);
  o.steps_per_epoch = 9;
  assert_zeus_err(zeus_job_open(&j, &o), ZEUS_EINVAL, "an epoch of 9 steps cannot hold 9 power-limit windows");
  o = job_opts(&f, 0, 100);
  assert_zeus_err(zeus_job_open(&j, &o), ZEUS_EINVAL, "batch_size");
  o = job_opts(&f, 8, 0);
  assert_zeus_err(zeus_job_open(&j, &o), ZEUS_EINVAL, "steps_per_epoch");
  fx_close(&f);
}

/* ---- profiling, files, stopping ---- */

static void job_profiles_first_epoch_and_writes_files(void **state) {
  (void)state;
  paths P;
  fixture f;
  fx_open(&f, 1);
  setenv("ZEUS_PROFILE_PARAMS", "2,5", 1);
  setenv("ZEUS_JOB_ID", "rec01+try01", 1);
  assert_zeus_ok(zeus_gpu_set_power_limit(f.dev, 0, 250000)); /* what close must put back */
  zeus_job_opts o = job_opts(&f, 32, 100);
  zeus_job *j;
  assert_zeus_ok(zeus_job_open(&j, &o));
  double e0 = truth(&f, 0), t0 = zeus_sim_now(f.node);
  /* Metric 0.3 + 0.1 e reaches 0.6 after epoch 3. */
  long epochs = train(&f, j, 100, 0.3, NULL);
  assert_int_equal(epochs, 3);
  zeus_job_info in;
  zeus_job_get_info(j, &in);
  assert_false(in.profiling);
  assert_true(in.finished && in.reached);
  unsigned opt = in.optimal_power_limit_w;
  assert_int_equal(limit_w(&f, 0), opt);
  double e1 = truth(&f, 0), t1 = zeus_sim_now(f.node);
  P = paths_of(j);
  zeus_job_close(j);
  assert_int_equal(limit_w(&f, 0), 250); /* restored */

  /* The profile: nine limits, 300 W at the top clock (120 + 170 W, 0.05 s per unit). */
  json_t *p = load_json(P.power);
  json_t *tp = json_object_get(p, "train_power"), *tt = json_object_get(p, "train_throughput");
  assert_int_equal(json_object_size(tp), 9);
  assert_near(num(tp, "300000"), 290.0, 0.01);
  assert_near(num(tt, "300000"), 20.0, 1e-6);
  assert_near(num(tp, "100000"), num(tp, "100000"), 0);
  assert_true(num(tt, "100000") < num(tt, "300000"));
  /* The optimum is the least (eta P + (1 - eta) 300) / throughput. */
  const char *key;
  json_t *v;
  double best = INFINITY;
  long best_mw = 0;
  json_object_foreach(tp, key, v) {
    double c = (0.5 * json_number_value(v) + 0.5 * 300) / num(tt, key);
    if (c < best) best = c, best_mw = atol(key);
  }
  assert_int_equal(num(p, "optimal_pl"), best_mw);
  assert_int_equal(best_mw, opt * 1000);
  json_t *ep = json_object_get(p, "eval_power");
  assert_int_equal(json_object_size(ep), 1); /* evaluation of epoch 1 ran at the optimum */
  assert_string_equal(json_string_value(json_object_get(p, "job_id")), "rec01+try01");
  json_decref(p);

  /* The result: every joule of the loop, three epochs, reached. */
  json_t *r = load_json(P.train);
  char want[400];
  snprintf(want, sizeof want, "%s/rec01+try01+bs32.train.json", f.dir);
  assert_string_equal(P.train, want);
  assert_near(num(r, "energy"), e1 - e0, 0.01);
  assert_near(num(r, "time"), t1 - t0, 1e-6);
  assert_near(num(r, "cost"), 0.5 * (e1 - e0) + 0.5 * 300 * (t1 - t0), 0.01);
  assert_int_equal(num(r, "num_epochs"), 3);
  assert_int_equal(num(r, "epochs"), 3);
  assert_true(json_is_true(json_object_get(r, "reached")));
  assert_int_equal(num(r, "batch_size"), 32);
  assert_int_equal(num(r, "power_limit_w"), opt);
  assert_true(json_is_false(json_object_get(r, "observer_mode")));
  assert_near(num(r, "observed_energy"), num(r, "energy"), 0);
  json_decref(r);
  fx_close(&f);
}

/* Profiles once into f's folder (bs 32, 100 steps); returns the optimal limit. */
static unsigned profile_once(fixture *f) {
  setenv("ZEUS_PROFILE_PARAMS", "2,5", 1);
  setenv("ZEUS_JOB_ID", "first", 1);
  zeus_job_opts o = job_opts(f, 32, 100);
  zeus_job *j;
  assert_zeus_ok(zeus_job_open(&j, &o));
  train(f, j, 100, 0.5, NULL);
  zeus_job_info in;
  zeus_job_get_info(j, &in);
  zeus_job_close(j);
  return in.optimal_power_limit_w;
}

static void job_reuses_saved_profile(void **state) {
  (void)state;
  paths P;
  fixture f;
  fx_open(&f, 1);
  unsigned opt = profile_once(&f);
  assert_true(opt >= 100 && opt < 300);
  setenv("ZEUS_JOB_ID", "second", 1);
  zeus_job_opts o = job_opts(&f, 32, 100);
  zeus_job *j;
  assert_zeus_ok(zeus_job_open(&j, &o));
  zeus_job_info in;
  zeus_job_get_info(j, &in);
  assert_false(in.profiling);
  assert_int_equal(in.optimal_power_limit_w, opt);
  unsigned first_epoch_limit = 0;
  double e0 = truth(&f, 0);
  assert_int_equal(train(&f, j, 100, 0.35, &first_epoch_limit), 3);
  assert_int_equal(first_epoch_limit, opt); /* no profiling: the optimum from the first step */
  zeus_job_get_info(j, &in);
  P = paths_of(j);
  zeus_job_close(j);
  json_t *r = load_json(P.train);
  assert_near(num(r, "energy"), truth(&f, 0) - e0, 0.01);
  json_decref(r);
  /* A different batch size has no profile yet. */
  o.batch_size = 64;
  assert_zeus_ok(zeus_job_open(&j, &o));
  zeus_job_get_info(j, &in);
  assert_true(in.profiling);
  zeus_job_close(j);
  /* A malformed profile is an error naming the file, not a silent re-profile. */
  char path[400];
  snprintf(path, sizeof path, "%s/bs32.power.json", f.dir);
  zeus_test_write_file(path, "{\"train_power\": {\"300000\": 290}, \"train_throughput\": {}, \"optimal_pl\": 300000}");
  o.batch_size = 32;
  assert_zeus_err(zeus_job_open(&j, &o), ZEUS_EPARSE, "bs32.power.json");
  zeus_test_write_file(path, "not json");
  assert_zeus_err(zeus_job_open(&j, &o), ZEUS_EPARSE, "bs32.power.json");
  fx_close(&f);
}

static void job_stops_at_max_epochs_unreached(void **state) {
  (void)state;
  paths P;
  fixture f;
  fx_open(&f, 1);
  profile_once(&f);
  setenv("ZEUS_JOB_ID", "slow", 1);
  zeus_job_opts o = job_opts(&f, 32, 100);
  o.max_epochs = 4;
  zeus_job *j;
  assert_zeus_ok(zeus_job_open(&j, &o));
  assert_int_equal(train(&f, j, 100, -5.0, NULL), 4);
  zeus_job_info in;
  zeus_job_get_info(j, &in);
  P = paths_of(j);
  assert_true(in.finished);
  assert_false(in.reached);
  bool more;
  long epoch;
  assert_zeus_ok(zeus_job_next_epoch(j, &more, &epoch)); /* stays stopped */
  assert_false(more);
  zeus_job_close(j);
  json_t *r = load_json(P.train);
  assert_true(json_is_false(json_object_get(r, "reached")));
  assert_int_equal(num(r, "num_epochs"), 4);
  json_decref(r);
  fx_close(&f);
}

static void job_cost_threshold_predicted_one_epoch_ahead(void **state) {
  (void)state;
  paths P;
  fixture f;
  fx_open(&f, 1);
  profile_once(&f);
  /* The cost of one steady epoch (training at the optimum and evaluation). */
  setenv("ZEUS_JOB_ID", "measure", 1);
  zeus_job_opts o = job_opts(&f, 32, 100);
  o.max_epochs = 2;
  zeus_job *j;
  assert_zeus_ok(zeus_job_open(&j, &o));
  train(&f, j, 100, -5.0, NULL);
  zeus_job_info in;
  zeus_job_get_info(j, &in);
  P = paths_of(j);
  zeus_job_close(j);
  double c = in.cost / 2;
  assert_true(c > 0);
  assert_true(isnan(in.predicted_cost)); /* no threshold: no prediction */
  assert_false(in.stopped_by_cost);
  /* Threshold 2.5 epochs: after two epochs the third would reach 3c >= 2.5c. */
  char thresh[64];
  snprintf(thresh, sizeof thresh, "%.17g", 2.5 * c);
  setenv("ZEUS_COST_THRESH", thresh, 1);
  setenv("ZEUS_JOB_ID", "bounded", 1);
  o.max_epochs = 10;
  assert_zeus_ok(zeus_job_open(&j, &o));
  assert_int_equal(train(&f, j, 100, -5.0, NULL), 2);
  zeus_job_get_info(j, &in);
  P = paths_of(j);
  zeus_job_close(j);
  assert_near(in.cost, 2 * c, c * 1e-6);
  assert_true(in.stopped_by_cost);
  assert_near(in.predicted_cost, 3 * c, c * 1e-3); /* what stopped it */
  json_t *r = load_json(P.train);
  assert_int_equal(num(r, "num_epochs"), 2);
  assert_true(json_is_false(json_object_get(r, "reached")));
  json_decref(r);
  /* The prediction comes from the profile (the profiling windows' throughput and power), so it
   * matches a measured epoch to about 1e-5: just below 3c stops after two, just above runs three. */
  snprintf(thresh, sizeof thresh, "%.17g", 3 * c * (1 - 1e-4));
  setenv("ZEUS_COST_THRESH", thresh, 1);
  assert_zeus_ok(zeus_job_open(&j, &o));
  assert_int_equal(train(&f, j, 100, -5.0, NULL), 2);
  zeus_job_close(j);
  snprintf(thresh, sizeof thresh, "%.17g", 3 * c * (1 + 1e-4));
  setenv("ZEUS_COST_THRESH", thresh, 1);
  assert_zeus_ok(zeus_job_open(&j, &o));
  assert_int_equal(train(&f, j, 100, -5.0, NULL), 3);
  zeus_job_close(j);
  /* Below one epoch: stops before the first (the profile is known), with nothing spent. */
  snprintf(thresh, sizeof thresh, "%.17g", 0.5 * c);
  setenv("ZEUS_COST_THRESH", thresh, 1);
  setenv("ZEUS_JOB_ID", "never", 1);
  assert_zeus_ok(zeus_job_open(&j, &o));
  assert_int_equal(train(&f, j, 100, -5.0, NULL), 0);
  zeus_job_get_info(j, &in);
  P = paths_of(j);
  zeus_job_close(j);
  r = load_json(P.train);
  assert_int_equal(num(r, "num_epochs"), 0);
  assert_near(num(r, "energy"), 0, 0);
  assert_near(num(r, "time"), 0, 0);
  json_decref(r);
  /* While profiling there is no prediction: a new batch size runs its first epoch anyway. */
  setenv("ZEUS_JOB_ID", "profiling", 1);
  o.batch_size = 16;
  assert_zeus_ok(zeus_job_open(&j, &o));
  assert_int_equal(train(&f, j, 100, -5.0, NULL), 1);
  zeus_job_close(j);
  fx_close(&f);
}

static void job_observer_mode_runs_at_max_and_accounts_optimal(void **state) {
  (void)state;
  paths P;
  fixture f;
  fx_open(&f, 1);
  unsigned opt = profile_once(&f);
  assert_true(opt < 300);
  /* A normal run at the optimum, for reference. */
  setenv("ZEUS_JOB_ID", "normal", 1);
  zeus_job_opts o = job_opts(&f, 32, 100);
  zeus_job *j;
  assert_zeus_ok(zeus_job_open(&j, &o));
  train(&f, j, 100, 0.35, NULL);
  zeus_job_info normal;
  zeus_job_get_info(j, &normal);
  zeus_job_close(j);
  setenv("ZEUS_USE_OPTIMAL_PL", "false", 1);
  setenv("ZEUS_JOB_ID", "observer", 1);
  assert_zeus_ok(zeus_job_open(&j, &o));
  unsigned in_epoch1 = 0;
  double e0 = truth(&f, 0);
  assert_int_equal(train(&f, j, 100, 0.35, &in_epoch1), 3);
  assert_int_equal(in_epoch1, 300);
  zeus_job_info in;
  zeus_job_get_info(j, &in);
  P = paths_of(j);
  zeus_job_close(j);
  json_t *r = load_json(P.train);
  assert_true(json_is_true(json_object_get(r, "observer_mode")));
  assert_near(num(r, "observed_energy"), truth(&f, 0) - e0, 0.01);   /* what really ran, at 300 W */
  /* As if at the optimum: steady epochs are accounted from the profile (to about 1e-5). */
  assert_near(num(r, "energy"), normal.energy_j, normal.energy_j * 1e-4);
  assert_near(num(r, "time"), normal.time_s, normal.time_s * 1e-4);
  assert_true(num(r, "observed_time") < num(r, "time"));
  json_decref(r);
  fx_close(&f);
}

static void job_hooks_out_of_order_are_errors(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1);
  zeus_job_opts o = job_opts(&f, 32, 100);
  zeus_job *j;
  assert_zeus_ok(zeus_job_open(&j, &o));
  assert_zeus_err(zeus_job_train_step_begin(j), ZEUS_ESTATE, "zeus_job_train_begin first");
  assert_zeus_err(zeus_job_train_end(j), ZEUS_ESTATE, "no training phase");
  assert_zeus_err(zeus_job_eval_step_end(j), ZEUS_ESTATE, "no evaluation step");
  assert_zeus_ok(zeus_job_train_begin(j));
  assert_zeus_err(zeus_job_eval_begin(j), ZEUS_ESTATE, "already running");
  assert_zeus_ok(zeus_job_train_step_begin(j));
  assert_zeus_err(zeus_job_train_step_begin(j), ZEUS_ESTATE, "not ended");
  assert_zeus_err(zeus_job_train_end(j), ZEUS_ESTATE, "not ended");
  bool more;
  long epoch;
  assert_zeus_err(zeus_job_next_epoch(j, &more, &epoch), ZEUS_ESTATE, "end the training");
  assert_zeus_ok(zeus_job_train_step_end(j));
  assert_zeus_err(zeus_job_report_metric(j, NAN, true), ZEUS_EINVAL, "NaN");
  /* One step is too short an epoch for any profiling window. */
  assert_zeus_err(zeus_job_train_end(j), ZEUS_ESTATE, "too few for a power-limit window");
  zeus_job_close(j);
  fx_close(&f);
}

static void job_lower_is_better_metric(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1);
  setenv("ZEUS_TARGET_METRIC", "40", 1);
  zeus_job_opts o = job_opts(&f, 32, 1000);
  zeus_job *j;
  assert_zeus_ok(zeus_job_open(&j, &o));
  assert_zeus_ok(zeus_job_report_metric(j, 41, false));
  zeus_job_info in;
  zeus_job_get_info(j, &in);
  assert_false(in.reached);
  assert_zeus_ok(zeus_job_report_metric(j, 40, false));
  zeus_job_get_info(j, &in);
  assert_true(in.reached);
  zeus_job_close(j);
  fx_close(&f);
}

/* ---- data parallel: two ranks (threads), one GPU each, over a barrier collective ---- */

typedef struct shared {
  pthread_barrier_t bar;
  double vals[2][8];
  unsigned char bytes[4096];
} shared;

typedef struct rank_ctx {
  shared *sh;
  int rank;
} rank_ctx;

static int t_allreduce(void *ctx, double *values, size_t n, zeus_reduce_op op) {
  rank_ctx *c = ctx;
  memcpy(c->sh->vals[c->rank], values, n * sizeof *values);
  pthread_barrier_wait(&c->sh->bar);
  for (size_t i = 0; i < n; i++) {
    double a = c->sh->vals[0][i], b = c->sh->vals[1][i];
    values[i] = op == ZEUS_REDUCE_SUM ? a + b : (a > b ? a : b);
  }
  pthread_barrier_wait(&c->sh->bar);
  return ZEUS_OK;
}

static int t_broadcast(void *ctx, void *buf, size_t len, int root) {
  rank_ctx *c = ctx;
  if (c->rank == root) memcpy(c->sh->bytes, buf, len);
  pthread_barrier_wait(&c->sh->bar);
  if (c->rank != root) memcpy(buf, c->sh->bytes, len);
  pthread_barrier_wait(&c->sh->bar);
  return ZEUS_OK;
}

typedef struct rank_arg {
  fixture *f;
  shared *sh;
  int rank;
  zeus_monitor *mon;
  long epochs;
  zeus_job_info info;
  paths P;
  int rc;
  char msg[512];
} rank_arg;

static void *rank_main(void *p) {
  rank_arg *a = p;
  rank_ctx ctx = {a->sh, a->rank};
  zeus_collective coll = {.ctx = &ctx, .rank = a->rank, .world_size = 2, .allreduce = t_allreduce,
                          .broadcast = t_broadcast};
  zeus_job_opts o = {.batch_size = 16, .max_epochs = 10, .steps_per_epoch = 100, .eval_steps_per_epoch = 0,
                     .monitor = a->mon, .collective = &coll, .no_signal_handlers = true};
  zeus_job *j;
  a->rc = zeus_job_open(&j, &o);
  if (a->rc) {
    snprintf(a->msg, sizeof a->msg, "%s", zeus_errmsg());
    return NULL;
  }
  bool more;
  long epoch;
  static const double units[2] = {1.0, 1.2};
  while ((a->rc = zeus_job_next_epoch(j, &more, &epoch)) == ZEUS_OK && more) {
    if ((a->rc = zeus_job_train_begin(j))) break;
    for (int s = 0; s < 100 && !a->rc; s++) {
      a->rc = zeus_job_train_step_begin(j);
      pthread_barrier_wait(&a->sh->bar);
      if (a->rank == 0) zeus_sim_work_all(a->f->node, units, NULL); /* both GPUs at once */
      pthread_barrier_wait(&a->sh->bar);
      if (!a->rc) a->rc = zeus_job_train_step_end(j);
    }
    if (!a->rc) a->rc = zeus_job_train_end(j);
    a->epochs++;
    /* Only rank 0 sees the target reached: the decision is rank 0's for everyone. */
    if (!a->rc) a->rc = zeus_job_report_metric(j, a->rank == 0 && a->epochs >= 2 ? 1.0 : 0.0, true);
    if (a->rc) break;
  }
  if (a->rc) snprintf(a->msg, sizeof a->msg, "%s", zeus_errmsg());
  zeus_job_get_info(j, &a->info);
  a->P = paths_of(j);
  zeus_job_close(j);
  return NULL;
}

static void job_data_parallel_ranks_agree(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 2);
  setenv("ZEUS_PROFILE_PARAMS", "1,4", 1);
  setenv("ZEUS_JOB_ID", "dp", 1);
  shared sh;
  pthread_barrier_init(&sh.bar, NULL, 2);
  rank_arg args[2];
  pthread_t th[2];
  static const unsigned none[1] = {0};
  double e0 = truth(&f, 0) + truth(&f, 1), t0 = zeus_sim_now(f.node);
  for (int r = 0; r < 2; r++) {
    unsigned gpu = (unsigned)r;
    memset(&args[r], 0, sizeof args[r]);
    args[r] = (rank_arg){.f = &f, .sh = &sh, .rank = r};
    zeus_monitor_opts mo = {.devices = f.dev, .gpu_indices = &gpu, .num_gpu_indices = 1, .cpu_indices = none};
    assert_zeus_ok(zeus_monitor_open(&args[r].mon, &mo));
  }
  for (int r = 0; r < 2; r++) pthread_create(&th[r], NULL, rank_main, &args[r]);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  double e1 = truth(&f, 0) + truth(&f, 1), t1 = zeus_sim_now(f.node);
  for (int r = 0; r < 2; r++) {
    if (args[r].rc) fail_msg("rank %d: %s", r, args[r].msg);
    assert_int_equal(args[r].epochs, 2);
    assert_true(args[r].info.finished);
    assert_true(args[r].info.reached);
    assert_int_equal(args[r].info.num_gpus, 2);
    assert_near(args[r].info.max_power_w, 600, 0);
    assert_int_equal(args[r].info.batch_size, 32);
    zeus_monitor_close(args[r].mon);
  }
  assert_int_equal(args[0].info.optimal_power_limit_w, args[1].info.optimal_power_limit_w);
  assert_near(args[0].info.energy_j, args[1].info.energy_j, 0);
  json_t *r = load_json(args[0].P.train);
  assert_near(num(r, "energy"), e1 - e0, 0.01);  /* both GPUs */
  assert_near(num(r, "time"), t1 - t0, 1e-6);
  assert_int_equal(num(r, "batch_size"), 32);
  json_decref(r);
  char path[400];
  snprintf(path, sizeof path, "%s/bs32.power.json", f.dir);
  json_t *p = load_json(path);
  /* Power sums both GPUs: at 300 W GPU 0 works 1 unit in 0.05 s while GPU 1 needs 0.06 s. */
  double tp = num(json_object_get(p, "train_power"), "300000");
  assert_true(tp > 290 && tp < 2 * 290);
  json_decref(p);
  pthread_barrier_destroy(&sh.bar);
  fx_close(&f);
}

/* SIGTERM: the shared handlers put the GPUs back, then run the handler that was there before
 * (the job's own handler used to leave a caller's handler alone and restore nothing). */
static volatile sig_atomic_t g_prev_handler_ran;
static void prev_handler(int sig) { (void)sig; g_prev_handler_ran++; }

static void job_signal_restores_gpus_then_chains_to_the_previous_handler(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1);
  struct sigaction mine = {.sa_handler = prev_handler}, old, cur;
  sigemptyset(&mine.sa_mask);
  sigaction(SIGTERM, &mine, &old);
  g_prev_handler_ran = 0;
  zeus_job_opts o = job_opts(&f, 32, 100);
  o.no_signal_handlers = false;
  zeus_job *j;
  assert_zeus_ok(zeus_job_open(&j, &o));
  sigaction(SIGTERM, NULL, &cur);
  assert_true(cur.sa_flags & SA_SIGINFO); /* the shared handler is in front of ours */
  assert_zeus_ok(zeus_gpu_set_power_limit(f.dev, 0, 150000));
  assert_int_equal(limit_w(&f, 0), 150);
  raise(SIGTERM);
  assert_int_equal(g_prev_handler_ran, 1);
  assert_int_equal(limit_w(&f, 0), 300); /* restored before our handler ran */
  zeus_job_close(j);
  sigaction(SIGTERM, NULL, &cur);
  assert_true(!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == prev_handler);
  sigaction(SIGTERM, &old, NULL);
  fx_close(&f);
}


/* ---- robust first-epoch profiling (issue 30: zeus_plo's rules) ---- */

static uint64_t rng_state;
static double gauss(void) {
  double u[2];
  for (int k = 0; k < 2; k++) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    u[k] = ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
  }
  return sqrt(-2 * log(u[0])) * cos(2 * 3.141592653589793 * u[1]);
}

typedef struct noisy_run {
  unsigned chosen_w;
  bool profiled_in_epoch1;
  long windows;     /* profiling windows measured (train_profile_info), 0 without the info */
  long thrice, thrice_steps; /* limits measured in 3 windows, and the fewest steps among them */
  json_t *profile;  /* the power profile file */
} noisy_run;

/* One job of one epoch (ZEUS_PROFILE_PARAMS 3,10; 300 steps) whose steps' work is 1 + jitter x a
 * normal deviate (seeded), the first 13 steps `slow` more and drifting `drift` over the epoch. */
static noisy_run run_noisy(uint64_t seed, double jitter, double slow, double drift, const char *mode) {
  fixture f;
  fx_open(&f, 1);
  setenv("ZEUS_PROFILE_PARAMS", "3,10", 1);
  if (mode) setenv("ZEUS_PLO_PROFILING", mode, 1);
  else unsetenv("ZEUS_PLO_PROFILING");
  rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
  zeus_job_opts o = job_opts(&f, 32, 300);
  zeus_job *j;
  assert_zeus_ok(zeus_job_open(&j, &o));
  bool more;
  long epoch;
  noisy_run r = {0};
  assert_zeus_ok(zeus_job_next_epoch(j, &more, &epoch));
  assert_true(more);
  assert_zeus_ok(zeus_job_train_begin(j));
  for (long s = 0; s < 300; s++) {
    double w = (1 + jitter * gauss()) * (1 + drift * (double)s / 300) * (s < 13 ? 1 + slow : 1);
    assert_zeus_ok(zeus_job_train_step_begin(j));
    assert_zeus_ok(zeus_sim_work(f.node, 0, w > 0.1 ? w : 0.1, NULL));
    assert_zeus_ok(zeus_job_train_step_end(j));
  }
  assert_zeus_ok(zeus_job_train_end(j));
  zeus_job_info in;
  zeus_job_get_info(j, &in);
  r.profiled_in_epoch1 = !in.profiling;
  r.chosen_w = in.optimal_power_limit_w;
  assert_zeus_ok(zeus_job_eval_begin(j));
  assert_zeus_ok(zeus_job_eval_end(j));
  assert_zeus_ok(zeus_job_report_metric(j, 1.0, true));
  assert_zeus_ok(zeus_job_next_epoch(j, &more, &epoch));
  assert_false(more);
  paths P = paths_of(j);
  zeus_job_close(j);
  r.profile = load_json(P.power);
  json_t *info = json_object_get(r.profile, "train_profile_info"), *v;
  const char *key;
  r.thrice_steps = LONG_MAX;
  json_object_foreach(info, key, v) {
    r.windows += (long)num(v, "windows");
    if (num(v, "windows") == 3) {
      r.thrice++;
      r.thrice_steps = (long)fmin((double)r.thrice_steps, num(v, "steps"));
    }
  }
  unsetenv("ZEUS_PLO_PROFILING");
  fx_close(&f);
  return r;
}

static void job_noiseless_profiling_is_the_originals(void **state) {
  (void)state;
  noisy_run a = run_noisy(1, 0, 0, 0, NULL), b = run_noisy(1, 0, 0, 0, "original");
  assert_int_equal(a.chosen_w, b.chosen_w);
  assert_true(json_equal(a.profile, b.profile)); /* the same file: no extra fields, the same figures */
  assert_int_equal(a.windows, 0);
  json_decref(a.profile);
  json_decref(b.profile);
}

/* Under issue 30's noise, the job re-measures the limits the noise cannot separate, within the
 * first epoch and 1.5x the sweep's steps, and chooses right (cost within 1 % of the noiseless
 * profile's best) at least as often as the original's profiling: seeded, so it cannot flake.
 * `hardware`: the GPUs' simulated hardware (NULL: ideal). */
static void check_noisy_profiling(const char *hardware) {
  /* The truth: each limit's cost on noiseless steps measured by ideal sensors. */
  fx_hardware = NULL;
  noisy_run truth_run = run_noisy(1, 0, 0, 0, "original");
  fx_hardware = hardware;
  json_t *tp = json_object_get(truth_run.profile, "train_power"), *tt = json_object_get(truth_run.profile, "train_throughput");
  const char *key;
  json_t *v;
  double best = INFINITY;
  json_object_foreach(tp, key, v) best = fmin(best, (0.5 * json_number_value(v) + 0.5 * 300) / num(tt, key));
  int right[2] = {0, 0}, remeasured = 0;
  const int runs = 20;
  /* On a real H100 the monitor follows the ticks (auto picks the sampled source); on the virtual
   * clock auto cannot tell, so the variable asks for it. */
  if (hardware) setenv("ZEUS_MONITOR_ENERGY", "sampled", 1);
  for (int m = 0; m < 2; m++) {
    for (int seed = 1; seed <= runs; seed++) {
      noisy_run r = run_noisy((uint64_t)seed, 0.05, 0.05, 0.02, m ? "original" : NULL);
      assert_true(r.profiled_in_epoch1);
      char k[24];
      snprintf(k, sizeof k, "%u", r.chosen_w * 1000);
      double c = (0.5 * num(tp, k) + 0.5 * 300) / num(tt, k);
      if (c <= best * 1.01) right[m]++;
      if (m == 0) {
        /* 9 sweep windows, re-measured windows within 1.5x the sweep's 117 steps (13 per window). */
        assert_true(r.windows >= 9 && r.windows * 13 <= 117 * 3 / 2);
        if (r.windows > 9) remeasured++;
        if (r.windows == 13) {
          /* A B B A in the 58 steps 1.5x leaves: 3 warm-ups (B B warms up once), so each new
           * window is 12 steps: the two limits measured thrice took 10 + 2 x 12 steps. */
          assert_int_equal(r.thrice, 2);
          assert_int_equal(r.thrice_steps, 34);
        }
      } else {
        assert_int_equal(r.windows, 0);
      }
      json_decref(r.profile);
    }
  }
  print_message("job under noise (%s): robust %d/%d right, original %d/%d; %d runs re-measured\n",
                hardware ? hardware : "ideal", right[0], runs, right[1], runs, remeasured);
  fx_hardware = NULL;
  unsetenv("ZEUS_MONITOR_ENERGY");
  assert_true(remeasured > runs / 2);
  assert_true(right[0] >= right[1]);
  assert_true(right[0] >= 18); /* as measured (ideal sensors and h100 alike; 74/80 with 80 seeds) */
  json_decref(truth_run.profile);
}

static void job_noisy_profiling_remeasures_within_the_first_epoch(void **state) {
  (void)state;
  check_noisy_profiling(NULL);
}

/* The same on GPUs that behave like the measured H100: a ~100 ms counter tick with jitter, 3.3 ms
 * counter reads and late power limits (virtual time on the virtual clock), the monitor following
 * the ticks as it does on a real H100: 18/20 right as on ideal sensors (9/20 with the raw counter). */
static void job_noisy_profiling_on_the_h100_model(void **state) {
  (void)state;
  check_noisy_profiling("h100");
}

/* GPUs with few limits (issue 37): 250 W down to 100 W, 7 limits. The sweep takes 93 steps and
 * 1.5x leaves room for three windows, the palindrome needs four: before, nothing was measured
 * again; now the two limits that decide are (one window each). Seeded, the figures exact. */
static void job_few_limits_remeasure_what_decides(void **state) {
  (void)state;
  fx_max_w = 250;
  noisy_run truth_run = run_noisy(1, 0, 0, 0, "original");
  json_t *tp = json_object_get(truth_run.profile, "train_power"), *tt = json_object_get(truth_run.profile, "train_throughput");
  assert_int_equal(json_object_size(tp), 7);
  const char *key;
  json_t *v;
  double best = INFINITY;
  json_object_foreach(tp, key, v) best = fmin(best, (0.5 * json_number_value(v) + 0.5 * 250) / num(tt, key));
  int right[2] = {0, 0}, remeasured = 0, with_contenders = 0;
  const int runs = 20;
  assert_null(json_object_get(truth_run.profile, "decision"));
  for (int m = 0; m < 2; m++) {
    for (int seed = 1; seed <= runs; seed++) {
      noisy_run r = run_noisy((uint64_t)seed, 0.05, 0.05, 0.02, m ? "original" : NULL);
      assert_true(r.profiled_in_epoch1);
      char k[24];
      snprintf(k, sizeof k, "%u", r.chosen_w * 1000);
      double c = (0.5 * num(tp, k) + 0.5 * 250) / num(tt, k);
      if (c <= best * 1.01) right[m]++;
      if (m == 0) {
        /* 7 sweep windows, then 0 or 2 more within 1.5x the sweep's 91 steps. */
        assert_true(r.windows == 7 || r.windows == 9);
        remeasured += r.windows == 9;
        /* The report (issue 37): the contenders (other limits, in W) and the confidence. */
        json_t *d = json_object_get(r.profile, "decision");
        assert_non_null(d);
        assert_int_equal(json_integer_value(json_object_get(d, "optimal_power_limit_w")), r.chosen_w);
        double conf = json_number_value(json_object_get(d, "confidence"));
        assert_true(conf >= 0 && conf <= 1);
        size_t ci;
        json_t *cv;
        json_array_foreach(json_object_get(d, "contenders_w"), ci, cv) {
          char ck[24];
          snprintf(ck, sizeof ck, "%lld", (long long)json_integer_value(cv) * 1000);
          assert_non_null(json_object_get(tp, ck));
          assert_true((unsigned)json_integer_value(cv) != r.chosen_w);
          with_contenders++;
        }
      } else {
        assert_null(json_object_get(r.profile, "decision")); /* the original's file */
      }
      json_decref(r.profile);
    }
  }
  print_message("job with 7 limits under noise: robust %d/%d right, original %d/%d; %d runs re-measured; %d "
                "contenders reported\n", right[0], runs, right[1], runs, remeasured, with_contenders);
  fx_max_w = 0;
  json_decref(truth_run.profile);
  assert_true(remeasured >= runs / 2);
  assert_true(right[0] >= right[1]);
  assert_true(right[0] >= 19); /* as measured (13/20 before: nothing was measured again) */
  assert_true(with_contenders > 0);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(job_requires_target_metric),
      cmocka_unit_test(job_few_limits_remeasure_what_decides),
      cmocka_unit_test(job_rejects_bad_settings_by_name),
      cmocka_unit_test(job_reads_every_setting),
      cmocka_unit_test(job_scales_profiling_windows_or_refuses),
      cmocka_unit_test(job_profiles_first_epoch_and_writes_files),
      cmocka_unit_test(job_reuses_saved_profile),
      cmocka_unit_test(job_stops_at_max_epochs_unreached),
      cmocka_unit_test(job_cost_threshold_predicted_one_epoch_ahead),
      cmocka_unit_test(job_observer_mode_runs_at_max_and_accounts_optimal),
      cmocka_unit_test(job_hooks_out_of_order_are_errors),
      cmocka_unit_test(job_lower_is_better_metric),
      cmocka_unit_test(job_data_parallel_ranks_agree),
      cmocka_unit_test(job_signal_restores_gpus_then_chains_to_the_previous_handler),
      cmocka_unit_test(job_noiseless_profiling_is_the_originals),
      cmocka_unit_test(job_noisy_profiling_remeasures_within_the_first_epoch),
      cmocka_unit_test(job_noisy_profiling_on_the_h100_model),
  };
  setenv("ZEUS_RAPL_ROOT", "/nonexistent-rapl-root", 1);
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

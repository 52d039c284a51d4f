/* run: the recurring-job driver with the demo trainee (examples/trainee_sim.c) on the simulated GPU
 * and with small shell trainees: state continuity across runs, the ZEUS_* protocol, crashing and
 * garbage-writing trainees, timeouts, interruption, mismatched and locked states. */
#include <math.h>

#include "test_util.h"

#include <jansson.h>
#include <sqlite3.h>
#include <zeus.h>

#include "core/core.h"

#define TRAINEE ZEUS_BINARY_DIR "/trainee_sim"

static const long BS[] = {32, 64, 128, 256, 512, 1024, 2048};

/* A spec for the demo trainee: default 256, target 0.6, 40 epochs. */
static zeus_run_spec demo_spec(const char *dir, const char *state) {
  static const char *const cmd[] = {TRAINEE, "--bs", "{bs}", "--lr", "{lr}", "--seed", "{seed}", "--epochs", "{epochs}",
                                    "--samples", "20000", NULL};
  zeus_run_spec s;
  zeus_run_spec_init(&s);
  s.command = cmd;
  s.batch_sizes = BS;
  s.num_batch_sizes = sizeof BS / sizeof BS[0];
  s.default_bs = 256;
  s.default_lr = 0.1;
  s.optimizer = "adam";
  s.target_metric = 0.6;
  s.max_epochs = 40;
  s.log_base = dir;
  s.state_path = state;
  s.profile_warmup_iters = 1;
  s.profile_measure_iters = 4;
  return s;
}

static void setup_env(void) {
  setenv("ZEUS_GPU_BACKEND", "sim", 1);
  setenv("ZEUS_SIM_GPUS", "1", 1);
  setenv("ZEUS_RAPL_ROOT", "/nonexistent-rapl-root", 1);
  static const char *const vars[] = {"ZEUS_LOG_DIR",  "ZEUS_JOB_ID",         "ZEUS_COST_THRESH",    "ZEUS_ETA_KNOB",
                                     "ZEUS_TARGET_METRIC", "ZEUS_PROFILE_PARAMS", "ZEUS_USE_OPTIMAL_PL", NULL};
  for (int i = 0; vars[i]; i++) unsetenv(vars[i]);
}

/* Collects the trainee's output and the finished tries' statuses. */
typedef struct sink {
  char out[65536];
  size_t len;
  int started, finished;
  char last_status[32];
  zeus_runner *stop_on_start; /* request a stop as soon as a try starts */
} sink;

static void on_output(void *ctx, const char *data, size_t len) {
  sink *s = ctx;
  if (s->len + len >= sizeof s->out) len = sizeof s->out - 1 - s->len;
  memcpy(s->out + s->len, data, len);
  s->len += len;
  s->out[s->len] = '\0';
}

static void on_started(void *ctx, const zeus_run_try *t, const char *const *argv, const char *log) {
  sink *s = ctx;
  (void)t;
  (void)argv;
  (void)log;
  s->started++;
  if (s->stop_on_start) zeus_runner_request_stop(s->stop_on_start);
}

static void on_finished(void *ctx, const zeus_run_try *t) {
  sink *s = ctx;
  s->finished++;
  snprintf(s->last_status, sizeof s->last_status, "%s", t->status);
}

static zeus_runner *open_runner(const zeus_run_spec *s, sink *k) {
  zeus_run_callbacks cb = {.ctx = k, .output = on_output, .try_started = on_started, .try_finished = on_finished};
  zeus_runner *r;
  assert_zeus_ok(zeus_runner_open(&r, s, &cb));
  return r;
}

static json_t *history(zeus_runner *r) {
  char *text;
  assert_zeus_ok(zeus_runner_history_json(r, &text));
  json_error_t err;
  json_t *v = json_loads(text, 0, &err);
  if (!v) fail_msg("history JSON: %s", err.text);
  zeus_free(text);
  return v;
}

/* The history rows (without the time they finished) and the driver row, straight from SQLite. */
static char *dump_state(const char *path) {
  sqlite3 *db;
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  zeus__buf b = {0};
  static const char *const q[] = {
      "SELECT recurrence, try, batch_size, quote(learning_rate), seed, quote(cost_threshold), quote(energy_j), "
      "quote(time_s), quote(cost), epochs, reached, status, exit_code FROM history ORDER BY id",
      "SELECT next_recurrence, next_try, next_seed, quote(min_cost), quote(cost_acc), optimizer FROM driver",
      "SELECT key, value FROM meta WHERE key IN ('version', 'config') ORDER BY key"};
  for (size_t k = 0; k < 3; k++) {
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, q[k], -1, &st, NULL), SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW) {
      for (int c = 0; c < sqlite3_column_count(st); c++)
        zeus__buf_printf(&b, "%s|", (const char *)sqlite3_column_text(st, c));
      zeus__buf_puts(&b, "\n");
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return b.data;
}

/* ---- continuity ---- */

static void run_two_invocations_equal_one(void **state) {
  (void)state;
  setup_env();
  char dir[256], a_state[320], b_state[320];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(a_state, sizeof a_state, "%s/a/state.sqlite", dir);
  snprintf(b_state, sizeof b_state, "%s/b/state.sqlite", dir);
  sink k = {0};
  zeus_run_spec s = demo_spec(dir, a_state);
  zeus_runner *r = open_runner(&s, &k);
  assert_zeus_ok(zeus_runner_run(r, 6));
  assert_int_equal(zeus_runner_recurrences_done(r), 6);
  char logdir_a[512];
  snprintf(logdir_a, sizeof logdir_a, "%s", zeus_runner_logdir(r));
  zeus_runner_close(r);
  r = open_runner(&s, &k); /* a later invocation */
  assert_string_equal(zeus_runner_logdir(r), logdir_a);
  assert_int_equal(zeus_runner_recurrences_done(r), 6);
  assert_zeus_ok(zeus_runner_run(r, 10));
  json_t *ha = history(r);
  zeus_runner_close(r);

  s = demo_spec(dir, b_state);
  r = open_runner(&s, &k);
  assert_zeus_ok(zeus_runner_run(r, 16));
  json_t *hb = history(r);
  zeus_runner_close(r);

  json_t *la = json_object_get(ha, "history"), *lb = json_object_get(hb, "history");
  assert_true(json_array_size(la) >= 16);
  if (!json_equal(la, lb)) {
    char *x = json_dumps(la, 0), *y = json_dumps(lb, 0);
    fail_msg("histories differ:\n%s\n%s", x, y);
  }
  assert_true(json_equal(json_object_get(ha, "optimizer"), json_object_get(hb, "optimizer")));
  assert_true(json_equal(json_object_get(ha, "min_cost_j"), json_object_get(hb, "min_cost_j")));
  assert_int_equal(json_integer_value(json_object_get(ha, "recurrences_done")), 16);
  /* The pruning phase went through the batch sizes and into Thompson sampling. */
  json_t *opt = json_object_get(ha, "optimizer");
  assert_string_equal(json_string_value(json_object_get(opt, "phase")), "thompson");
  assert_true(json_array_size(json_object_get(opt, "arms")) >= 1);
  json_t *arm0 = json_array_get(json_object_get(opt, "arms"), 0);
  assert_true(json_is_real(json_object_get(arm0, "mean_cost_j")));
  assert_true(json_number_value(json_object_get(arm0, "mean_cost_j")) > 0);
  /* Some try did not converge (2048 never does) and every recurrence ended reached. */
  size_t failed = 0, reached = 0;
  for (size_t i = 0; i < json_array_size(la); i++) {
    json_t *e = json_array_get(la, i);
    reached += json_is_true(json_object_get(e, "reached"));
    failed += strcmp(json_string_value(json_object_get(e, "status")), "not_reached") == 0;
  }
  assert_int_equal(reached, 16);
  assert_true(failed >= 1);
  json_decref(ha);
  json_decref(hb);
  /* The SQLite files themselves hold the same history and state. */
  char *da = dump_state(a_state), *db = dump_state(b_state);
  assert_string_equal(da, db);
  free(da);
  free(db);
  assert_true(k.len > 0 && strstr(k.out, "trainee_sim: batch size 256"));
}

static void run_default_state_continues_latest_job_folder(void **state) {
  (void)state;
  setup_env();
  char dir[256];
  zeus_test_tmpdir(dir, sizeof dir);
  sink k = {0};
  zeus_run_spec s = demo_spec(dir, NULL);
  s.recurrences = 2;
  zeus_runner *r = open_runner(&s, &k);
  assert_zeus_ok(zeus_runner_run(r, 2));
  char logdir[512];
  snprintf(logdir, sizeof logdir, "%s", zeus_runner_logdir(r));
  /* Named like build_logdir, under the log base, with the state inside. */
  assert_non_null(strstr(logdir, "/job+model+bs256+adam+lr0.1+tm0.6+me40+x2+eta0.5+beta2.0+"));
  assert_true(strncmp(logdir, dir, strlen(dir)) == 0);
  char want[600];
  snprintf(want, sizeof want, "%s/state.sqlite", logdir);
  assert_string_equal(zeus_runner_state_path(r), want);
  zeus_runner_close(r);
  s.recurrences = 5;
  r = open_runner(&s, &k);
  assert_string_equal(zeus_runner_logdir(r), logdir);
  assert_int_equal(zeus_runner_recurrences_done(r), 2);
  zeus_runner_close(r);
  /* Other knobs: another folder. */
  s.eta = 0.7;
  r = open_runner(&s, &k);
  assert_string_not_equal(zeus_runner_logdir(r), logdir);
  assert_int_equal(zeus_runner_recurrences_done(r), 0);
  zeus_runner_close(r);
}

static void run_refuses_other_knobs_and_second_driver(void **state) {
  (void)state;
  setup_env();
  char dir[256], st[320];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(st, sizeof st, "%s/state.sqlite", dir);
  sink k = {0};
  zeus_run_spec s = demo_spec(dir, st);
  zeus_runner *r = open_runner(&s, &k), *r2;
  assert_zeus_err(zeus_runner_open(&r2, &s, NULL), ZEUS_EEXIST, "another zeus run is using");
  zeus_runner_close(r);
  s.eta = 0.25;
  assert_zeus_err(zeus_runner_open(&r2, &s, NULL), ZEUS_EINVAL, "eta = 0.5, this run has 0.25");
  s = demo_spec(dir, st);
  long fewer[] = {128, 256};
  s.batch_sizes = fewer;
  s.num_batch_sizes = 2;
  assert_zeus_err(zeus_runner_open(&r2, &s, NULL), ZEUS_EINVAL, "batch_sizes");
  /* Not a database at all. */
  char bad[320];
  snprintf(bad, sizeof bad, "%s/bad.sqlite", dir);
  zeus_test_write_file(bad, "this is not SQLite, but long enough to look like a header of a file..........\n");
  s = demo_spec(dir, bad);
  assert_zeus_err(zeus_runner_open(&r2, &s, NULL), ZEUS_EIO, "bad.sqlite");
}

/* ---- the protocol ---- */

static void write_script(const char *path, const char *text) {
  zeus_test_write_file(path, text);
  assert_int_equal(chmod(path, 0755), 0);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) fail_msg("cannot read %s", path);
  static char buf[16384];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static void run_sets_protocol_environment_and_arguments(void **state) {
  (void)state;
  setup_env();
  char dir[256], script[320], dump[320], work[320];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(script, sizeof script, "%s/trainee.sh", dir);
  snprintf(dump, sizeof dump, "%s/dump.txt", dir);
  snprintf(work, sizeof work, "%s/work", dir);
  assert_int_equal(mkdir(work, 0755), 0);
  char text[1024];
  snprintf(text, sizeof text,
           "#!/bin/sh\n"
           "env | grep '^ZEUS_' | sort > '%s'\n"
           "echo \"args: $*\" >> '%s'\n"
           "echo \"pwd: $(pwd)\" >> '%s'\n"
           "echo 'hello from the trainee'\n"
           "echo '{\"energy\": 1000, \"time\": 10, \"reached\": true, \"num_epochs\": 3}' > "
           "\"$ZEUS_LOG_DIR/$ZEUS_JOB_ID+bs$1.train.json\"\n",
           dump, dump, dump);
  write_script(script, text);
  const char *cmd[] = {
      script,        "{bs}", "{lr}", "{seed}", "{epochs}", "{slice_number}", "{target_metric}", "lr={learning_rate}",
      "{{literal}}", NULL};
  zeus_run_spec s;
  zeus_run_spec_init(&s);
  s.command = cmd;
  long bss[] = {128, 256};
  s.batch_sizes = bss;
  s.num_batch_sizes = 2;
  s.default_bs = 256;
  s.default_lr = 0.1;
  s.optimizer = "sgd";
  s.target_metric = 0.6;
  s.max_epochs = 7;
  s.log_base = dir;
  s.workdir = work;
  s.max_power_w = 300;
  sink k = {0};
  zeus_runner *r = open_runner(&s, &k);
  assert_zeus_ok(zeus_runner_run(r, 1));
  const char *d = slurp(dump);
  char want[600];
  snprintf(want, sizeof want, "ZEUS_LOG_DIR=%s\n", zeus_runner_logdir(r));
  assert_non_null(strstr(d, want));
  assert_non_null(strstr(d, "ZEUS_JOB_ID=rec01+try01\n"));
  assert_non_null(strstr(d, "ZEUS_COST_THRESH=inf\n"));
  assert_non_null(strstr(d, "ZEUS_ETA_KNOB=0.5\n"));
  assert_non_null(strstr(d, "ZEUS_TARGET_METRIC=0.6\n"));
  assert_non_null(strstr(d, "ZEUS_PROFILE_PARAMS=10,40\n"));
  assert_non_null(strstr(d, "ZEUS_USE_OPTIMAL_PL=true\n"));
  assert_non_null(strstr(d, "args: 256 0.1 123456 7 1 0.6 lr=0.1 {literal}\n"));
  snprintf(want, sizeof want, "pwd: %s\n", work);
  assert_non_null(strstr(d, want));
  assert_non_null(strstr(k.out, "hello from the trainee"));
  char log[700];
  snprintf(log, sizeof log, "%s/rec01+try01.train.log", zeus_runner_logdir(r));
  assert_non_null(strstr(slurp(log), "hello from the trainee"));
  /* The cost: 0.5 * 1000 + 0.5 * 300 * 10 = 2000; the next try's threshold is 2 x 2000. */
  json_t *h = history(r);
  json_t *e = json_array_get(json_object_get(h, "history"), 0);
  assert_near(json_number_value(json_object_get(e, "cost_j")), 2000, 1e-9);
  assert_int_equal(json_integer_value(json_object_get(e, "epochs")), 3);
  assert_near(json_number_value(json_object_get(h, "min_cost_j")), 2000, 1e-9);
  json_decref(h);
  assert_zeus_ok(zeus_runner_run(r, 1));
  d = slurp(dump);
  if (!strstr(d, "ZEUS_COST_THRESH=4000.0\n")) fail_msg("dump: %s", d);
  assert_non_null(strstr(d, "ZEUS_JOB_ID=rec02+try01\n"));
  assert_non_null(strstr(d, "args: 128 0.05 123457 7 2 0.6 lr=0.05 {literal}\n")); /* sgd: linear */
  zeus_runner_close(r);
  /* Observer mode and profiling steps pass through. */
  s.observer_mode = true;
  s.profile_warmup_iters = 3;
  s.profile_measure_iters = 9;
  s.eta = 0.25;
  r = open_runner(&s, &k);
  assert_zeus_ok(zeus_runner_run(r, 1));
  d = slurp(dump);
  assert_non_null(strstr(d, "ZEUS_USE_OPTIMAL_PL=false\n"));
  assert_non_null(strstr(d, "ZEUS_PROFILE_PARAMS=3,9\n"));
  assert_non_null(strstr(d, "ZEUS_ETA_KNOB=0.25\n"));
  zeus_runner_close(r);
}

static void run_rejects_bad_specs(void **state) {
  (void)state;
  setup_env();
  char dir[256];
  zeus_test_tmpdir(dir, sizeof dir);
  zeus_run_spec s = demo_spec(dir, NULL);
  zeus_runner *r;
  const char *unknown[] = {"x", "{batch}", NULL};
  s.command = unknown;
  assert_zeus_err(zeus_runner_open(&r, &s, NULL), ZEUS_EINVAL, "unknown placeholder {batch}");
  const char *brace[] = {"x", "{bs", NULL};
  s.command = brace;
  assert_zeus_err(zeus_runner_open(&r, &s, NULL), ZEUS_EINVAL, "unmatched '{'");
  s = demo_spec(dir, NULL);
  s.optimizer = "lamb";
  assert_zeus_err(zeus_runner_open(&r, &s, NULL), ZEUS_EINVAL, "no rule for optimizer 'lamb'");
  long lb[] = {32, 64, 128, 256, 512, 1024, 2048};
  double lv[] = {0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07};
  s.lr_batch_sizes = lb;
  s.lr_values = lv;
  s.num_lrs = 7; /* an explicit rate for every batch size: no rule needed */
  s.max_power_w = 300;
  assert_zeus_ok(zeus_runner_open(&r, &s, NULL));
  zeus_runner_close(r);
  s = demo_spec(dir, NULL);
  s.default_lr = NAN;
  assert_zeus_err(zeus_runner_open(&r, &s, NULL), ZEUS_EINVAL, "no learning rate is known");
  s = demo_spec(dir, NULL);
  s.default_bs = 100;
  assert_zeus_err(zeus_runner_open(&r, &s, NULL), ZEUS_EINVAL, "default batch size 100");
  s = demo_spec(dir, NULL);
  s.target_metric = NAN;
  assert_zeus_err(zeus_runner_open(&r, &s, NULL), ZEUS_EINVAL, "target metric");
  s = demo_spec(dir, NULL);
  s.dataset = "a/b";
  assert_zeus_err(zeus_runner_open(&r, &s, NULL), ZEUS_EINVAL, "dataset 'a/b'");
  s = demo_spec(dir, NULL);
  s.command = NULL;
  assert_zeus_err(zeus_runner_open(&r, &s, NULL), ZEUS_EINVAL, "command is empty");
  /* No GPU and no --max-power-w. */
  s = demo_spec(dir, NULL);
  setenv("ZEUS_GPU_BACKEND", "none", 1);
  assert_zeus_err(zeus_runner_open(&r, &s, NULL), ZEUS_EINVAL, "--max-power-w");
  setenv("ZEUS_GPU_BACKEND", "sim", 1);
}

static void run_loads_spec_files(void **state) {
  (void)state;
  char dir[256], path[320];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/job.json", dir);
  zeus_test_write_file(path,
                       "{\"command\": \"echo {bs}\", \"batch_sizes\": [8, 16], \"default_batch_size\": 16,\n"
                       " \"target_metric\": 0.5, \"max_epochs\": 3, \"eta\": 0.3, \"beta\": \"inf\", \"seed\": 9,\n"
                       " \"learning_rates\": {\"8\": 0.01, \"16\": 0.02}, \"observer_mode\": true,\n"
                       " \"recurrences\": 4, \"dataset\": \"d\", \"workdir\": \"/tmp\"}");
  zeus_run_spec s;
  zeus_run_spec_init(&s);
  void *storage;
  long rec = -1;
  assert_zeus_ok(zeus_run_spec_load(&s, path, &storage, &rec));
  assert_string_equal(s.command[0], "/bin/sh");
  assert_string_equal(s.command[1], "-c");
  assert_string_equal(s.command[2], "echo {bs}");
  assert_null(s.command[3]);
  assert_int_equal(s.num_batch_sizes, 2);
  assert_int_equal(s.batch_sizes[1], 16);
  assert_int_equal(s.default_bs, 16);
  assert_near(s.eta, 0.3, 0);
  assert_true(isinf(s.beta));
  assert_int_equal(s.seed, 9);
  assert_int_equal(s.num_lrs, 2);
  assert_true(s.observer_mode);
  assert_int_equal(rec, 4);
  assert_string_equal(s.dataset, "d");
  assert_near(s.max_epochs, 3, 0);
  zeus_free(storage);
  zeus_test_write_file(path, "{\"batch_size\": [8]}");
  assert_zeus_err(zeus_run_spec_load(&s, path, &storage, &rec), ZEUS_EPARSE, "unknown field 'batch_size'");
  zeus_test_write_file(path, "{\"max_epochs\": \"ten\"}");
  assert_zeus_err(zeus_run_spec_load(&s, path, &storage, &rec), ZEUS_EPARSE, "'max_epochs' is a string");
  zeus_test_write_file(path, "[1]");
  assert_zeus_err(zeus_run_spec_load(&s, path, &storage, &rec), ZEUS_EPARSE, "expected a JSON object");
  zeus_test_write_file(path, "{");
  assert_zeus_err(zeus_run_spec_load(&s, path, &storage, &rec), ZEUS_EPARSE, "job.json");
}

/* ---- trainees that fail ---- */

/* A wrapper around the demo trainee that crashes (exit 3, no result) while a marker file exists,
 * or writes garbage instead of its result while another does. */
static void write_flaky(const char *dir, char *script, size_t len) {
  snprintf(script, len, "%s/flaky.sh", dir);
  char text[1024];
  snprintf(text, sizeof text,
           "#!/bin/sh\n"
           "if [ -e '%s/crash' ]; then echo 'flaky: crashing' >&2; exit 3; fi\n"
           "if [ -e '%s/garbage' ]; then echo 'flaky: garbage'; "
           "echo 'not json {' > \"$ZEUS_LOG_DIR/$ZEUS_JOB_ID+bs$2.train.json\"; exit 0; fi\n"
           "exec '%s' \"$@\"\n",
           dir, dir, TRAINEE);
  write_script(script, text);
}

static zeus_run_spec flaky_spec(const char *dir, const char *state, const char *script) {
  static const char *cmd[13];
  const char *c[] = {script,   "--bs",     "{bs}",     "--lr",      "{lr}",  "--seed",
                     "{seed}", "--epochs", "{epochs}", "--samples", "20000", NULL};
  memcpy(cmd, c, sizeof c);
  zeus_run_spec s = demo_spec(dir, state);
  s.command = cmd;
  return s;
}

static void touch(const char *dir, const char *name) {
  char p[400];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  zeus_test_write_file(p, "");
}

static void rm(const char *dir, const char *name) {
  char p[400];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  unlink(p);
}

static void run_crashing_trainee_stops_cleanly_and_next_run_continues(void **state) {
  (void)state;
  setup_env();
  char dir[256], script[320], st[320], ref[320];
  zeus_test_tmpdir(dir, sizeof dir);
  write_flaky(dir, script, sizeof script);
  snprintf(st, sizeof st, "%s/s/state.sqlite", dir);
  snprintf(ref, sizeof ref, "%s/ref/state.sqlite", dir);
  sink k = {0};
  zeus_run_spec s = flaky_spec(dir, st, script);
  zeus_runner *r = open_runner(&s, &k);
  assert_zeus_ok(zeus_runner_run(r, 2));
  touch(dir, "crash");
  assert_zeus_err(zeus_runner_run(r, 2), ZEUS_EIO, "exited with code 3 without writing its result file");
  assert_non_null(strstr(zeus_errmsg(), "rec03+try01+bs"));
  assert_string_equal(k.last_status, "failed");
  assert_non_null(strstr(k.out, "flaky: crashing"));
  assert_int_equal(zeus_runner_recurrences_done(r), 2);
  json_t *h = history(r);
  assert_int_equal(json_array_size(json_object_get(h, "history")), 2); /* the failed try is not recorded */
  json_decref(h);
  zeus_runner_close(r);
  /* The next run repeats the try and ends as an uninterrupted run would. */
  rm(dir, "crash");
  r = open_runner(&s, &k);
  assert_zeus_ok(zeus_runner_run(r, 2));
  json_t *ha = history(r);
  zeus_runner_close(r);
  s = flaky_spec(dir, ref, script);
  r = open_runner(&s, &k);
  assert_zeus_ok(zeus_runner_run(r, 4));
  json_t *hb = history(r);
  zeus_runner_close(r);
  if (!json_equal(json_object_get(ha, "history"), json_object_get(hb, "history")))
    fail_msg("histories differ:\n%s\n%s", json_dumps(json_object_get(ha, "history"), 0),
             json_dumps(json_object_get(hb, "history"), 0));
  assert_true(json_equal(json_object_get(ha, "optimizer"), json_object_get(hb, "optimizer")));
  json_decref(ha);
  json_decref(hb);
}

static void run_garbage_result_is_reported_or_skipped_with_keep_going(void **state) {
  (void)state;
  setup_env();
  char dir[256], script[320], st[320];
  zeus_test_tmpdir(dir, sizeof dir);
  write_flaky(dir, script, sizeof script);
  snprintf(st, sizeof st, "%s/s/state.sqlite", dir);
  sink k = {0};
  zeus_run_spec s = flaky_spec(dir, st, script);
  zeus_runner *r = open_runner(&s, &k);
  touch(dir, "garbage");
  assert_zeus_err(zeus_runner_run(r, 1), ZEUS_EPARSE, "rec01+try01+bs256.train.json");
  assert_non_null(strstr(zeus_errmsg(), "exited with code 0"));
  zeus_runner_close(r);
  /* keep-going: the garbage try is recorded as failed and the recurrence goes on. */
  s.keep_going = true;
  s.max_tries = 3;
  r = open_runner(&s, &k);
  assert_zeus_err(zeus_runner_run(r, 1), ZEUS_ESTATE, "did not reach the target metric in 3 tries");
  json_t *h = history(r);
  json_t *l = json_object_get(h, "history");
  assert_int_equal(json_array_size(l), 3);
  for (size_t i = 0; i < 3; i++) {
    json_t *e = json_array_get(l, i);
    assert_string_equal(json_string_value(json_object_get(e, "status")), "failed");
    assert_int_equal(json_integer_value(json_object_get(e, "try")), (json_int_t)i + 1);
  }
  /* The optimizer saw none of them. */
  assert_int_equal(json_array_size(json_object_get(json_object_get(h, "optimizer"), "observations")), 0);
  json_decref(h);
  zeus_runner_close(r);
  /* With a fresh state: one garbage try, then a good one in the same recurrence. */
  snprintf(st, sizeof st, "%s/t/state.sqlite", dir);
  s = flaky_spec(dir, st, script);
  s.keep_going = true;
  r = open_runner(&s, &k);
  assert_zeus_ok(zeus_runner_run(r, 0));
  rm(dir, "garbage");
  touch(dir, "garbage");
  k.stop_on_start = NULL;
  /* A trainee that writes garbage only once: remove the marker after the first try starts. */
  char once[320], text[700];
  snprintf(once, sizeof once, "%s/once.sh", dir);
  snprintf(text, sizeof text,
           "#!/bin/sh\nif [ -e '%s/garbage' ]; then rm '%s/garbage'; echo x > "
           "\"$ZEUS_LOG_DIR/$ZEUS_JOB_ID+bs$2.train.json\"; exit 0; fi\nexec '%s' \"$@\"\n",
           dir, dir, TRAINEE);
  write_script(once, text);
  zeus_runner_close(r);
  s = flaky_spec(dir, st, once);
  s.keep_going = true;
  r = open_runner(&s, &k);
  assert_zeus_ok(zeus_runner_run(r, 1));
  h = history(r);
  l = json_object_get(h, "history");
  assert_int_equal(json_array_size(l), 2);
  assert_string_equal(json_string_value(json_object_get(json_array_get(l, 0), "status")), "failed");
  assert_string_equal(json_string_value(json_object_get(json_array_get(l, 1), "status")), "reached");
  assert_int_equal(json_integer_value(json_object_get(json_array_get(l, 1), "try")), 2);
  json_decref(h);
  zeus_runner_close(r);
}

static void run_default_that_never_converges_is_an_error(void **state) {
  (void)state;
  setup_env();
  char dir[256];
  zeus_test_tmpdir(dir, sizeof dir);
  sink k = {0};
  zeus_run_spec s = demo_spec(dir, NULL);
  s.target_metric = 0.99; /* the model tops out at 0.75 */
  s.max_epochs = 5;
  zeus_runner *r = open_runner(&s, &k);
  assert_zeus_err(zeus_runner_run(r, 3), ZEUS_ESTATE, "default batch size 256 did not reach the target metric");
  json_t *h = history(r);
  assert_int_equal(json_array_size(json_object_get(h, "history")), 1); /* the try is recorded */
  json_decref(h);
  zeus_runner_close(r);
}

static void run_timeout_and_stop_request_end_the_trainee(void **state) {
  (void)state;
  setup_env();
  char dir[256], script[320];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(script, sizeof script, "%s/slow.sh", dir);
  write_script(script, "#!/bin/sh\nsleep 30\n");
  const char *cmd[] = {script, NULL};
  zeus_run_spec s;
  zeus_run_spec_init(&s);
  s.command = cmd;
  long bss[] = {8};
  s.batch_sizes = bss;
  s.num_batch_sizes = 1;
  s.default_bs = 8;
  s.target_metric = 1;
  s.max_epochs = 1;
  s.log_base = dir;
  s.max_power_w = 100;
  s.timeout_s = 0.3;
  sink k = {0};
  zeus_runner *r = open_runner(&s, &k);
  double t0 = zeus_monotonic_s();
  assert_zeus_err(zeus_runner_run(r, 1), ZEUS_EIO, "timeout");
  assert_true(zeus_monotonic_s() - t0 < 10);
  zeus_runner_close(r);
  s.timeout_s = 0;
  r = open_runner(&s, &k);
  k.stop_on_start = r;
  t0 = zeus_monotonic_s();
  assert_zeus_err(zeus_runner_run(r, 1), ZEUS_ESTATE, "interrupted");
  assert_true(zeus_monotonic_s() - t0 < 10);
  json_t *h = history(r);
  assert_int_equal(json_array_size(json_object_get(h, "history")), 0);
  json_decref(h);
  zeus_runner_close(r);
  /* A command that does not exist. */
  const char *missing[] = {"/nonexistent/trainee", NULL};
  s.command = missing;
  k.stop_on_start = NULL;
  r = open_runner(&s, &k);
  assert_zeus_err(zeus_runner_run(r, 1), ZEUS_EIO, "exited with code 127");
  assert_non_null(strstr(k.out, "cannot run '/nonexistent/trainee'"));
  zeus_runner_close(r);
}

static void run_no_epoch_try_is_learnt_as_prohibitive(void **state) {
  (void)state;
  setup_env();
  char dir[256], script[320], text[800];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(script, sizeof script, "%s/t.sh", dir);
  /* Recurrence 1 reaches the target at cost 2000; afterwards the trainee stops before its first
   * epoch (as zeus_job does when one epoch would cross the threshold). */
  snprintf(text, sizeof text,
           "#!/bin/sh\nout=\"$ZEUS_LOG_DIR/$ZEUS_JOB_ID+bs$1.train.json\"\n"
           "if [ \"$ZEUS_COST_THRESH\" = inf ]; then echo '{\"energy\": 1000, \"time\": 10, \"reached\": true}' > "
           "\"$out\";\n"
           "else echo '{\"energy\": 0, \"time\": 0, \"reached\": false, \"num_epochs\": 0}' > \"$out\"; fi\n");
  write_script(script, text);
  const char *cmd[] = {script, "{bs}", NULL};
  zeus_run_spec s;
  zeus_run_spec_init(&s);
  s.command = cmd;
  long bss[] = {8, 16};
  s.batch_sizes = bss;
  s.num_batch_sizes = 2;
  s.default_bs = 16;
  s.target_metric = 1;
  s.max_epochs = 1;
  s.log_base = dir;
  s.max_power_w = 300;
  s.max_tries = 2;
  sink k = {0};
  zeus_runner *r = open_runner(&s, &k);
  assert_zeus_err(zeus_runner_run(r, 2), ZEUS_ESTATE, "recurrence 2 did not reach the target metric in 2 tries");
  json_t *h = history(r);
  json_t *l = json_object_get(h, "history");
  assert_int_equal(json_array_size(l), 3);
  assert_string_equal(json_string_value(json_object_get(json_array_get(l, 1), "status")), "no_epoch");
  assert_near(json_number_value(json_object_get(json_array_get(l, 1), "cost_threshold_j")), 4000, 1e-9);
  /* The optimizer saw 100 x beta x best cost = 400000 for batch size 8. */
  json_t *oh = json_object_get(json_object_get(h, "optimizer"), "observations");
  json_t *second = json_array_get(oh, 1);
  assert_int_equal(json_integer_value(json_object_get(second, "batch_size")), 8);
  assert_near(json_number_value(json_object_get(second, "cost_j")), 400000, 1e-6);
  json_decref(h);
  zeus_runner_close(r);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(run_two_invocations_equal_one),
      cmocka_unit_test(run_default_state_continues_latest_job_folder),
      cmocka_unit_test(run_refuses_other_knobs_and_second_driver),
      cmocka_unit_test(run_sets_protocol_environment_and_arguments),
      cmocka_unit_test(run_rejects_bad_specs),
      cmocka_unit_test(run_loads_spec_files),
      cmocka_unit_test(run_crashing_trainee_stops_cleanly_and_next_run_continues),
      cmocka_unit_test(run_garbage_result_is_reported_or_skipped_with_keep_going),
      cmocka_unit_test(run_default_that_never_converges_is_an_error),
      cmocka_unit_test(run_timeout_and_stop_request_end_the_trainee),
      cmocka_unit_test(run_no_epoch_try_is_learnt_as_prohibitive),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

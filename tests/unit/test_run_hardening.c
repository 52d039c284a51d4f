/* run_hardening: `zeus run` under crashes and hostile conditions (issue 19, items 8-12 and the spec
 * part of 15): the trainee dies with a driver killed by SIGKILL and a restart refuses while an
 * orphan of the try lives; two first runs of one job cannot split its state; a damaged state is
 * refused (and --reset-state starts over, keeping it); --timeout bounds a trainee whose helper
 * keeps its output open; an unwritable state starts no try. Every wait is bounded. */
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "test_util.h"

#include <jansson.h>
#include <sqlite3.h>
#include <zeus.h>

#include "core/core.h"

static void setup_env(void) {
  setenv("ZEUS_GPU_BACKEND", "sim", 1);
  setenv("ZEUS_SIM_GPUS", "1", 1);
  setenv("ZEUS_RAPL_ROOT", "/nonexistent-rapl-root", 1);
  static const char *const vars[] = {
      "ZEUS_LOG_DIR",       "ZEUS_JOB_ID",         "ZEUS_COST_THRESH",    "ZEUS_ETA_KNOB",
      "ZEUS_TARGET_METRIC", "ZEUS_PROFILE_PARAMS", "ZEUS_USE_OPTIMAL_PL", NULL};
  for (int i = 0; vars[i]; i++) unsetenv(vars[i]);
}

static void write_script(const char *path, const char *text) {
  zeus_test_write_file(path, text);
  assert_int_equal(chmod(path, 0755), 0);
}

/* A one-batch-size spec running `script` (which writes the result file itself or not). */
static zeus_run_spec script_spec(const char *dir, const char *state, const char *const *cmd) {
  zeus_run_spec s;
  zeus_run_spec_init(&s);
  s.command = cmd;
  static const long bss[] = {8};
  s.batch_sizes = bss;
  s.num_batch_sizes = 1;
  s.default_bs = 8;
  s.target_metric = 1;
  s.max_epochs = 1;
  s.log_base = dir;
  s.state_path = state;
  s.max_power_w = 100;
  return s;
}

/* A trainee that reaches the target at once: {"energy": 10, "time": 1, "reached": true}. */
static const char OK_TRAINEE[] =
    "#!/bin/sh\n"
    "echo '{\"energy\": 10, \"time\": 1, \"reached\": true}' > \"$ZEUS_LOG_DIR/$ZEUS_JOB_ID+bs8.train.json\"\n";

static int started_count;
static void count_start(void *ctx, const zeus_run_try *t, const char *const *argv, const char *log) {
  (void)ctx;
  (void)t;
  (void)argv;
  (void)log;
  started_count++;
}

static long read_pid(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  long v = -1;
  if (fscanf(f, "%ld", &v) != 1) v = -1;
  fclose(f);
  return v;
}

/* Polls for `path` to hold a pid, up to `seconds`. */
static long wait_pid_file(const char *path, double seconds) {
  double end = zeus_monotonic_s() + seconds;
  long v;
  while ((v = read_pid(path)) <= 0 && zeus_monotonic_s() < end) usleep(20000);
  return v;
}

/* Whether pid is a live process (a zombie counts as dead: its parent may be a non-reaping init). */
static bool alive(long pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

static bool wait_dead(long pid, double seconds) {
  double end = zeus_monotonic_s() + seconds;
  while (alive(pid) && zeus_monotonic_s() < end) usleep(20000);
  return !alive(pid);
}

/* ---- item 8: orphans ---- */

static void run_trainee_dies_with_killed_driver_and_restart_refuses_live_orphan(void **state) {
  (void)state;
  setup_env();
  char dir[256], st[320], script[320], text[1024], trainee_pid[320], helper_pid[320];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(st, sizeof st, "%s/state.sqlite", dir);
  snprintf(script, sizeof script, "%s/long.sh", dir);
  snprintf(trainee_pid, sizeof trainee_pid, "%s/trainee.pid", dir);
  snprintf(helper_pid, sizeof helper_pid, "%s/helper.pid", dir);
  /* A helper in the trainee's group (not its direct child's PDEATHSIG) and the trainee itself. */
  snprintf(text, sizeof text,
           "#!/bin/sh\n"
           "if [ -e '%s/done' ]; then %s exit 0; fi\n"
           "sleep 60 &\n"
           "echo $! > '%s'\n"
           "echo $$ > '%s'\n"
           "exec sleep 60\n",
           dir,
           "echo '{\"energy\": 10, \"time\": 1, \"reached\": true}' > \"$ZEUS_LOG_DIR/$ZEUS_JOB_ID+bs8.train.json\";",
           helper_pid, trainee_pid);
  write_script(script, text);
  const char *cmd[] = {script, NULL};
  zeus_run_spec s = script_spec(dir, st, cmd);
  pid_t drv = fork();
  assert_true(drv >= 0);
  if (drv == 0) {
    zeus_runner *r;
    if (zeus_runner_open(&r, &s, NULL) != ZEUS_OK) _exit(3);
    zeus_runner_run(r, 1);
    _exit(4);
  }
  long tp = wait_pid_file(trainee_pid, 20), hp = wait_pid_file(helper_pid, 20);
  if (tp <= 0 || hp <= 0) {
    kill(drv, SIGKILL);
    waitpid(drv, NULL, 0);
    fail_msg("the trainee did not start within 20 s");
  }
  assert_int_equal(kill(drv, SIGKILL), 0);
  int status;
  assert_int_equal(waitpid(drv, &status, 0), drv);
  /* The trainee got SIGKILL with its driver. */
  assert_true(wait_dead(tp, 10));
  /* The helper lives on in the trainee's group: a restart refuses, naming it. */
  assert_true(alive(hp));
  zeus_runner *r;
  char want[64];
  snprintf(want, sizeof want, "(process group %ld)", tp);
  assert_zeus_err(zeus_runner_open(&r, &s, NULL), ZEUS_EEXIST, want);
  assert_non_null(strstr(zeus_errmsg(), "recurrence 1, try 1"));
  assert_non_null(strstr(zeus_errmsg(), "still running"));
  kill((pid_t)hp, SIGKILL);
  assert_true(wait_dead(hp, 10));
  /* Gone: the restart repeats the try (nothing was recorded for it). */
  char done[320];
  snprintf(done, sizeof done, "%s/done", dir);
  zeus_test_write_file(done, "");
  assert_zeus_ok(zeus_runner_open(&r, &s, NULL));
  assert_int_equal(zeus_runner_recurrences_done(r), 0);
  assert_zeus_ok(zeus_runner_run(r, 1));
  assert_int_equal(zeus_runner_recurrences_done(r), 1);
  zeus_runner_close(r);
}

/* A trainee that exits leaves nothing of its group behind (a helper would run beside the next try). */
static void run_leftovers_of_a_finished_trainee_are_killed(void **state) {
  (void)state;
  setup_env();
  char dir[256], script[320], text[1024], helper_pid[320];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(script, sizeof script, "%s/bg.sh", dir);
  snprintf(helper_pid, sizeof helper_pid, "%s/helper.pid", dir);
  snprintf(text, sizeof text, "%ssleep 60 > /dev/null 2>&1 &\necho $! > '%s'\n", OK_TRAINEE, helper_pid);
  write_script(script, text);
  const char *cmd[] = {script, NULL};
  zeus_run_spec s = script_spec(dir, NULL, cmd);
  zeus_runner *r;
  assert_zeus_ok(zeus_runner_open(&r, &s, NULL));
  assert_zeus_ok(zeus_runner_run(r, 1));
  zeus_runner_close(r);
  long hp = read_pid(helper_pid);
  assert_true(hp > 0);
  bool dead = wait_dead(hp, 10);
  if (!dead) kill((pid_t)hp, SIGKILL);
  assert_true(dead);
}

/* ---- item 9: one lock per job ---- */

static void run_concurrent_first_runs_of_a_job_cannot_split_its_state(void **state) {
  (void)state;
  setup_env();
  char dir[256], script[320];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(script, sizeof script, "%s/ok.sh", dir);
  write_script(script, OK_TRAINEE);
  const char *cmd[] = {script, NULL};
  zeus_run_spec s = script_spec(dir, NULL, cmd);
  s.recurrences = 3;
  zeus_runner *a, *b;
  assert_zeus_ok(zeus_runner_open(&a, &s, NULL));
  /* The second first run of the same job (also with another +x<N>) is refused, naming the job. */
  s.recurrences = 4;
  assert_zeus_err(zeus_runner_open(&b, &s, NULL), ZEUS_EEXIST, "another zeus run is running the job");
  assert_non_null(strstr(zeus_errmsg(), "job+model+bs8+none"));
  assert_zeus_ok(zeus_runner_run(a, 1));
  char logdir[512];
  snprintf(logdir, sizeof logdir, "%s", zeus_runner_logdir(a));
  zeus_runner_close(a);
  /* Once the first is done, the second continues its folder: one state, both recurrences. */
  assert_zeus_ok(zeus_runner_open(&b, &s, NULL));
  assert_string_equal(zeus_runner_logdir(b), logdir);
  assert_zeus_ok(zeus_runner_run(b, 1));
  assert_int_equal(zeus_runner_recurrences_done(b), 2);
  zeus_runner_close(b);
  /* Other knobs are another job: not locked out. */
  s.eta = 0.25;
  assert_zeus_ok(zeus_runner_open(&a, &s, NULL));
  s.eta = 0.5;
  assert_zeus_ok(zeus_runner_open(&b, &s, NULL));
  zeus_runner_close(b);
  zeus_runner_close(a);
}

/* ---- item 10: damage ---- */

static void sql(const char *path, const char *stmt) {
  sqlite3 *db;
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  char *err = NULL;
  if (sqlite3_exec(db, stmt, NULL, NULL, &err) != SQLITE_OK) fail_msg("%s: %s", stmt, err);
  sqlite3_close(db);
}

/* A state with one recurrence done, at `st`. */
static void make_state(const char *dir, const char *st, const char *script) {
  const char *cmd[] = {script, NULL};
  zeus_run_spec s = script_spec(dir, st, cmd);
  zeus_runner *r;
  assert_zeus_ok(zeus_runner_open(&r, &s, NULL));
  assert_zeus_ok(zeus_runner_run(r, 1));
  zeus_runner_close(r);
}

static void run_damaged_state_is_refused_and_reset_state_starts_over(void **state) {
  (void)state;
  setup_env();
  char dir[256], st[320], script[320];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(st, sizeof st, "%s/state.sqlite", dir);
  snprintf(script, sizeof script, "%s/ok.sh", dir);
  write_script(script, OK_TRAINEE);
  const char *cmd[] = {script, NULL};
  zeus_run_spec s = script_spec(dir, st, cmd);
  zeus_runner *r;
  /* A 0-byte state. */
  zeus_test_write_file(st, "");
  assert_zeus_err(zeus_runner_open(&r, &s, NULL), ZEUS_EPARSE, "is damaged: it is empty (0 bytes)");
  assert_non_null(strstr(zeus_errmsg(), "--reset-state"));
  struct stat sb;
  assert_int_equal(stat(st, &sb), 0);
  assert_int_equal(sb.st_size, 0); /* left as it is */
  unlink(st);
  /* Meta rows gone. */
  make_state(dir, st, script);
  sql(st, "DELETE FROM meta");
  assert_zeus_err(zeus_runner_open(&r, &s, NULL), ZEUS_EPARSE, "its meta rows (version and config) are gone");
  sql(st, "DROP TABLE meta");
  assert_zeus_err(zeus_runner_open(&r, &s, NULL), ZEUS_EPARSE, "its table 'meta' is gone");
  unlink(st);
  /* The history ahead of the driver (rows of another state, or a driver row rolled back). */
  make_state(dir, st, script);
  sql(st, "UPDATE driver SET next_recurrence = 1, next_try = 1");
  assert_zeus_err(zeus_runner_open(&r, &s, NULL), ZEUS_EPARSE, "history ends at recurrence 1, try 1");
  /* --reset-state keeps the damaged file and starts over. */
  s.reset_state = true;
  assert_zeus_ok(zeus_runner_open(&r, &s, NULL));
  assert_int_equal(zeus_runner_recurrences_done(r), 0);
  assert_zeus_ok(zeus_runner_run(r, 1));
  assert_int_equal(zeus_runner_recurrences_done(r), 1);
  zeus_runner_close(r);
  char cmdline[600];
  snprintf(cmdline, sizeof cmdline, "ls '%s' | grep -c '^state.sqlite.reset-[0-9]*$' | grep -qx 1", dir);
  assert_int_equal(system(cmdline), 0);
  /* A healthy state goes on without it. */
  s.reset_state = false;
  assert_zeus_ok(zeus_runner_open(&r, &s, NULL));
  assert_int_equal(zeus_runner_recurrences_done(r), 1);
  zeus_runner_close(r);
}

/* ---- item 11: the timeout bounds the whole group ---- */

static void run_timeout_bounds_a_trainee_whose_helper_keeps_its_output(void **state) {
  (void)state;
  setup_env();
  char dir[256], script[320], text[1024], helper_pid[320];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(script, sizeof script, "%s/held.sh", dir);
  snprintf(helper_pid, sizeof helper_pid, "%s/helper.pid", dir);
  /* The result is written at once (the old driver recorded such a try as normal); a helper that
   * left the group (setsid) keeps the output open for 60 s; the trainee ignores SIGTERM. */
  snprintf(text, sizeof text,
           "%s"
           "setsid sh -c 'echo $$ > \"%s\"; exec sleep 60' &\n"
           "trap '' TERM\n"
           "sleep 60\n",
           OK_TRAINEE, helper_pid);
  write_script(script, text);
  const char *cmd[] = {script, NULL};
  zeus_run_spec s = script_spec(dir, NULL, cmd);
  s.timeout_s = 0.5;
  s.keep_going = true;
  s.max_tries = 1;
  zeus_runner *r;
  assert_zeus_ok(zeus_runner_open(&r, &s, NULL));
  double t0 = zeus_monotonic_s();
  int rc = zeus_runner_run(r, 1);
  double took = zeus_monotonic_s() - t0;
  long hp = read_pid(helper_pid);
  if (hp > 0) kill((pid_t)hp, SIGKILL);
  /* timeout 0.5 s + SIGKILL after 5 s + 1 s of draining, with room for a loaded machine */
  assert_true(took < 20);
  assert_int_equal(rc, ZEUS_ESTATE); /* the only try failed: max tries */
  char *text_json;
  assert_zeus_ok(zeus_runner_history_json(r, &text_json));
  json_t *h = json_loads(text_json, 0, NULL);
  zeus_free(text_json);
  json_t *row = json_array_get(json_object_get(h, "history"), 0);
  assert_non_null(row);
  assert_string_equal(json_string_value(json_object_get(row, "status")), "failed");
  json_decref(h);
  zeus_runner_close(r);
}

/* ---- item 12: an unwritable state costs no try ---- */

static void run_unwritable_state_starts_no_try(void **state) {
  (void)state;
  setup_env();
  char dir[256], st[320], script[320];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(st, sizeof st, "%s/state.sqlite", dir);
  snprintf(script, sizeof script, "%s/ok.sh", dir);
  write_script(script, OK_TRAINEE);
  const char *cmd[] = {script, NULL};
  zeus_run_spec s = script_spec(dir, st, cmd);
  zeus_run_callbacks cb = {.try_started = count_start};
  zeus_runner *r;
  assert_zeus_ok(zeus_runner_open(&r, &s, &cb));
  /* No file may grow (root ignores permissions; a file-size limit of 0 stops the journal too). */
  struct rlimit old, none;
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
  none = old;
  none.rlim_cur = 0;
  void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &none), 0);
  started_count = 0;
  int rc = zeus_runner_run(r, 1);
  char msg[512];
  snprintf(msg, sizeof msg, "%s", zeus_errmsg());
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, prev);
  assert_int_equal(rc, ZEUS_EIO);
  assert_non_null(strstr(msg, "the state cannot be written, so no try was started"));
  assert_int_equal(started_count, 0);
  /* Writable again: the same try runs. */
  assert_zeus_ok(zeus_runner_run(r, 1));
  assert_int_equal(started_count, 1);
  zeus_runner_close(r);
}

/* ---- item 13: the trainee's result file is read bounded ---- */

static void run_result_file_linked_to_dev_zero_or_a_fifo_is_refused_at_once(void **state) {
  (void)state;
  setup_env();
  char dir[256], script[320];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(script, sizeof script, "%s/hostile.sh", dir);
  write_script(script,
               "#!/bin/sh\n"
               "r=\"$ZEUS_LOG_DIR/$ZEUS_JOB_ID+bs8.train.json\"\n"
               "if [ \"$1\" = fifo ]; then mkfifo \"$r\"; else ln -s /dev/zero \"$r\"; fi\n");
  for (int k = 0; k < 2; k++) {
    const char *cmd[] = {script, k ? "fifo" : "zero", NULL};
    zeus_run_spec s = script_spec(dir, NULL, cmd);
    s.dataset = k ? "fifo" : "zero";
    zeus_runner *r;
    assert_zeus_ok(zeus_runner_open(&r, &s, NULL));
    double t0 = zeus_monotonic_s();
    assert_zeus_err(zeus_runner_run(r, 1), ZEUS_EPARSE, "is not a regular file");
    assert_true(zeus_monotonic_s() - t0 < 10);
    assert_non_null(strstr(zeus_errmsg(), "result file"));
    zeus_runner_close(r);
  }
}

/* ---- item 15 (spec): counts out of range ---- */

static void run_spec_negative_recurrences_are_refused(void **state) {
  (void)state;
  char dir[256], path[320];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/job.json", dir);
  zeus_test_write_file(path,
                       "{\"command\": \"true\", \"batch_sizes\": [8], \"default_batch_size\": 8, "
                       "\"target_metric\": 1, \"max_epochs\": 1, \"recurrences\": -3}");
  zeus_run_spec s;
  zeus_run_spec_init(&s);
  void *storage = NULL;
  long recs = 99;
  assert_zeus_err(zeus_run_spec_load(&s, path, &storage, &recs), ZEUS_EPARSE, "recurrences");
  assert_non_null(strstr(zeus_errmsg(), "[0, 1000000]"));
  assert_int_equal(recs, 99);
  /* The spec reader is bounded: a FIFO and /dev/zero are refused at once. */
  assert_zeus_err(zeus_run_spec_load(&s, "/dev/zero", &storage, &recs), ZEUS_EINVAL, "not a regular file");
  char fifo[320];
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  assert_zeus_err(zeus_run_spec_load(&s, fifo, &storage, &recs), ZEUS_EINVAL, "job spec");
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(run_trainee_dies_with_killed_driver_and_restart_refuses_live_orphan),
      cmocka_unit_test(run_leftovers_of_a_finished_trainee_are_killed),
      cmocka_unit_test(run_concurrent_first_runs_of_a_job_cannot_split_its_state),
      cmocka_unit_test(run_damaged_state_is_refused_and_reset_state_starts_over),
      cmocka_unit_test(run_timeout_bounds_a_trainee_whose_helper_keeps_its_output),
      cmocka_unit_test(run_unwritable_state_starts_no_try),
      cmocka_unit_test(run_result_file_linked_to_dev_zero_or_a_fifo_is_refused_at_once),
      cmocka_unit_test(run_spec_negative_recurrences_are_refused),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

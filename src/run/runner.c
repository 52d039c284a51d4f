/* runner.c: the recurring-job driver (the original's ZeusMaster.run): one recurrence after
 * another, tries until the target is reached, the optimizer fed with each try's cost, every
 * finished try committed to the state. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/json.h"
#include "run/run_internal.h"

extern char **environ;

static const char *const PROTOCOL_VARS[] = {"ZEUS_LOG_DIR",        "ZEUS_JOB_ID",        "ZEUS_COST_THRESH",
                                            "ZEUS_ETA_KNOB",       "ZEUS_TARGET_METRIC", "ZEUS_PROFILE_PARAMS",
                                            "ZEUS_USE_OPTIMAL_PL", NULL};

/* The cost's max power: the GPUs' maximum limit times their number. */
static int gpu_max_power(double *out) {
  zeus_devices *d;
  int rc = zeus_devices_open(&d, NULL);
  if (rc) return zeus__error_ctx(rc, "finding the GPUs' maximum power (or give --max-power-w)");
  unsigned n = zeus_gpu_count(d), mn, mx, def;
  if (n == 0) {
    zeus_devices_close(d);
    return zeus__error(ZEUS_EINVAL, "no GPU is visible to find the cost's maximum power: give --max-power-w "
                                    "(or run where the training GPUs are visible)");
  }
  rc = zeus_gpu_power_limit_constraints(d, 0, &mn, &mx, &def);
  zeus_devices_close(d);
  if (rc) return zeus__error_ctx(rc, "reading GPU 0's power-limit range (or give --max-power-w)");
  *out = (double)(mx / 1000) * n;
  return ZEUS_OK;
}

int zeus_runner_open(zeus_runner **out, const zeus_run_spec *spec, const zeus_run_callbacks *cb) {
  int rc = zeus__run_spec_check(spec);
  if (rc) return rc;
  zeus_runner *r = calloc(1, sizeof *r);
  if (!r) return zeus__oom("opening the job driver");
  r->lock_fd = r->id_lock_fd = -1;
  if (cb) r->cb = *cb;
  rc = zeus__run_spec_copy(&r->own, spec, &r->s);
  /* Which placeholders the command uses; every batch size must have a rate when it uses {lr}. */
  zeus__run_subst v;
  memset(&v, 0, sizeof v);
  zeus__buf b = {0};
  for (size_t i = 0; !rc && r->s.command[i]; i++) rc = zeus__run_expand(r->s.command[i], &v, &b, &r->uses_lr);
  zeus__buf_free(&b);
  for (size_t i = 0; !rc && r->uses_lr && i < r->s.num_batch_sizes; i++) {
    double lr;
    rc = zeus__run_lr(&r->s, r->s.batch_sizes[i], &lr);
  }
  r->max_power_w = r->s.max_power_w;
  if (!rc && r->max_power_w == 0) rc = gpu_max_power(&r->max_power_w);
  if (!rc) rc = zeus__run_state_open(r);
  if (rc) {
    zeus_runner_close(r);
    return rc;
  }
  *out = r;
  return ZEUS_OK;
}

void zeus_runner_close(zeus_runner *r) {
  if (!r) return;
  zeus__run_state_close(r);
  zeus_bso_close(r->bso);
  free(r->logdir);
  free(r->state_path);
  free(r->lock_path);
  zeus__arena_free(&r->own);
  free(r);
}

void zeus_runner_request_stop(zeus_runner *r) { r->stop = 1; }
const char *zeus_runner_logdir(const zeus_runner *r) { return r->logdir; }
const char *zeus_runner_state_path(const zeus_runner *r) { return r->state_path; }
long zeus_runner_recurrences_done(const zeus_runner *r) { return r->next_rec - 1; }
int zeus_runner_history_json(zeus_runner *r, char **json) { return zeus__run_state_json(r, json); }

/* ---- one try ---- */

typedef struct launch {
  char **argv;
  char **env;
  zeus__arena a;
  char *log_path, *result_path;
} launch;

static void launch_free(launch *l) {
  zeus__arena_free(&l->a);
  free(l->log_path);
  free(l->result_path);
}

static int add_env(launch *l, size_t *n, const char *key, const char *value) {
  size_t len = strlen(key) + strlen(value) + 2;
  char *kv = zeus__arena_alloc(&l->a, len);
  if (!kv) return zeus__oom("preparing the trainee's environment");
  snprintf(kv, len, "%s=%s", key, value);
  l->env[(*n)++] = kv;
  return ZEUS_OK;
}

static bool is_protocol_var(const char *kv) {
  for (int i = 0; PROTOCOL_VARS[i]; i++) {
    size_t n = strlen(PROTOCOL_VARS[i]);
    if (strncmp(kv, PROTOCOL_VARS[i], n) == 0 && kv[n] == '=') return true;
  }
  return false;
}

static int prepare(zeus_runner *r, const zeus_run_try *t, launch *l) {
  memset(l, 0, sizeof *l);
  char job_id[64];
  snprintf(job_id, sizeof job_id, "rec%02ld+try%02ld", t->recurrence, t->try_index);
  zeus__buf lp = {0}, rp = {0};
  int rc = zeus__buf_printf(&lp, "%s/%s.train.log", r->logdir, job_id);
  if (!rc) rc = zeus__buf_printf(&rp, "%s/%s+bs%ld.train.json", r->logdir, job_id, t->batch_size);
  l->log_path = lp.data;
  l->result_path = rp.data;
  if (rc) return rc;
  zeus__run_subst v;
  snprintf(v.bs, sizeof v.bs, "%ld", t->batch_size);
  if (isnan(t->learning_rate)) snprintf(v.lr, sizeof v.lr, "None");
  else zeus__py_repr(t->learning_rate, v.lr, sizeof v.lr);
  snprintf(v.seed, sizeof v.seed, "%lld", t->seed);
  snprintf(v.epochs, sizeof v.epochs, "%ld", r->s.max_epochs);
  snprintf(v.slice, sizeof v.slice, "%ld", t->recurrence);
  zeus__py_repr(r->s.target_metric, v.target, sizeof v.target);
  size_t argc = 0;
  while (r->s.command[argc]) argc++;
  l->argv = zeus__arena_alloc(&l->a, (argc + 1) * sizeof *l->argv);
  if (!l->argv) return zeus__oom("preparing the trainee's command");
  zeus__buf b = {0};
  for (size_t i = 0; i < argc && !rc; i++) {
    rc = zeus__run_expand(r->s.command[i], &v, &b, NULL);
    if (!rc && !(l->argv[i] = zeus__arena_strdup(&l->a, b.data))) rc = zeus__oom("preparing the trainee's command");
  }
  zeus__buf_free(&b);
  if (rc) return rc;
  size_t nenv = 0;
  while (environ[nenv]) nenv++;
  l->env = zeus__arena_alloc(&l->a, (nenv + 8) * sizeof *l->env);
  if (!l->env) return zeus__oom("preparing the trainee's environment");
  size_t n = 0;
  for (size_t i = 0; i < nenv; i++)
    if (!is_protocol_var(environ[i])) l->env[n++] = environ[i];
  char thresh[40], eta[40], target[40], params[64];
  zeus__py_repr(t->cost_threshold, thresh, sizeof thresh);
  zeus__py_repr(r->s.eta, eta, sizeof eta);
  zeus__py_repr(r->s.target_metric, target, sizeof target);
  snprintf(params, sizeof params, "%ld,%ld", r->s.profile_warmup_iters, r->s.profile_measure_iters);
  rc = add_env(l, &n, "ZEUS_LOG_DIR", r->logdir);
  if (!rc) rc = add_env(l, &n, "ZEUS_JOB_ID", job_id);
  if (!rc) rc = add_env(l, &n, "ZEUS_COST_THRESH", thresh);
  if (!rc) rc = add_env(l, &n, "ZEUS_ETA_KNOB", eta);
  if (!rc) rc = add_env(l, &n, "ZEUS_TARGET_METRIC", target);
  if (!rc) rc = add_env(l, &n, "ZEUS_PROFILE_PARAMS", params);
  if (!rc) rc = add_env(l, &n, "ZEUS_USE_OPTIMAL_PL", r->s.observer_mode ? "false" : "true");
  l->env[n] = NULL;
  return rc;
}

static void describe_exit(const zeus__child_result *c, char *buf, size_t len) {
  if (c->timed_out) snprintf(buf, len, "was stopped after the %s timeout", "per-try");
  else if (c->signal) snprintf(buf, len, "was killed by signal %d", c->signal);
  else snprintf(buf, len, "exited with code %d", c->exit_code);
}

/* Reads the trainee's result file. */
static int read_result(const char *path, const zeus__child_result *c, zeus_run_try *t) {
  char how[64];
  describe_exit(c, how, sizeof how);
  if (access(path, F_OK) != 0)
    return zeus__error(ZEUS_EIO, "the trainee %s without writing its result file '%s'", how, path);
  json_t *root;
  int rc = zeus__json_load_file_max(path, ZEUS__RUN_RESULT_MAX, "trainee's result file (JSON)", &root);
  if (rc) return zeus__error_ctx(ZEUS_EPARSE, "the trainee's result file (the trainee %s)", how);
  json_t *e = json_object_get(root, "energy"), *tm = json_object_get(root, "time"),
         *re = json_object_get(root, "reached");
  json_t *ep = json_object_get(root, "num_epochs");
  if (!ep) ep = json_object_get(root, "epochs");
  rc = ZEUS_OK;
  if (!json_is_object(root) || !json_is_number(e) || !json_is_number(tm) || !(json_number_value(e) >= 0) ||
      !(json_number_value(tm) >= 0) || !isfinite(json_number_value(e)) || !isfinite(json_number_value(tm)))
    rc = zeus__error(ZEUS_EPARSE, "%s: expected {\"energy\": J >= 0, \"time\": s >= 0, \"reached\": true|false} "
                                  "(the trainee %s)", path, how);
  if (!rc) {
    if (json_is_boolean(re)) t->reached = json_is_true(re);
    else if (json_is_string(re) && strcasecmp(json_string_value(re), "true") == 0) t->reached = true;
    else if (json_is_string(re) && strcasecmp(json_string_value(re), "false") == 0) t->reached = false;
    else rc = zeus__error(ZEUS_EPARSE, "%s: field 'reached' is %s, expected true or false (the trainee %s)", path,
                          zeus__json_type_name(re), how);
  }
  if (!rc) {
    t->energy_j = json_number_value(e);
    t->time_s = json_number_value(tm);
    t->epochs = json_is_integer(ep) ? (long)json_integer_value(ep) : -1;
  }
  json_decref(root);
  return rc;
}

/* Runs one try; fills t. ZEUS_ESTATE when stopped; errors of read_result otherwise. */
static int run_try(zeus_runner *r, zeus_run_try *t) {
  launch l;
  int rc = prepare(r, t, &l);
  if (rc) {
    launch_free(&l);
    return rc;
  }
  if (unlink(l.result_path) != 0 && errno != ENOENT)
    zeus__log(ZEUS_LOG_WARN, "run", "cannot remove the old result file %s: %s", l.result_path, strerror(errno));
  r->cur_rec = t->recurrence;
  r->cur_try = t->try_index;
  if (r->cb.try_started) r->cb.try_started(r->cb.ctx, t, (const char *const *)l.argv, l.log_path);
  zeus__child_result c;
  rc = zeus__run_child(r, l.argv, l.env, l.log_path, &c);
  if (!rc) {
    t->exit_code = c.exit_code;
    if (c.stopped) rc = zeus__error(ZEUS_ESTATE, "interrupted: the try (recurrence %ld, try %ld) was stopped and is "
                                                 "not recorded; run again to continue", t->recurrence, t->try_index);
    /* A try cut short by the timeout failed, whatever result file it left. */
    else if (c.timed_out)
      rc = zeus__error(ZEUS_EIO, "the trainee was stopped after the per-try timeout of %g s (recurrence %ld, try %ld)",
                       r->s.timeout_s, t->recurrence, t->try_index);
    else rc = read_result(l.result_path, &c, t);
  }
  launch_free(&l);
  return rc;
}

static int run_loop(zeus_runner *r, long recurrences);

int zeus_runner_run(zeus_runner *r, long recurrences) {
  if (recurrences < 0) return zeus__error(ZEUS_EINVAL, "recurrences: %ld, expected >= 0", recurrences);
  int rc = run_loop(r, recurrences);
  if (rc) {
    /* What was not committed (a prediction's random draws, a try without a result) is forgotten,
     * so that this runner and a later run continue from the state. */
    zeus__saved_error e;
    zeus__error_save(&e);
    if (zeus__run_state_reload(r) != ZEUS_OK)
      zeus__log(ZEUS_LOG_ERROR, "run", "could not re-read the state after an error: %s", zeus_errmsg());
    zeus__error_restore(&e);
  }
  return rc;
}

static int run_loop(zeus_runner *r, long recurrences) {
  r->stop = 0;
  for (long done = 0; done < recurrences;) {
    if (r->stop) return zeus__error(ZEUS_ESTATE, "interrupted before recurrence %ld", r->next_rec);
    if (r->next_try > r->s.max_tries)
      return zeus__error(ZEUS_ESTATE, "recurrence %ld did not reach the target metric in %ld tries", r->next_rec,
                         r->s.max_tries);
    /* The state must take this try's result: checked by writing it (unchanged) before the try
     * starts, so that an unwritable state never costs a training run. */
    int wrc = zeus__run_state_commit(r, NULL);
    if (wrc) return zeus__error_ctx(wrc, "the state cannot be written, so no try was started");
    zeus_run_try t;
    memset(&t, 0, sizeof t);
    t.recurrence = r->next_rec;
    t.try_index = r->next_try;
    t.seed = r->next_seed;
    t.cost_threshold = r->s.beta * r->min_cost;
    if (isnan(t.cost_threshold)) t.cost_threshold = INFINITY; /* beta inf x no cost yet */
    t.learning_rate = NAN;
    int rc = zeus_bso_predict(r->bso, &t.batch_size);
    if (!rc && r->uses_lr) rc = zeus__run_lr(&r->s, t.batch_size, &t.learning_rate);
    if (rc) return rc;
    rc = run_try(r, &t);
    if (rc == ZEUS_ESTATE) return rc; /* stopped: nothing recorded */
    if (rc) {
      if (!r->s.keep_going) {
        t.status = "failed";
        if (r->cb.try_finished) r->cb.try_finished(r->cb.ctx, &t);
        return rc;
      }
      /* Recorded, not shown to the optimizer; the next try starts. */
      zeus__log(ZEUS_LOG_WARN, "run", "%s; recorded as failed, going on (keep-going)", zeus_errmsg());
      t.status = "failed";
      t.energy_j = t.time_s = t.cost = 0;
      t.epochs = -1;
      t.reached = false;
      r->next_try++;
      r->next_seed++;
      rc = zeus__run_state_commit(r, &t);
      if (r->cb.try_finished) r->cb.try_finished(r->cb.ctx, &t);
      if (rc) return rc;
      continue;
    }
    r->next_seed++;
    bool no_epoch = !t.reached && t.energy_j == 0 && t.time_s == 0;
    if (no_epoch) {
      if (!isfinite(r->min_cost))
        return zeus__error(ZEUS_EIO,
                           "the trainee ran no epoch although no cost threshold was set (recurrence %ld, try %ld)",
                           t.recurrence, t.try_index);
      /* Even one epoch would cross the threshold: the optimizer learns a prohibitive cost. */
      t.status = "no_epoch";
      t.cost = 0;
      rc = zeus_bso_observe(r->bso, t.batch_size, 100.0 * r->s.beta * r->min_cost, false);
    } else {
      t.status = t.reached ? "reached" : "not_reached";
      t.cost = zeus_cost(t.energy_j, t.time_s, r->s.eta, r->max_power_w);
      r->cost_acc += t.cost;
      rc = zeus_bso_observe(r->bso, t.batch_size, t.cost, t.reached);
    }
    if (rc) return rc;
    bool first = t.recurrence == 1;
    if (t.reached) {
      if (r->cost_acc < r->min_cost) r->min_cost = r->cost_acc;
      r->next_rec++;
      r->next_try = 1;
      r->cost_acc = 0;
      done++;
    } else {
      r->next_try++;
    }
    rc = zeus__run_state_commit(r, &t);
    if (r->cb.try_finished) r->cb.try_finished(r->cb.ctx, &t);
    if (rc) return rc;
    if (!t.reached && first)
      return zeus__error(ZEUS_ESTATE,
                         "the default batch size %ld did not reach the target metric in the first recurrence; "
                         "check the target metric, max epochs and the training command",
                         t.batch_size);
  }
  return ZEUS_OK;
}

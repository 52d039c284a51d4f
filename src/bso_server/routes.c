/* routes.c: the batch-size optimizer server's routes over the store: the original's
 * register / predict / report / end-trial / delete semantics, with pruning exploration replayed
 * through src/bso/'s explorer from the job's trials and Thompson sampling by src/bso/'s zeus_gts,
 * whose arms and generator are kept in the job's row. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bso/bso_internal.h"
#include "bso_server/bso_server_internal.h"
#include "zeus/clock.h"

enum { T_EXPLORATION = 0, T_CONCURRENT = 1, T_MAB = 2 };
enum { S_DISPATCHED = 0, S_SUCCEEDED = 1, S_FAILED = 2 };

#define MAX_BATCH_SIZES 1024
#define MAX_ID_LEN 256

/* Bounds on the numbers that make a cost (issue 36): with time <= 1e9 s (31 years), energy <=
 * 1e18 J and max_power <= 1e9 W, a cost is at most 2e18, a window's variance of costs at most
 * 4e36 and a sum of rewards far from overflowing, so no cost, variance or refit of an arm can be
 * infinite (an infinite variance was a reward precision of 0: an arm "without information" and a
 * job answering 500 for ever). The priors are bounded for the same reason. */
#define MAX_TIME_S BSO_MAX_TIME_S
#define MAX_ENERGY_J BSO_MAX_ENERGY_J
#define MAX_POWER_W 1e9
#define MAX_PRIOR 1e30

json_t *bso_message(const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return json_pack("{ss}", "message", buf);
}

static void set_reply(bso_reply *r, int status, json_t *body) {
  json_decref(r->body);
  r->status = status;
  r->body = body;
}

/* ---- validation: FastAPI's 422 shape, naming the field ---- */

static int invalid(bso_reply *r, const char *field, const char *type, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  json_t *loc = json_pack("[ss]", field ? "body" : "query", field ? field : "job_id");
  set_reply(r, 422, json_pack("{s[{sossss}]}", "detail", "loc", loc, "msg", msg, "type", type));
  return 1;
}

static bool is_int(const json_t *v) {
  if (json_is_integer(v)) return true;
  if (json_is_real(v)) {
    double d = json_real_value(v);
    return isfinite(d) && d == floor(d) && fabs(d) < 9e15;
  }
  return false;
}
static long long int_of(const json_t *v) {
  return json_is_integer(v) ? json_integer_value(v) : (long long)json_real_value(v);
}

/* Field k of o as a number (default def when absent). */
static int num_field(json_t *o, const char *k, bool required, double def, bool nullable, json_t *out, bso_reply *r) {
  json_t *v = json_object_get(o, k);
  if (!v) {
    if (required) return invalid(r, k, "value_error.missing", "field required");
    if (isnan(def))
      json_object_set_new(out, k, json_null());
    else
      json_object_set_new(out, k, json_real(def));
    return 0;
  }
  if (json_is_null(v) && nullable) {
    json_object_set_new(out, k, json_null());
    return 0;
  }
  if (!json_is_number(v) || !isfinite(json_number_value(v)))
    return invalid(r, k, "type_error.float", "value is not a valid float");
  json_object_set_new(out, k, json_real(json_number_value(v)));
  return 0;
}

static int int_field(json_t *o, const char *k, bool required, long long def, long long min, long long max,
                     bool nullable, json_t *out, bso_reply *r) {
  json_t *v = json_object_get(o, k);
  if (!v) {
    if (required) return invalid(r, k, "value_error.missing", "field required");
    json_object_set_new(out, k, nullable ? json_null() : json_integer(def));
    return 0;
  }
  if (json_is_null(v) && nullable) {
    json_object_set_new(out, k, json_null());
    return 0;
  }
  if (!is_int(v)) return invalid(r, k, "type_error.integer", "value is not a valid integer");
  long long x = int_of(v);
  if (x < min || x > max)
    return invalid(r, k, "value_error.number", "ensure this value is in %lld..%lld (got %lld)", min, max, x);
  json_object_set_new(out, k, json_integer(x));
  return 0;
}

static int str_field(json_t *o, const char *k, bool required, bool nullable, json_t *out, bso_reply *r) {
  json_t *v = json_object_get(o, k);
  if (!v || json_is_null(v)) {
    if (required && !(v && nullable))
      return invalid(r, k, v ? "type_error.none.not_allowed" : "value_error.missing",
                     v ? "none is not an allowed value" : "field required");
    json_object_set_new(out, k, json_null());
    return 0;
  }
  if (!json_is_string(v)) return invalid(r, k, "type_error.str", "str type expected");
  if (strlen(json_string_value(v)) > MAX_ID_LEN)
    return invalid(r, k, "value_error.any_str.max_length", "ensure this value has at most %d characters", MAX_ID_LEN);
  json_object_set(out, k, v);
  return 0;
}

static int bool_field(json_t *o, const char *k, bool def, json_t *out, bso_reply *r) {
  json_t *v = json_object_get(o, k);
  if (!v) {
    json_object_set_new(out, k, json_boolean(def));
    return 0;
  }
  if (!json_is_boolean(v)) return invalid(r, k, "type_error.bool", "value could not be parsed to a boolean");
  json_object_set(out, k, v);
  return 0;
}

static int cmp_long(const void *a, const void *b) {
  long x = *(const long *)a, y = *(const long *)b;
  return (x > y) - (x < y);
}

/* JobSpecFromClient, normalised: every field, in the original's order, batch sizes sorted. */
static int validate_job(json_t *in, json_t **out, bso_reply *r) {
  json_t *o = json_object();
  int bad = str_field(in, "job_id", false, true, o, r) || str_field(in, "job_id_prefix", true, false, o, r);
  if (!bad) {
    json_t *bs = json_object_get(in, "batch_sizes");
    if (!bs)
      bad = invalid(r, "batch_sizes", "value_error.missing", "field required");
    else if (!json_is_array(bs))
      bad = invalid(r, "batch_sizes", "type_error.list", "value is not a valid list");
    else if (json_array_size(bs) == 0)
      bad = invalid(r, "batch_sizes", "value_error", "Batch Sizes = [] is empty");
    else if (json_array_size(bs) > MAX_BATCH_SIZES)
      bad = invalid(r, "batch_sizes", "value_error", "at most %d batch sizes", MAX_BATCH_SIZES);
    else {
      size_t n = json_array_size(bs);
      long v[MAX_BATCH_SIZES];
      for (size_t i = 0; i < n && !bad; i++) {
        json_t *e = json_array_get(bs, i);
        if (!is_int(e) || int_of(e) <= 0 || int_of(e) > 1000000000)
          bad = invalid(r, "batch_sizes", "type_error.integer", "batch size %zu is not an integer in 1..1000000000", i);
        else
          v[i] = (long)int_of(e);
      }
      if (!bad) {
        qsort(v, n, sizeof *v, cmp_long);
        json_t *a = json_array();
        for (size_t i = 0; i < n && !bad; i++) {
          if (i && v[i] == v[i - 1])
            bad = invalid(r, "batch_sizes", "value_error", "batch size %ld is listed twice", v[i]);
          json_array_append_new(a, json_integer(v[i]));
        }
        json_object_set_new(o, "batch_sizes", a);
      }
    }
  }
  bad = bad || int_field(in, "default_batch_size", true, 0, 1, 1000000000, false, o, r) ||
        num_field(in, "eta_knob", false, 0.5, false, o, r) || num_field(in, "beta_knob", false, 2.0, true, o, r) ||
        num_field(in, "target_metric", false, 0.5, false, o, r) ||
        bool_field(in, "higher_is_better_metric", true, o, r) ||
        int_field(in, "max_epochs", false, 100, 1, 1000000000, false, o, r) ||
        int_field(in, "num_pruning_rounds", false, 2, 0, 1000, false, o, r) ||
        int_field(in, "window_size", false, 0, 0, 1000000000, false, o, r) ||
        num_field(in, "mab_prior_mean", false, 0.0, false, o, r) ||
        num_field(in, "mab_prior_precision", false, 0.0, false, o, r) ||
        int_field(in, "mab_num_explorations", false, 2, 0, 1000000, false, o, r) ||
        int_field(in, "mab_seed", false, 0, INT64_MIN, INT64_MAX, true, o, r) ||
        num_field(in, "max_power", true, 0, false, o, r) ||
        int_field(in, "number_of_gpus", true, 0, 1, 1000000, false, o, r) ||
        str_field(in, "gpu_model", true, false, o, r);
  if (!bad) {
    double eta = json_real_value(json_object_get(o, "eta_knob"));
    json_t *beta = json_object_get(o, "beta_knob");
    long dbs = (long)json_integer_value(json_object_get(o, "default_batch_size"));
    const char *id = json_string_value(json_object_get(o, "job_id"));
    const char *prefix = json_string_value(json_object_get(o, "job_id_prefix"));
    bool found = false;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(o, "batch_sizes"), i, e) found = found || json_integer_value(e) == dbs;
    if (eta < 0 || eta > 1)
      bad = invalid(r, "eta_knob", "value_error", "eta_knob should be in range [0,1]");
    else if (json_is_real(beta) && !(json_real_value(beta) > 0))
      bad = invalid(r, "beta_knob", "value_error",
                    "Invalid beta_knob(%g). To disable early stop, set beta_knob = None to disable or positive value.",
                    json_real_value(beta));
    else if (!(json_real_value(json_object_get(o, "max_power")) > 0))
      bad = invalid(r, "max_power", "value_error.number.not_gt", "ensure this value is greater than 0");
    else if (json_real_value(json_object_get(o, "max_power")) > MAX_POWER_W)
      bad = invalid(r, "max_power", "value_error.number.not_le",
                    "ensure this value is at most %g (watts, all the job's GPUs together; got %g)", MAX_POWER_W,
                    json_real_value(json_object_get(o, "max_power")));
    else if (json_real_value(json_object_get(o, "mab_prior_precision")) < 0)
      bad = invalid(r, "mab_prior_precision", "value_error.number.not_ge",
                    "ensure this value is greater than or equal to 0");
    else if (json_real_value(json_object_get(o, "mab_prior_precision")) > MAX_PRIOR)
      bad = invalid(r, "mab_prior_precision", "value_error.number.not_le", "ensure this value is at most %g",
                    MAX_PRIOR);
    else if (fabs(json_real_value(json_object_get(o, "mab_prior_mean"))) > MAX_PRIOR)
      bad = invalid(r, "mab_prior_mean", "value_error.number", "ensure this value is in -%g..%g", MAX_PRIOR,
                    MAX_PRIOR);
    else if (!*json_string_value(json_object_get(o, "gpu_model")))
      bad = invalid(r, "gpu_model", "value_error", "Invalid gpu_model(). Shouldn't be empty.");
    else if (!found)
      bad = invalid(r, "default_batch_size", "value_error", "Default BS(%ld) not in batch_sizes.", dbs);
    else if (id && strncmp(id, prefix, strlen(prefix)) != 0)
      bad = invalid(r, "job_id", "value_error", "Job_id(%s) does not start with prefix(%s).", id, prefix);
    else if (strlen(prefix) > MAX_ID_LEN - 40)
      bad = invalid(r, "job_id_prefix", "value_error", "ensure this value has at most %d characters", MAX_ID_LEN - 40);
  }
  if (bad) {
    json_decref(o);
    return 1;
  }
  *out = o;
  return 0;
}

static int validate_trial(json_t *in, bool result, json_t **out, bso_reply *r) {
  json_t *o = json_object();
  int bad = str_field(in, "job_id", true, false, o, r) ||
            int_field(in, "batch_size", true, 0, 1, 1000000000, false, o, r) ||
            int_field(in, "trial_number", true, 0, 1, INT64_MAX, false, o, r);
  if (!bad && result) {
    bad = num_field(in, "time", true, 0, false, o, r) || num_field(in, "energy", true, 0, false, o, r) ||
          num_field(in, "metric", true, 0, false, o, r) ||
          int_field(in, "current_epoch", true, 0, 0, 1000000000, false, o, r);
    double t = json_real_value(json_object_get(o, "time")), e = json_real_value(json_object_get(o, "energy"));
    if (!bad && t < 0)
      bad = invalid(r, "time", "value_error.number.not_ge", "ensure this value is greater than or equal to 0");
    if (!bad && t > MAX_TIME_S)
      bad = invalid(r, "time", "value_error.number.not_le",
                    "ensure this value is in 0..%g (seconds of training so far; got %g)", MAX_TIME_S, t);
    if (!bad && e < 0)
      bad = invalid(r, "energy", "value_error.number.not_ge", "ensure this value is greater than or equal to 0");
    if (!bad && e > MAX_ENERGY_J)
      bad = invalid(r, "energy", "value_error.number.not_le",
                    "ensure this value is in 0..%g (joules of training so far; got %g)", MAX_ENERGY_J, e);
  }
  if (bad) {
    json_decref(o);
    return 1;
  }
  *out = o;
  return 0;
}

int bso_validate(bso_req *q, bso_reply *r) {
  if (q->route == BSO_R_DELETE || q->route == BSO_R_PREDICT) {
    if (!q->job_id) return invalid(r, NULL, "value_error.missing", "field required");
    return 0;
  }
  if (!json_is_object(q->body)) return invalid(r, "__root__", "type_error.dict", "the body is not a JSON object");
  json_t *norm = NULL;
  int bad = q->route == BSO_R_REGISTER ? validate_job(q->body, &norm, r)
                                       : validate_trial(q->body, q->route == BSO_R_REPORT, &norm, r);
  if (bad) return 1;
  json_decref(q->body);
  q->body = norm;
  return 0;
}

/* ---- the job ---- */

typedef struct job {
  json_t *spec;
  const char *id;
  long *bs;
  size_t nbs;
  long default_bs;
  double eta, beta, target, max_power, prior_mean, prior_prec;
  bool has_beta, higher;
  long max_epochs, rounds, window, num_expl;
  uint64_t seed;
  int stage;
  bool has_min;
  double min_cost;
  long min_cost_bs;
  char *mab;
} job;

static void job_free(job *j) {
  json_decref(j->spec);
  free(j->bs);
  free(j->mab);
  memset(j, 0, sizeof *j);
}

static double jreal(const json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }
static long jlong(const json_t *o, const char *k) { return (long)json_integer_value(json_object_get(o, k)); }

/* Loads the job (locking its row where the backend can); 0 rows: *found false. */
static int load_job(zeus__store *db, const char *lock, const char *id, job *j, bool *found, char *err, size_t errlen) {
  memset(j, 0, sizeof *j);
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT spec, seed, stage, min_cost, min_cost_bs, mab FROM bso_job WHERE job_id = $1%s",
           lock);
  zeus__store_val p = store_text(id);
  zeus__store_rows rows;
  int rc = db->ops->exec(db, sql, &p, 1, &rows, err, errlen);
  if (rc) return rc;
  *found = rows.nrows == 1;
  if (!*found) {
    zeus__store_rows_free(&rows);
    return STORE_OK;
  }
  const char *spec = zeus__store_rows_text(&rows, 0, 0);
  j->spec = spec ? json_loads(spec, 0, NULL) : NULL;
  if (!j->spec) {
    zeus__store_rows_free(&rows);
    snprintf(err, errlen, "job '%s': its stored specification is not JSON", id);
    return STORE_ERR;
  }
  j->id = json_string_value(json_object_get(j->spec, "job_id"));
  json_t *a = json_object_get(j->spec, "batch_sizes");
  j->nbs = json_array_size(a);
  j->bs = malloc((j->nbs ? j->nbs : 1) * sizeof *j->bs);
  for (size_t i = 0; j->bs && i < j->nbs; i++) j->bs[i] = (long)json_integer_value(json_array_get(a, i));
  j->default_bs = jlong(j->spec, "default_batch_size");
  j->eta = jreal(j->spec, "eta_knob");
  j->has_beta = json_is_number(json_object_get(j->spec, "beta_knob"));
  j->beta = j->has_beta ? jreal(j->spec, "beta_knob") : 0;
  j->target = jreal(j->spec, "target_metric");
  j->higher = json_is_true(json_object_get(j->spec, "higher_is_better_metric"));
  j->max_epochs = jlong(j->spec, "max_epochs");
  j->rounds = jlong(j->spec, "num_pruning_rounds");
  j->window = jlong(j->spec, "window_size");
  j->prior_mean = jreal(j->spec, "mab_prior_mean");
  j->prior_prec = jreal(j->spec, "mab_prior_precision");
  j->num_expl = jlong(j->spec, "mab_num_explorations");
  j->max_power = jreal(j->spec, "max_power");
  j->seed = (uint64_t)zeus__store_rows_int(&rows, 0, 1);
  j->stage = (int)zeus__store_rows_int(&rows, 0, 2);
  j->has_min = !zeus__store_rows_is_null(&rows, 0, 3);
  j->min_cost = zeus__store_rows_real(&rows, 0, 3);
  j->min_cost_bs = (long)zeus__store_rows_int(&rows, 0, 4);
  const char *mab = zeus__store_rows_text(&rows, 0, 5);
  j->mab = mab ? strdup(mab) : NULL;
  zeus__store_rows_free(&rows);
  if (!j->bs) {
    snprintf(err, errlen, "out of memory");
    return STORE_ERR;
  }
  return STORE_OK;
}

static double cost_of(const job *j, double energy, double time) {
  return zeus_cost(energy, time, j->eta, j->max_power);
}

/* The bandit of the job from its saved arms and generator, or a new one over arms. */
static int gts_new(const job *j, const long *arms, size_t n, zeus_gts **g) {
  zeus_gts_opts o;
  zeus_gts_opts_init(&o);
  o.prior_mean = j->prior_mean;
  o.prior_precision = j->prior_prec;
  o.reward_precision = 0;
  o.num_exploration = j->num_expl;
  o.seed = j->seed;
  return zeus_gts_open(g, arms, n, &o);
}

/* A number of a stored arm; null (a NaN saved by a refit over an overflow before the report
 * bounds) reads as NaN, so that gts_load_healed can refit the arm instead of the job failing. */
static int arm_double(const json_t *v, const char *key, double *out) {
  if (json_is_null(v)) {
    *out = NAN;
    return ZEUS_OK;
  }
  return zeus__json_get_double(v, "bandit", key, out);
}

static int gts_load(const job *j, zeus_gts **out, char *err, size_t errlen) {
  json_t *m = j->mab ? json_loads(j->mab, 0, NULL) : NULL;
  json_t *arms = json_object_get(m, "arms"), *rng = json_object_get(m, "rng");
  size_t n = json_array_size(arms);
  if (!n || json_array_size(rng) != 4) {
    json_decref(m);
    snprintf(err, errlen, "job '%s': its stored bandit is damaged", j->id);
    return STORE_ERR;
  }
  long *v = malloc(n * sizeof *v);
  for (size_t i = 0; v && i < n; i++) v[i] = (long)json_integer_value(json_array_get(json_array_get(arms, i), 0));
  zeus_gts *g = NULL;
  int rc = v ? gts_new(j, v, n, &g) : ZEUS_ENOMEM;
  free(v);
  for (size_t i = 0; !rc && i < n; i++) {
    json_t *a = json_array_get(arms, i);
    zeus_gts_arm st = {.arm = (long)json_integer_value(json_array_get(a, 0)),
                       .num_observations = (long)json_integer_value(json_array_get(a, 4))};
    rc = arm_double(json_array_get(a, 1), "mean", &st.mean) ||
         arm_double(json_array_get(a, 2), "precision", &st.precision) ||
         arm_double(json_array_get(a, 3), "reward_precision", &st.reward_precision) ||
         zeus__gts_set_arm_state(g, &st);
  }
  zeus_rng *r = g ? zeus__gts_rng(g) : NULL;
  for (int i = 0; !rc && i < 4; i++) r->s[i] = strtoull(json_string_value(json_array_get(rng, i)), NULL, 16);
  json_decref(m);
  if (rc) {
    zeus_gts_close(g);
    snprintf(err, errlen, "job '%s': its stored bandit is damaged (%s)", j->id, zeus_errmsg());
    return STORE_ERR;
  }
  *out = g;
  return STORE_OK;
}

static char *gts_save(const zeus_gts *g) {
  json_t *arms = json_array(), *rng = json_array();
  for (size_t i = 0; i < zeus_gts_num_arms(g); i++) {
    zeus_gts_arm a;
    zeus_gts_arm_at(g, i, &a);
    json_array_append_new(
        arms, json_pack("[IoooI]", (json_int_t)a.arm, zeus__json_double(a.mean), zeus__json_double(a.precision),
                        zeus__json_double(a.reward_precision), (json_int_t)a.num_observations));
  }
  const zeus_rng *r = zeus__gts_rng_const(g);
  for (int i = 0; i < 4; i++) {
    char hex[24];
    snprintf(hex, sizeof hex, "0x%016" PRIx64, r->s[i]);
    json_array_append_new(rng, json_string(hex));
  }
  json_t *m = json_pack("{soso}", "arms", arms, "rng", rng);
  char *s = m ? json_dumps(m, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
  json_decref(m);
  return s;
}

/* Refits arm bs on its latest window_size results (all when 0), oldest first: zeus_bso's rule. */
static int refit(zeus__store *db, const job *j, zeus_gts *g, long bs, char *err, size_t errlen) {
  char sql[256];
  snprintf(sql, sizeof sql,
           "SELECT time_s, energy_j FROM bso_trial WHERE job_id = $1 AND batch_size = $2 AND status = 1 "
           "ORDER BY trial_number DESC%s",
           j->window > 0 ? " LIMIT $3" : "");
  zeus__store_val p[3] = {store_text(j->id), store_int(bs), store_int(j->window)};
  zeus__store_rows rows;
  int rc = db->ops->exec(db, sql, p, j->window > 0 ? 3 : 2, &rows, err, errlen);
  if (rc) return rc;
  size_t m = rows.nrows;
  double *x = malloc((m ? m : 1) * sizeof *x);
  if (!x) {
    zeus__store_rows_free(&rows);
    snprintf(err, errlen, "out of memory");
    return STORE_ERR;
  }
  for (size_t i = 0; i < m; i++)
    x[m - 1 - i] = -cost_of(j, zeus__store_rows_real(&rows, i, 1), zeus__store_rows_real(&rows, i, 0));
  zeus__store_rows_free(&rows);
  rc = zeus__gts_refit(g, bs, x, m, NULL);
  free(x);
  if (rc) {
    snprintf(err, errlen, "fitting batch size %ld: %s", bs, zeus_errmsg());
    return STORE_ERR;
  }
  return STORE_OK;
}

static int new_trial(zeus__store *db, const job *j, long bs, int type, bso_reply *r, char *err, size_t errlen) {
  zeus__store_val p[4] = {store_text(j->id)};
  zeus__store_rows rows;
  int rc = db->ops->exec(db, "SELECT COALESCE(MAX(trial_number), 0) + 1 FROM bso_trial WHERE job_id = $1", p, 1, &rows,
                         err, errlen);
  if (rc) return rc;
  long long n = zeus__store_rows_int(&rows, 0, 0);
  zeus__store_rows_free(&rows);
  zeus__store_val q[5] = {store_text(j->id), store_int(n), store_int(bs), store_int(type), store_real(zeus_wall_s())};
  rc = db->ops->exec(db,
                     "INSERT INTO bso_trial (job_id, trial_number, batch_size, type, status, start_s) "
                     "VALUES ($1, $2, $3, $4, 0, $5)",
                     q, 5, NULL, err, errlen);
  if (rc) return rc;
  set_reply(r, 200,
            json_pack("{sssIsI}", "job_id", j->id, "batch_size", (json_int_t)bs, "trial_number", (json_int_t)n));
  return STORE_OK;
}

static int save_mab(zeus__store *db, const job *j, const zeus_gts *g, char *err, size_t errlen) {
  char *m = gts_save(g);
  if (!m) {
    snprintf(err, errlen, "out of memory");
    return STORE_ERR;
  }
  zeus__store_val p[2] = {store_text(m), store_text(j->id)};
  int rc = db->ops->exec(db, "UPDATE bso_job SET stage = 1, mab = $1 WHERE job_id = $2", p, 2, NULL, err, errlen);
  free(m);
  return rc;
}

/* What every request of a job looks at first, in one query over a partial index (migration 3):
 * its dispatched trials and its succeeded trials whose numbers are outside the bounds.
 *
 * The trial lease (issue 36): a trial dispatched and then neither reported nor ended for lease_s
 * (its client preempted or killed, or the server killed between commit and answer) ends as
 * failed, so that pruning, which waits for each exploration's outcome, moves on: the batch size
 * is explored again. Counted from the trial's start or its latest report, with the wall clock of
 * the servers sharing the database.
 *
 * Recovery of a job whose database holds a report outside the bounds (written before they were
 * checked, or by hand): each such trial counts as failed from now on (its numbers are kept for
 * whoever looks), and the job's least cost is recomputed from the sound trials when a row was set
 * aside or the stored one is not finite. *bad_bs (n_bad) gets the batch sizes of the rows set
 * aside, whose arms the caller refits during Thompson sampling.
 *
 * One log line per trial; the changes are part of the request's transaction, so they are logged
 * once, by the request that commits them. */
static int attend_rows(zeus__store *db, job *j, double lease_s, long *bad_bs, size_t cap, size_t *n_bad, char *err,
                       size_t errlen) {
  *n_bad = 0;
  double now = zeus_wall_s();
  zeus__store_val p[1] = {store_text(j->id)};
  zeus__store_rows rows;
  int rc = db->ops->exec(db,
                         "SELECT trial_number, batch_size, status, time_s, energy_j, COALESCE(seen_s, start_s) "
                         "FROM bso_trial WHERE job_id = $1 AND " BSO_TRIAL_ATTENTION,
                         p, 1, &rows, err, errlen);
  if (rc) return rc;
  size_t unsound = 0;
  for (size_t i = 0; !rc && i < rows.nrows; i++) {
    long long tn = zeus__store_rows_int(&rows, i, 0);
    long bs = (long)zeus__store_rows_int(&rows, i, 1);
    zeus__store_val q[3] = {store_real(now), store_text(j->id), store_int(tn)};
    if (zeus__store_rows_int(&rows, i, 2) == S_DISPATCHED) {
      double seen = zeus__store_rows_real(&rows, i, 5);
      if (!(lease_s > 0) || !(seen < now - lease_s)) continue;
      zeus__log(ZEUS_LOG_WARN, "bso",
                "job '%s': trial %lld (batch size %ld) had no report and no end for %.0f s, longer than the trial "
                "lease of %g s (--trial-lease): it counts as failed",
                j->id, tn, bs, now - seen, lease_s);
      rc = db->ops->exec(db, "UPDATE bso_trial SET status = 2, end_s = $1 WHERE job_id = $2 AND trial_number = $3",
                         q, 3, NULL, err, errlen);
      continue;
    }
    zeus__log(ZEUS_LOG_WARN, "bso",
              "job '%s': trial %lld (batch size %ld) holds time %g s, energy %g J, outside the accepted range "
              "(time 0..%g s, energy 0..%g J); it counts as a failed trial from now on",
              j->id, tn, bs, zeus__store_rows_real(&rows, i, 3), zeus__store_rows_real(&rows, i, 4), MAX_TIME_S,
              MAX_ENERGY_J);
    rc = db->ops->exec(db, "UPDATE bso_trial SET status = 2 WHERE job_id = $1 AND trial_number = $2", q + 1, 2, NULL,
                       err, errlen);
    unsound++;
    size_t k = 0;
    while (k < *n_bad && bad_bs[k] != bs) k++;
    if (k == *n_bad && *n_bad < cap) bad_bs[(*n_bad)++] = bs;
  }
  zeus__store_rows_free(&rows);
  if (rc || (unsound == 0 && (!j->has_min || isfinite(j->min_cost)))) return rc;
  /* The least cost of the sound succeeded trials, the first one reaching it (as reports set it). */
  rc = db->ops->exec(db,
                     "SELECT batch_size, time_s, energy_j FROM bso_trial WHERE job_id = $1 AND status = 1 "
                     "ORDER BY trial_number",
                     p, 1, &rows, err, errlen);
  if (rc) return rc;
  bool has = false;
  double least = 0;
  long least_bs = 0;
  for (size_t i = 0; i < rows.nrows; i++) {
    double c = cost_of(j, zeus__store_rows_real(&rows, i, 2), zeus__store_rows_real(&rows, i, 1));
    if (isfinite(c) && (!has || c < least)) {
      has = true;
      least = c;
      least_bs = (long)zeus__store_rows_int(&rows, i, 0);
    }
  }
  zeus__store_rows_free(&rows);
  if (j->has_min && !isfinite(j->min_cost))
    zeus__log(ZEUS_LOG_WARN, "bso", "job '%s': its stored least cost %g is not finite; recomputed from its trials",
              j->id, j->min_cost);
  zeus__store_val q[3] = {has ? store_real(least) : store_null(), has ? store_int(least_bs) : store_null(),
                          store_text(j->id)};
  rc = db->ops->exec(db, "UPDATE bso_job SET min_cost = $1, min_cost_bs = $2 WHERE job_id = $3", q, 3, NULL, err,
                     errlen);
  j->has_min = has;
  j->min_cost = has ? least : NAN;
  j->min_cost_bs = has ? least_bs : 0;
  return rc;
}

/* The job's bandit during Thompson sampling, its arms of batch sizes bad_bs and any arm holding an
 * impossible belief (observed, yet a precision that is not > 0, or a mean that is not finite: a
 * refit over an overflowing variance stored those) refitted from their trials. *changed: whether
 * the caller must save it. */
static int gts_load_healed(zeus__store *db, const job *j, const long *bad_bs, size_t n_bad, zeus_gts **out,
                           bool *changed, char *err, size_t errlen) {
  *changed = false;
  int rc = gts_load(j, out, err, errlen);
  for (size_t i = 0; !rc && i < zeus_gts_num_arms(*out); i++) {
    zeus_gts_arm a;
    zeus_gts_arm_at(*out, i, &a);
    bool impossible = !isfinite(a.mean) || isnan(a.precision) || isnan(a.reward_precision) ||
                      (a.num_observations > 0 && !(a.precision > 0));
    bool bad = impossible;
    for (size_t k = 0; k < n_bad; k++) bad = bad || bad_bs[k] == a.arm;
    if (!bad) continue;
    if (impossible)
      zeus__log(ZEUS_LOG_WARN, "bso",
                "job '%s': arm %ld of its bandit held an impossible belief (mean %g, precision %g after %ld "
                "observations); refitted from its trials",
                j->id, a.arm, a.mean, a.precision, a.num_observations);
    rc = refit(db, j, *out, a.arm, err, errlen);
    *changed = true;
  }
  if (rc) {
    zeus_gts_close(*out);
    *out = NULL;
  }
  return rc;
}

/* attend_rows, and during Thompson sampling the arms of the rows set aside refitted and saved at
 * once (whatever the request answers next). */
static int attend_job(zeus__store *db, job *j, double lease_s, char *err, size_t errlen) {
  long bad_bs[MAX_BATCH_SIZES];
  size_t n_bad = 0;
  int rc = attend_rows(db, j, lease_s, bad_bs, MAX_BATCH_SIZES, &n_bad, err, errlen);
  if (rc || n_bad == 0 || j->stage != 1) return rc;
  zeus_gts *g = NULL;
  bool changed;
  rc = gts_load_healed(db, j, bad_bs, n_bad, &g, &changed, err, errlen);
  if (!rc) rc = save_mab(db, j, g, err, errlen);
  if (!rc) {
    char *m = gts_save(g);
    free(j->mab);
    j->mab = m;
    if (!m) {
      snprintf(err, errlen, "out of memory");
      rc = STORE_ERR;
    }
  }
  zeus_gts_close(g);
  return rc;
}

/* Pruning: replays the job's explorations through src/bso/'s explorer. Sets *next to the batch
 * size to explore (type exploration or concurrent), or leaves it 0 with the survivors in ex. */
static int replay(zeus__store *db, const job *j, zeus__explorer *ex, long *next, int *type, char *err, size_t errlen) {
  *next = 0;
  zeus__store_val p = store_text(j->id);
  zeus__store_rows rows;
  int rc = db->ops->exec(db,
                         "SELECT batch_size, status, time_s, energy_j, converged FROM bso_trial "
                         "WHERE job_id = $1 AND type = 0 AND status <> 2 ORDER BY trial_number",
                         &p, 1, &rows, err, errlen);
  if (rc) return rc;
  if (zeus__explorer_init(ex, j->bs, j->nbs, j->default_bs, j->rounds)) {
    zeus__store_rows_free(&rows);
    snprintf(err, errlen, "out of memory");
    return STORE_ERR;
  }
  while (!zeus__explorer_done(ex)) {
    long bs = ex->expecting;
    size_t k = rows.nrows;
    long seen = 0;
    for (size_t i = 0; i < rows.nrows; i++)
      if (zeus__store_rows_int(&rows, i, 0) == bs && seen++ == ex->round) {
        k = i;
        break;
      }
    if (k == rows.nrows) {
      *next = bs;
      *type = T_EXPLORATION;
      break;
    }
    if (zeus__store_rows_int(&rows, k, 1) == S_DISPATCHED) {
      /* Another node explores this batch size now: the original's concurrent trial. */
      *next = j->has_min ? j->min_cost_bs : j->default_bs;
      *type = T_CONCURRENT;
      break;
    }
    double cost = cost_of(j, zeus__store_rows_real(&rows, k, 3), zeus__store_rows_real(&rows, k, 2));
    zeus__explorer_report(ex, bs, cost, zeus__store_rows_int(&rows, k, 4) != 0);
  }
  zeus__store_rows_free(&rows);
  return STORE_OK;
}

static int route_predict(zeus__store *db, const char *lock, const char *id, double lease_s, bso_reply *r, char *err,
                         size_t errlen) {
  job j;
  bool found;
  int rc = load_job(db, lock, id, &j, &found, err, errlen);
  if (rc) return rc;
  if (!found) {
    set_reply(r, 400, bso_message("Unknown job(%s). Please register the job first", id));
    return STORE_OK;
  }
  rc = attend_job(db, &j, lease_s, err, errlen);
  if (rc) {
    job_free(&j);
    return rc;
  }
  zeus_gts *g = NULL;
  if (j.stage == 0) {
    zeus__explorer ex;
    long next;
    int type;
    rc = replay(db, &j, &ex, &next, &type, err, errlen);
    if (!rc && next) {
      zeus__explorer_free(&ex);
      rc = new_trial(db, &j, next, type, r, err, errlen);
      job_free(&j);
      return rc;
    }
    if (!rc && ex.ncands == 0) {
      zeus__explorer_free(&ex);
      job_free(&j);
      set_reply(r, 500,
                bso_message("No converged batch sizes has observed. Reconfigure batch_sizes and re-launch the job."));
      return STORE_OK;
    }
    if (!rc && gts_new(&j, ex.cands, ex.ncands, &g)) {
      snprintf(err, errlen, "creating the bandit: %s", zeus_errmsg());
      rc = STORE_ERR;
    }
    for (size_t i = 0; !rc && i < ex.ncands; i++) rc = refit(db, &j, g, ex.cands[i], err, errlen);
    zeus__explorer_free(&ex);
  } else {
    bool healed;
    rc = gts_load_healed(db, &j, NULL, 0, &g, &healed, err, errlen);
  }
  long bs = 0;
  if (!rc && zeus_gts_predict(g, &bs)) {
    set_reply(r, 500, bso_message("Thompson sampling failed: %s", zeus_errmsg()));
    zeus_gts_close(g);
    job_free(&j);
    return STORE_OK;
  }
  if (!rc) rc = save_mab(db, &j, g, err, errlen);
  if (!rc) rc = new_trial(db, &j, bs, T_MAB, r, err, errlen);
  zeus_gts_close(g);
  job_free(&j);
  return rc;
}

static int route_report(zeus__store *db, const char *lock, json_t *b, double lease_s, bso_reply *r, char *err,
                        size_t errlen) {
  const char *id = json_string_value(json_object_get(b, "job_id"));
  long bs = jlong(b, "batch_size");
  long long tn = json_integer_value(json_object_get(b, "trial_number"));
  double time = jreal(b, "time"), energy = jreal(b, "energy"), metric = jreal(b, "metric");
  long epoch = jlong(b, "current_epoch");
  job j;
  bool found;
  int rc = load_job(db, lock, id, &j, &found, err, errlen);
  if (rc) return rc;
  if (!found) {
    set_reply(r, 400, bso_message("Unknown job %s", id));
    return STORE_OK;
  }
  rc = attend_job(db, &j, lease_s, err, errlen);
  if (rc) {
    job_free(&j);
    return rc;
  }
  zeus__store_val p[7] = {store_text(id), store_int(tn), store_int(bs)};
  zeus__store_rows rows;
  rc = db->ops->exec(
      db, "SELECT status, converged FROM bso_trial WHERE job_id = $1 AND trial_number = $2 AND batch_size = $3", p, 3,
      &rows, err, errlen);
  if (rc) {
    job_free(&j);
    return rc;
  }
  if (rows.nrows == 0) {
    set_reply(r, 400, bso_message("Unknown trial: job_id %s, batch_size %ld, trial_number %lld", id, bs, tn));
    job_free(&j);
    return STORE_OK;
  }
  int status = (int)zeus__store_rows_int(&rows, 0, 0);
  bool was_null = zeus__store_rows_is_null(&rows, 0, 1);
  bool was_conv = zeus__store_rows_int(&rows, 0, 1) != 0;
  zeus__store_rows_free(&rows);
  if (status != S_DISPATCHED) {
    if (was_null)
      set_reply(r, 400,
                bso_message("Trial(%lld) has ended without a result (PATCH /trials, or no report within the "
                            "server's trial lease); its report is refused.",
                            tn));
    else
      set_reply(r, 200,
                json_pack("{sbsbss}", "stop_train", 1, "converged", was_conv, "message",
                          "Result for this trial is already reported."));
    job_free(&j);
    return STORE_OK;
  }
  double ub = (j.has_beta && j.has_min) ? j.beta * j.min_cost : INFINITY;
  double cost = cost_of(&j, energy, time);
  bool within = ub >= cost;
  bool converged = j.higher ? j.target <= metric : j.target >= metric;
  if (within && epoch < j.max_epochs && !converged) {
    /* A sign of life: the trial's lease counts from here. */
    zeus__store_val q[3] = {store_real(zeus_wall_s()), store_text(id), store_int(tn)};
    rc = db->ops->exec(db, "UPDATE bso_trial SET seen_s = $1 WHERE job_id = $2 AND trial_number = $3", q, 3, NULL, err,
                       errlen);
    if (rc) {
      job_free(&j);
      return rc;
    }
    set_reply(
        r, 200,
        json_pack("{sbsbss}", "stop_train", 0, "converged", 0, "message", "Stop condition not met, keep training"));
    job_free(&j);
    return STORE_OK;
  }
  char msg[512];
  if (converged && within)
    snprintf(msg, sizeof msg, "Train succeeded");
  else if (!within)
    snprintf(msg, sizeof msg,
             "Batch Size(%ld) exceeded the cost upper bound: current cost(%.17g) > beta_knob(%.17g)*min_cost(%.17g)",
             bs, cost, j.beta, j.min_cost);
  else
    snprintf(msg, sizeof msg, "Train failed to converge within max_epoch(%ld)", j.max_epochs);
  bool ok = converged && within;
  p[0] = store_real(time);
  p[1] = store_real(energy);
  p[2] = store_int(ok);
  p[3] = store_real(zeus_wall_s());
  p[4] = store_text(id);
  p[5] = store_int(tn);
  rc = db->ops->exec(db,
                     "UPDATE bso_trial SET status = 1, time_s = $1, energy_j = $2, converged = $3, end_s = $4 "
                     "WHERE job_id = $5 AND trial_number = $6",
                     p, 6, NULL, err, errlen);
  if (!rc && (!j.has_min || j.min_cost > cost)) {
    zeus__store_val q[3] = {store_real(cost), store_int(bs), store_text(id)};
    rc = db->ops->exec(db, "UPDATE bso_job SET min_cost = $1, min_cost_bs = $2 WHERE job_id = $3", q, 3, NULL, err,
                       errlen);
  }
  if (!rc && j.stage == 1) {
    zeus_gts *g = NULL;
    zeus_gts_arm a;
    bool healed = false;
    rc = gts_load_healed(db, &j, NULL, 0, &g, &healed, err, errlen);
    bool mine = !rc && zeus_gts_get_arm(g, bs, &a) == ZEUS_OK;
    if (mine) rc = refit(db, &j, g, bs, err, errlen);
    if (!rc && (mine || healed)) rc = save_mab(db, &j, g, err, errlen);
    zeus_gts_close(g);
  }
  job_free(&j);
  if (!rc) set_reply(r, 200, json_pack("{sbsbss}", "stop_train", 1, "converged", ok, "message", msg));
  return rc;
}

static int route_end(zeus__store *db, const char *lock, json_t *b, double lease_s, bso_reply *r, char *err,
                     size_t errlen) {
  const char *id = json_string_value(json_object_get(b, "job_id"));
  long bs = jlong(b, "batch_size");
  long long tn = json_integer_value(json_object_get(b, "trial_number"));
  job j;
  bool found;
  int rc = load_job(db, lock, id, &j, &found, err, errlen); /* locks the job's row */
  if (!rc && found) rc = attend_job(db, &j, lease_s, err, errlen);
  job_free(&j);
  if (rc) return rc;
  zeus__store_val p[3] = {store_text(id), store_int(tn), store_int(bs)};
  zeus__store_rows rows;
  rc = db->ops->exec(db, "SELECT status FROM bso_trial WHERE job_id = $1 AND trial_number = $2 AND batch_size = $3", p,
                     3, &rows, err, errlen);
  if (rc) return rc;
  size_t n = rows.nrows;
  int status = (int)zeus__store_rows_int(&rows, 0, 0);
  zeus__store_rows_free(&rows);
  if (!n) {
    set_reply(r, 404,
              bso_message("Could not find the trial: job_id %s, batch_size %ld, trial_number %lld", id, bs, tn));
    return STORE_OK;
  }
  if (status == S_DISPATCHED) {
    zeus__store_val q[3] = {store_real(zeus_wall_s()), store_text(id), store_int(tn)};
    rc = db->ops->exec(db, "UPDATE bso_trial SET status = 2, end_s = $1 WHERE job_id = $2 AND trial_number = $3", q, 3,
                       NULL, err, errlen);
  }
  if (!rc) set_reply(r, 200, json_null());
  return rc;
}

static int route_delete(zeus__store *db, const char *lock, const char *id, bso_reply *r, char *err, size_t errlen) {
  job j;
  bool found;
  int rc = load_job(db, lock, id, &j, &found, err, errlen);
  if (rc) return rc;
  job_free(&j);
  if (!found) {
    set_reply(r, 404, bso_message("No job was deleted."));
    return STORE_OK;
  }
  zeus__store_val p = store_text(id);
  rc = db->ops->exec(db, "DELETE FROM bso_trial WHERE job_id = $1", &p, 1, NULL, err, errlen);
  if (!rc) rc = db->ops->exec(db, "DELETE FROM bso_job WHERE job_id = $1", &p, 1, NULL, err, errlen);
  if (!rc) set_reply(r, 200, json_null());
  return rc;
}

static int route_register(zeus__store *db, const char *lock, json_t *spec, bso_reply *r, char *err, size_t errlen) {
  json_t *idv = json_object_get(spec, "job_id");
  char idbuf[MAX_ID_LEN + 1];
  bool found = false;
  job j;
  int rc;
  if (json_is_null(idv)) {
    /* The original's prefix plus 8 hex digits of a hash of the time, guessable; here 26 random
     * base32 characters (130 bits). */
    char tok[27];
    if (zeus__random_token(tok, 26)) {
      snprintf(err, errlen, "no random numbers: %s", zeus_errmsg());
      return STORE_ERR;
    }
    snprintf(idbuf, sizeof idbuf, "%s-%s", json_string_value(json_object_get(spec, "job_id_prefix")), tok);
    json_object_set_new(spec, "job_id", json_string(idbuf));
  } else {
    snprintf(idbuf, sizeof idbuf, "%s", json_string_value(idv));
    rc = load_job(db, lock, idbuf, &j, &found, err, errlen);
    if (rc) return rc;
    if (found) {
      bool same = json_equal(j.spec, spec);
      job_free(&j);
      if (same)
        set_reply(r, 200, json_incref(spec));
      else
        set_reply(
            r, 409,
            bso_message("JobSpec doesn't match with existing jobSpec. Use a new job_id for different configuration"));
      return STORE_OK;
    }
  }
  json_t *seedv = json_object_get(spec, "mab_seed");
  uint64_t seed;
  if (json_is_integer(seedv))
    seed = (uint64_t)json_integer_value(seedv);
  else if (zeus__random_bytes(&seed, sizeof seed)) {
    snprintf(err, errlen, "no random numbers");
    return STORE_ERR;
  }
  char *text = json_dumps(spec, JSON_COMPACT | JSON_REAL_PRECISION(17));
  if (!text) {
    snprintf(err, errlen, "out of memory");
    return STORE_ERR;
  }
  zeus__store_val p[4] = {store_text(idbuf), store_text(text), store_int((long long)seed), store_real(zeus_wall_s())};
  rc = db->ops->exec(db, "INSERT INTO bso_job (job_id, spec, seed, stage, created_s) VALUES ($1, $2, $3, 0, $4)", p, 4,
                     NULL, err, errlen);
  free(text);
  if (!rc) set_reply(r, 201, json_incref(spec));
  return rc;
}

int bso_route(zeus__store *db, const char *lock, bso_req *q, bso_reply *r, char *err, size_t errlen) {
  switch (q->route) {
    case BSO_R_REGISTER: return route_register(db, lock, q->body, r, err, errlen);
    case BSO_R_DELETE: return route_delete(db, lock, q->job_id, r, err, errlen);
    case BSO_R_PREDICT: return route_predict(db, lock, q->job_id, q->trial_lease_s, r, err, errlen);
    case BSO_R_REPORT: return route_report(db, lock, q->body, q->trial_lease_s, r, err, errlen);
    case BSO_R_END: return route_end(db, lock, q->body, q->trial_lease_s, r, err, errlen);
  }
  snprintf(err, errlen, "unknown route");
  return STORE_ERR;
}

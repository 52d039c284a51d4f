/* job.c: the training side of recurring jobs (the original's ZeusDataLoader protocol): ZEUS_*
 * settings, the epoch iterator with cost-threshold prediction, just-in-time power-limit profiling
 * during the first epoch, the power profile and result files, and data-parallel agreement through
 * the collective. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bso/bso_internal.h"
#include "core/json.h"
#include "device/restore_signals.h"
#include "plo/plo_internal.h"
#include "zeus/job.h"

#define MAX_LIMITS 64
#define WIN_TRAIN "__zeus_job_train"
#define WIN_EVAL "__zeus_job_eval"
#define WIN_LIMIT "__zeus_job_power_limit"

typedef enum prof_state { PROF_IDLE = 0, PROF_WARMUP, PROF_MEASURE } prof_state;

/* The power profile as every rank holds it (broadcast from rank 0 as bytes). */
typedef struct profile {
  int32_t status;        /* 0 ok; < 0 rank 0 could not load the file */
  uint32_t present;      /* a profile is known */
  uint32_t n;
  uint32_t optimal_w;
  uint32_t have_eval;
  uint32_t limits_w[MAX_LIMITS];
  double train_power[MAX_LIMITS]; /* W, every GPU of every rank */
  double train_tput[MAX_LIMITS];  /* steps per second */
  double eval_power, eval_tput;   /* at the optimal limit */
} profile;

struct zeus_job {
  zeus_job_opts o;
  zeus_monitor *mon;
  bool own_mon;
  zeus_devices *dev;
  unsigned nlocal;
  unsigned orig_mw[ZEUS_MAX_GPUS];
  bool changed[ZEUS_MAX_GPUS];
  unsigned cur_w;
  /* settings */
  double target, thresh, eta;
  long warmup, measure;
  bool use_opt;
  char *log_dir, *job_id, *train_json, *power_json;
  int rank, ranks;
  unsigned num_gpus;
  long global_bs;
  double max_power_w;
  unsigned min_w, max_w;
  /* power profile */
  profile p;
  bool measured[MAX_LIMITS];
  /* robust profiling (issue 30; zeus_plo's rules, src/plo/robust.c) */
  bool original;         /* ZEUS_PLO_PROFILING=original: the original's profiling exactly */
  double *step_s;        /* per-step times of the open window (capacity 2 x measure) */
  long win_len;          /* steps of a re-measuring window: measure, longer where the room allows */
  long nstep;
  double last_t;         /* backend clock at the window's start or its last step end */
  double win_cv[MAX_LIMITS];
  long win_steps[MAX_LIMITS], win_n[MAX_LIMITS], win_out[MAX_LIMITS];
  double win_dur[MAX_LIMITS];
  double sw_time[MAX_LIMITS], sw_energy[MAX_LIMITS]; /* the sweep's window per limit */
  double r_t[MAX_LIMITS], r_e[MAX_LIMITS], r_cv2[MAX_LIMITS]; /* re-measured sums */
  bool refining, noisy;
  /* The report of the choice (issue 37), on noisy steps: the limits within the measured noise of
   * it and the confidence that it is within 1 % of the best cost. */
  bool decided;
  double confidence;
  unsigned contenders_w[MAX_LIMITS];
  size_t ncontenders;
  size_t seq[2 * MAX_LIMITS + 2], nseq, ri;
  long sweep_steps;      /* steps the sweep took (the original's profiling) */
  bool profiling;        /* limits are left to profile in this run */
  bool save_pending;     /* profiling finished; the file is not written yet */
  size_t next_limit;
  prof_state ps;
  long warm_start, prof_start;
  /* epoch state */
  long epochs;
  bool in_train, in_eval, in_step, in_eval_step;
  long step, eval_step;
  long last_train_steps, last_eval_steps;
  bool epoch_profiled;   /* this epoch ran (part of) the profiling */
  double time_acc, energy_acc;  /* accounted */
  double time_obs, energy_obs;  /* measured */
  bool reached, finished;
  double predicted;      /* the last predicted cost after one more epoch (NAN: none) */
  bool stopped_by_cost;
  bool handlers;
};

/* ---- settings ---- */

static int read_settings(zeus_job *j) {
  const char *t = zeus__env_str("ZEUS_TARGET_METRIC");
  if (!t)
    return zeus__error(ZEUS_EINVAL, "ZEUS_TARGET_METRIC is not set: the training side needs the target validation "
                                    "metric (zeus run sets it)");
  int rc = zeus__parse_double(t, -1.7976931348623157e308, 1.7976931348623157e308, "ZEUS_TARGET_METRIC", &j->target);
  if (rc) return rc;
  const char *dir = zeus__env_str("ZEUS_LOG_DIR");
  const char *id = zeus__env_str("ZEUS_JOB_ID");
  if (!id) id = "zeus";
  if (strlen(id) > 200)
    return zeus__error(ZEUS_EINVAL, "ZEUS_JOB_ID: %zu characters, expected at most 200", strlen(id));
  for (const char *c = id; *c; c++)
    if (*c == '/' || (unsigned char)*c < 0x20)
      return zeus__error(ZEUS_EINVAL, "ZEUS_JOB_ID='%s': expected a file-name prefix without '/' or control characters",
                         id);
  rc = zeus__env_double("ZEUS_COST_THRESH", 0, INFINITY, INFINITY, &j->thresh);
  if (rc) return rc;
  if (!(j->thresh > 0))
    return zeus__error(ZEUS_ERANGE, "ZEUS_COST_THRESH: %g, expected a cost > 0 or 'inf'", j->thresh);
  rc = zeus__env_double("ZEUS_ETA_KNOB", 0, 1, 0.5, &j->eta);
  if (rc) return rc;
  const char *pp = zeus__env_str("ZEUS_PROFILE_PARAMS");
  j->warmup = 10;
  j->measure = 40;
  if (pp) {
    const char *comma = strchr(pp, ',');
    if (!comma || strchr(comma + 1, ','))
      return zeus__error(ZEUS_EINVAL, "ZEUS_PROFILE_PARAMS='%s': expected 'warmup,measure' such as '10,40'", pp);
    char first[64];
    size_t len = (size_t)(comma - pp);
    if (len >= sizeof first) len = sizeof first - 1;
    memcpy(first, pp, len);
    first[len] = '\0';
    rc = zeus__parse_long(first, 0, 1000000, "ZEUS_PROFILE_PARAMS warmup steps", &j->warmup);
    if (!rc) rc = zeus__parse_long(comma + 1, 1, 1000000, "ZEUS_PROFILE_PARAMS measure steps", &j->measure);
    if (rc) return zeus__error_ctx(rc, "ZEUS_PROFILE_PARAMS='%s'", pp);
  }
  rc = zeus__env_bool("ZEUS_USE_OPTIMAL_PL", true, &j->use_opt);
  if (rc) return rc;
  zeus__buf a = {0}, b = {0};
  j->log_dir = strdup(dir ? dir : "zeus_log");
  j->job_id = strdup(id);
  rc = (j->log_dir && j->job_id) ? ZEUS_OK : zeus__oom("reading the job settings");
  if (!rc) rc = zeus__buf_printf(&a, "%s/%s+bs%ld.train.json", j->log_dir, j->job_id, j->global_bs);
  if (!rc) rc = zeus__buf_printf(&b, "%s/bs%ld.power.json", j->log_dir, j->global_bs);
  j->train_json = a.data;
  j->power_json = b.data;
  return rc;
}

/* ---- collective helpers ---- */

static int reduce_window(zeus_job *j, const zeus_measurement *m, double *energy, double *time) {
  double e = 0;
  for (unsigned k = 0; k < m->num_gpus; k++) e += m->gpu_energy_j[k];
  double t = m->time_s;
  int rc = zeus_collective_allreduce(j->o.collective, &e, 1, ZEUS_REDUCE_SUM);
  if (!rc) rc = zeus_collective_allreduce(j->o.collective, &t, 1, ZEUS_REDUCE_MAX);
  *energy = e;
  *time = t;
  return rc;
}

static int end_window(zeus_job *j, const char *key, double *energy, double *time) {
  zeus_measurement m;
  int rc = zeus_monitor_end_window(j->mon, key, false, &m);
  if (rc) return rc;
  return reduce_window(j, &m, energy, time);
}

/* ---- power limits ---- */

static int apply_limit(zeus_job *j, unsigned w) {
  if (w == j->cur_w) return ZEUS_OK;
  for (unsigned k = 0; k < j->nlocal; k++) {
    unsigned gpu = zeus_monitor_gpu_index(j->mon, k);
    int rc = zeus_gpu_set_power_limit(j->dev, gpu, w * 1000u);
    if (rc) return zeus__error_ctx(rc, "setting GPU %u's power limit to %u W", gpu, w);
    j->changed[k] = true;
  }
  j->cur_w = w;
  zeus__log(ZEUS_LOG_INFO, "job", "power limit %u W", w);
  return ZEUS_OK;
}

static unsigned steady_limit(const zeus_job *j) { return j->use_opt ? j->p.optimal_w : j->max_w; }

static size_t limit_index(const profile *p, unsigned w) {
  for (size_t i = 0; i < p->n; i++)
    if (p->limits_w[i] == w) return i;
  return p->n;
}

static double limit_cost(const zeus_job *j, size_t i) {
  return (j->eta * j->p.train_power[i] + (1 - j->eta) * j->max_power_w) / j->p.train_tput[i];
}

/* The optimum: least (eta * power + (1 - eta) * max_power) / throughput; ties to the lower limit.
 * only: the limits to choose among (NULL: every limit). */
static unsigned choose_optimal(const zeus_job *j, const bool *only) {
  unsigned best = 0;
  double best_cost = INFINITY;
  for (size_t i = 0; i < j->p.n; i++) {
    if (only && !only[i]) continue;
    double c = (j->eta * j->p.train_power[i] + (1 - j->eta) * j->max_power_w) / j->p.train_tput[i];
    if (c < best_cost || (c == best_cost && j->p.limits_w[i] < best)) {
      best_cost = c;
      best = j->p.limits_w[i];
    }
  }
  return best;
}

/* ---- the power profile file (the original's shape: keys are limits in mW) ---- */

static json_t *limit_map(const zeus_job *j, const double *v) {
  json_t *o = json_object();
  for (size_t i = 0; o && i < j->p.n; i++) {
    char key[24];
    snprintf(key, sizeof key, "%u", j->p.limits_w[i] * 1000u);
    json_object_set_new(o, key, zeus__json_derived(v[i]));
  }
  return o;
}

static int save_profile(zeus_job *j) {
  j->save_pending = false;
  if (j->rank != 0) return ZEUS_OK;
  json_t *root = json_object();
  if (!root) return zeus__oom("saving the power profile");
  json_t *ep = json_object(), *et = json_object();
  if (j->p.have_eval) {
    char key[24];
    snprintf(key, sizeof key, "%u", j->p.optimal_w * 1000u);
    json_object_set_new(ep, key, zeus__json_derived(j->p.eval_power));
    json_object_set_new(et, key, zeus__json_derived(j->p.eval_tput));
  }
  json_object_set_new(root, "job_id", json_string(j->job_id));
  json_object_set_new(root, "train_power", limit_map(j, j->p.train_power));
  json_object_set_new(root, "train_throughput", limit_map(j, j->p.train_tput));
  json_object_set_new(root, "eval_power", ep);
  json_object_set_new(root, "eval_throughput", et);
  json_object_set_new(root, "optimal_pl", json_integer((json_int_t)j->p.optimal_w * 1000));
  if (j->noisy) {
    /* What each training measurement is (robust profiling on noisy steps; readers of the
     * original's format ignore it): steps, wall time, spread, windows, outlier steps. */
    json_t *info = json_object();
    for (size_t i = 0; info && i < j->p.n; i++) {
      char key[24];
      snprintf(key, sizeof key, "%u", j->p.limits_w[i] * 1000u);
      json_object_set_new(info, key,
                          json_pack("{s:I, s:o, s:o, s:I, s:I}", "steps", (json_int_t)j->win_steps[i], "duration_s",
                                    zeus__json_measured(j->win_dur[i], 9), "step_time_cv",
                                    zeus__json_derived(j->win_cv[i]), "windows", (json_int_t)j->win_n[i],
                                    "outlier_steps", (json_int_t)j->win_out[i]));
    }
    json_object_set_new(root, "train_profile_info", info);
  }
  if (j->decided) {
    /* Issue 37: what the choice could not tell apart, and the confidence it reached. */
    json_t *cw = json_array();
    for (size_t i = 0; cw && i < j->ncontenders; i++)
      json_array_append_new(cw, json_integer((json_int_t)j->contenders_w[i]));
    json_object_set_new(root, "decision",
                        json_pack("{s:I, s:o, s:o}", "optimal_power_limit_w", (json_int_t)j->p.optimal_w,
                                  "contenders_w", cw ? cw : json_array(), "confidence",
                                  zeus__json_derived(j->confidence)));
  }
  int rc = zeus__json_write_file_atomic(j->power_json, root, 2);
  json_decref(root);
  if (!rc) zeus__log(ZEUS_LOG_INFO, "job", "saved the power profile %s (optimal %u W)", j->power_json, j->p.optimal_w);
  return rc;
}

static int bad_profile(const char *path, const char *what) {
  return zeus__error(ZEUS_EPARSE, "%s: %s (delete the file to profile the power limits again)", path, what);
}

/* Reads a {"limit mW": value} map into p (train maps define the limits; eval maps are looked up). */
static int load_profile(zeus_job *j, profile *p) {
  json_t *root;
  int rc = zeus__json_load_file_max(j->power_json, ZEUS__READ_MAX, "power profile (JSON)", &root);
  if (rc == ZEUS_ENOENT) return ZEUS_OK; /* no profile yet */
  if (rc) return zeus__error_ctx(rc, "power profile (delete it to profile the limits again)");
  const char *path = j->power_json;
  json_t *tp = json_object_get(root, "train_power"), *tt = json_object_get(root, "train_throughput");
  json_t *ep = json_object_get(root, "eval_power"), *et = json_object_get(root, "eval_throughput");
  json_t *opt = json_object_get(root, "optimal_pl");
  if (!json_is_object(tp) || !json_is_object(tt) || !json_is_integer(opt) || json_object_size(tp) == 0) {
    json_decref(root);
    return bad_profile(path, "expected objects train_power and train_throughput and an integer optimal_pl");
  }
  const char *key;
  json_t *v;
  rc = ZEUS_OK;
  json_object_foreach(tp, key, v) {
    char *end;
    long mw = strtol(key, &end, 10);
    json_t *tv = json_object_get(tt, key);
    if (*end || mw <= 0 || mw % 1000 || !json_is_number(v) || !json_is_number(tv) || !(json_number_value(tv) > 0) ||
        !(json_number_value(v) > 0)) {
      rc = bad_profile(path, "every train_power key must be a limit in mW with a positive power and throughput");
      break;
    }
    if (p->n == MAX_LIMITS) {
      rc = bad_profile(path, "too many power limits");
      break;
    }
    p->limits_w[p->n] = (uint32_t)(mw / 1000);
    p->train_power[p->n] = json_number_value(v);
    p->train_tput[p->n] = json_number_value(tv);
    p->n++;
  }
  long long opt_mw = json_integer_value(opt);
  if (!rc && (opt_mw % 1000 || limit_index(p, (unsigned)(opt_mw / 1000)) == p->n))
    rc = bad_profile(path, "optimal_pl is not one of the profiled limits");
  if (!rc) {
    p->optimal_w = (uint32_t)(opt_mw / 1000);
    char okey[24];
    snprintf(okey, sizeof okey, "%lld", opt_mw);
    json_t *e1 = json_is_object(ep) ? json_object_get(ep, okey) : NULL;
    json_t *e2 = json_is_object(et) ? json_object_get(et, okey) : NULL;
    if (json_is_number(e1) && json_is_number(e2) && json_number_value(e2) > 0) {
      p->have_eval = 1;
      p->eval_power = json_number_value(e1);
      p->eval_tput = json_number_value(e2);
    }
    if (p->optimal_w < j->min_w || p->optimal_w > j->max_w) {
      char msg[160];
      snprintf(msg, sizeof msg, "the optimal limit %u W is outside these GPUs' range [%u, %u] W", p->optimal_w,
               j->min_w, j->max_w);
      rc = bad_profile(path, msg);
    }
    p->present = 1;
  }
  json_decref(root);
  return rc;
}

/* ---- signal handling ----
 * SIGINT/SIGTERM put the GPUs back through the handlers every GPU-changing module shares
 * (device/restore_signals.h): they restore every open device handle, then let the signal do what
 * it did before (the previous handler runs; a default disposition ends the process with it). */

static void install_handlers(zeus_job *j) {
  if (j->o.no_signal_handlers) return;
  if (zeus__restore_signals_acquire() != ZEUS_OK) {
    zeus__log(ZEUS_LOG_WARN, "job", "%s; power limits are put back on close only", zeus_errmsg());
    return;
  }
  j->handlers = true;
}

static void remove_handlers(zeus_job *j) {
  if (!j->handlers) return;
  zeus__restore_signals_release();
  j->handlers = false;
}

/* ---- open / close ---- */

void zeus_job_opts_init(zeus_job_opts *o) {
  memset(o, 0, sizeof *o);
  o->pl_step_w = 25;
}

static int check_opts(const zeus_job_opts *o) {
  if (o->batch_size <= 0) return zeus__error(ZEUS_EINVAL, "zeus_job: batch_size %ld, expected > 0", o->batch_size);
  if (o->max_epochs <= 0) return zeus__error(ZEUS_EINVAL, "zeus_job: max_epochs %ld, expected > 0", o->max_epochs);
  if (o->steps_per_epoch <= 0)
    return zeus__error(ZEUS_EINVAL, "zeus_job: steps_per_epoch %ld, expected > 0", o->steps_per_epoch);
  if (o->eval_steps_per_epoch < 0)
    return zeus__error(ZEUS_EINVAL, "zeus_job: eval_steps_per_epoch %ld, expected >= 0", o->eval_steps_per_epoch);
  return zeus_collective_check(o->collective);
}

/* GPUs, their common power-limit range across ranks, the original limits. */
static int setup_gpus(zeus_job *j) {
  j->dev = zeus_monitor_devices(j->mon);
  j->nlocal = zeus_monitor_num_gpus(j->mon);
  double local[5] = {0, 0, 0, 0, j->nlocal};
  unsigned lo = 0, hi = 0;
  for (unsigned k = 0; k < j->nlocal; k++) {
    unsigned gpu = zeus_monitor_gpu_index(j->mon, k), mn, mx, def;
    int rc = zeus_gpu_power_limit_constraints(j->dev, gpu, &mn, &mx, &def);
    if (!rc) rc = zeus_gpu_get_power_limit(j->dev, gpu, &j->orig_mw[k]);
    if (rc) return zeus__error_ctx(rc, "GPU %u", gpu);
    if (k > 0 && (mn / 1000 != lo || mx / 1000 != hi))
      return zeus__error(ZEUS_EINVAL, "GPU %u's power-limit range [%u, %u] W differs from GPU %u's [%u, %u] W", gpu,
                         mn / 1000, mx / 1000, zeus_monitor_gpu_index(j->mon, 0), lo, hi);
    lo = mn / 1000;
    hi = mx / 1000;
  }
  /* Agree across ranks: the largest and smallest of each bound must coincide. */
  local[0] = hi;
  local[1] = -(double)hi;
  local[2] = lo;
  local[3] = -(double)lo;
  int rc = zeus_collective_allreduce(j->o.collective, local, 4, ZEUS_REDUCE_MAX);
  if (!rc) rc = zeus_collective_allreduce(j->o.collective, local + 4, 1, ZEUS_REDUCE_SUM);
  if (rc) return rc;
  j->num_gpus = (unsigned)local[4];
  if (j->num_gpus == 0 || j->nlocal == 0)
    return zeus__error(ZEUS_EINVAL,
                       "zeus_job: no GPU to measure (every rank needs one; ZEUS_GPU_BACKEND=sim simulates one)");
  if (local[0] != -local[1] || local[2] != -local[3])
    return zeus__error(ZEUS_EINVAL, "zeus_job: the ranks' GPUs have different power-limit ranges");
  j->max_w = hi;
  j->min_w = lo;
  j->max_power_w = (double)hi * j->num_gpus;
  return ZEUS_OK;
}

/* Plans the profiling windows: limits from max to min, windows scaled to fit one epoch. */
static int plan_profiling(zeus_job *j) {
  unsigned step = j->o.pl_step_w ? j->o.pl_step_w : 25;
  j->p.n = 0;
  for (unsigned w = j->max_w; w >= j->min_w && j->p.n < MAX_LIMITS; w -= step) {
    j->p.limits_w[j->p.n++] = w;
    if (w < step) break;
  }
  long room = j->o.steps_per_epoch - 1, n = (long)j->p.n;
  if (n * (j->warmup + j->measure) > room) {
    double f = (double)room / (double)(n * (j->warmup + j->measure));
    long w = (long)floor((double)j->warmup * f), m = (long)floor((double)j->measure * f);
    if (m < 1 && room >= n) {
      /* Rounding left no measurement: measure every step the epoch has room for instead. */
      w = 0;
      m = room / n;
    }
    if (m < 1)
      return zeus__error(ZEUS_EINVAL,
                         "ZEUS_PROFILE_PARAMS=%ld,%ld: an epoch of %ld steps cannot hold %ld power-limit windows "
                         "(at least %ld steps are needed); use a smaller batch size or fewer profiling steps",
                         j->warmup, j->measure, j->o.steps_per_epoch, n, n + 1);
    zeus__log(ZEUS_LOG_INFO, "job",
              "profiling windows scaled from %ld+%ld to %ld+%ld steps to fit %ld limits in one epoch", j->warmup,
              j->measure, w, m, n);
    j->warmup = w;
    j->measure = m;
  }
  j->profiling = true;
  return ZEUS_OK;
}

int zeus_job_open(zeus_job **out, const zeus_job_opts *opts) {
  if (!opts)
    return zeus__error(ZEUS_EINVAL, "zeus_job: options are required (batch_size, max_epochs, steps_per_epoch)");
  int rc = check_opts(opts);
  if (rc) return rc;
  zeus_job *j = calloc(1, sizeof *j);
  if (!j) return zeus__oom("opening a job");
  j->o = *opts;
  j->predicted = NAN;
  j->rank = opts->collective ? opts->collective->rank : 0;
  j->ranks = opts->collective ? opts->collective->world_size : 1;
  j->global_bs = opts->batch_size * j->ranks;
  rc = read_settings(j);
  if (!rc) rc = zeus__robust_mode_from_env(&j->original);
  if (!rc && !j->original && !(j->step_s = malloc(2 * (size_t)j->measure * sizeof *j->step_s)))
    rc = zeus__oom("opening a job");
  if (!rc) {
    if (opts->monitor) {
      j->mon = opts->monitor;
    } else {
      rc = zeus_monitor_open(&j->mon, NULL);
      j->own_mon = rc == ZEUS_OK;
    }
  }
  if (!rc) rc = setup_gpus(j);
  /* Rank 0 creates the folder and loads the profile; every rank learns the outcome (a failure
   * included) from one broadcast, so that all ranks fail or go on together. */
  profile p;
  memset(&p, 0, sizeof p);
  if (!rc) {
    if (j->rank == 0) {
      p.status = zeus__mkdirs(j->log_dir);
      if (!p.status) p.status = load_profile(j, &p);
    }
    rc = zeus_collective_broadcast(j->o.collective, &p, sizeof p, 0);
    if (!rc && p.status)
      rc = j->rank == 0 ? p.status
                        : zeus__error(p.status, "rank 0 could not prepare %s or its power profile", j->log_dir);
  }
  if (!rc) {
    if (p.present) {
      j->p = p;
      zeus__log(ZEUS_LOG_INFO, "job", "loaded %s: optimal power limit %u W", j->power_json, p.optimal_w);
    } else {
      rc = plan_profiling(j);
    }
  }
  if (rc) {
    zeus_job_close(j);
    return rc;
  }
  install_handlers(j);
  *out = j;
  return ZEUS_OK;
}

void zeus_job_close(zeus_job *j) {
  if (!j) return;
  if (j->mon) {
    for (unsigned k = 0; k < j->nlocal; k++) {
      if (!j->changed[k]) continue;
      unsigned gpu = zeus_monitor_gpu_index(j->mon, k);
      if (zeus_gpu_set_power_limit(j->dev, gpu, j->orig_mw[k]) != ZEUS_OK)
        zeus__log(ZEUS_LOG_WARN, "job", "could not put GPU %u's power limit back: %s", gpu, zeus_errmsg());
    }
    static const char *const wins[] = {WIN_TRAIN, WIN_EVAL, WIN_LIMIT};
    for (size_t i = 0; i < 3; i++)
      if (zeus_monitor_is_open(j->mon, wins[i])) zeus_monitor_end_window(j->mon, wins[i], true, NULL);
    if (j->own_mon) zeus_monitor_close(j->mon);
  }
  remove_handlers(j);
  free(j->step_s);
  free(j->log_dir);
  free(j->job_id);
  free(j->train_json);
  free(j->power_json);
  free(j);
}

/* ---- accounting and the result file ---- */

static double cost_of(const zeus_job *j, double energy, double time) {
  return zeus_cost(energy, time, j->eta, j->max_power_w);
}

static int finish(zeus_job *j, bool reached) {
  j->finished = true;
  j->reached = reached;
  if (j->rank != 0) return ZEUS_OK;
  unsigned pl = j->p.present ? j->p.optimal_w : 0;
  /* Energies at the mJ, times at the ns, the cost (derived) at ZEUS_DERIVED_DIGITS digits. */
  json_t *root = json_pack("{s:o, s:o, s:o, s:I, s:I, s:b, s:I, s:I, s:b, s:o, s:o}", "energy",
                           zeus__json_measured(j->energy_acc, 3), "time", zeus__json_measured(j->time_acc, 9),
                           "cost", zeus__json_derived(cost_of(j, j->energy_acc, j->time_acc)), "num_epochs",
                           (json_int_t)j->epochs, "epochs", (json_int_t)j->epochs, "reached", reached, "batch_size",
                           (json_int_t)j->global_bs, "power_limit_w", (json_int_t)pl, "observer_mode", !j->use_opt,
                           "observed_energy", zeus__json_measured(j->energy_obs, 3), "observed_time",
                           zeus__json_measured(j->time_obs, 9));
  if (!root) return zeus__oom("writing the result file");
  int rc = zeus__json_write_file_atomic(j->train_json, root, 0);
  json_decref(root);
  if (!rc)
    zeus__log(ZEUS_LOG_INFO, "job", "%s after %ld epochs: %.6g J, %.6g s; wrote %s",
              reached ? "target reached" : "stopped", j->epochs, j->energy_acc, j->time_acc, j->train_json);
  return rc;
}

/* Time and energy of `steps` steps at the optimal limit (train or eval profile). */
static void predict(const zeus_job *j, long steps, bool eval, double *energy, double *time) {
  *energy = *time = 0;
  if (steps <= 0) return;
  double tput, power;
  if (eval) {
    if (!j->p.have_eval) return;
    tput = j->p.eval_tput;
    power = j->p.eval_power;
  } else {
    size_t i = limit_index(&j->p, j->p.optimal_w);
    tput = j->p.train_tput[i];
    power = j->p.train_power[i];
  }
  *time = (double)steps / tput;
  *energy = *time * power;
}

/* Adds a measured phase; in observer mode steady phases count as if run at the optimal limit. */
static void account(zeus_job *j, double energy, double time, long steps, bool eval) {
  j->energy_obs += energy;
  j->time_obs += time;
  if (!j->use_opt && !j->epoch_profiled && j->p.present && (!eval || j->p.have_eval)) {
    predict(j, steps, eval, &energy, &time);
  }
  j->energy_acc += energy;
  j->time_acc += time;
}

int zeus_job_next_epoch(zeus_job *j, bool *more, long *epoch) {
  if (j->in_train || j->in_eval)
    return zeus__error(ZEUS_ESTATE, "zeus_job_next_epoch: end the training or evaluation phase first");
  *epoch = j->epochs;
  if (j->finished) {
    *more = false;
    return ZEUS_OK;
  }
  int rc = ZEUS_OK;
  if (j->save_pending) rc = save_profile(j);
  if (rc) return rc;
  /* 0: go on, 1: stop (reached), 2: stop (not reached). Rank 0 decides. */
  int32_t decision = 0;
  double cost = cost_of(j, j->energy_acc, j->time_acc);
  j->predicted = NAN;
  if (j->reached) {
    decision = 1;
  } else if (j->epochs >= j->o.max_epochs) {
    decision = 2;
    zeus__log(ZEUS_LOG_INFO, "job", "maximum number of epochs %ld reached", j->o.max_epochs);
  } else if (!j->profiling && j->p.present && isfinite(j->thresh)) {
    long steps = j->epochs ? j->last_train_steps : j->o.steps_per_epoch;
    long esteps = j->epochs ? j->last_eval_steps : j->o.eval_steps_per_epoch;
    double e1, t1, e2, t2;
    predict(j, steps, false, &e1, &t1);
    predict(j, esteps, true, &e2, &t2);
    double next = cost_of(j, j->energy_acc + e1 + e2, j->time_acc + t1 + t2);
    j->predicted = next;
    zeus__log(ZEUS_LOG_INFO, "job", "cost %.6g so far, %.6g after the next epoch (threshold %.6g)", cost, next,
              j->thresh);
    if (next >= j->thresh) decision = 2;
  }
  rc = zeus_collective_broadcast(j->o.collective, &decision, sizeof decision, 0);
  if (rc) return rc;
  if (decision) {
    *more = false;
    j->stopped_by_cost = decision == 2 && j->epochs < j->o.max_epochs;
    return finish(j, decision == 1);
  }
  *more = true;
  return ZEUS_OK;
}

int zeus_job_train_begin(zeus_job *j) {
  if (j->finished) return zeus__error(ZEUS_ESTATE, "zeus_job_train_begin: the job has finished");
  if (j->in_train || j->in_eval) return zeus__error(ZEUS_ESTATE, "zeus_job_train_begin: a phase is already running");
  j->epochs++;
  j->step = 0;
  j->epoch_profiled = j->profiling;
  int rc = ZEUS_OK;
  if (!j->profiling && j->p.present) rc = apply_limit(j, steady_limit(j));
  if (!rc) rc = zeus_monitor_begin_window(j->mon, WIN_TRAIN, true);
  if (rc) return rc;
  j->in_train = true;
  return ZEUS_OK;
}

static int conclude_refine(zeus_job *j);

/* The next re-measuring window is at the limit the last window measured (a palindrome's middle
 * pair, or its first limit the sweep's last): the GPU is warm at it. */
static bool refine_warm(const zeus_job *j) {
  return j->refining && j->ri < j->nseq && zeus__robust_warm(j->seq, j->ri, j->p.n);
}

/* Steps of the window to measure next: the sweep's measure, a re-measuring window's win_len. */
static long window_len(const zeus_job *j) { return j->refining && j->win_len > j->measure ? j->win_len : j->measure; }

int zeus_job_train_step_begin(zeus_job *j) {
  if (!j->in_train) return zeus__error(ZEUS_ESTATE, "zeus_job_train_step_begin: call zeus_job_train_begin first");
  if (j->in_step)
    return zeus__error(ZEUS_ESTATE,
                       "zeus_job_train_step_begin: the previous step was not ended (zeus_job_train_step_end)");
  j->in_step = true;
  if (!j->profiling) return ZEUS_OK;
  long k = j->step;
  long room = (j->epochs > 1 && j->last_train_steps > 0 ? j->last_train_steps : j->o.steps_per_epoch) - 1;
  int rc = ZEUS_OK;
  long warmup = refine_warm(j) ? 0 : j->warmup, len = window_len(j);
  if (j->ps == PROF_IDLE && j->refining && k + warmup + len > room) {
    rc = conclude_refine(j); /* no room left in this epoch: decide with the windows measured */
    if (rc || !j->profiling) return rc;
  }
  if (j->ps == PROF_IDLE && (j->refining || j->next_limit < j->p.n) && k + warmup + len <= room) {
    rc = apply_limit(j, j->p.limits_w[j->refining ? j->seq[j->ri] : j->next_limit]);
    if (rc) return rc;
    j->ps = PROF_WARMUP;
    j->warm_start = k - (j->warmup - warmup);
  }
  if (j->ps == PROF_WARMUP && k == j->warm_start + j->warmup) {
    rc = zeus_monitor_begin_window(j->mon, WIN_LIMIT, true);
    if (rc) return rc;
    j->ps = PROF_MEASURE;
    j->prof_start = k;
    j->nstep = 0;
    if (j->step_s) j->last_t = zeus_devices_now(j->dev);
  }
  return ZEUS_OK;
}

/* Profiling is over: the optimum (among `only`, NULL: every limit) is chosen on rank 0 and
 * applied on every rank. */
/* The report of choosing opt (noisy steps; zeus_plo's rules): each limit's cost has the relative
 * standard error of its throughput, the step spread over the steps of the windows that count (the
 * counter's tick error is not tracked here); contenders within 2 standard errors of a difference,
 * the confidence of being within 1 % of the best. */
static void decide_report(zeus_job *j, unsigned opt) {
  j->decided = false;
  j->ncontenders = 0;
  if (!j->noisy || j->p.n < 2) return;
  double key[MAX_LIMITS], sd[MAX_LIMITS];
  bool cont[MAX_LIMITS];
  size_t c = j->p.n;
  for (size_t i = 0; i < j->p.n; i++) {
    long steps = j->win_steps[i] - (i == 0 && j->win_n[i] > 1 ? j->measure : 0); /* the first window does not count */
    key[i] = limit_cost(j, i);
    sd[i] = steps > 0 ? key[i] * j->win_cv[i] / sqrt((double)steps) : 0;
    if (j->p.limits_w[i] == opt) c = i;
  }
  if (c == j->p.n) return;
  j->confidence = zeus__robust_decide_min(key, sd, j->p.n, c, ZEUS__ROBUST_TOL, ZEUS__ROBUST_CONTENDER_Z, cont, NULL);
  for (size_t i = 0; i < j->p.n; i++)
    if (cont[i]) j->contenders_w[j->ncontenders++] = j->p.limits_w[i];
  j->decided = true;
}

static int finish_profiling(zeus_job *j, const bool *only) {
  unsigned opt = choose_optimal(j, only);
  int rc = zeus_collective_broadcast(j->o.collective, &opt, sizeof opt, 0);
  if (rc) return rc;
  j->p.optimal_w = opt;
  j->p.present = 1;
  j->profiling = false;
  j->refining = false;
  j->save_pending = true;
  decide_report(j, opt);
  if (j->decided) {
    char buf[256] = "";
    size_t at = 0;
    for (size_t i = 0; i < j->ncontenders && at < sizeof buf; i++)
      at += (size_t)snprintf(buf + at, sizeof buf - at, "%s %u", i ? "," : "", j->contenders_w[i]);
    zeus__log(ZEUS_LOG_INFO, "job", "optimal power limit %u W (%s%s%s; confidence %.3f)", opt,
              j->ncontenders ? "could not tell apart from" : "no contender within the noise", buf,
              j->ncontenders ? " W" : "", j->confidence);
  } else {
    zeus__log(ZEUS_LOG_INFO, "job", "optimal power limit %u W", opt);
  }
  /* The rest of this epoch, evaluation included, runs at the optimum (so that evaluation is
   * profiled at it); steady epochs use steady_limit(). */
  return apply_limit(j, opt);
}

/* After the sweep (robust profiling, zeus_plo's rules): when the step times spread, the limits
 * whose cost is within the noise of the best are measured again in a palindromic order, within
 * 1.5x the sweep's steps and the rest of this (first) epoch. Returns whether windows are planned. */
static bool refine_plan(zeus_job *j, long k) {
  j->nseq = j->ri = 0;
  if (j->original || j->epochs != 1 || j->p.n < 2) return false;
  double s2 = 0;
  for (size_t i = 0; i < j->p.n; i++) s2 += j->win_cv[i] * j->win_cv[i];
  double cv = sqrt(s2 / (double)j->p.n);
  if (zeus_collective_allreduce(j->o.collective, &cv, 1, ZEUS_REDUCE_MAX)) return false;
  if (!(cv > ZEUS__ROBUST_NOISELESS_CV)) return false; /* noiseless: the original's profiling */
  j->noisy = true;
  j->sweep_steps = k + 1;
  double budget = (ZEUS__ROBUST_STEP_BUDGET - 1) * (double)j->sweep_steps;
  double epoch_room = (double)(j->o.steps_per_epoch - 1 - (k + 1));
  double room = fmin(budget, epoch_room);
  size_t windows = zeus__robust_window_count(room, j->warmup, j->measure, true);
  if (windows > 2 * j->p.n) windows = 2 * j->p.n;
  double key[MAX_LIMITS];
  for (size_t i = 0; i < j->p.n; i++) key[i] = limit_cost(j, i);
  size_t nc = 0;
  double thr = zeus__robust_threshold(cv, j->measure);
  j->nseq = zeus__robust_palindrome(key, j->p.n, thr, windows, j->seq, &nc);
  /* Few limits (issue 37): no palindrome of two fits; the two that decide, once each, if two
   * windows do. */
  if (j->nseq == 0 && nc >= 2)
    j->nseq = zeus__robust_short_plan(key, j->p.n, thr, zeus__robust_window_count(room, j->warmup, j->measure, false),
                                      j->seq, &nc);
  /* The room whole windows leave lengthens them all alike. */
  j->win_len = zeus__robust_refine_len(j->seq, j->nseq, j->p.n, room, j->warmup, j->measure, 2 * j->measure);
  if (j->nseq)
    zeus__log(ZEUS_LOG_INFO, "job", "step spread %.2f%%: %zu limit(s) within the noise; %zu more windows", 100 * cv,
              nc, j->nseq);
  return j->nseq > 0;
}

/* Re-measuring is over (or cut short): a re-measured limit's throughput is from the mean of its
 * windows (the new ones, drift-balanced, and the sweep's unless it was the first), its power over
 * every window at it; the choice is among the re-measured limits
 * (every limit when fewer than two were). */
static int conclude_refine(zeus_job *j) {
  bool only[MAX_LIMITS];
  size_t nref = 0;
  for (size_t i = 0; i < j->p.n; i++) {
    only[i] = j->win_n[i] > 1;
    if (!only[i]) continue;
    nref++;
    long nn = j->win_n[i] - 1;
    double n = (double)nn;
    double t = zeus__robust_remeasured_time(j->sw_time[i], i == 0, j->r_t[i], nn);
    j->p.train_power[i] = (j->sw_energy[i] + j->r_e[i]) / (j->sw_time[i] + j->r_t[i]);
    j->p.train_tput[i] = (double)j->measure / t;
    double sw_cv = j->win_cv[i]; /* the sweep's window's */
    j->win_cv[i] = i == 0 ? sqrt(j->r_cv2[i] / n) : sqrt((j->r_cv2[i] + sw_cv * sw_cv) / (n + 1));
  }
  return finish_profiling(j, nref >= 2 ? only : NULL);
}

int zeus_job_train_step_end(zeus_job *j) {
  if (!j->in_step) return zeus__error(ZEUS_ESTATE, "zeus_job_train_step_end: no step was begun");
  j->in_step = false;
  long k = j->step++;
  if (j->ps != PROF_MEASURE) return ZEUS_OK;
  if (j->step_s) {
    double now = zeus_devices_now(j->dev);
    if (j->nstep < 2 * j->measure) j->step_s[j->nstep++] = now - j->last_t;
    j->last_t = now;
  }
  if (k != j->prof_start + window_len(j) - 1) return ZEUS_OK;
  double e, t;
  int rc = end_window(j, WIN_LIMIT, &e, &t);
  if (rc) return rc;
  j->ps = PROF_IDLE;
  size_t i = j->refining ? j->seq[j->ri++] : j->next_limit++;
  if (!(t > 0)) return zeus__error(ZEUS_EDEVICE, "the profiling window at %u W measured no time", j->p.limits_w[i]);
  if (!j->original) {
    /* Per-step times, outliers left out (their share of the energy too), the same on every rank. */
    zeus__step_summary ws = zeus__robust_window(j->step_s, j->nstep, j->measure, t);
    double tt = ws.time_s, cv = ws.cv;
    rc = zeus_collective_allreduce(j->o.collective, &tt, 1, ZEUS_REDUCE_MAX);
    if (!rc) rc = zeus_collective_allreduce(j->o.collective, &cv, 1, ZEUS_REDUCE_MAX);
    if (rc) return rc;
    e *= tt / t;
    j->win_steps[i] += j->nstep;
    j->win_dur[i] += t;
    j->win_out[i] += ws.outliers;
    j->win_n[i]++;
    t = tt;
    if (j->refining) {
      j->r_t[i] += t;
      j->r_e[i] += e;
      j->r_cv2[i] += cv * cv;
      zeus__log(ZEUS_LOG_INFO, "job", "%u W again: %.6g W, %.6g steps/s (step spread %.2f%%)", j->p.limits_w[i],
                e / t, (double)j->measure / t, 100 * cv);
      return j->ri == j->nseq ? conclude_refine(j) : ZEUS_OK;
    }
    j->win_cv[i] = cv;
    j->sw_time[i] = t;
    j->sw_energy[i] = e;
  }
  j->p.train_power[i] = e / t;
  j->p.train_tput[i] = (double)j->measure / t;
  j->measured[i] = true;
  zeus__log(ZEUS_LOG_INFO, "job", "profiled %u W: %.6g W, %.6g steps/s", j->p.limits_w[i], j->p.train_power[i],
            j->p.train_tput[i]);
  if (j->next_limit < j->p.n) return ZEUS_OK;
  if (refine_plan(j, k)) {
    j->refining = true;
    return ZEUS_OK;
  }
  return finish_profiling(j, NULL);
}

int zeus_job_train_end(zeus_job *j) {
  if (!j->in_train) return zeus__error(ZEUS_ESTATE, "zeus_job_train_end: no training phase was begun");
  if (j->in_step) return zeus__error(ZEUS_ESTATE, "zeus_job_train_end: the last step was not ended");
  int rc = ZEUS_OK;
  bool interrupted = j->ps != PROF_IDLE;
  if (j->ps == PROF_MEASURE) rc = zeus_monitor_end_window(j->mon, WIN_LIMIT, true, NULL);
  if (interrupted && j->refining) {
    zeus__log(ZEUS_LOG_INFO, "job", "the epoch ended (%ld steps) while re-measuring: the choice uses the windows measured",
              j->step);
    j->ps = PROF_IDLE;
  } else if (interrupted) {
    zeus__log(ZEUS_LOG_WARN, "job",
              "the epoch ended (%ld steps) inside the profiling window of %u W; it is retried next epoch", j->step,
              j->p.limits_w[j->next_limit]);
    j->ps = PROF_IDLE;
  }
  if (!rc && j->refining) rc = conclude_refine(j); /* never past the first epoch */
  double e, t;
  if (!rc) rc = end_window(j, WIN_TRAIN, &e, &t);
  j->in_train = false;
  if (rc) return rc;
  j->last_train_steps = j->step;
  account(j, e, t, j->step, false);
  if (j->profiling && j->step - 1 < j->warmup + j->measure)
    return zeus__error(ZEUS_ESTATE,
                       "the epoch had %ld training steps (steps_per_epoch says %ld): too few for a power-limit "
                       "window of %ld+%ld steps",
                       j->step, j->o.steps_per_epoch, j->warmup, j->measure);
  return ZEUS_OK;
}

int zeus_job_eval_begin(zeus_job *j) {
  if (j->finished) return zeus__error(ZEUS_ESTATE, "zeus_job_eval_begin: the job has finished");
  if (j->in_train || j->in_eval) return zeus__error(ZEUS_ESTATE, "zeus_job_eval_begin: a phase is already running");
  int rc = zeus_monitor_begin_window(j->mon, WIN_EVAL, true);
  if (rc) return rc;
  j->in_eval = true;
  j->eval_step = 0;
  return ZEUS_OK;
}

int zeus_job_eval_step_begin(zeus_job *j) {
  if (!j->in_eval) return zeus__error(ZEUS_ESTATE, "zeus_job_eval_step_begin: call zeus_job_eval_begin first");
  if (j->in_eval_step) return zeus__error(ZEUS_ESTATE, "zeus_job_eval_step_begin: the previous step was not ended");
  j->in_eval_step = true;
  return ZEUS_OK;
}

int zeus_job_eval_step_end(zeus_job *j) {
  if (!j->in_eval_step) return zeus__error(ZEUS_ESTATE, "zeus_job_eval_step_end: no evaluation step was begun");
  j->in_eval_step = false;
  j->eval_step++;
  return ZEUS_OK;
}

int zeus_job_eval_end(zeus_job *j) {
  if (!j->in_eval) return zeus__error(ZEUS_ESTATE, "zeus_job_eval_end: no evaluation phase was begun");
  if (j->in_eval_step) return zeus__error(ZEUS_ESTATE, "zeus_job_eval_end: the last evaluation step was not ended");
  double e, t;
  int rc = end_window(j, WIN_EVAL, &e, &t);
  j->in_eval = false;
  if (rc) return rc;
  j->last_eval_steps = j->eval_step;
  account(j, e, t, j->eval_step, true);
  if (j->save_pending) {
    if (j->eval_step > 0 && t > 0) {
      /* Evaluation of the profiling epoch ran at the optimum: its power and throughput predict
       * later evaluations. */
      j->p.have_eval = 1;
      j->p.eval_power = e / t;
      j->p.eval_tput = (double)j->eval_step / t;
    }
    rc = save_profile(j);
  }
  return rc;
}

int zeus_job_report_metric(zeus_job *j, double value, bool higher_is_better) {
  if (isnan(value)) return zeus__error(ZEUS_EINVAL, "zeus_job_report_metric: the metric is NaN");
  if (higher_is_better ? value >= j->target : value <= j->target) j->reached = true;
  zeus__log(ZEUS_LOG_INFO, "job", "epoch %ld metric %.6g (target %.6g, %s is better)%s", j->epochs, value, j->target,
            higher_is_better ? "higher" : "lower", j->reached ? ": target reached" : "");
  return ZEUS_OK;
}

void zeus_job_get_info(const zeus_job *j, zeus_job_info *out) {
  memset(out, 0, sizeof *out);
  out->target_metric = j->target;
  out->cost_threshold = j->thresh;
  out->eta = j->eta;
  out->warmup_steps = j->warmup;
  out->measure_steps = j->measure;
  out->use_optimal_pl = j->use_opt;
  out->log_dir = j->log_dir;
  out->job_id = j->job_id;
  out->train_json = j->train_json;
  out->power_json = j->power_json;
  out->batch_size = j->global_bs;
  out->num_gpus = j->num_gpus;
  out->max_power_w = j->max_power_w;
  out->profiling = j->profiling;
  out->optimal_power_limit_w = j->p.present ? j->p.optimal_w : 0;
  out->epochs = j->epochs;
  out->energy_j = j->energy_acc;
  out->time_s = j->time_acc;
  out->cost = cost_of(j, j->energy_acc, j->time_acc);
  out->reached = j->reached;
  out->finished = j->finished;
  out->predicted_cost = j->predicted;
  out->stopped_by_cost = j->stopped_by_cost;
}

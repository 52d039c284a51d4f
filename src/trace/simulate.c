/* simulate.c: one recurring job over the NSDI '23 traces, driven by the batch-size optimizer and
 * a just-in-time power-limit optimizer (the original's Simulator.simulate_one_job), plus the
 * baseline, the oracle and the savings. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bso/bso_internal.h"
#include "trace/trace_internal.h"
#include "zeus/format.h"

#define MAX_TRIES 20
#define PATH_SEED_XOR 0x9e3779b97f4a7c15ULL

static const zeus_trace_workload SIX[] = {
    {"cifar100", "shufflenetv2", "adadelta", 0.60, 100, 1024},
    {"imagenet", "resnet50", "adadelta", 0.65, 100, 256},
    {"squad", "bert_base_uncased", "adamw", 84, 6, 32},
    {"librispeech", "deepspeech2", "adamw", 40, 16, 192},
    {"movielens-1m", "ncf", "adam", 0.41, 100, 1024},
    {"sentiment140", "bert_base_uncased", "adamw", 0.84, 10, 128},
};

size_t zeus_trace_default_workloads(const zeus_trace_workload **out) {
  *out = SIX;
  return sizeof SIX / sizeof SIX[0];
}

void zeus_simulate_opts_init(zeus_simulate_opts *o) {
  memset(o, 0, sizeof *o);
  o->eta = 0.5;
  o->beta = 2.0;
  o->seed = 1;
}

/* Everything the simulation needs about one batch size. */
typedef struct bsinfo {
  long bs;
  double *paths;        /* target epoch of each run at the target (NAN: never) */
  size_t npaths;
  double *pl_w;         /* power limits, descending */
  double *tpe;          /* time per epoch at each limit */
  double *power;        /* average power at each limit */
  size_t npl;
  size_t best;          /* limit of least epoch cost */
  double prof_energy;   /* the profiling epoch: mean over the limits */
  double prof_time;
  bool profiled;
} bsinfo;

typedef struct job {
  bsinfo *b;
  size_t n;
  double max_power_w;
  size_t num_pl;        /* distinct limits of the workload */
} job;

static void job_free(job *j) {
  for (size_t i = 0; i < j->n; i++) {
    free(j->b[i].paths);
    free(j->b[i].pl_w);
    free(j->b[i].tpe);
    free(j->b[i].power);
  }
  free(j->b);
}

static bool same_target(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b)); }

static int cmp_long(const void *a, const void *b) {
  long x = *(const long *)a, y = *(const long *)b;
  return (x > y) - (x < y);
}

static bool contains(const long *v, size_t n, long x) {
  for (size_t i = 0; i < n; i++)
    if (v[i] == x) return true;
  return false;
}

static double epoch_cost(const bsinfo *b, size_t k, double eta, double max_power) {
  return (eta * b->power[k] + (1.0 - eta) * max_power) * b->tpe[k];
}

/* Collects the workload's batch sizes (in both traces), runs at the target and power rows. */
static int build_job(const zeus_trace *t, const zeus_trace_workload *w, double eta, job *j) {
  memset(j, 0, sizeof *j);
  j->max_power_w = t->max_power_w;
  int d = zeus__trace_name(t, w->dataset), nw = zeus__trace_name(t, w->network), o = zeus__trace_name(t, w->optimizer);
  long *tb = malloc((t->ntrain + 1) * sizeof *tb), *pb = malloc((t->npower + 1) * sizeof *pb);
  double *pls = malloc((t->npower + 1) * sizeof *pls);
  if (!tb || !pb || !pls) {
    free(tb);
    free(pb);
    free(pls);
    return zeus__oom("preparing a simulation");
  }
  size_t ntb = 0, npb = 0, npls = 0;
  for (size_t i = 0; i < t->ntrain && d >= 0 && nw >= 0 && o >= 0; i++) {
    const zeus__train_row *r = &t->train[i];
    if (r->dataset == d && r->network == nw && r->optimizer == o && !contains(tb, ntb, r->bs)) tb[ntb++] = r->bs;
  }
  for (size_t i = 0; i < t->npower && d >= 0 && nw >= 0 && o >= 0; i++) {
    const zeus__power_row *r = &t->power[i];
    if (r->dataset != d || r->network != nw || r->optimizer != o) continue;
    if (!contains(pb, npb, r->bs)) pb[npb++] = r->bs;
    bool seen = false;
    for (size_t k = 0; k < npls; k++) seen = seen || pls[k] == r->pl_w;
    if (!seen) pls[npls++] = r->pl_w;
  }
  free(pls);
  j->num_pl = npls;
  size_t n = 0;
  for (size_t i = 0; i < ntb; i++)
    if (contains(pb, npb, tb[i])) tb[n++] = tb[i];
  free(pb);
  if (n == 0) {
    free(tb);
    return zeus__error(ZEUS_EINVAL,
                       "workload %s/%s/%s: no batch size is in both the train trace and the power trace",
                       w->dataset, w->network, w->optimizer);
  }
  qsort(tb, n, sizeof *tb, cmp_long);
  j->b = calloc(n, sizeof *j->b);
  if (!j->b) {
    free(tb);
    return zeus__oom("preparing a simulation");
  }
  j->n = n;
  int rc = ZEUS_OK;
  for (size_t i = 0; i < n && !rc; i++) {
    bsinfo *b = &j->b[i];
    b->bs = tb[i];
    size_t np = 0, npl = 0;
    for (size_t k = 0; k < t->ntrain; k++) {
      const zeus__train_row *r = &t->train[k];
      np += r->dataset == d && r->network == nw && r->optimizer == o && r->bs == b->bs &&
            same_target(r->target, w->target_metric);
    }
    for (size_t k = 0; k < t->npower; k++) {
      const zeus__power_row *r = &t->power[k];
      npl += r->dataset == d && r->network == nw && r->optimizer == o && r->bs == b->bs;
    }
    b->paths = malloc((np ? np : 1) * sizeof *b->paths);
    b->pl_w = malloc(npl * sizeof *b->pl_w);
    b->tpe = malloc(npl * sizeof *b->tpe);
    b->power = malloc(npl * sizeof *b->power);
    double *count = calloc(npl, sizeof *count);
    if (!b->paths || !b->pl_w || !b->tpe || !b->power || !count) {
      free(count);
      rc = zeus__oom("preparing a simulation");
      break;
    }
    for (size_t k = 0; k < t->ntrain; k++) {
      const zeus__train_row *r = &t->train[k];
      if (r->dataset == d && r->network == nw && r->optimizer == o && r->bs == b->bs &&
          same_target(r->target, w->target_metric))
        b->paths[b->npaths++] = r->epoch;
    }
    if (b->npaths == 0) {
      /* No run of this batch size at this target: every try runs to max_epochs and fails. */
      b->paths[0] = NAN;
      b->npaths = 1;
    }
    /* Limits, descending; a repeated (batch size, limit) row is averaged. */
    for (size_t k = 0; k < t->npower; k++) {
      const zeus__power_row *r = &t->power[k];
      if (r->dataset != d || r->network != nw || r->optimizer != o || r->bs != b->bs) continue;
      size_t at = b->npl;
      for (size_t q = 0; q < b->npl; q++)
        if (b->pl_w[q] == r->pl_w) at = q;
      if (at == b->npl) {
        b->pl_w[at] = r->pl_w;
        b->tpe[at] = b->power[at] = 0;
        b->npl++;
      }
      b->tpe[at] += r->time_per_epoch;
      b->power[at] += r->power_w;
      count[at] += 1;
    }
    for (size_t q = 0; q < b->npl; q++) {
      b->tpe[q] /= count[q];
      b->power[q] /= count[q];
    }
    free(count);
    for (size_t q = 1; q < b->npl; q++) /* insertion sort, descending limit */
      for (size_t p = q; p > 0 && b->pl_w[p - 1] < b->pl_w[p]; p--) {
        double x;
        x = b->pl_w[p], b->pl_w[p] = b->pl_w[p - 1], b->pl_w[p - 1] = x;
        x = b->tpe[p], b->tpe[p] = b->tpe[p - 1], b->tpe[p - 1] = x;
        x = b->power[p], b->power[p] = b->power[p - 1], b->power[p - 1] = x;
      }
    b->best = 0;
    double e = 0, tt = 0;
    for (size_t q = 0; q < b->npl; q++) {
      if (epoch_cost(b, q, eta, j->max_power_w) < epoch_cost(b, b->best, eta, j->max_power_w)) b->best = q;
      e += b->tpe[q] * b->power[q];
      tt += b->tpe[q];
    }
    b->prof_energy = e / (double)b->npl;
    b->prof_time = tt / (double)b->npl;
  }
  free(tb);
  if (rc) job_free(j);
  return rc;
}

static bsinfo *find_bs(job *j, long bs) {
  for (size_t i = 0; i < j->n; i++)
    if (j->b[i].bs == bs) return &j->b[i];
  return NULL;
}

/* One try: samples a path, runs up to the cost bound or max_epochs. *epochs 0: could not run. */
static void run_try(bsinfo *b, zeus_rng *paths, double cost_ub, double eta, double max_power, long max_epochs,
                    bool profile, long *epochs, double *energy, double *time, bool *reached) {
  double target_epoch = b->paths[zeus_rng_below(paths, b->npaths)];
  size_t k = b->best;
  long limit = max_epochs;
  if (isfinite(cost_ub)) {
    double m = floor(cost_ub / epoch_cost(b, k, eta, max_power));
    if (m < (double)limit) limit = (long)m;
  }
  *reached = false;
  *epochs = 0;
  *energy = *time = 0;
  if (limit <= 0) return;
  long e = limit;
  if (!isnan(target_epoch) && target_epoch <= (double)limit) {
    e = (long)target_epoch;
    *reached = true;
  }
  double epe = b->tpe[k] * b->power[k];
  if (profile) {
    *energy = b->prof_energy + epe * (double)(e - 1);
    *time = b->prof_time + b->tpe[k] * (double)(e - 1);
  } else {
    *energy = epe * (double)e;
    *time = b->tpe[k] * (double)e;
  }
  *epochs = e;
}

static int push_try(zeus_simulate_result *r, size_t *cap, const zeus_simulate_try *t) {
  int rc = zeus__grow(&r->history, cap, r->history_len + 1, sizeof *r->history, "recording the simulation history");
  if (rc) return rc;
  r->history[r->history_len++] = *t;
  return ZEUS_OK;
}

/* Baseline and oracle: expected per-recurrence figures over the runs that reach the target. */
static int expectations(job *j, const zeus_trace_workload *w, long default_bs, double eta, zeus_simulate_result *r) {
  bsinfo *d = find_bs(j, default_bs);
  double sum = 0;
  size_t cnt = 0;
  for (size_t i = 0; i < d->npaths; i++)
    if (!isnan(d->paths[i]) && d->paths[i] <= (double)w->max_epochs) {
      sum += d->paths[i];
      cnt++;
    }
  if (cnt == 0)
    return zeus__error(ZEUS_ESTATE, "the default batch size %ld never reaches the target metric %g within %ld epochs",
                       default_bs, w->target_metric, w->max_epochs);
  double mean_epochs = sum / (double)cnt; /* limit 0 is the largest */
  r->baseline_time_s = mean_epochs * d->tpe[0];
  r->baseline_energy_j = r->baseline_time_s * d->power[0];
  r->baseline_cost = zeus_cost(r->baseline_energy_j, r->baseline_time_s, eta, j->max_power_w);
  for (int pass = 0; pass < 2 && r->oracle_bs == 0; pass++) {
    double best = INFINITY;
    for (size_t i = 0; i < j->n; i++) {
      bsinfo *b = &j->b[i];
      double s = 0;
      size_t c = 0;
      for (size_t p = 0; p < b->npaths; p++)
        if (!isnan(b->paths[p]) && b->paths[p] <= (double)w->max_epochs) {
          s += b->paths[p];
          c++;
        }
      if (c == 0 || (pass == 0 && c < b->npaths)) continue;
      double me = s / (double)c;
      for (size_t k = 0; k < b->npl; k++) {
        double cost = me * epoch_cost(b, k, eta, j->max_power_w);
        if (cost < best) {
          best = cost;
          r->oracle_bs = b->bs;
          r->oracle_power_limit_w = (unsigned)lround(b->pl_w[k]);
          r->oracle_time_s = me * b->tpe[k];
          r->oracle_energy_j = r->oracle_time_s * b->power[k];
          r->oracle_cost = cost;
        }
      }
    }
  }
  return ZEUS_OK;
}

static int check(const zeus_trace_workload *w, const zeus_simulate_opts *o) {
  if (!w || !w->dataset || !w->network || !w->optimizer)
    return zeus__error(ZEUS_EINVAL, "simulate: the workload needs a dataset, a network and an optimizer");
  if (!isfinite(w->target_metric)) return zeus__error(ZEUS_EINVAL, "simulate: target metric must be a finite number");
  if (w->max_epochs <= 0) return zeus__error(ZEUS_EINVAL, "simulate: max epochs %ld, expected > 0", w->max_epochs);
  if (w->default_bs <= 0)
    return zeus__error(ZEUS_EINVAL, "simulate: default batch size %ld, expected > 0", w->default_bs);
  if (!(o->eta >= 0 && o->eta <= 1))
    return zeus__error(ZEUS_EINVAL, "simulate: eta %g, expected a number in [0, 1]", o->eta);
  if (!(o->beta > 0)) return zeus__error(ZEUS_EINVAL, "simulate: beta %g, expected a number > 0 (or inf)", o->beta);
  if (o->recurrences < 0)
    return zeus__error(ZEUS_EINVAL, "simulate: recurrences %ld, expected >= 1 (0: the default)", o->recurrences);
  return ZEUS_OK;
}

int zeus_simulate(const zeus_trace *t, const zeus_trace_workload *w, const zeus_simulate_opts *opts,
                  zeus_simulate_result **out) {
  zeus_simulate_opts o;
  if (opts) o = *opts;
  else zeus_simulate_opts_init(&o);
  int rc = check(w, &o);
  if (rc) return rc;
  job j;
  rc = build_job(t, w, o.eta, &j);
  if (rc) return rc;
  zeus_simulate_result *r = calloc(1, sizeof *r);
  long *bss = malloc(j.n * sizeof *bss);
  if (!r || !bss) {
    free(r);
    free(bss);
    job_free(&j);
    return zeus__oom("running a simulation");
  }
  for (size_t i = 0; i < j.n; i++) bss[i] = j.b[i].bs;
  r->batch_sizes = bss;
  r->num_batch_sizes = j.n;
  r->num_power_limits = j.num_pl;
  r->max_power_w = j.max_power_w;
  long def = 0;
  for (size_t i = 0; i < j.n; i++)
    if (bss[i] <= w->default_bs) def = bss[i];
  if (def == 0) {
    rc = zeus__error(ZEUS_EINVAL, "workload %s/%s: the traces have no batch size at or below the default %ld",
                     w->dataset, w->network, w->default_bs);
  }
  r->default_bs = def;
  r->recurrences = o.recurrences ? o.recurrences : (long)(2 * j.n * j.num_pl);
  zeus_bso *bso = NULL;
  zeus_bso_opts bo;
  zeus_bso_opts_init(&bo);
  bo.seed = o.seed;
  if (!rc) rc = zeus_bso_open(&bso, bss, j.n, def, &bo);
  if (!rc) rc = expectations(&j, w, def, o.eta, r);
  zeus_rng paths;
  zeus_rng_seed(&paths, o.seed ^ PATH_SEED_XOR);
  double min_cost = INFINITY;
  size_t cap = 0;
  for (long rec = 1; rec <= r->recurrences && !rc; rec++) {
    double cost_acc = 0;
    bool done = false;
    for (long tr = 1; tr <= MAX_TRIES && !rc && !done; tr++) {
      long bs;
      rc = zeus_bso_predict(bso, &bs);
      if (rc) break;
      bsinfo *b = find_bs(&j, bs);
      bool profile = !b->profiled;
      b->profiled = true;
      zeus_simulate_try h = {.recurrence = rec, .try_index = tr, .batch_size = bs,
                             .power_limit_w = (unsigned)lround(b->pl_w[b->best])};
      run_try(b, &paths, o.beta * min_cost, o.eta, j.max_power_w, w->max_epochs, profile, &h.epochs, &h.energy_j,
              &h.time_s, &h.reached);
      if (h.epochs == 0) {
        /* Even one epoch would exceed the bound: a failure the optimizer learns, without history. */
        rc = zeus_bso_observe(bso, bs, 100.0 * o.beta * min_cost, false);
        continue;
      }
      h.cost = zeus_cost(h.energy_j, h.time_s, o.eta, j.max_power_w);
      cost_acc += h.cost;
      rc = zeus_bso_observe(bso, bs, h.cost, h.reached);
      if (!rc) rc = push_try(r, &cap, &h);
      if (rc) break;
      r->energy_j += h.energy_j;
      r->time_s += h.time_s;
      r->cost += h.cost;
      if (h.reached) {
        if (cost_acc < min_cost) min_cost = cost_acc;
        done = true;
      } else if (rec == 1) {
        rc = zeus__error(ZEUS_ESTATE,
                         "the default batch size %ld did not reach the target metric %g on the first recurrence", def,
                         w->target_metric);
      }
    }
    if (!rc && !done)
      rc = zeus__error(ZEUS_ESTATE, "recurrence %ld did not reach the target metric %g in %d tries", rec,
                       w->target_metric, MAX_TRIES);
  }
  zeus_bso_close(bso);
  job_free(&j);
  if (rc) {
    zeus_simulate_result_free(r);
    return rc;
  }
  double R = (double)r->recurrences;
  r->energy_savings_pct = 100.0 * (1.0 - r->energy_j / (R * r->baseline_energy_j));
  r->time_change_pct = 100.0 * (1.0 - r->time_s / (R * r->baseline_time_s));
  *out = r;
  return ZEUS_OK;
}

void zeus_simulate_result_free(zeus_simulate_result *r) {
  if (!r) return;
  free(r->history);
  free(r->batch_sizes);
  free(r);
}

/* A figure the simulation derives from the traces (sums, averages, costs, percentages), at
 * ZEUS_DERIVED_DIGITS significant digits (zeus/format.h). */
static json_t *derived(double v) {
  return isfinite(v) ? json_real(zeus_round_significant(v, ZEUS_DERIVED_DIGITS)) : json_null();
}

/* {"energy_j", "time_s", "cost_j"} (plus batch size and limit when bs > 0). */
static json_t *figures(long bs, double limit_w, double energy_j, double time_s, double cost_j) {
  json_t *o = json_object();
  if (o && bs > 0) {
    json_object_set_new(o, "batch_size", json_integer(bs));
    json_object_set_new(o, "power_limit_w", json_real(limit_w));
  }
  if (o) {
    json_object_set_new(o, "energy_j", derived(energy_j));
    json_object_set_new(o, "time_s", derived(time_s));
    json_object_set_new(o, "cost_j", derived(cost_j));
  }
  return o;
}

int zeus_simulate_result_json(const zeus_simulate_result *r, bool with_history, char **out) {
  json_t *root = json_object(), *sum = json_object(), *bss = json_array();
  if (!root || !sum || !bss) {
    json_decref(root);
    json_decref(sum);
    json_decref(bss);
    return zeus__oom("serialising a simulation");
  }
  if (with_history) {
    json_t *h = json_array();
    for (size_t i = 0; h && i < r->history_len; i++) {
      const zeus_simulate_try *t = &r->history[i];
      json_t *e = json_pack("{s:I, s:I, s:I, s:f, s:I, s:o, s:o, s:o, s:b}", "recurrence", (json_int_t)t->recurrence,
                            "try", (json_int_t)t->try_index, "batch_size", (json_int_t)t->batch_size, "power_limit_w",
                            (double)t->power_limit_w, "epochs", (json_int_t)t->epochs, "energy_j",
                            derived(t->energy_j), "time_s", derived(t->time_s), "cost_j", derived(t->cost),
                            "reached", t->reached);
      json_array_append_new(h, e);
    }
    json_object_set_new(root, "history", h);
  }
  for (size_t i = 0; i < r->num_batch_sizes; i++) json_array_append_new(bss, json_integer(r->batch_sizes[i]));
  json_object_set_new(sum, "recurrences", json_integer(r->recurrences));
  json_object_set_new(sum, "tries", json_integer((json_int_t)r->history_len));
  json_object_set_new(sum, "batch_sizes", bss);
  json_object_set_new(sum, "default_batch_size", json_integer(r->default_bs));
  json_object_set_new(sum, "num_power_limits", json_integer((json_int_t)r->num_power_limits));
  json_object_set_new(sum, "max_power_w", json_real(r->max_power_w));
  json_object_set_new(sum, "total", figures(0, 0, r->energy_j, r->time_s, r->cost));
  json_object_set_new(sum, "baseline_per_recurrence", figures(r->default_bs, r->max_power_w, r->baseline_energy_j,
                                                              r->baseline_time_s, r->baseline_cost));
  json_object_set_new(sum, "oracle_per_recurrence", figures(r->oracle_bs, r->oracle_power_limit_w, r->oracle_energy_j,
                                                            r->oracle_time_s, r->oracle_cost));
  json_object_set_new(sum, "energy_saved_pct", derived(r->energy_savings_pct));
  json_object_set_new(sum, "time_saved_pct", derived(r->time_change_pct));
  json_object_set_new(root, "summary", sum);
  char *s = zeus_json_dumps(root, JSON_COMPACT);
  json_decref(root);
  if (!s) return zeus__oom("serialising a simulation");
  *out = s;
  return ZEUS_OK;
}

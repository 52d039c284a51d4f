/* gts.c: Gaussian Thompson sampling with known reward precision per arm (the original's
 * GaussianTS), conjugate Normal updates and the infinite-precision case. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bso/bso_internal.h"

struct zeus_gts {
  zeus_gts_opts o;
  size_t n;
  zeus_gts_arm *arms;
  size_t *order; /* scratch for the exploration shuffle */
  zeus_rng rng;
};

void zeus_gts_opts_init(zeus_gts_opts *o) {
  memset(o, 0, sizeof *o);
  o->num_exploration = 1;
  o->seed = 123456;
}

static int check_reward_precision(double p, const char *what) {
  if (isnan(p) || p < 0)
    return zeus__error(ZEUS_EINVAL, "%s: %g, expected a precision >= 0 (or infinity)", what, p);
  return ZEUS_OK;
}

int zeus_gts_open(zeus_gts **out, const long *arms, size_t n, const zeus_gts_opts *opts) {
  zeus_gts_opts o;
  if (opts) o = *opts;
  else zeus_gts_opts_init(&o);
  if (n == 0 || !arms) return zeus__error(ZEUS_EINVAL, "Gaussian Thompson sampling needs at least one arm");
  if (!isfinite(o.prior_mean))
    return zeus__error(ZEUS_EINVAL, "prior_mean: %g, expected a finite number", o.prior_mean);
  if (!isfinite(o.prior_precision) || o.prior_precision < 0)
    return zeus__error(ZEUS_EINVAL, "prior_precision: %g, expected a finite number >= 0", o.prior_precision);
  int rc = check_reward_precision(o.reward_precision, "reward_precision");
  if (rc) return rc;
  if (o.num_exploration < 0)
    return zeus__error(ZEUS_EINVAL, "num_exploration: %ld, expected >= 0", o.num_exploration);
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < i; k++)
      if (arms[i] == arms[k]) return zeus__error(ZEUS_EINVAL, "arm %ld is listed twice", arms[i]);
  zeus_gts *g = calloc(1, sizeof *g);
  if (!g) return zeus__oom("creating a bandit");
  g->arms = calloc(n, sizeof *g->arms);
  g->order = calloc(n, sizeof *g->order);
  if (!g->arms || !g->order) {
    zeus_gts_close(g);
    return zeus__oom("creating a bandit");
  }
  g->o = o;
  g->n = n;
  for (size_t i = 0; i < n; i++) {
    g->arms[i] = (zeus_gts_arm){.arm = arms[i], .mean = o.prior_mean, .precision = o.prior_precision,
                                .reward_precision = o.reward_precision, .num_observations = 0};
  }
  zeus_rng_seed(&g->rng, o.seed);
  *out = g;
  return ZEUS_OK;
}

void zeus_gts_close(zeus_gts *g) {
  if (!g) return;
  free(g->arms);
  free(g->order);
  free(g);
}

static zeus_gts_arm *find(const zeus_gts *g, long arm) {
  for (size_t i = 0; i < g->n; i++)
    if (g->arms[i].arm == arm) return &g->arms[i];
  return NULL;
}

static int unknown_arm(long arm) { return zeus__error(ZEUS_ENOENT, "the bandit has no arm %ld", arm); }

int zeus_gts_set_reward_precision(zeus_gts *g, long arm, double precision) {
  zeus_gts_arm *a = find(g, arm);
  if (!a) return unknown_arm(arm);
  int rc = check_reward_precision(precision, "reward precision");
  if (rc) return rc;
  a->reward_precision = precision;
  return ZEUS_OK;
}

int zeus_gts_fit_arm(zeus_gts *g, long arm, const double *rewards, size_t n, bool reset) {
  zeus_gts_arm *a = find(g, arm);
  if (!a) return unknown_arm(arm);
  double sum = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(rewards[i]))
      return zeus__error(ZEUS_EINVAL, "reward %zu of arm %ld is %g, expected a finite number", i, arm, rewards[i]);
    sum += rewards[i];
  }
  if (reset) {
    a->mean = g->o.prior_mean;
    a->precision = g->o.prior_precision;
    a->num_observations = 0;
  }
  if (n == 0) return ZEUS_OK;
  if (isinf(a->reward_precision)) {
    /* Exact rewards: the belief is their mean with no uncertainty. */
    a->precision = INFINITY;
    a->mean = sum / (double)n;
  } else {
    double prec = a->precision + (double)n * a->reward_precision;
    if (prec > 0) a->mean = (a->precision * a->mean + a->reward_precision * sum) / prec;
    a->precision = prec; /* 0 stays 0: no information, the mean stays the prior's */
  }
  a->num_observations += (long)n;
  return ZEUS_OK;
}

int zeus_gts_fit(zeus_gts *g, const long *arms, const double *rewards, size_t n, bool reset) {
  for (size_t i = 0; i < n; i++)
    if (!find(g, arms[i])) return unknown_arm(arms[i]);
  double *buf = n ? malloc(n * sizeof *buf) : NULL;
  if (n && !buf) return zeus__oom("fitting a bandit");
  int rc = ZEUS_OK;
  for (size_t k = 0; k < g->n && rc == ZEUS_OK; k++) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
      if (arms[i] == g->arms[k].arm) buf[m++] = rewards[i];
    rc = zeus_gts_fit_arm(g, g->arms[k].arm, buf, m, reset);
  }
  free(buf);
  return rc;
}

int zeus_gts_predict(zeus_gts *g, long *arm) {
  for (size_t i = 0; i < g->n; i++) g->order[i] = i;
  zeus__rng_shuffle(&g->rng, g->order, g->n);
  for (size_t i = 0; i < g->n; i++) {
    const zeus_gts_arm *a = &g->arms[g->order[i]];
    if (a->num_observations < g->o.num_exploration) {
      zeus__log(ZEUS_LOG_DEBUG, "bso", "Thompson sampling: explore arm %ld", a->arm);
      *arm = a->arm;
      return ZEUS_OK;
    }
  }
  size_t best = 0;
  double best_sample = -INFINITY;
  for (size_t i = 0; i < g->n; i++) {
    const zeus_gts_arm *a = &g->arms[i];
    if (!(a->precision > 0))
      return zeus__error(ZEUS_ESTATE,
                         "Thompson sampling: arm %ld has no information (precision 0); give a prior "
                         "precision or explore it first", a->arm);
    double z = zeus_rng_normal(&g->rng);
    double sample = isinf(a->precision) ? a->mean : a->mean + z / sqrt(a->precision);
    zeus__log(ZEUS_LOG_DEBUG, "bso", "Thompson sampling: arm %ld ~ N(%.6g, 1/%.6g) -> %.6g", a->arm, a->mean,
              a->precision, sample);
    if (i == 0 || sample > best_sample) {
      best = i;
      best_sample = sample;
    }
  }
  *arm = g->arms[best].arm;
  return ZEUS_OK;
}

size_t zeus_gts_num_arms(const zeus_gts *g) { return g ? g->n : 0; }

int zeus_gts_arm_at(const zeus_gts *g, size_t i, zeus_gts_arm *out) {
  if (i >= g->n) return zeus__error(ZEUS_ERANGE, "arm index %zu, the bandit has %zu arms", i, g->n);
  *out = g->arms[i];
  return ZEUS_OK;
}

int zeus_gts_get_arm(const zeus_gts *g, long arm, zeus_gts_arm *out) {
  const zeus_gts_arm *a = find(g, arm);
  if (!a) return unknown_arm(arm);
  *out = *a;
  return ZEUS_OK;
}

zeus_rng *zeus__gts_rng(zeus_gts *g) { return &g->rng; }
const zeus_rng *zeus__gts_rng_const(const zeus_gts *g) { return &g->rng; }
void zeus__gts_opts(const zeus_gts *g, zeus_gts_opts *out) { *out = g->o; }

int zeus__gts_set_arm_state(zeus_gts *g, const zeus_gts_arm *st) {
  zeus_gts_arm *a = find(g, st->arm);
  if (!a) return unknown_arm(st->arm);
  *a = *st;
  return ZEUS_OK;
}

int zeus__gts_refit(zeus_gts *g, long arm, const double *rewards, size_t m, double *prec_out) {
  double var = zeus__variance(rewards, m);
  double prec = var > 0 ? 1.0 / var : INFINITY;
  if (prec_out) *prec_out = prec;
  int rc = zeus_gts_set_reward_precision(g, arm, prec);
  if (!rc) rc = zeus_gts_fit_arm(g, arm, rewards, m, true);
  return rc;
}

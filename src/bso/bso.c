/* bso.c: the pruning Gaussian-Thompson-sampling batch-size optimizer (the original's
 * PruningGTSBatchSizeOptimizer for one job). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bso/bso_state.h"

void zeus_bso_opts_init(zeus_bso_opts *o) {
  memset(o, 0, sizeof *o);
  o->num_pruning_rounds = 2;
  o->seed = 123456;
}

static int cmp_long(const void *a, const void *b) {
  long x = *(const long *)a, y = *(const long *)b;
  return (x > y) - (x < y);
}

int zeus__bso_check_opts(const zeus_bso_opts *o) {
  if (!isfinite(o->prior_mean))
    return zeus__error(ZEUS_EINVAL, "prior_mean: %g, expected a finite number", o->prior_mean);
  if (!isfinite(o->prior_precision) || o->prior_precision < 0)
    return zeus__error(ZEUS_EINVAL, "prior_precision: %g, expected a finite number >= 0", o->prior_precision);
  if (o->window_size < 0)
    return zeus__error(ZEUS_EINVAL, "window_size: %ld, expected >= 0 (0: every observation)", o->window_size);
  if (o->num_pruning_rounds < 1)
    return zeus__error(ZEUS_EINVAL, "num_pruning_rounds: %ld, expected >= 1", o->num_pruning_rounds);
  return ZEUS_OK;
}

int zeus__bso_new(zeus_bso **out, const long *batch_sizes, size_t n, long default_bs, const zeus_bso_opts *o) {
  int rc = zeus__bso_check_opts(o);
  if (rc) return rc;
  if (n == 0 || !batch_sizes) return zeus__error(ZEUS_EINVAL, "the batch-size optimizer needs at least one batch size");
  zeus_bso *b = calloc(1, sizeof *b);
  if (!b) return zeus__oom("creating the batch-size optimizer");
  b->bs = malloc(n * sizeof *b->bs);
  if (!b->bs) {
    free(b);
    return zeus__oom("creating the batch-size optimizer");
  }
  memcpy(b->bs, batch_sizes, n * sizeof *b->bs);
  qsort(b->bs, n, sizeof *b->bs, cmp_long);
  b->n = n;
  b->o = *o;
  b->default_bs = default_bs;
  for (size_t i = 0; i < n; i++) {
    if (b->bs[i] <= 0) {
      rc = zeus__error(ZEUS_EINVAL, "batch size %ld, expected a positive integer", b->bs[i]);
      break;
    }
    if (i && b->bs[i] == b->bs[i - 1]) {
      rc = zeus__error(ZEUS_EINVAL, "batch size %ld is listed twice", b->bs[i]);
      break;
    }
  }
  if (!rc && !zeus__bso_has(b, default_bs)) {
    zeus__buf list = {0};
    for (size_t i = 0; i < n; i++) zeus__buf_printf(&list, "%s%ld", i ? ", " : "", b->bs[i]);
    rc = zeus__error(ZEUS_EINVAL, "the default batch size %ld is not among the batch sizes (%s)", default_bs,
                     list.data ? list.data : "");
    zeus__buf_free(&list);
  }
  if (rc) {
    zeus_bso_close(b);
    return rc;
  }
  *out = b;
  return ZEUS_OK;
}

int zeus_bso_open(zeus_bso **out, const long *batch_sizes, size_t n, long default_bs, const zeus_bso_opts *opts) {
  zeus_bso_opts o;
  if (opts) o = *opts;
  else zeus_bso_opts_init(&o);
  zeus_bso *b;
  int rc = zeus__bso_new(&b, batch_sizes, n, default_bs, &o);
  if (rc) return rc;
  rc = zeus__explorer_init(&b->ex, b->bs, b->n, default_bs, o.num_pruning_rounds);
  if (rc) {
    zeus_bso_close(b);
    return rc;
  }
  *out = b;
  return ZEUS_OK;
}

void zeus_bso_close(zeus_bso *b) {
  if (!b) return;
  zeus__explorer_free(&b->ex);
  zeus_gts_close(b->mab);
  free(b->bs);
  free(b->hist_bs);
  free(b->hist_reward);
  free(b);
}

bool zeus__bso_has(const zeus_bso *b, long bs) {
  for (size_t i = 0; i < b->n; i++)
    if (b->bs[i] == bs) return true;
  return false;
}

/* The latest window_size rewards of bs (all when 0), oldest first, into buf (capacity hist_n). */
static size_t windowed(const zeus_bso *b, long bs, double *buf) {
  size_t m = 0;
  for (size_t i = b->hist_n; i-- > 0;) {
    if (b->hist_bs[i] != bs) continue;
    buf[m++] = b->hist_reward[i];
    if (b->o.window_size > 0 && m == (size_t)b->o.window_size) break;
  }
  for (size_t i = 0; i < m / 2; i++) {
    double t = buf[i];
    buf[i] = buf[m - 1 - i];
    buf[m - 1 - i] = t;
  }
  return m;
}

/* Re-fits one arm on its windowed rewards with precision 1 / variance. */
static int refit_arm(zeus_bso *b, long bs) {
  double *buf = malloc((b->hist_n ? b->hist_n : 1) * sizeof *buf);
  if (!buf) return zeus__oom("fitting the bandit");
  size_t m = windowed(b, bs, buf);
  double prec;
  int rc = zeus__gts_refit(b->mab, bs, buf, m, &prec);
  zeus__log(ZEUS_LOG_INFO, "bso", "batch size %ld: %zu rewards, reward precision %.6g", bs, m, prec);
  free(buf);
  return rc;
}

/* Pruning is over: a bandit over the survivors, each fitted on its rewards. */
static int construct_mab(zeus_bso *b) {
  if (b->ex.ncands == 0)
    return zeus__error(ZEUS_ESTATE,
                       "every batch size was pruned: none reached the target metric during pruning exploration");
  zeus_gts_opts go;
  zeus_gts_opts_init(&go);
  go.prior_mean = b->o.prior_mean;
  go.prior_precision = b->o.prior_precision;
  go.reward_precision = 0;
  go.num_exploration = 2;
  go.seed = b->o.seed;
  zeus_gts *g;
  int rc = zeus_gts_open(&g, b->ex.cands, b->ex.ncands, &go);
  if (rc) return rc;
  b->mab = g;
  zeus__buf list = {0};
  for (size_t i = 0; i < b->ex.ncands; i++) zeus__buf_printf(&list, "%s%ld", i ? ", " : "", b->ex.cands[i]);
  zeus__log(ZEUS_LOG_INFO, "bso", "pruning done; Thompson sampling over batch sizes %s", list.data ? list.data : "");
  zeus__buf_free(&list);
  for (size_t i = 0; i < b->ex.ncands && !rc; i++) rc = refit_arm(b, b->ex.cands[i]);
  if (rc) {
    zeus_gts_close(g);
    b->mab = NULL;
  }
  return rc;
}

int zeus_bso_predict(zeus_bso *b, long *batch_size) {
  if (!b->mab) {
    if (!zeus__explorer_done(&b->ex)) {
      *batch_size = b->ex.expecting;
      zeus__log(ZEUS_LOG_INFO, "bso", "pruning round %ld: batch size %ld", b->ex.round + 1, *batch_size);
      return ZEUS_OK;
    }
    int rc = construct_mab(b);
    if (rc) return rc;
  }
  int rc = zeus_gts_predict(b->mab, batch_size);
  if (!rc) zeus__log(ZEUS_LOG_INFO, "bso", "Thompson sampling: batch size %ld", *batch_size);
  return rc;
}

int zeus__bso_hist_append(zeus_bso *b, long bs, double reward) {
  /* Two arrays with one capacity: grow both, then record the capacity both have. */
  size_t cap_bs = b->hist_cap, cap_r = b->hist_cap;
  int rc = zeus__grow(&b->hist_bs, &cap_bs, b->hist_n + 1, sizeof *b->hist_bs, "recording an observation");
  if (!rc) rc = zeus__grow(&b->hist_reward, &cap_r, b->hist_n + 1, sizeof *b->hist_reward, "recording an observation");
  if (rc) return rc;
  b->hist_cap = cap_bs < cap_r ? cap_bs : cap_r;
  b->hist_bs[b->hist_n] = bs;
  b->hist_reward[b->hist_n] = reward;
  b->hist_n++;
  return ZEUS_OK;
}

int zeus_bso_observe(zeus_bso *b, long bs, double cost, bool reached) {
  if (!zeus__bso_has(b, bs)) return zeus__error(ZEUS_EINVAL, "batch size %ld is not one of the job's batch sizes", bs);
  if (!isfinite(cost) || cost < 0)
    return zeus__error(ZEUS_EINVAL, "cost of batch size %ld: %g, expected a finite number >= 0", bs, cost);
  if (!b->mab && zeus__explorer_done(&b->ex)) {
    int rc = construct_mab(b);
    if (rc) return rc;
  }
  if (!b->mab) {
    bool expected = b->ex.expecting == bs;
    if (!expected && !b->o.concurrency)
      return zeus__error(ZEUS_ESTATE,
                         "pruning exploration expected the result of batch size %ld, got %ld (enable "
                         "concurrency to accept concurrent submissions)",
                         b->ex.expecting, bs);
    int rc = zeus__bso_hist_append(b, bs, -cost);
    if (rc) return rc;
    zeus__log(ZEUS_LOG_INFO, "bso", "pruning: batch size %ld cost %.6g %s%s", bs, cost,
              reached ? "reached the target" : "did not reach the target",
              expected ? "" : " (concurrent submission: kept in the history only)");
    if (expected) return zeus__explorer_report(&b->ex, bs, cost, reached);
    return ZEUS_OK;
  }
  int rc = zeus__bso_hist_append(b, bs, -cost);
  if (rc) return rc;
  zeus_gts_arm a;
  if (zeus_gts_get_arm(b->mab, bs, &a) != ZEUS_OK) {
    zeus__log(ZEUS_LOG_INFO, "bso", "batch size %ld was pruned; its cost %.6g is kept in the history only", bs, cost);
    return ZEUS_OK;
  }
  return refit_arm(b, bs);
}

zeus_bso_phase zeus_bso_get_phase(const zeus_bso *b) {
  return (b->mab || zeus__explorer_done(&b->ex)) ? ZEUS_BSO_THOMPSON : ZEUS_BSO_PRUNING;
}

long zeus_bso_expecting(const zeus_bso *b) { return b->mab ? 0 : b->ex.expecting; }

const zeus_gts *zeus_bso_bandit(const zeus_bso *b) { return b->mab; }

size_t zeus_bso_num_observations(const zeus_bso *b) { return b->hist_n; }

int zeus_bso_observation(const zeus_bso *b, size_t i, long *batch_size, double *reward) {
  if (i >= b->hist_n) return zeus__error(ZEUS_ERANGE, "observation %zu, there are %zu", i, b->hist_n);
  if (batch_size) *batch_size = b->hist_bs[i];
  if (reward) *reward = b->hist_reward[i];
  return ZEUS_OK;
}

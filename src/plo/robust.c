/* robust.c: the measurement rules of robust power-limit profiling (issue 30), shared by the
 * power-limit optimizer (plo.c) and the recurring job's first-epoch profiling (src/job/job.c):
 * per-step times with outliers left out, the noise threshold, the palindromic re-measuring plan,
 * and the ZEUS_PLO_PROFILING switch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "plo/plo_internal.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

zeus__step_summary zeus__robust_window(const double *v, long n, long nominal_steps, double window_s) {
  zeus__step_summary ws = {.time_s = window_s * (n > 0 ? (double)nominal_steps / (double)n : 1.0)};
  if (n < 2) return ws;
  double sorted_stack[256];
  double *sorted = n <= 256 ? sorted_stack : malloc((size_t)n * sizeof *sorted);
  if (!sorted) return ws;
  memcpy(sorted, v, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
  double med = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  for (long i = 0; i < n; i++) sorted[i] = fabs(v[i] - med);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
  double mad = 1.4826 * (n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]));
  if (sorted != sorted_stack) free(sorted);
  double sum = 0, sum2 = 0;
  long kept = 0;
  for (long i = 0; i < n; i++) {
    if (mad > 0 && fabs(v[i] - med) > ZEUS__ROBUST_OUTLIER_MADS * mad) continue;
    sum += v[i];
    sum2 += v[i] * v[i];
    kept++;
  }
  ws.outliers = n - kept;
  double mean = sum / (double)kept;
  double var = kept > 1 ? (sum2 - (double)kept * mean * mean) / (double)(kept - 1) : 0;
  ws.cv = mean > 0 && var > 0 ? sqrt(var) / mean : 0;
  if (ws.outliers > 0) ws.time_s = mean * (double)nominal_steps;
  return ws;
}

double zeus__robust_threshold(double cv, long steps) {
  return ZEUS__ROBUST_NOISE_Z * sqrt(2.0) * cv / sqrt((double)(steps > 0 ? steps : 1));
}

typedef struct cand {
  size_t i;
  double d;
} cand;

static int cmp_cand(const void *a, const void *b) {
  const cand *x = a, *y = b;
  if (x->d != y->d) return (x->d > y->d) - (x->d < y->d);
  return (x->i > y->i) - (x->i < y->i);
}

size_t zeus__robust_palindrome(const double *key, size_t n, double thr, size_t windows, size_t *seq,
                               size_t *ncand) {
  if (ncand) *ncand = 0;
  if (n == 0) return 0;
  cand *c = malloc(n * sizeof *c);
  if (!c) return 0;
  double best = INFINITY;
  for (size_t i = 0; i < n; i++) best = fmin(best, key[i]);
  size_t nc = 0;
  for (size_t i = 0; i < n; i++)
    if (key[i] <= best * (1 + thr)) c[nc++] = (cand){i, key[i]};
  qsort(c, nc, sizeof *c, cmp_cand);
  size_t m = windows / 2, ns = 0;
  if (nc < m) m = nc;
  if (m >= 2) {
    for (size_t k = 0; k < m; k++) seq[ns++] = c[k].i;
    for (size_t k = m; k-- > 0;) seq[ns++] = c[k].i;
  }
  free(c);
  if (ncand) *ncand = nc;
  return ns;
}

size_t zeus__robust_short_plan(const double *key, size_t n, double thr, size_t windows, size_t *seq, size_t *ncand) {
  if (ncand) *ncand = 0;
  if (n < 2 || windows < 2) return 0;
  cand *c = malloc(n * sizeof *c);
  if (!c) return 0;
  double best = INFINITY;
  for (size_t i = 0; i < n; i++) best = fmin(best, key[i]);
  size_t nc = 0;
  bool first_in = false;
  for (size_t i = 0; i < n; i++)
    if (key[i] <= best * (1 + thr)) {
      c[nc++] = (cand){i, key[i]};
      first_in |= i == 0;
    }
  qsort(c, nc, sizeof *c, cmp_cand);
  if (ncand) *ncand = nc;
  size_t ns = 0;
  if (nc >= 2) {
    size_t a = c[0].i, b = c[1].i;
    /* The first window's limit can decide the choice: it is one of the two. */
    if (first_in && a != 0 && b != 0) b = 0;
    /* The first window's limit last, else the best last (measured latest, as it will run). */
    bool swap = a == 0 || b != 0;
    seq[ns++] = swap ? b : a;
    seq[ns++] = swap ? a : b;
  }
  free(c);
  return ns;
}

size_t zeus__robust_window_count(double room, long warmup, long len, bool palindrome) {
  double per = (double)warmup + (double)len;
  if (!(per > 0) || room < per) return 0;
  size_t n = (size_t)floor(room / per);
  if (palindrome && room + (double)warmup >= 2 * per) n = 2 * (size_t)floor((room + (double)warmup) / (2 * per));
  return n;
}

bool zeus__robust_warm(const size_t *seq, size_t k, size_t nlimits) {
  return k > 0 ? seq[k] == seq[k - 1] : seq[0] + 1 == nlimits;
}

long zeus__robust_refine_len(const size_t *seq, size_t n, size_t nlimits, double room, long warmup, long len,
                             long cap) {
  if (n == 0) return len;
  size_t warms = 0;
  for (size_t k = 0; k < n; k++) warms += !zeus__robust_warm(seq, k, nlimits);
  double l = floor((room - (double)warms * (double)warmup) / (double)n);
  if (l > (double)cap) l = (double)cap;
  return l > (double)len ? (long)l : len;
}

double zeus__robust_remeasured_time(double sweep_s, bool first_window, double new_sum_s, long new_windows) {
  if (first_window || !(sweep_s > 0)) return new_windows > 0 ? new_sum_s / (double)new_windows : sweep_s;
  return (sweep_s + new_sum_s) / (double)(new_windows + 1);
}

/* P(N(0, 1) <= x). */
static double phi(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

/* P(N(mean, sd^2) >= 0), a certainty when sd is 0. */
static double p_nonneg(double mean, double sd) { return sd > 0 ? phi(mean / sd) : (mean >= 0 ? 1.0 : 0.0); }

double zeus__robust_decide_min(const double *key, const double *sd, size_t n, size_t c, double tol, double z,
                               bool *contender, double *pj) {
  double conf = 1;
  for (size_t j = 0; j < n; j++) {
    if (contender) contender[j] = false;
    if (pj) pj[j] = 1;
    if (j == c) continue;
    double s = hypot(sd[c], sd[j]);
    if (contender) contender[j] = key[j] - key[c] <= z * s;
    double q = p_nonneg((1 + tol) * key[j] - key[c], s);
    if (pj) pj[j] = q;
    conf *= q;
  }
  return conf;
}

double zeus__robust_decide_slowdown(const double *ratio, const double *sd, const double *energy, size_t n, size_t c,
                                    double factor, double z, bool *contender, double *pj) {
  double conf = c == 0 ? 1.0 : p_nonneg(factor * (1 + ZEUS__ROBUST_SLOWDOWN_TOL) - ratio[c], sd[c]);
  for (size_t j = 0; j < n; j++) {
    if (contender) contender[j] = j != c && j != 0 && fabs(ratio[j] - factor) <= z * sd[j];
    if (pj) pj[j] = j == c ? conf : 1;
    /* A lower limit with less energy that is within the factor after all would be the choice. */
    if (j > c && energy[j] < energy[c] / (1 + ZEUS__ROBUST_TOL)) {
      double q = p_nonneg(ratio[j] - factor, sd[j]);
      if (pj) pj[j] = q;
      conf *= q;
    }
  }
  return conf;
}

int zeus__robust_mode_from_env(bool *original) {
  static const char *const modes[] = {"robust", "original", NULL};
  int mode = 0;
  int rc = zeus__env_choice("ZEUS_PLO_PROFILING", modes, 0, &mode);
  if (!rc) *original = mode == 1;
  return rc;
}

/* rules.c: the learning-rate scaling rules, and small numeric helpers. */
#include <math.h>
#include <strings.h>

#include "bso/bso_internal.h"

double zeus__variance(const double *x, size_t n) {
  if (n < 2) return 0.0;
  double mean = 0;
  for (size_t i = 0; i < n; i++) mean += x[i];
  mean /= (double)n;
  double ss = 0;
  for (size_t i = 0; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
  return ss / (double)n;
}

int zeus_bso_scale_lr(const char *optimizer, double default_lr, long default_bs, long bs, double *lr) {
  if (default_bs <= 0 || bs <= 0)
    return zeus__error(ZEUS_EINVAL, "learning-rate scaling: batch sizes must be positive (default %ld, %ld)",
                       default_bs, bs);
  if (!isfinite(default_lr) || default_lr < 0)
    return zeus__error(ZEUS_EINVAL, "learning-rate scaling: default learning rate %g, expected a finite number >= 0",
                       default_lr);
  double ratio = (double)bs / (double)default_bs;
  if (optimizer && (strcasecmp(optimizer, "adam") == 0 || strcasecmp(optimizer, "adamw") == 0 ||
                    strcasecmp(optimizer, "adadelta") == 0)) {
    *lr = default_lr * sqrt(ratio);
    return ZEUS_OK;
  }
  if (optimizer && strcasecmp(optimizer, "sgd") == 0) {
    *lr = default_lr * ratio;
    return ZEUS_OK;
  }
  return zeus__error(ZEUS_EINVAL,
                     "learning-rate scaling: no rule for optimizer '%s' (known: adam, adamw, adadelta scale "
                     "by the square root of the batch-size ratio, sgd linearly); give the learning rate of "
                     "each batch size instead",
                     optimizer ? optimizer : "");
}


/* Optimum selectors of the power-limit optimizer (OptimumSelector and its four subclasses of the
 * original) and the Zeus time-energy cost. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "plo/plo_internal.h"

double zeus_cost(double energy_j, double time_s, double eta, double max_power_w) {
  return eta * energy_j + (1.0 - eta) * max_power_w * time_s;
}

int zeus_selector_energy(zeus_selector *out) {
  if (!out) return zeus__error(ZEUS_EINVAL, "zeus_selector_energy: out is required");
  memset(out, 0, sizeof *out);
  out->kind = ZEUS_SELECTOR_ENERGY;
  return ZEUS_OK;
}

int zeus_selector_time(zeus_selector *out) {
  if (!out) return zeus__error(ZEUS_EINVAL, "zeus_selector_time: out is required");
  memset(out, 0, sizeof *out);
  out->kind = ZEUS_SELECTOR_TIME;
  return ZEUS_OK;
}

int zeus_selector_zeus_cost(zeus_selector *out, double eta, unsigned world_size) {
  if (!out) return zeus__error(ZEUS_EINVAL, "zeus_selector_zeus_cost: out is required");
  zeus_selector s = {.kind = ZEUS_SELECTOR_ZEUS_COST, .eta = eta, .world_size = world_size};
  int rc = zeus__selector_check(&s);
  if (rc) return rc;
  *out = s;
  return ZEUS_OK;
}

int zeus_selector_max_slowdown(zeus_selector *out, double factor) {
  if (!out) return zeus__error(ZEUS_EINVAL, "zeus_selector_max_slowdown: out is required");
  zeus_selector s = {.kind = ZEUS_SELECTOR_MAX_SLOWDOWN, .factor = factor};
  int rc = zeus__selector_check(&s);
  if (rc) return rc;
  *out = s;
  return ZEUS_OK;
}

int zeus_selector_custom(zeus_selector *out, zeus_selector_fn fn, void *ctx) {
  if (!out) return zeus__error(ZEUS_EINVAL, "zeus_selector_custom: out is required");
  zeus_selector s = {.kind = ZEUS_SELECTOR_CUSTOM, .fn = fn, .ctx = ctx};
  int rc = zeus__selector_check(&s);
  if (rc) return rc;
  *out = s;
  return ZEUS_OK;
}

int zeus__selector_check(const zeus_selector *s) {
  switch (s->kind) {
    case ZEUS_SELECTOR_ENERGY:
    case ZEUS_SELECTOR_TIME:
      return ZEUS_OK;
    case ZEUS_SELECTOR_ZEUS_COST:
      if (!(s->eta >= 0.0 && s->eta <= 1.0))
        return zeus__error(ZEUS_EINVAL, "ZeusCost selector: eta %g is outside the allowed range [0, 1]", s->eta);
      if (s->world_size < 1)
        return zeus__error(ZEUS_EINVAL, "ZeusCost selector: world_size %u is outside the allowed range [1, %u]",
                           s->world_size, UINT_MAX);
      return ZEUS_OK;
    case ZEUS_SELECTOR_MAX_SLOWDOWN:
      if (!(s->factor >= 1.0) || isinf(s->factor))
        return zeus__error(ZEUS_EINVAL,
                           "MaxSlowdownConstraint selector: factor %g is outside the allowed range [1, inf) "
                           "(a finite number >= 1)",
                           s->factor);
      return ZEUS_OK;
    case ZEUS_SELECTOR_CUSTOM:
      if (!s->fn) return zeus__error(ZEUS_EINVAL, "custom selector: fn is NULL, expected a selector callback");
      return ZEUS_OK;
  }
  return zeus__error(ZEUS_EINVAL, "selector kind %d is not one of ENERGY, TIME, ZEUS_COST, MAX_SLOWDOWN, CUSTOM",
                     (int)s->kind);
}

const char *zeus__selector_name(const zeus_selector *s) {
  switch (s->kind) {
    case ZEUS_SELECTOR_ENERGY: return "Energy";
    case ZEUS_SELECTOR_TIME: return "Time";
    case ZEUS_SELECTOR_ZEUS_COST: return "ZeusCost";
    case ZEUS_SELECTOR_MAX_SLOWDOWN: return "MaxSlowdownConstraint";
    case ZEUS_SELECTOR_CUSTOM: return "custom";
  }
  return "unknown";
}

/* Index of the smallest key; ties go to the first (the original's min() over the list: with the
 * limits profiled from the highest down, the higher limit). */
static size_t argmin(const double *key, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; i++)
    if (key[i] < key[best]) best = i;
  return best;
}

int zeus_selector_select(const zeus_selector *s, const zeus_plo_measurement *m, size_t n, unsigned *out_w) {
  if (!s || !m || !out_w) return zeus__error(ZEUS_EINVAL, "zeus_selector_select: s, m and out_w are required");
  if (n == 0) return zeus__error(ZEUS_EINVAL, "%s selector: no measurements to choose from", zeus__selector_name(s));
  int rc = zeus__selector_check(s);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++) {
    if (m[i].power_limit_w == 0 || !isfinite(m[i].energy_j) || !isfinite(m[i].time_s))
      return zeus__error(ZEUS_EINVAL,
                         "%s selector: measurement %zu (power limit %u W, energy %g J, time %g s) is not a "
                         "positive limit with finite energy and time",
                         zeus__selector_name(s), i, m[i].power_limit_w, m[i].energy_j, m[i].time_s);
  }
  if (s->kind == ZEUS_SELECTOR_CUSTOM) {
    unsigned w = 0;
    rc = s->fn(s->ctx, m, n, &w);
    if (rc < 0) {
      if (zeus_errcode() != rc) return zeus__error(rc, "custom selector failed: %s", zeus_strerror(rc));
      return rc;
    }
    for (size_t i = 0; i < n; i++) {
      if (m[i].power_limit_w == w) {
        *out_w = w;
        return ZEUS_OK;
      }
    }
    return zeus__error(ZEUS_EINVAL, "custom selector chose %u W, which is not one of the %zu profiled power limits", w,
                       n);
  }

  unsigned max_w = 0;
  size_t at_max = 0;
  for (size_t i = 0; i < n; i++) {
    if (m[i].power_limit_w > max_w) {
      max_w = m[i].power_limit_w;
      at_max = i;
    }
  }
  if (s->kind == ZEUS_SELECTOR_MAX_SLOWDOWN) {
    double bound = s->factor * m[at_max].time_s;
    unsigned best = max_w; /* the largest limit always qualifies: factor >= 1 */
    for (size_t i = 0; i < n; i++)
      if (m[i].time_s <= bound && m[i].power_limit_w < best) best = m[i].power_limit_w;
    *out_w = best;
    return ZEUS_OK;
  }

  double stack_keys[64];
  double *key = n <= 64 ? stack_keys : malloc(n * sizeof *key);
  if (!key) return zeus__oom("choosing a power limit");
  double max_power_w = (double)max_w * (double)s->world_size;
  for (size_t i = 0; i < n; i++) {
    switch (s->kind) {
      case ZEUS_SELECTOR_ENERGY: key[i] = m[i].energy_j; break;
      case ZEUS_SELECTOR_TIME: key[i] = m[i].time_s; break;
      default: key[i] = zeus_cost(m[i].energy_j, m[i].time_s, s->eta, max_power_w); break;
    }
  }
  *out_w = m[argmin(key, n)].power_limit_w;
  if (key != stack_keys) free(key);
  return ZEUS_OK;
}

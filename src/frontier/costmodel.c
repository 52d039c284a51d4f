/* Cost models over an instruction's options: cost as a function of its duration in units.
 *
 * Exponential: cost(t) = a·e^(b·t) + c with a >= 0, least squared error. For a fixed b the
 * model is linear in (a, c), solved in closed form (a clamped at 0), so the fit is a 1-D
 * search over b: a grid of exponents, then golden-section refinement around the best. t is
 * measured from the fastest option's duration to keep e^(b·t) in range.
 * Hull: the lower convex hull of the options, linear between its vertices. */
#include <math.h>
#include <stdlib.h>

#include "frontier/frontier.h"

/* Least squares of y ≈ a·e^(b·x) + c for fixed b; returns the squared error. */
static double fit_linear(const zeus__fopts *o, double b, double *a_out, double *c_out) {
  size_t n = o->nopt;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < n; i++) {
    double x = exp(b * (double)(o->opt[i].quant - o->qmin)), y = o->opt[i].cost;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  double det = (double)n * sxx - sx * sx;
  double a = 0, c = sy / (double)n;
  if (det > 1e-12 * (double)n * sxx) {
    a = ((double)n * sxy - sx * sy) / det;
    c = (sy - a * sx) / (double)n;
    if (a < 0) {
      a = 0;
      c = sy / (double)n;
    }
  }
  double sse = 0;
  for (size_t i = 0; i < n; i++) {
    double r = a * exp(b * (double)(o->opt[i].quant - o->qmin)) + c - o->opt[i].cost;
    sse += r * r;
  }
  *a_out = a;
  *c_out = c;
  return sse;
}

static void fit_exponential(zeus__fopts *o) {
  o->a = 0;
  o->b = 0;
  o->c = o->opt[0].cost;
  if (o->nopt < 2) return;
  double span = (double)(o->qmax - o->qmin);
  enum { GRID = 241 };
  const double umax = 30.0; /* b·span in [−umax, umax] */
  double best = INFINITY, bbest = 0;
  int ibest = 0;
  for (int i = 0; i < GRID; i++) {
    double b = (-umax + 2.0 * umax * i / (GRID - 1)) / span, a, c;
    double sse = fit_linear(o, b, &a, &c);
    /* Ties (as with two options, which every exponent fits) go to the least curved model. */
    bool tie = fabs(sse - best) <= 1e-12 * (1.0 + best) && fabs(b) < fabs(bbest);
    if (i == 0 || sse < best - 1e-12 * (1.0 + best) || tie) {
      best = sse;
      bbest = b;
      ibest = i;
    }
  }
  /* Golden-section search between the neighbours of the best grid point. */
  double lo = (-umax + 2.0 * umax * (ibest > 0 ? ibest - 1 : 0) / (GRID - 1)) / span;
  double hi = (-umax + 2.0 * umax * (ibest < GRID - 1 ? ibest + 1 : GRID - 1) / (GRID - 1)) / span;
  const double g = 0.6180339887498949;
  double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo), a, c;
  double f1 = fit_linear(o, x1, &a, &c), f2 = fit_linear(o, x2, &a, &c);
  for (int k = 0; k < ZEUS__FIT_REFINE_STEPS; k++) {
    if (f1 < f2) {
      hi = x2; x2 = x1; f2 = f1;
      x1 = hi - g * (hi - lo);
      f1 = fit_linear(o, x1, &a, &c);
    } else {
      lo = x1; x1 = x2; f1 = f2;
      x2 = lo + g * (hi - lo);
      f2 = fit_linear(o, x2, &a, &c);
    }
  }
  double bref = f1 < f2 ? x1 : x2;
  if (fit_linear(o, bref, &a, &c) < best - 1e-12 * (1.0 + best)) bbest = bref;
  o->b = bbest;
  fit_linear(o, bbest, &o->a, &o->c);
}

static int fit_hull(zeus__fopts *o) {
  o->hull_q = malloc(o->nopt * sizeof *o->hull_q);
  o->hull_c = malloc(o->nopt * sizeof *o->hull_c);
  if (!o->hull_q || !o->hull_c) return zeus__oom("building the convex hull cost model");
  size_t h = 0;
  for (size_t i = 0; i < o->nopt; i++) {
    double q = (double)o->opt[i].quant, c = o->opt[i].cost;
    /* Pop while the last two vertices and this point do not turn left (counter-clockwise). */
    while (h >= 2) {
      double ax = (double)o->hull_q[h - 2], ay = o->hull_c[h - 2];
      double bx = (double)o->hull_q[h - 1], by = o->hull_c[h - 1];
      double cross = (bx - ax) * (c - ay) - (by - ay) * (q - ax);
      if (cross > 0) break;
      h--;
    }
    o->hull_q[h] = o->opt[i].quant;
    o->hull_c[h] = c;
    h++;
  }
  o->nhull = h;
  return ZEUS_OK;
}

double zeus__costmodel_eval(const zeus__fopts *o, double q) {
  if (o->model == ZEUS_FRONTIER_COST_HULL) {
    if (o->nhull == 1 || q <= (double)o->hull_q[0]) return o->hull_c[0];
    for (size_t i = 1; i < o->nhull; i++) {
      if (q <= (double)o->hull_q[i]) {
        double q0 = (double)o->hull_q[i - 1], q1 = (double)o->hull_q[i];
        double w = (q - q0) / (q1 - q0);
        return o->hull_c[i - 1] + w * (o->hull_c[i] - o->hull_c[i - 1]);
      }
    }
    return o->hull_c[o->nhull - 1];
  }
  return o->a * exp(o->b * (q - (double)o->qmin)) + o->c;
}

int zeus__costmodel_fit(zeus__fopts *o) {
  if (o->model == ZEUS_FRONTIER_COST_HULL) {
    int rc = fit_hull(o);
    if (rc) return rc;
  } else {
    fit_exponential(o);
  }
  size_t len = (size_t)(o->qmax - o->qmin + 1);
  o->table = malloc(len * sizeof *o->table);
  if (!o->table) return zeus__oom("tabulating a cost model");
  for (size_t i = 0; i < len; i++) o->table[i] = zeus__costmodel_eval(o, (double)(o->qmin + (long)i));
  return ZEUS_OK;
}

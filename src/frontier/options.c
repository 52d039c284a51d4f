/* Execution options of one (stage, instruction): quantised, costed, Pareto-filtered. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontier/frontier.h"

static const char *const kind_names[2] = {"forward", "backward"};

long zeus__frontier_quantise(double time_s, double unit_s) {
  return (long)floor(time_s / unit_s + ZEUS__QUANT_EPS);
}

static int by_time(const void *pa, const void *pb) {
  const zeus__fopt *a = pa, *b = pb;
  if (a->time_s != b->time_s) return a->time_s < b->time_s ? -1 : 1;
  return (a->freq_mhz > b->freq_mhz) ? -1 : (a->freq_mhz < b->freq_mhz);
}

/* Keeps, of options sorted fastest first, those no faster option dominates. With noise < 1
 * a faster option dominates only when its cost is clearly (by the factor) lower. */
static size_t pareto(const zeus__fopt *in, size_t n, double noise, zeus__fopt *out) {
  size_t k = 0;
  double best = INFINITY; /* lowest cost of the faster options */
  for (size_t i = 0; i < n; i++) {
    double c = in[i].cost;
    bool dominated = noise >= 1.0 ? best <= c : best < c - (1.0 - noise) * fabs(c);
    if (!dominated) out[k++] = in[i];
    if (c < best) best = c;
  }
  return k;
}

/* Measured effective cost (energy − blocking power × measured time) of every option and a
 * sparse table of its range minima: rmq[k·nopt + i] = the index of the least cost among
 * options i .. i + 2^k − 1. */
static int build_reclaim(zeus__fopts *o, double pb) {
  size_t n = o->nopt, levels = 1;
  while (((size_t)1 << levels) <= n) levels++;
  o->rcost = malloc(n * sizeof *o->rcost);
  o->rmq = malloc(levels * n * sizeof *o->rmq);
  if (!o->rcost || !o->rmq) return zeus__oom("building execution options");
  for (size_t i = 0; i < n; i++) {
    o->rcost[i] = o->opt[i].energy_j - pb * o->opt[i].time_s;
    o->rmq[i] = (int)i;
  }
  for (size_t k = 1; k < levels; k++) {
    size_t half = (size_t)1 << (k - 1);
    for (size_t i = 0; i + 2 * half <= n; i++) {
      int a = o->rmq[(k - 1) * n + i], b = o->rmq[(k - 1) * n + i + half];
      o->rmq[k * n + i] = o->rcost[b] < o->rcost[a] ? b : a;
    }
  }
  return ZEUS_OK;
}

size_t zeus__fopts_reclaim(const zeus__fopts *o, size_t cur, double room_s) {
  /* Options run fastest first: the slowest that fits is the last with time <= room. */
  size_t lo = cur, hi = o->nopt;
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (o->opt[mid].time_s <= room_s + ZEUS__TIME_EPS) lo = mid;
    else hi = mid;
  }
  if (lo == cur) return cur;
  size_t a = cur + 1, len = lo - cur, k = 0, n = o->nopt;
  while (((size_t)2 << k) <= len) k++;
  int i = o->rmq[k * n + a], j = o->rmq[k * n + lo + 1 - ((size_t)1 << k)];
  size_t best = (size_t)(o->rcost[j] < o->rcost[i] ? j : i);
  return o->rcost[best] < o->rcost[cur] ? best : cur;
}

int zeus__fopts_build(zeus__fopts *o, const zeus_frontier_profile *p, int stage,
                      zeus_frontier_instr kind, const zeus_frontier_opts *opts) {
  memset(o, 0, sizeof *o);
  o->stage = stage;
  o->kind = kind;
  o->model = opts->cost_model;
  double unit = opts->unit_time_s, pb = opts->blocking_power_w;
  size_t n = 0;
  for (size_t r = 0; r < p->nrows[kind]; r++) n += p->row_stage[kind][r] == stage;
  if (n == 0)
    return zeus__error(ZEUS_EINVAL, "%s: stage %d has no options for %s", p->name, stage, kind_names[kind]);
  zeus__fopt *all = calloc(n, sizeof *all), *kept = calloc(n, sizeof *kept);
  if (!all || !kept) {
    free(all);
    free(kept);
    return zeus__oom("building execution options");
  }
  size_t k = 0;
  for (size_t r = 0; r < p->nrows[kind]; r++) {
    if (p->row_stage[kind][r] != stage) continue;
    const zeus__fmeas *m = &p->rows[kind][r];
    zeus__fopt *x = &all[k++];
    x->freq_mhz = m->freq_mhz;
    x->time_s = m->time_s;
    x->energy_j = m->energy_j;
    x->quant = zeus__frontier_quantise(m->time_s, unit);
    x->cost = m->energy_j - pb * (double)x->quant * unit;
    if (x->quant < 1) {
      int rc = zeus__error(ZEUS_EINVAL,
                           "%s: stage %d %s at %d MHz takes %g s, less than one time unit (%g s); "
                           "use a smaller unit time",
                           p->name, stage, kind_names[kind], m->freq_mhz, m->time_s, unit);
      free(all);
      free(kept);
      return rc;
    }
  }
  qsort(all, n, sizeof *all, by_time);
  /* The filter compares x->cost: the effective cost, or (as the original) the energy. */
  bool by_energy = opts->pareto == ZEUS_FRONTIER_PARETO_ENERGY;
  if (by_energy)
    for (size_t i = 0; i < n; i++) all[i].cost = all[i].energy_j;
  size_t nk = pareto(all, n, 1.0, kept);
  if (nk <= 3 && nk < n) nk = pareto(all, n, opts->noise_factor, kept);
  if (by_energy)
    for (size_t i = 0; i < nk; i++) kept[i].cost = kept[i].energy_j - pb * (double)kept[i].quant * unit;
  /* One option per time unit: the fastest (first in time order). */
  size_t w = 0;
  for (size_t i = 0; i < nk; i++)
    if (w == 0 || kept[i].quant != kept[w - 1].quant) kept[w++] = kept[i];
  free(all);
  o->opt = kept;
  o->nopt = w;
  o->qmin = kept[0].quant;
  o->qmax = kept[w - 1].quant;
  o->pick = malloc((size_t)(o->qmax - o->qmin + 1) * sizeof *o->pick);
  if (!o->pick) {
    zeus__fopts_free(o);
    return zeus__oom("building execution options");
  }
  for (size_t i = 0, j = 0; i < (size_t)(o->qmax - o->qmin + 1); i++) {
    while (j + 1 < w && kept[j + 1].quant <= o->qmin + (long)i) j++;
    o->pick[i] = (int)j;
  }
  int rc = build_reclaim(o, pb);
  if (!rc) rc = zeus__costmodel_fit(o);
  if (rc) zeus__fopts_free(o);
  return rc;
}

void zeus__fopts_free(zeus__fopts *o) {
  if (!o) return;
  free(o->opt);
  free(o->hull_q);
  free(o->hull_c);
  free(o->table);
  free(o->pick);
  free(o->rcost);
  free(o->rmq);
  memset(o, 0, sizeof *o);
}

const zeus__fopt *zeus__fopts_pick(const zeus__fopts *o, long q) {
  if (q <= o->qmin) return &o->opt[0];
  if (q >= o->qmax) return &o->opt[o->nopt - 1];
  return &o->opt[o->pick[q - o->qmin]];
}

int zeus__fopts_dump(const zeus__fopts *o, zeus__buf *b) {
  int rc = zeus__buf_printf(b, "stage %d %s: %zu options, quant %ld..%ld\n", o->stage,
                            kind_names[o->kind], o->nopt, o->qmin, o->qmax);
  for (size_t i = 0; i < o->nopt && !rc; i++)
    rc = zeus__buf_printf(b, "  option %d MHz time %.6f s quant %ld cost %.6f J\n", o->opt[i].freq_mhz,
                          o->opt[i].time_s, o->opt[i].quant, o->opt[i].cost);
  if (!rc && o->model == ZEUS_FRONTIER_COST_HULL) {
    rc = zeus__buf_puts(b, "  hull");
    for (size_t i = 0; i < o->nhull && !rc; i++)
      rc = zeus__buf_printf(b, " (%ld, %.6f)", o->hull_q[i], o->hull_c[i]);
    if (!rc) rc = zeus__buf_puts(b, "\n");
  } else if (!rc) {
    rc = zeus__buf_printf(b, "  exponential a %.6g b %.6g c %.6g (t from %ld)\n", o->a, o->b, o->c, o->qmin);
  }
  return rc;
}

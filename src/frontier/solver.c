/* Phillips–Dessouky: the time–cost frontier of the pipeline DAG by iterative minimum cuts.
 *
 * Every instruction starts at its slowest option. Each iteration finds the critical sub-DAG
 * (zero slack, integer time units), turns it into a flow network (instruction v becomes an
 * edge in(v) → out(v) whose upper bound is the model's cost of making v one unit faster,
 * infinite at its fastest option, and whose lower bound is the saving of making v one unit
 * slower, zero at its slowest; DAG edges are unbounded), and takes a minimum cut: instructions
 * cut forwards run one unit faster, those cut backwards one unit slower. Every critical path
 * crosses the cut forwards once more than backwards, so the iteration time falls by a unit.
 * A slowed instruction can lengthen a path that had exactly one unit of slack; when that
 * keeps the iteration time from falling, the slowdowns on the new critical path are undone
 * (without slowdowns the time always falls). The loop ends when every cut is infinite: a
 * critical path runs entirely at the fastest options.
 *
 * The flow network is numbered by the DAG's topological order and keeps its edges' keys from
 * iteration to iteration, so each minimum cut starts from the last one's flow (maxflow.c).
 * Each recorded point's clocks then reclaim the slack of the measured schedule
 * (reclaim_slack) unless the options ask to keep the durations' own clocks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontier/frontier.h"

typedef struct pd_state {
  zeus_frontier *f;
  int n;
  int32_t *dur;
  long *es, *lf;
  int *cid; /* critical node -> index among critical nodes, or −1 */
  int *crit;
  int *pos;  /* node -> its index in the DAG's topological order */
  zeus__lbedge *edges;
  int edges_cap;
  unsigned char *side, *slowed;
  double *evt, *eve; /* measured time and energy per node for evaluation */
  int *optix;        /* per node: index of its option in the plan being recorded */
  double *rs, *rf;   /* slack reclamation: earliest starts, latest finishes (measured) */
  double *scratch;   /* 2n: the evaluation's starts and finishes */
  int32_t *rec;      /* the plan being recorded: each node's option quant */
  zeus__mincut cut;
} pd_state;

static double node_cost(const zeus_frontier *f, int v, long d) {
  const zeus__fopts *o = &f->fo[f->node_fo[v]];
  return o->table[d - o->qmin];
}

/* Earliest starts and latest finishes; returns the makespan in units. */
static long schedule(pd_state *st) {
  const zeus__fdag *d = &st->f->dag;
  for (int i = 0; i < d->n; i++) {
    int v = d->topo[i];
    long es = 0;
    for (int k = d->pred_off[v]; k < d->pred_off[v + 1]; k++) {
      int u = d->pred[k];
      if (st->es[u] + st->dur[u] > es) es = st->es[u] + st->dur[u];
    }
    st->es[v] = es;
  }
  long T = st->es[d->n - 1] + st->dur[d->n - 1];
  for (int i = d->n - 1; i >= 0; i--) {
    int v = d->topo[i];
    long lf = T;
    for (int k = d->succ_off[v]; k < d->succ_off[v + 1]; k++) {
      int w = d->succ[k];
      if (st->lf[w] - st->dur[w] < lf) lf = st->lf[w] - st->dur[w];
    }
    st->lf[v] = lf;
  }
  return T;
}

static bool is_critical(const pd_state *st, int v) { return st->es[v] + st->dur[v] == st->lf[v]; }

/* Slack reclamation on the measured times evt[] of the plan's clocks (see
 * ZEUS_FRONTIER_SLACK_RECLAIM). One pass in reverse topological order: a node's latest finish
 * lf comes from its successors' latest starts with their final times, its earliest start es
 * from the plan before the pass; giving it the slowest option of least measured effective cost
 * that takes at most lf − es keeps the as-late-as-possible schedule within the plan's
 * makespan (every predecessor still finishes by the node's latest start), so the iteration
 * time cannot grow and the energy, Σ energy + blocking power × (S × makespan − Σ time),
 * cannot rise. Updates evt[], eve[] and the recorded option quants rec[]. */
static void reclaim_slack(pd_state *st, int32_t *rec) {
  const zeus_frontier *f = st->f;
  const zeus__fdag *d = &f->dag;
  int n = st->n;
  double *es = st->rs, *lf = st->rf;
  for (int i = 0; i < n; i++) {
    int v = d->topo[i];
    double e = 0;
    for (int k = d->pred_off[v]; k < d->pred_off[v + 1]; k++) {
      int u = d->pred[k];
      if (es[u] + st->evt[u] > e) e = es[u] + st->evt[u];
    }
    es[v] = e;
  }
  double makespan = es[n - 1];
  for (int i = n - 1; i >= 0; i--) {
    int v = d->topo[i];
    double l = makespan;
    for (int k = d->succ_off[v]; k < d->succ_off[v + 1]; k++) {
      int w = d->succ[k];
      if (lf[w] - st->evt[w] < l) l = lf[w] - st->evt[w];
    }
    lf[v] = l;
    if (v == 0 || v == n - 1) continue;
    const zeus__fopts *fo = &f->fo[f->node_fo[v]];
    size_t cur = (size_t)st->optix[v], best = zeus__fopts_reclaim(fo, cur, l - es[v]);
    if (best == cur) continue;
    st->evt[v] = fo->opt[best].time_s;
    st->eve[v] = fo->opt[best].energy_j;
    rec[v] = (int32_t)fo->opt[best].quant;
  }
}

static int record_point(pd_state *st, long T) {
  zeus_frontier *f = st->f;
  int n = st->n;
  if (f->npts == f->cappts) {
    size_t cap = f->cappts ? 2 * f->cappts : 256;
    zeus_frontier_point *p = realloc(f->pts, cap * sizeof *p);
    if (!p) return zeus__oom("recording frontier points");
    f->pts = p;
    f->cappts = cap;
  }
  double cost = 0;
  int32_t *rec = st->rec;
  st->evt[0] = st->eve[0] = st->evt[n - 1] = st->eve[n - 1] = 0;
  rec[0] = rec[n - 1] = 0;
  for (int v = 1; v < n - 1; v++) {
    cost += node_cost(f, v, st->dur[v]);
    const zeus__fopts *fo = &f->fo[f->node_fo[v]];
    const zeus__fopt *o = zeus__fopts_pick(fo, st->dur[v]);
    st->evt[v] = o->time_s;
    st->eve[v] = o->energy_j;
    st->optix[v] = (int)(o - fo->opt);
    rec[v] = (int32_t)o->quant;
  }
  if (f->opts.slack == ZEUS_FRONTIER_SLACK_RECLAIM) reclaim_slack(st, rec);
  int rc = zeus__fplans_push(&f->plans, rec);
  if (rc) return rc;
  zeus_frontier_point *p = &f->pts[f->npts];
  p->iteration = (long)f->npts;
  p->time_units = T;
  p->time_s = (double)T * f->opts.unit_time_s;
  p->cost_j = cost;
  p->cost_with_blocking_j = cost + f->opts.blocking_power_w * f->opts.stages * p->time_s;
  p->dominated = false;
  zeus__fdag_evaluate_buf(&f->dag, st->evt, st->eve, f->opts.blocking_power_w, st->scratch, &p->eval_time_s,
                          &p->eval_energy_j);
  f->npts++;
  return ZEUS_OK;
}

/* One Phillips–Dessouky step from makespan T. Returns 1 when the time fell, 0 when no finite
 * cut remains, < 0 on error. */
static int pd_step(pd_state *st, long T, long *T_new) {
  zeus_frontier *f = st->f;
  const zeus__fdag *d = &f->dag;
  int n = st->n, nc = 0, m = 0;
  for (int v = 0; v < n; v++) {
    st->cid[v] = -1;
    if (is_critical(st, v)) {
      st->cid[v] = nc;
      st->crit[nc++] = v;
    }
  }
  /* Edges: one per critical node, one per tight DAG edge between critical nodes. Flow nodes
   * are numbered by the DAG's topological order (in(v) = 2·pos(v), out(v) = in(v) + 1), so the
   * network is in topological order and every edge keeps its key (instruction v: v; DAG edge
   * k: n + k) from iteration to iteration, which lets the minimum cut start from the last
   * iteration's flow. */
  int need = nc;
  for (int i = 0; i < nc; i++) need += d->succ_off[st->crit[i] + 1] - d->succ_off[st->crit[i]];
  if (need > st->edges_cap) {
    zeus__lbedge *e = realloc(st->edges, (size_t)need * sizeof *e);
    if (!e) return zeus__oom("building the flow network");
    st->edges = e;
    st->edges_cap = need;
  }
  const int *pos = st->pos;
  for (int i = 0; i < nc; i++) {
    int v = st->crit[i];
    zeus__lbedge *e = &st->edges[m++];
    *e = (zeus__lbedge){2 * pos[v], 2 * pos[v] + 1, 0, INFINITY, v};
    if (v == 0 || v == n - 1) continue;
    const zeus__fopts *o = &f->fo[f->node_fo[v]];
    long dv = st->dur[v];
    double c = node_cost(f, v, dv);
    if (dv > o->qmin) {
      e->ub = node_cost(f, v, dv - 1) - c;
      if (e->ub < 0) e->ub = 0;
    }
    if (dv < o->qmax) {
      e->lb = c - node_cost(f, v, dv + 1);
      if (e->lb < 0) e->lb = 0;
      if (e->lb > e->ub) e->lb = e->ub;
    }
  }
  for (int i = 0; i < nc; i++) {
    int u = st->crit[i];
    for (int k = d->succ_off[u]; k < d->succ_off[u + 1]; k++) {
      int w = d->succ[k];
      if (st->cid[w] < 0 || st->es[u] + st->dur[u] != st->es[w]) continue;
      st->edges[m++] = (zeus__lbedge){2 * pos[u] + 1, 2 * pos[w], 0, INFINITY, n + k};
    }
  }
  double value;
  int rc = zeus__mincut_lb(&st->cut, 2 * n, st->edges, m, 2 * pos[0], 2 * pos[n - 1] + 1, st->side, &value);
  if (rc <= 0) return rc;
  int nslow = 0;
  for (int i = 0; i < nc; i++) {
    int v = st->crit[i];
    st->slowed[v] = 0;
    if (v == 0 || v == n - 1) continue;
    const unsigned char *sd = st->side + 2 * pos[v];
    if (sd[0] && !sd[1]) {
      st->dur[v]--;
    } else if (!sd[0] && sd[1]) {
      st->dur[v]++;
      st->slowed[v] = 1;
      nslow++;
    }
  }
  long Tn = schedule(st);
  while (Tn > T - 1 && nslow > 0) {
    /* Undo the slowdowns on the new critical path. */
    for (int i = 0; i < nc; i++) {
      int v = st->crit[i];
      if (st->slowed[v] && is_critical(st, v)) {
        st->dur[v]--;
        st->slowed[v] = 0;
        nslow--;
      }
    }
    Tn = schedule(st);
  }
  if (Tn >= T)
    return zeus__error(ZEUS_EINTERNAL, "a minimum cut did not shorten the iteration (%ld units)", T);
  *T_new = Tn;
  return 1;
}

static int check_opts(const zeus_frontier_profile *p, const zeus_frontier_opts *in, zeus_frontier_opts *o) {
  if (!in) return zeus__error(ZEUS_EINVAL, "frontier options are NULL");
  *o = *in;
  if (o->stages < 1) return zeus__error(ZEUS_EINVAL, "stages: %d, expected at least 1", o->stages);
  if (o->microbatches < 1)
    return zeus__error(ZEUS_EINVAL, "microbatches: %d, expected at least 1", o->microbatches);
  /* Fewer microbatches than stages is a valid, if bubble-heavy, 1F1B pipeline, but far more
   * often the two counts were swapped: refused unless asked for. */
  if (o->microbatches < o->stages && !o->allow_fewer_microbatches)
    return zeus__error(ZEUS_EINVAL,
                       "microbatches: %d is fewer than the %d stages (were the counts swapped?); a pipeline "
                       "that never reaches 1F1B's steady state must be asked for with "
                       "allow_fewer_microbatches (--allow-fewer-microbatches)",
                       o->microbatches, o->stages);
  if (o->microbatches > 100000)
    return zeus__error(ZEUS_EINVAL, "microbatches: %d is more than 100000", o->microbatches);
  if (2L * o->stages * o->microbatches > ZEUS__FRONTIER_MAX_INSTRUCTIONS)
    return zeus__error(ZEUS_ERANGE,
                       "%d stages x %d microbatches make %ld instructions, more than the limit of %ld "
                       "(about 0.5 KB of memory each): use fewer microbatches",
                       o->stages, o->microbatches, 2L * o->stages * o->microbatches,
                       (long)ZEUS__FRONTIER_MAX_INSTRUCTIONS);
  if (p->nstages < o->stages)
    return zeus__error(ZEUS_EINVAL, "%s has %d stage%s, fewer than the %d stages asked for", p->name,
                       p->nstages, p->nstages == 1 ? "" : "s", o->stages);
  if (!isfinite(o->blocking_power_w) || o->blocking_power_w < 0)
    return zeus__error(ZEUS_EINVAL, "blocking power: %g W, expected a non-negative number", o->blocking_power_w);
  if (o->unit_time_s == 0) o->unit_time_s = 0.001;
  if (!isfinite(o->unit_time_s) || o->unit_time_s <= 0 || o->unit_time_s > 1000)
    return zeus__error(ZEUS_EINVAL, "unit time: %g s, expected a positive number of seconds", o->unit_time_s);
  if (o->noise_factor == 0) o->noise_factor = 0.95;
  if (!(o->noise_factor > 0 && o->noise_factor <= 1))
    return zeus__error(ZEUS_EINVAL, "noise factor: %g, expected a number in (0, 1]", o->noise_factor);
  if (o->cost_model != ZEUS_FRONTIER_COST_EXPONENTIAL && o->cost_model != ZEUS_FRONTIER_COST_HULL)
    return zeus__error(ZEUS_EINVAL, "cost model: %d is not one of the known models", (int)o->cost_model);
  if (o->pareto != ZEUS_FRONTIER_PARETO_EFFECTIVE && o->pareto != ZEUS_FRONTIER_PARETO_ENERGY)
    return zeus__error(ZEUS_EINVAL, "pareto filter: %d is not one of the known filters", (int)o->pareto);
  if (o->slack != ZEUS_FRONTIER_SLACK_RECLAIM && o->slack != ZEUS_FRONTIER_SLACK_KEEP)
    return zeus__error(ZEUS_EINVAL, "slack: %d is not one of the known modes", (int)o->slack);
  if (o->max_iterations < 0)
    return zeus__error(ZEUS_EINVAL, "max iterations: %ld is negative", o->max_iterations);
  return ZEUS_OK;
}

void zeus_frontier_free(zeus_frontier *f) {
  if (!f) return;
  if (f->fo)
    for (int i = 0; i < 2 * f->opts.stages; i++) zeus__fopts_free(&f->fo[i]);
  free(f->fo);
  free(f->node_fo);
  zeus__fdag_free(&f->dag);
  free(f->pts);
  zeus__fplans_free(&f->plans);
  free(f->profile_name);
  free(f);
}

static void state_free(pd_state *st) {
  free(st->dur);
  free(st->es);
  free(st->lf);
  free(st->cid);
  free(st->crit);
  free(st->edges);
  free(st->side);
  free(st->slowed);
  free(st->evt);
  free(st->eve);
  free(st->optix);
  free(st->rs);
  free(st->rf);
  free(st->pos);
  free(st->scratch);
  free(st->rec);
  zeus__mincut_free(&st->cut);
}

/* The time units between the fastest and slowest measurement of each (stage, instruction),
 * summed, and the clock range, from the profile before any option is built: a unit time far
 * below the profile's resolution would make the cost tables (one entry per unit) huge. */
static int check_quanta(zeus_frontier *f, const zeus_frontier_profile *p) {
  const zeus_frontier_opts *o = &f->opts;
  double total = 0, worst = 0;
  f->clock_min_mhz = 0;
  f->clock_max_mhz = 0;
  for (int s = 0; s < o->stages; s++)
    for (int k = 0; k < 2; k++) {
      double lo = INFINITY, hi = -INFINITY;
      for (size_t r = 0; r < p->nrows[k]; r++) {
        if (p->row_stage[k][r] != s) continue;
        const zeus__fmeas *m = &p->rows[k][r];
        lo = fmin(lo, m->time_s);
        hi = fmax(hi, m->time_s);
        if (f->clock_min_mhz == 0 || m->freq_mhz < f->clock_min_mhz) f->clock_min_mhz = m->freq_mhz;
        if (m->freq_mhz > f->clock_max_mhz) f->clock_max_mhz = m->freq_mhz;
      }
      if (lo > hi) continue; /* no options: zeus__fopts_build names it */
      total += (hi - lo) / o->unit_time_s + 1;
      worst = fmax(worst, hi / o->unit_time_s);
    }
  if (worst > (double)INT32_MAX / 4 || total > (double)ZEUS__FRONTIER_MAX_QUANTA)
    return zeus__error(ZEUS_ERANGE,
                       "unit time %g s: the options of %s span %.4g time units (up to %.4g in one "
                       "instruction), more than the limit of %ld; use a larger unit time (the profile's "
                       "times differ by far more than it)",
                       o->unit_time_s, p->name, total, worst, (long)ZEUS__FRONTIER_MAX_QUANTA);
  return ZEUS_OK;
}

/* The number of points the solve can record (the time range in units + 1, or max_iterations),
 * refused above the limit; a warning when the work looks like more than a minute. */
static int check_points(pd_state *st, long T0, long Tmin, size_t *max_points) {
  const zeus_frontier *f = st->f;
  const zeus_frontier_opts *o = &f->opts;
  long range = T0 - Tmin + 1;
  if (range < 1) range = 1;
  long most = o->max_iterations > 0 && o->max_iterations < range ? o->max_iterations : range;
  if (most > ZEUS__FRONTIER_MAX_POINTS)
    return zeus__error(ZEUS_ERANGE,
                       "the frontier would have up to %ld points (%.6g s down to %.6g s in units of %g s), "
                       "more than the limit of %ld: use a larger unit time, or bound the points with "
                       "max_iterations (--max-iterations)",
                       range, (double)T0 * o->unit_time_s, (double)Tmin * o->unit_time_s, o->unit_time_s,
                       (long)ZEUS__FRONTIER_MAX_POINTS);
  *max_points = (size_t)most;
  /* About 0.1 µs per instruction and point on a 2020s server core (Bloom on A40, 8 x 512). */
  double est_s = 1e-7 * (double)most * (double)st->n;
  if (est_s > 60)
    zeus__log(ZEUS_LOG_WARN, "frontier",
              "up to %ld points over %d instructions: expect about %.0f minutes; a larger unit time or "
              "max_iterations (--max-iterations) shortens it",
              most, st->n - 2, ceil(est_s / 60));
  return ZEUS_OK;
}

typedef struct dom_key {
  double t, e;
  size_t i;
} dom_key;

static int by_time_then_energy(const void *pa, const void *pb) {
  const dom_key *a = pa, *b = pb;
  if (a->t != b->t) return a->t < b->t ? -1 : 1;
  if (a->e != b->e) return a->e < b->e ? -1 : 1;
  return (a->i > b->i) - (a->i < b->i);
}

/* Marks the points whose evaluated (time, energy) another point weakly dominates: no slower,
 * no costlier, better in one. Sorted by time, a point is dominated when an earlier time has
 * energy <= its own, or its own time has a lower energy. */
static int mark_dominated(zeus_frontier *f) {
  dom_key *k = malloc(f->npts * sizeof *k);
  if (!k) return zeus__oom("marking dominated points");
  for (size_t i = 0; i < f->npts; i++) k[i] = (dom_key){f->pts[i].eval_time_s, f->pts[i].eval_energy_j, i};
  qsort(k, f->npts, sizeof *k, by_time_then_energy);
  double best_before = INFINITY; /* least energy at strictly smaller times */
  for (size_t g = 0; g < f->npts;) {
    size_t h = g;
    while (h < f->npts && k[h].t == k[g].t) h++;
    double group_min = k[g].e; /* sorted by energy within a time */
    for (size_t j = g; j < h; j++) f->pts[k[j].i].dominated = best_before <= k[j].e || group_min < k[j].e;
    if (group_min < best_before) best_before = group_min;
    g = h;
  }
  free(k);
  return ZEUS_OK;
}

int zeus_frontier_solve(zeus_frontier **out, const zeus_frontier_profile *p, const zeus_frontier_opts *opts) {
  if (!out || !p) return zeus__error(ZEUS_EINVAL, "zeus_frontier_solve: NULL argument");
  zeus_frontier_opts o;
  int rc = check_opts(p, opts, &o);
  if (rc) return rc;
  zeus_frontier *f = calloc(1, sizeof *f);
  pd_state st = {0};
  if (!f) return zeus__oom("solving the frontier");
  f->opts = o;
  if (!(f->profile_name = strdup(p->name))) {
    rc = zeus__oom("solving the frontier");
    goto done;
  }
  if ((rc = check_quanta(f, p))) goto done;
  if ((rc = zeus__fdag_build(&f->dag, o.stages, o.microbatches))) goto done;
  int n = st.n = f->dag.n;
  if ((rc = zeus__fplans_init(&f->plans, n))) goto done;
  f->fo = calloc(2 * (size_t)o.stages, sizeof *f->fo);
  f->node_fo = malloc((size_t)n * sizeof *f->node_fo);
  if (!f->fo || !f->node_fo) {
    rc = zeus__oom("solving the frontier");
    goto done;
  }
  for (int s = 0; s < o.stages; s++)
    for (int k = 0; k < 2; k++)
      if ((rc = zeus__fopts_build(&f->fo[2 * s + k], p, s, (zeus_frontier_instr)k, &o))) goto done;
  st.f = f;
  st.dur = malloc((size_t)n * sizeof *st.dur);
  st.es = malloc((size_t)n * sizeof *st.es);
  st.lf = malloc((size_t)n * sizeof *st.lf);
  st.cid = malloc((size_t)n * sizeof *st.cid);
  st.crit = malloc((size_t)n * sizeof *st.crit);
  st.pos = malloc((size_t)n * sizeof *st.pos);
  st.side = malloc(2 * (size_t)n);
  st.slowed = calloc((size_t)n, 1);
  st.evt = malloc((size_t)n * sizeof *st.evt);
  st.eve = malloc((size_t)n * sizeof *st.eve);
  st.optix = malloc((size_t)n * sizeof *st.optix);
  st.rs = malloc((size_t)n * sizeof *st.rs);
  st.rf = malloc((size_t)n * sizeof *st.rf);
  st.scratch = malloc(2 * (size_t)n * sizeof *st.scratch);
  st.rec = malloc((size_t)n * sizeof *st.rec);
  if (!st.dur || !st.es || !st.lf || !st.cid || !st.crit || !st.pos || !st.side || !st.slowed || !st.evt ||
      !st.eve || !st.optix || !st.rs || !st.rf || !st.scratch || !st.rec) {
    rc = zeus__oom("solving the frontier");
    goto done;
  }
  for (int i = 0; i < n; i++) st.pos[f->dag.topo[i]] = i;
  /* The all-fastest iteration time first (where the solve will end), then the all-slowest. */
  for (int v = 0; v < n; v++) {
    f->node_fo[v] = (v == 0 || v == n - 1) ? -1 : 2 * f->dag.stage[v] + (int)f->dag.kind[v];
    st.dur[v] = v == 0 || v == n - 1 ? 0 : (int32_t)f->fo[f->node_fo[v]].qmin;
  }
  long Tmin = schedule(&st);
  for (int v = 1; v < n - 1; v++) st.dur[v] = (int32_t)f->fo[f->node_fo[v]].qmax;
  long T = schedule(&st);
  zeus_frontier_progress prog = {.slowest_time_s = (double)T * o.unit_time_s,
                                 .fastest_time_s = (double)Tmin * o.unit_time_s};
  if ((rc = check_points(&st, T, Tmin, &prog.max_points))) goto done;
  if ((rc = record_point(&st, T))) goto done;
  for (;;) {
    if (o.progress) {
      prog.points = f->npts;
      prog.time_s = f->pts[f->npts - 1].time_s;
      if (o.progress(&prog, o.progress_ctx) != 0) {
        zeus__log(ZEUS_LOG_INFO, "frontier", "stopped by the progress callback after %zu points", f->npts);
        break;
      }
    }
    if (o.max_iterations > 0 && (long)f->npts >= o.max_iterations) break;
    long Tn = T;
    rc = pd_step(&st, T, &Tn);
    if (rc < 0) goto done;
    if (rc == 0) break;
    T = Tn;
    if ((rc = record_point(&st, T))) goto done;
  }
  if ((rc = mark_dominated(f))) goto done;
  size_t ndom = 0;
  for (size_t i = 0; i < f->npts; i++) ndom += f->pts[i].dominated;
  zeus__log(ZEUS_LOG_INFO, "frontier", "%zu points from %.3f s to %.3f s, %zu dominated; plans in %zu KiB",
            f->npts, f->pts[0].time_s, f->pts[f->npts - 1].time_s, ndom, zeus__fplans_bytes(&f->plans) / 1024);
done:
  state_free(&st);
  if (rc) {
    zeus_frontier_free(f);
    return rc;
  }
  *out = f;
  return ZEUS_OK;
}

/* ---- accessors ---- */

size_t zeus_frontier_num_points(const zeus_frontier *f) { return f ? f->npts : 0; }

int zeus_frontier_get_point(const zeus_frontier *f, size_t i, zeus_frontier_point *out) {
  if (!f || !out) return zeus__error(ZEUS_EINVAL, "zeus_frontier_get_point: NULL argument");
  if (i >= f->npts) return zeus__error(ZEUS_ERANGE, "frontier point %zu: there are %zu", i, f->npts);
  *out = f->pts[i];
  return ZEUS_OK;
}

const zeus__fopt *zeus__frontier_opt(const zeus_frontier *f, const int32_t *q, int node) {
  if (node <= 0 || node >= f->dag.n - 1) return NULL;
  return zeus__fopts_pick(&f->fo[f->node_fo[node]], q[node]);
}

int zeus_frontier_get_plan(const zeus_frontier *f, size_t i, int stage, zeus_frontier_instr *kinds,
                           int *freqs_mhz, size_t cap, size_t *n) {
  if (!f || !n) return zeus__error(ZEUS_EINVAL, "zeus_frontier_get_plan: NULL argument");
  if (i >= f->npts) return zeus__error(ZEUS_ERANGE, "frontier point %zu: there are %zu", i, f->npts);
  if (stage < 0 || stage >= f->dag.S)
    return zeus__error(ZEUS_ERANGE, "stage %d: the pipeline has %d stages", stage, f->dag.S);
  size_t len = 2 * (size_t)f->dag.M;
  if (freqs_mhz && cap > 0) {
    int32_t *q = malloc((size_t)f->dag.n * sizeof *q);
    if (!q) return zeus__oom("reading a frontier plan");
    zeus__fplans_get(&f->plans, i, q);
    for (size_t k = 0; k < len && k < cap; k++)
      freqs_mhz[k] = zeus__frontier_opt(f, q, zeus__fdag_node(&f->dag, stage, (int)k))->freq_mhz;
    free(q);
  }
  for (size_t k = 0; kinds && k < len && k < cap; k++) kinds[k] = f->dag.kind[zeus__fdag_node(&f->dag, stage, (int)k)];
  *n = len;
  return ZEUS_OK;
}

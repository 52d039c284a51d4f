/* The 3D-parallel wrapper: the wrapped scheduler sees pure pipeline parallelism (one rank per
 * stage); results of ranks sharing a stage are combined (times: max, energies: sum) and each
 * stage's schedule is copied to every rank of that stage. Unlike the original, the wrapped
 * scheduler is given the pipeline view of the ranks, not the full list. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pfo_server/sched.h"

int zeus__sched3d_view(const zeus_pfo_job_info *job, const zeus_pfo_rank_info *ranks, size_t n,
                       zeus_pfo_job_info *vjob, zeus_pfo_rank_info **vranks, size_t *vn) {
  size_t pp = (size_t)job->pp_degree;
  zeus_pfo_rank_info *v = calloc(pp, sizeof *v);
  if (!v) return zeus__oom("building the pipeline view");
  int rc = ZEUS_OK;
  for (size_t i = 0; i < n && !rc; i++) {
    const zeus_pfo_rank_info *r = &ranks[i];
    if (r->dp_rank != 0 || r->tp_rank != 0) continue;
    if (r->pp_rank < 0 || (size_t)r->pp_rank >= pp || v[r->pp_rank].available_frequencies) {
      rc = zeus__error(ZEUS_EINVAL, "3D view: two ranks with dp_rank 0 and tp_rank 0 claim pp_rank %d",
                       r->pp_rank);
      break;
    }
    if (!(rc = zeus__pfo_rank_info_copy(r, &v[r->pp_rank]))) v[r->pp_rank].rank = r->pp_rank;
  }
  for (size_t s = 0; s < pp && !rc; s++)
    if (!v[s].available_frequencies)
      rc = zeus__error(ZEUS_EINVAL, "3D view: no rank has pp_rank %zu with dp_rank 0 and tp_rank 0", s);
  if (rc) { zeus_pfo_ranks_free(v, pp); return rc; }
  *vjob = *job;
  vjob->dp_degree = 1;
  vjob->tp_degree = 1;
  vjob->world_size = job->pp_degree;
  *vranks = v;
  *vn = pp;
  return ZEUS_OK;
}

/* Element-wise max or sum of several lists, truncated to the shortest (as zip does). */
static int agg_list(const double *const *lists, const size_t *lens, size_t k, bool take_max,
                    double **out, size_t *nout) {
  size_t m = k ? lens[0] : 0;
  for (size_t i = 1; i < k; i++) if (lens[i] < m) m = lens[i];
  double *v = malloc((m ? m : 1) * sizeof *v);
  if (!v) return zeus__oom("aggregating results");
  for (size_t j = 0; j < m; j++) {
    double a = lists[0][j];
    for (size_t i = 1; i < k; i++) a = take_max ? fmax(a, lists[i][j]) : a + lists[i][j];
    v[j] = a;
  }
  *out = v;
  *nout = m;
  return ZEUS_OK;
}

static const zeus_pfo_breakdown *find_bd(const zeus_pfo_breakdown *bd, size_t n, const char *inst) {
  for (size_t i = 0; i < n; i++) if (strcmp(bd[i].instruction, inst) == 0) return &bd[i];
  return NULL;
}

/* Aggregates one breakdown field over the results in `grp`. */
static int agg_breakdowns(const zeus_pfo_prof_result *const *grp, size_t k, bool energy, bool take_max,
                          zeus_pfo_breakdown **out, size_t *nout) {
  const zeus_pfo_prof_result *r0 = grp[0];
  size_t nb = energy ? r0->n_energy_breakdown : r0->n_time_breakdown;
  const zeus_pfo_breakdown *b0 = energy ? r0->energy_breakdown : r0->time_breakdown;
  zeus_pfo_breakdown *res = calloc(nb ? nb : 1, sizeof *res);
  const zeus_pfo_breakdown **parts = calloc(k, sizeof *parts);
  const double **lists = calloc(k, sizeof *lists);
  size_t *lens = calloc(k, sizeof *lens);
  int rc = (!res || !parts || !lists || !lens) ? zeus__oom("aggregating results") : ZEUS_OK;
  zeus__buf vals = {0};
  for (size_t b = 0; b < nb && !rc; b++) {
    const char *inst = b0[b].instruction;
    size_t iters = SIZE_MAX;
    for (size_t i = 0; i < k && !rc; i++) {
      parts[i] = find_bd(energy ? grp[i]->energy_breakdown : grp[i]->time_breakdown,
                         energy ? grp[i]->n_energy_breakdown : grp[i]->n_time_breakdown, inst);
      if (!parts[i])
        rc = zeus__error(ZEUS_EINVAL, "rank %d's result lacks instruction '%s' in %s, which rank %d "
                         "of the same stage reported", grp[i]->rank, inst,
                         energy ? "energy_breakdown" : "time_breakdown", r0->rank);
      else if (parts[i]->n_iters < iters) iters = parts[i]->n_iters;
    }
    if (rc) break;
    zeus_pfo_breakdown *o = &res[b];
    o->instruction = zeus__strdup(inst);
    o->n_iters = iters;
    o->offsets = malloc((iters + 1) * sizeof(size_t));
    if (!o->instruction || !o->offsets) { rc = zeus__oom("aggregating results"); break; }
    vals.len = 0;
    for (size_t it = 0; it < iters && !rc; it++) {
      for (size_t i = 0; i < k; i++) {
        lists[i] = parts[i]->values + parts[i]->offsets[it];
        lens[i] = parts[i]->offsets[it + 1] - parts[i]->offsets[it];
      }
      double *row;
      size_t nrow;
      if ((rc = agg_list(lists, lens, k, take_max, &row, &nrow))) break;
      o->offsets[it] = vals.len / sizeof(double);
      rc = zeus__buf_append(&vals, (const char *)row, nrow * sizeof(double));
      free(row);
    }
    if (rc) break;
    size_t total = vals.len / sizeof(double);
    o->offsets[iters] = total;
    o->values = malloc((total ? total : 1) * sizeof(double));
    if (!o->values) { rc = zeus__oom("aggregating results"); break; }
    if (total) memcpy(o->values, vals.data, total * sizeof(double));
  }
  zeus__buf_free(&vals);
  free(parts);
  free(lists);
  free(lens);
  if (rc) {
    for (size_t b = 0; res && b < nb; b++) zeus__pfo_breakdown_clear(&res[b]);
    free(res);
    return rc;
  }
  *out = res;
  *nout = nb;
  return ZEUS_OK;
}

int zeus__sched3d_aggregate(const zeus_pfo_job_info *job, const zeus_pfo_rank_info *ranks, size_t n,
                            const zeus_pfo_prof_result *results, size_t nr,
                            zeus_pfo_prof_result **out, size_t *nout) {
  size_t pp = (size_t)job->pp_degree;
  zeus_pfo_prof_result *agg = calloc(pp, sizeof *agg);
  const zeus_pfo_prof_result **grp = calloc(nr + 1, sizeof *grp);
  const double **lists = calloc(nr + 1, sizeof *lists);
  size_t *lens = calloc(nr + 1, sizeof *lens);
  int rc = (!agg || !grp || !lists || !lens) ? zeus__oom("aggregating results") : ZEUS_OK;
  for (size_t s = 0; s < pp && !rc; s++) {
    size_t k = 0;
    for (size_t i = 0; i < nr; i++) {
      int pr = -1;
      for (size_t j = 0; j < n; j++) if (ranks[j].rank == results[i].rank) { pr = ranks[j].pp_rank; break; }
      if (pr < 0) {
        rc = zeus__error(ZEUS_EINVAL, "a result names rank %d, which the job does not have", results[i].rank);
        break;
      }
      if ((size_t)pr == s) grp[k++] = &results[i];
    }
    if (rc) break;
    if (k == 0) { rc = zeus__error(ZEUS_EINVAL, "no result for pipeline stage %zu", s); break; }
    zeus_pfo_prof_result *o = &agg[s];
    o->rank = (int)s;
    for (size_t i = 0; i < k; i++) { lists[i] = grp[i]->iter_time; lens[i] = grp[i]->n_iter_time; }
    if ((rc = agg_list(lists, lens, k, true, &o->iter_time, &o->n_iter_time))) break;
    for (size_t i = 0; i < k; i++) { lists[i] = grp[i]->iter_energy; lens[i] = grp[i]->n_iter_energy; }
    if ((rc = agg_list(lists, lens, k, false, &o->iter_energy, &o->n_iter_energy))) break;
    if ((rc = agg_breakdowns(grp, k, false, true, &o->time_breakdown, &o->n_time_breakdown))) break;
    if ((rc = agg_breakdowns(grp, k, true, false, &o->energy_breakdown, &o->n_energy_breakdown))) break;
  }
  free(grp);
  free(lists);
  free(lens);
  if (rc) { zeus_pfo_prof_results_free(agg, pp); return rc; }
  *out = agg;
  *nout = pp;
  return ZEUS_OK;
}

int zeus__sched3d_expand(const zeus_pfo_rank_info *ranks, size_t n, const zeus_pfo_schedule *stage,
                         size_t nstage, zeus_pfo_schedule **out, size_t *nout) {
  zeus_pfo_schedule *v = calloc(n + 1, sizeof *v);
  if (!v) return zeus__oom("copying stage schedules");
  int rc = ZEUS_OK;
  size_t k = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    const zeus_pfo_schedule *src = NULL;
    for (size_t s = 0; s < nstage; s++) if (stage[s].rank == ranks[i].pp_rank) { src = &stage[s]; break; }
    if (!src) { rc = zeus__error(ZEUS_EINTERNAL, "no schedule for pipeline stage %d", ranks[i].pp_rank); break; }
    if (!(rc = zeus__pfo_schedule_copy(src, &v[k]))) v[k++].rank = ranks[i].rank;
  }
  if (rc) { zeus_pfo_schedules_free(v, k); return rc; }
  *out = v;
  *nout = k;
  return ZEUS_OK;
}

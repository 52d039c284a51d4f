/* The clock-stepping profiler shared by InstructionProfiler and Perseus.
 *
 * Units (ranks, or pipeline stages for Perseus) each have a descending list of clocks >= the
 * minimum. Round 0 is a warm-up at the highest clock (its measurements are dropped); then every
 * unit steps down one clock per round, recording the mean time and energy of a forward and of a
 * backward at that clock, until its energy (forward + backward) has risen for `patience` clocks
 * in a row or its clocks run out. A unit that has stopped runs at its highest clock; so does
 * every unit once all have stopped. */
#include <stdlib.h>
#include <string.h>

#include "pfo_server/sched.h"

typedef struct {
  int *freqs; /* descending, >= min_frequency, no duplicates */
  size_t nfreqs, idx;
  int fmax; /* highest available clock (also below the minimum) */
  int rises;
  double last_energy;
  bool done;
  zeus_pfo_offline_result prof;
} unit;

struct zeus__profiling {
  char who[64];
  unit *u;
  size_t n;
  long patience;
  int phase;
};

static int cmp_desc(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (y > x) - (y < x);
}

void zeus__profiling_destroy(zeus__profiling *p) {
  if (!p) return;
  for (size_t i = 0; i < p->n; i++) {
    free(p->u[i].freqs);
    zeus_pfo_offline_result_clear(&p->u[i].prof);
  }
  free(p->u);
  free(p);
}

int zeus__profiling_create(zeus__profiling **out, const char *who, const zeus_pfo_rank_info *units, size_t n,
                           long min_frequency, long patience) {
  zeus__profiling *p = calloc(1, sizeof *p);
  if (!p || !(p->u = calloc(n + 1, sizeof *p->u))) {
    free(p);
    return zeus__oom("creating the profiler");
  }
  snprintf(p->who, sizeof p->who, "%s", who);
  p->patience = patience < 1 ? 1 : patience;
  int rc = ZEUS_OK;
  for (size_t i = 0; i < n && !rc; i++) {
    const zeus_pfo_rank_info *ri = &units[i];
    unit *u = &p->u[i];
    p->n++;
    u->prof.rank = ri->rank;
    u->prof.dp_rank = ri->dp_rank;
    u->prof.pp_rank = ri->pp_rank;
    u->prof.tp_rank = ri->tp_rank;
    size_t na = ri->n_available_frequencies;
    u->freqs = malloc((na + 1) * sizeof *u->freqs);
    u->prof.forward = calloc(na + 1, sizeof *u->prof.forward);
    u->prof.backward = calloc(na + 1, sizeof *u->prof.backward);
    if (!u->freqs || !u->prof.forward || !u->prof.backward) {
      rc = zeus__oom("creating the profiler");
      break;
    }
    if (na) memcpy(u->freqs, ri->available_frequencies, na * sizeof *u->freqs);
    qsort(u->freqs, na, sizeof *u->freqs, cmp_desc);
    u->fmax = na ? u->freqs[0] : 0;
    size_t k = 0;
    for (size_t j = 0; j < na; j++)
      if (u->freqs[j] >= min_frequency && (k == 0 || u->freqs[k - 1] != u->freqs[j])) u->freqs[k++] = u->freqs[j];
    u->nfreqs = k;
    if (k == 0)
      rc = zeus__error(ZEUS_EINVAL, "%s: rank %d has no frequency >= min_frequency %ld", p->who, ri->rank,
                       min_frequency);
  }
  if (rc) {
    zeus__profiling_destroy(p);
    return rc;
  }
  *out = p;
  return ZEUS_OK;
}

int zeus__profiling_phase(const zeus__profiling *p) { return p->phase; }

int zeus__profiling_frequency(const zeus__profiling *p, size_t i) {
  const unit *u = &p->u[i];
  return p->phase == 1 && !u->done ? u->freqs[u->idx] : u->fmax;
}

void zeus__profiling_progress(const zeus__profiling *p, size_t *done_steps, size_t *max_steps) {
  size_t d = 0, m = 0;
  for (size_t i = 0; i < p->n; i++) {
    d += p->u[i].done ? p->u[i].nfreqs : p->u[i].idx;
    m += p->u[i].nfreqs;
  }
  *done_steps = d;
  *max_steps = m;
}

int zeus__profiling_observe(zeus__profiling *p, const zeus__prof_sample *s) {
  if (p->phase == 0) {
    p->phase = 1;
    return ZEUS_OK;
  }
  if (p->phase == 2) return ZEUS_OK;
  for (size_t i = 0; i < p->n; i++)
    if (!p->u[i].done && !s[i].have[0] && !s[i].have[1])
      return zeus__error(ZEUS_EINVAL, "%s: rank %d's result has no forward or backward measurements in "
                         "time_breakdown and energy_breakdown", p->who, p->u[i].prof.rank);
  bool all_done = true;
  for (size_t i = 0; i < p->n; i++) {
    unit *u = &p->u[i];
    if (u->done) continue;
    double energy = 0;
    for (int k = 0; k < 2; k++) {
      if (!s[i].have[k]) continue;
      zeus_pfo_freq_measure *m = k == 0 ? &u->prof.forward[u->prof.n_forward++]
                                        : &u->prof.backward[u->prof.n_backward++];
      m->frequency_mhz = u->freqs[u->idx];
      m->time_s = s[i].time_s[k];
      m->energy_j = s[i].energy_j[k];
      energy += s[i].energy_j[k];
    }
    if (u->idx > 0 && energy > u->last_energy) u->rises++;
    else u->rises = 0;
    u->last_energy = energy;
    u->idx++;
    if (u->rises >= p->patience || u->idx >= u->nfreqs) u->done = true;
    if (!u->done) all_done = false;
  }
  if (all_done) p->phase = 2;
  return ZEUS_OK;
}

void zeus__profiling_stop(zeus__profiling *p) { p->phase = 2; }

const zeus_pfo_offline_result *zeus__profiling_unit(const zeus__profiling *p, size_t i) { return &p->u[i].prof; }

size_t zeus__profiling_units(const zeus__profiling *p) { return p->n; }

int zeus__profiling_write_csv(const zeus__profiling *p, const zeus__pfo_dump_loc *dump, const char *name) {
  zeus_pfo_offline_result *v = malloc((p->n + 1) * sizeof *v);
  if (!v) return zeus__oom("writing the instruction CSV");
  for (size_t i = 0; i < p->n; i++) v[i] = p->u[i].prof;
  zeus__buf b = {0};
  int rc = zeus__pfo_instruction_csv(v, p->n, &b);
  if (!rc) rc = zeus__pfo_dump_write(dump, name, b.data, b.len);
  zeus__buf_free(&b);
  free(v);
  return rc;
}

bool zeus__pfo_breakdown_mean(const zeus_pfo_breakdown *bd, size_t nbd, const char *inst, long skip, double *out) {
  for (size_t i = 0; i < nbd; i++) {
    if (strcmp(bd[i].instruction, inst)) continue;
    size_t from = skip > 0 && (size_t)skip < bd[i].n_iters ? (size_t)skip : 0;
    size_t a = bd[i].offsets[from], b = bd[i].offsets[bd[i].n_iters];
    if (b <= a) return false;
    double sum = 0;
    for (size_t j = a; j < b; j++) sum += bd[i].values[j];
    *out = sum / (double)(b - a);
    return true;
  }
  return false;
}

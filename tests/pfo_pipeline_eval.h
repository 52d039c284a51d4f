/* A deterministic stand-in for the ranks of a pipeline-parallel job, for the Perseus tests and
 * benchmark: given each rank's frequency schedule of a round, it computes what the ranks would
 * report (ProfilingResult: iteration time and energy, per-instruction time and energy) from a
 * stage profile table, the way examples/pipeline_sim.c's --stage-profile GPUs behave:
 * synchronous 1F1B per data-parallel pipeline (forward m of stage s after forward m of stage
 * s - 1, backward m after backward m of stage s + 1, each stage in its schedule's order), every
 * pipeline ending the iteration together, idle time at the blocking power, a pipeline's
 * instructions `factor` times as long and as costly. Header-only (static functions). */
#ifndef ZEUS_TEST_PFO_PIPELINE_EVAL_H
#define ZEUS_TEST_PFO_PIPELINE_EVAL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zeus.h>

typedef struct pe_profile {
  int S, nclk;
  int mhz[512]; /* highest first */
  double *t, *e; /* [(s * 2 + kind) * nclk + clock index] */
} pe_profile;

static inline void pe_free(pe_profile *p) {
  if (!p) return;
  free(p->t);
  free(p->e);
  free(p);
}

static inline pe_profile *pe_alloc(int S, int nclk) {
  pe_profile *p = calloc(1, sizeof *p);
  p->S = S, p->nclk = nclk;
  p->t = calloc((size_t)S * 2 * (size_t)nclk, sizeof *p->t);
  p->e = calloc((size_t)S * 2 * (size_t)nclk, sizeof *p->e);
  return p;
}

/* A synthetic profile: clocks 1740..1200 MHz in steps of 60; the last stage is the heaviest, so
 * the others have slack; energy per instruction falls as the clock drops. */
static inline pe_profile *pe_synth(int S) {
  pe_profile *p = pe_alloc(S, 10);
  for (int c = 0; c < 10; c++) p->mhz[c] = 1740 - 60 * c;
  for (int s = 0; s < S; s++)
    for (int k = 0; k < 2; k++)
      for (int c = 0; c < 10; c++) {
        double f = p->mhz[c], base = (s == S - 1 ? 0.016 : s == 0 ? 0.012 : 0.010) * (k ? 2 : 1);
        double t = base * (0.3 + 0.7 * 1740.0 / f), x = f / 1740.0;
        p->t[(s * 2 + k) * 10 + c] = t;
        p->e[(s * 2 + k) * 10 + c] = (80 + 220 * x * x * x) * t;
      }
  return p;
}

/* Loads stages 0..S-1 of a stage,instruction,frequency,time,energy CSV whose clocks are the same
 * for every stage and instruction. NULL when the file is unusable. */
static inline pe_profile *pe_load(const char *path, int S) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char line[1024];
  int col[5] = {-1, -1, -1, -1, -1}, n = 0;
  static const char *const names[] = {"stage", "instruction", "frequency", "time", "energy"};
  if (!fgets(line, sizeof line, f)) {
    fclose(f);
    return NULL;
  }
  for (char *tok = strtok(line, ",\r\n"); tok; tok = strtok(NULL, ",\r\n"), n++)
    for (int c = 0; c < 5; c++)
      if (!strcmp(tok, names[c])) col[c] = n;
  int mhz[512], nclk = 0;
  struct { int s, k, f; double t, e; } *rows = malloc(100000 * sizeof *rows);
  size_t nr = 0;
  while (fgets(line, sizeof line, f) && nr < 100000) {
    char *fld[16];
    int nf = 0;
    for (char *tok = strtok(line, ",\r\n"); tok && nf < 16; tok = strtok(NULL, ",\r\n")) fld[nf++] = tok;
    if (nf <= col[0] || nf <= col[4]) continue;
    int s = atoi(fld[col[0]]);
    if (s >= S) continue;
    rows[nr].s = s;
    rows[nr].k = strcmp(fld[col[1]], "backward") == 0;
    rows[nr].f = atoi(fld[col[2]]);
    rows[nr].t = strtod(fld[col[3]], NULL);
    rows[nr].e = strtod(fld[col[4]], NULL);
    bool seen = false;
    for (int c = 0; c < nclk; c++) seen |= mhz[c] == rows[nr].f;
    if (!seen && nclk < 512) mhz[nclk++] = rows[nr].f;
    nr++;
  }
  fclose(f);
  for (int i = 1; i < nclk; i++) /* highest first */
    for (int j = i; j > 0 && mhz[j] > mhz[j - 1]; j--) {
      int x = mhz[j];
      mhz[j] = mhz[j - 1];
      mhz[j - 1] = x;
    }
  pe_profile *p = pe_alloc(S, nclk);
  memcpy(p->mhz, mhz, (size_t)nclk * sizeof *mhz);
  for (size_t i = 0; i < nr; i++)
    for (int c = 0; c < nclk; c++)
      if (mhz[c] == rows[i].f) {
        p->t[(rows[i].s * 2 + rows[i].k) * nclk + c] = rows[i].t;
        p->e[(rows[i].s * 2 + rows[i].k) * nclk + c] = rows[i].e;
      }
  free(rows);
  return p;
}

static inline int pe_clock(const pe_profile *p, int mhz) {
  for (int c = 0; c < p->nclk; c++)
    if (p->mhz[c] == mhz) return c;
  return -1;
}

/* Fills one breakdown (one value per occurrence per iteration, the same every iteration). */
static inline void pe_breakdown(zeus_pfo_breakdown *b, const char *inst, const double *v, size_t n, size_t iters) {
  b->instruction = strdup(inst);
  b->n_iters = iters;
  b->offsets = malloc((iters + 1) * sizeof *b->offsets);
  b->values = malloc((iters * n + 1) * sizeof *b->values);
  for (size_t i = 0; i <= iters; i++) b->offsets[i] = i * n;
  for (size_t i = 0; i < iters; i++) memcpy(b->values + i * n, v, n * sizeof *v);
}

/* One round of a D x S x T job (rank = (d * S + s) * T + t; sched indexed by rank, each in 1F1B
 * order). factor[d] scales pipeline d's instructions (NULL: none). With no_backward the results
 * leave backward out of their breakdowns. Fills res[world]; job_time and pipe_energy[D] (energy
 * of one iteration over the pipeline's GPUs) may be NULL. Returns 0, or -1 for a clock the
 * profile lacks. */
static inline int pe_round(const pe_profile *p, int D, int S, int T, const zeus_pfo_schedule *sched,
                           const double *factor, double bp, size_t iters, bool no_backward, zeus_pfo_prof_result *res,
                           double *job_time, double *pipe_energy) {
  int M = 0;
  for (size_t i = 0; i < sched[0].n_frequencies; i++) M += strcmp(sched[0].frequencies[i].instruction, "forward") == 0;
  size_t SM = (size_t)S * (size_t)M;
  double *ff = malloc(SM * sizeof *ff), *fb = malloc(SM * sizeof *fb);
  double *end = malloc((size_t)D * (size_t)S * sizeof *end), *busy = calloc((size_t)D * (size_t)S, sizeof *busy);
  double *work_e = calloc((size_t)D * (size_t)S, sizeof *work_e), *tpipe = calloc((size_t)D, sizeof *tpipe);
  double *vf_t = malloc(((size_t)D * SM + 1) * sizeof *vf_t), *vb_t = malloc(((size_t)D * SM + 1) * sizeof *vb_t);
  double *vf_e = malloc(((size_t)D * SM + 1) * sizeof *vf_e), *vb_e = malloc(((size_t)D * SM + 1) * sizeof *vb_e);
  int rc = 0;
  for (int d = 0; d < D && !rc; d++) {
    double fac = factor ? factor[d] : 1;
    for (size_t i = 0; i < SM; i++) ff[i] = fb[i] = -1;
    int *idx = calloc((size_t)S, sizeof *idx), *nfw = calloc((size_t)S, sizeof *nfw),
        *nbw = calloc((size_t)S, sizeof *nbw);
    for (int s = 0; s < S; s++) end[d * S + s] = 0;
    size_t left = 2 * SM;
    while (left && !rc) {
      bool progress = false;
      for (int s = 0; s < S && !rc; s++) {
        const zeus_pfo_schedule *sc = &sched[(d * S + s) * T];
        while (idx[s] < (int)sc->n_frequencies) {
          const zeus_pfo_freq *q = &sc->frequencies[idx[s]];
          bool fwd = strcmp(q->instruction, "forward") == 0;
          int m = fwd ? nfw[s] : nbw[s];
          double dep = 0;
          if (fwd && s > 0) dep = ff[(s - 1) * M + m];
          else if (!fwd && s < S - 1) dep = fb[(s + 1) * M + m];
          if (dep < 0) break;
          int c = pe_clock(p, q->frequency_mhz);
          if (c < 0) {
            rc = -1;
            break;
          }
          size_t k = ((size_t)s * 2 + (fwd ? 0 : 1)) * (size_t)p->nclk + (size_t)c;
          double t = p->t[k] * fac, e = p->e[k] * fac;
          double start = end[d * S + s] > dep ? end[d * S + s] : dep, fin = start + t;
          (fwd ? ff : fb)[s * M + m] = fin;
          end[d * S + s] = fin;
          busy[d * S + s] += t;
          work_e[d * S + s] += e;
          (fwd ? vf_t : vb_t)[(size_t)d * SM + (size_t)s * M + m] = t;
          (fwd ? vf_e : vb_e)[(size_t)d * SM + (size_t)s * M + m] = e;
          fwd ? nfw[s]++ : nbw[s]++;
          idx[s]++;
          left--;
          progress = true;
        }
      }
      if (!progress) break;
    }
    for (int s = 0; s < S; s++) tpipe[d] = end[d * S + s] > tpipe[d] ? end[d * S + s] : tpipe[d];
    free(idx);
    free(nfw);
    free(nbw);
  }
  double tj = 0;
  for (int d = 0; d < D; d++) tj = tpipe[d] > tj ? tpipe[d] : tj;
  for (int d = 0; d < D && !rc; d++) {
    double pe = 0;
    for (int s = 0; s < S; s++)
      for (int t = 0; t < T; t++) {
        int rank = (d * S + s) * T + t;
        zeus_pfo_prof_result *r = &res[rank];
        memset(r, 0, sizeof *r);
        r->rank = rank;
        double e = work_e[d * S + s] + bp * (tj - busy[d * S + s]);
        pe += e;
        r->n_iter_time = r->n_iter_energy = iters;
        r->iter_time = malloc(iters * sizeof(double));
        r->iter_energy = malloc(iters * sizeof(double));
        for (size_t i = 0; i < iters; i++) r->iter_time[i] = tj, r->iter_energy[i] = e;
        int nb = no_backward ? 1 : 2;
        r->n_time_breakdown = r->n_energy_breakdown = (size_t)nb;
        r->time_breakdown = calloc(2, sizeof *r->time_breakdown);
        r->energy_breakdown = calloc(2, sizeof *r->energy_breakdown);
        size_t off = (size_t)d * SM + (size_t)s * M;
        pe_breakdown(&r->time_breakdown[0], "forward", vf_t + off, (size_t)M, iters);
        pe_breakdown(&r->energy_breakdown[0], "forward", vf_e + off, (size_t)M, iters);
        if (!no_backward) {
          pe_breakdown(&r->time_breakdown[1], "backward", vb_t + off, (size_t)M, iters);
          pe_breakdown(&r->energy_breakdown[1], "backward", vb_e + off, (size_t)M, iters);
        }
      }
    if (pipe_energy) pipe_energy[d] = pe;
  }
  if (job_time) *job_time = tj;
  free(ff), free(fb), free(end), free(busy), free(work_e), free(tpipe);
  free(vf_t), free(vb_t), free(vf_e), free(vb_e);
  return rc;
}

#endif

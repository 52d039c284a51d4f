/* The synchronous 1F1B pipeline DAG of one training iteration. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontier/frontier.h"
#include "zeus/pipeline.h"

/* The order is zeus_pipeline_1f1b_instr's (one definition for the solver, the schedulers and the
 * simulator); the arguments are valid here (1 <= M, 0 <= s < S), so it cannot fail. */
void zeus__fdag_1f1b_order(int S, int M, int s, zeus_frontier_instr *kinds, int *mbs) {
  for (int k = 0; k < 2 * M; k++) {
    zeus_pipeline_instr kd = ZEUS_PIPELINE_FORWARD;
    zeus_pipeline_1f1b_instr(S, s, M, k, &kd, &mbs[k]);
    kinds[k] = kd == ZEUS_PIPELINE_FORWARD ? ZEUS_FRONTIER_FORWARD : ZEUS_FRONTIER_BACKWARD;
  }
}

void zeus__fdag_free(zeus__fdag *d) {
  if (!d) return;
  free(d->stage);
  free(d->mb);
  free(d->kind);
  free(d->succ_off);
  free(d->succ);
  free(d->pred_off);
  free(d->pred);
  free(d->topo);
  memset(d, 0, sizeof *d);
}

int zeus__fdag_build(zeus__fdag *d, int S, int M) {
  memset(d, 0, sizeof *d);
  d->S = S;
  d->M = M;
  int n = d->n = S * 2 * M + 2, src = 0, snk = n - 1;
  int maxe = S * 2 * M * 3 + 4;
  int *eu = malloc((size_t)maxe * sizeof *eu), *ev = malloc((size_t)maxe * sizeof *ev);
  int *pos = malloc((size_t)S * 2 * M * sizeof *pos); /* (s, kind, m) -> node */
  int *indeg = calloc((size_t)n, sizeof *indeg), *outdeg = calloc((size_t)n, sizeof *outdeg);
  d->stage = malloc((size_t)n * sizeof *d->stage);
  d->mb = malloc((size_t)n * sizeof *d->mb);
  d->kind = malloc((size_t)n * sizeof *d->kind);
  d->succ_off = calloc((size_t)n + 1, sizeof *d->succ_off);
  d->pred_off = calloc((size_t)n + 1, sizeof *d->pred_off);
  d->topo = malloc((size_t)n * sizeof *d->topo);
  int rc = ZEUS_OK;
  if (!eu || !ev || !pos || !indeg || !outdeg || !d->stage || !d->mb || !d->kind || !d->succ_off ||
      !d->pred_off || !d->topo) {
    rc = zeus__oom("building the pipeline DAG");
    goto done;
  }
  d->stage[src] = d->stage[snk] = -1;
  d->mb[src] = d->mb[snk] = -1;
  d->kind[src] = d->kind[snk] = ZEUS_FRONTIER_FORWARD;
  for (int s = 0; s < S; s++) {
    zeus__fdag_1f1b_order(S, M, s, d->kind + zeus__fdag_node(d, s, 0), d->mb + zeus__fdag_node(d, s, 0));
    for (int k = 0; k < 2 * M; k++) {
      int v = zeus__fdag_node(d, s, k);
      d->stage[v] = s;
      pos[(s * 2 + (int)d->kind[v]) * M + d->mb[v]] = v;
    }
  }
  int m_e = 0;
#define EDGE(a, b) do { eu[m_e] = (a); ev[m_e] = (b); outdeg[a]++; indeg[b]++; m_e++; } while (0)
  for (int s = 0; s < S; s++)
    for (int k = 0; k + 1 < 2 * M; k++) EDGE(zeus__fdag_node(d, s, k), zeus__fdag_node(d, s, k + 1));
  for (int s = 0; s + 1 < S; s++)
    for (int m = 0; m < M; m++) {
      EDGE(pos[(s * 2 + 0) * M + m], pos[((s + 1) * 2 + 0) * M + m]);
      EDGE(pos[((s + 1) * 2 + 1) * M + m], pos[(s * 2 + 1) * M + m]);
    }
  for (int v = 1; v < snk; v++) {
    if (indeg[v] == 0) EDGE(src, v);
    if (outdeg[v] == 0) EDGE(v, snk);
  }
#undef EDGE
  d->succ = malloc((size_t)m_e * sizeof *d->succ);
  d->pred = malloc((size_t)m_e * sizeof *d->pred);
  if (!d->succ || !d->pred) {
    rc = zeus__oom("building the pipeline DAG");
    goto done;
  }
  for (int e = 0; e < m_e; e++) {
    d->succ_off[eu[e] + 1]++;
    d->pred_off[ev[e] + 1]++;
  }
  for (int v = 0; v < n; v++) {
    d->succ_off[v + 1] += d->succ_off[v];
    d->pred_off[v + 1] += d->pred_off[v];
  }
  memset(outdeg, 0, (size_t)n * sizeof *outdeg); /* reused as fill cursors */
  memset(indeg, 0, (size_t)n * sizeof *indeg);
  for (int e = 0; e < m_e; e++) {
    d->succ[d->succ_off[eu[e]] + outdeg[eu[e]]++] = ev[e];
    d->pred[d->pred_off[ev[e]] + indeg[ev[e]]++] = eu[e];
  }
  /* Kahn's algorithm. */
  for (int v = 0; v < n; v++) indeg[v] = d->pred_off[v + 1] - d->pred_off[v];
  int head = 0, tail = 0;
  for (int v = 0; v < n; v++)
    if (indeg[v] == 0) d->topo[tail++] = v;
  while (head < tail) {
    int u = d->topo[head++];
    for (int i = d->succ_off[u]; i < d->succ_off[u + 1]; i++)
      if (--indeg[d->succ[i]] == 0) d->topo[tail++] = d->succ[i];
  }
  if (tail != n) rc = zeus__error(ZEUS_EINTERNAL, "the 1F1B DAG for %d stages and %d microbatches has a cycle", S, M);
done:
  free(eu);
  free(ev);
  free(pos);
  free(indeg);
  free(outdeg);
  if (rc) zeus__fdag_free(d);
  return rc;
}

double zeus__fdag_longest(const zeus__fdag *d, const double *dur, double *start, double *finish) {
  for (int i = 0; i < d->n; i++) {
    int v = d->topo[i];
    double st = 0;
    for (int k = d->pred_off[v]; k < d->pred_off[v + 1]; k++)
      if (finish[d->pred[k]] > st) st = finish[d->pred[k]];
    start[v] = st;
    finish[v] = st + dur[v];
  }
  return finish[d->n - 1];
}

void zeus__fdag_evaluate_buf(const zeus__fdag *d, const double *time, const double *energy, double blocking_w,
                             double *scratch, double *time_out, double *energy_out) {
  double T = zeus__fdag_longest(d, time, scratch, scratch + d->n);
  double e = 0, busy = 0;
  for (int v = 1; v < d->n - 1; v++) {
    e += energy[v];
    busy += time[v];
  }
  *time_out = T;
  *energy_out = e + blocking_w * ((double)d->S * T - busy);
}

void zeus__fdag_evaluate(const zeus__fdag *d, const double *time, const double *energy,
                         double blocking_w, double *time_out, double *energy_out) {
  /* Small pipelines (the exhaustive tests) use the stack; large ones allocate. */
  double sbuf[2 * 256], *buf = d->n <= 256 ? sbuf : malloc(2 * (size_t)d->n * sizeof *buf);
  if (!buf) { /* out of memory: a NaN makes the failure visible to the caller */
    *time_out = *energy_out = NAN;
    return;
  }
  zeus__fdag_evaluate_buf(d, time, energy, blocking_w, buf, time_out, energy_out);
  if (buf != sbuf) free(buf);
}

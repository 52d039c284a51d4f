/* The frontier's plans, delta-encoded with checkpoints (see zeus__fplans in frontier.h). */
#include <stdlib.h>
#include <string.h>

#include "frontier/frontier.h"

int zeus__fplans_init(zeus__fplans *pl, int n) {
  memset(pl, 0, sizeof *pl);
  pl->n = n;
  pl->last = malloc((size_t)n * sizeof *pl->last);
  pl->off = malloc(sizeof *pl->off);
  if (!pl->last || !pl->off) {
    zeus__fplans_free(pl);
    return zeus__oom("recording frontier plans");
  }
  pl->off[0] = 0;
  return ZEUS_OK;
}

void zeus__fplans_free(zeus__fplans *pl) {
  if (!pl) return;
  free(pl->off);
  free(pl->dnode);
  free(pl->dq);
  free(pl->ck);
  free(pl->ck_point);
  free(pl->last);
  memset(pl, 0, sizeof *pl);
}

static int add_checkpoint(zeus__fplans *pl, const int32_t *q) {
  if (pl->nck == pl->capck) {
    size_t cap = pl->capck ? 2 * pl->capck : 4;
    int32_t *ck = realloc(pl->ck, cap * (size_t)pl->n * sizeof *ck);
    if (!ck) return zeus__oom("recording frontier plans");
    pl->ck = ck;
    size_t *cp = realloc(pl->ck_point, cap * sizeof *cp);
    if (!cp) return zeus__oom("recording frontier plans");
    pl->ck_point = cp;
    pl->capck = cap;
  }
  memcpy(pl->ck + pl->nck * (size_t)pl->n, q, (size_t)pl->n * sizeof *q);
  pl->ck_point[pl->nck++] = pl->npts;
  pl->since_ck = 0;
  return ZEUS_OK;
}

int zeus__fplans_push(zeus__fplans *pl, const int32_t *q) {
  int n = pl->n;
  if (pl->npts == pl->cappts) {
    size_t cap = pl->cappts ? 2 * pl->cappts : 256;
    size_t *off = realloc(pl->off, (cap + 1) * sizeof *off);
    if (!off) return zeus__oom("recording frontier plans");
    pl->off = off;
    pl->cappts = cap;
  }
  size_t changes = 0;
  if (pl->npts > 0)
    for (int v = 0; v < n; v++) changes += q[v] != pl->last[v];
  if (pl->nd + changes > pl->capd) {
    size_t cap = pl->capd ? pl->capd : 1024;
    while (cap < pl->nd + changes) cap *= 2;
    int32_t *a = realloc(pl->dnode, cap * sizeof *a);
    if (!a) return zeus__oom("recording frontier plans");
    pl->dnode = a;
    int32_t *b = realloc(pl->dq, cap * sizeof *b);
    if (!b) return zeus__oom("recording frontier plans");
    pl->dq = b;
    pl->capd = cap;
  }
  if (pl->npts > 0)
    for (int v = 0; v < n; v++)
      if (q[v] != pl->last[v]) {
        pl->dnode[pl->nd] = v;
        pl->dq[pl->nd++] = q[v];
      }
  /* A checkpoint at the first point and whenever the changes since the last reach a plan's
   * length: reading a point then never applies more than n changes. */
  pl->since_ck += changes;
  if (pl->npts == 0 || pl->since_ck >= (size_t)n) {
    int rc = add_checkpoint(pl, q);
    if (rc) return rc;
  }
  memcpy(pl->last, q, (size_t)n * sizeof *q);
  pl->off[++pl->npts] = pl->nd;
  return ZEUS_OK;
}

static void apply(const zeus__fplans *pl, size_t from, size_t to, int32_t *q) {
  for (size_t k = from; k < to; k++) q[pl->dnode[k]] = pl->dq[k];
}

void zeus__fplans_get(const zeus__fplans *pl, size_t i, int32_t *q) {
  /* The last checkpoint at or before i. */
  size_t lo = 0, hi = pl->nck;
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (pl->ck_point[mid] <= i) lo = mid;
    else hi = mid;
  }
  size_t c = pl->ck_point[lo];
  memcpy(q, pl->ck + lo * (size_t)pl->n, (size_t)pl->n * sizeof *q);
  apply(pl, pl->off[c + 1], pl->off[i + 1], q);
}

void zeus__fplans_step(const zeus__fplans *pl, size_t i, int32_t *q) { apply(pl, pl->off[i], pl->off[i + 1], q); }

size_t zeus__fplans_bytes(const zeus__fplans *pl) {
  return (pl->cappts + 1) * sizeof *pl->off + pl->capd * 2 * sizeof(int32_t) +
         pl->capck * ((size_t)pl->n * sizeof(int32_t) + sizeof(size_t)) + (size_t)pl->n * sizeof(int32_t);
}

/* Maximum flow (Dinic) on real capacities, and the minimum cut of a network with lower
 * bounds. Buffers are kept between calls so the solver's iterations do not allocate. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontier/frontier.h"

static int grow(void **p, int *capn, int need, size_t elem) {
  if (need <= *capn) return ZEUS_OK;
  int c = *capn ? *capn : 64;
  while (c < need) c *= 2;
  void *q = realloc(*p, (size_t)c * elem);
  if (!q) return zeus__oom("growing the flow network");
  *p = q;
  return ZEUS_OK;
}

int zeus__flow_reset(zeus__flow *f, int n) {
  if (n > f->ncap) {
    int c = f->ncap;
    void *h = f->head, *l = f->level, *i = f->it, *q = f->queue;
    int rc = grow(&h, &c, n, sizeof(int));
    f->head = h;
    if (rc) return rc;
    c = f->ncap;
    if ((rc = grow(&l, &c, n, sizeof(int)))) return rc;
    f->level = l;
    c = f->ncap;
    if ((rc = grow(&i, &c, n, sizeof(int)))) return rc;
    f->it = i;
    c = f->ncap;
    if ((rc = grow(&q, &c, n, sizeof(int)))) return rc;
    f->queue = q;
    f->ncap = c;
  }
  f->n = n;
  f->m = 0;
  for (int v = 0; v < n; v++) f->head[v] = -1;
  return ZEUS_OK;
}

int zeus__flow_add(zeus__flow *f, int u, int v, double cap) {
  if (f->m + 2 > f->mcap) {
    int need = f->m + 2, c;
    void *p;
    c = f->mcap; p = f->next;
    if (grow(&p, &c, need, sizeof(int))) return ZEUS_ENOMEM;
    f->next = p;
    c = f->mcap; p = f->to;
    if (grow(&p, &c, need, sizeof(int))) return ZEUS_ENOMEM;
    f->to = p;
    c = f->mcap; p = f->cap;
    if (grow(&p, &c, need, sizeof(double))) return ZEUS_ENOMEM;
    f->cap = p;
    f->mcap = c;
  }
  int e = f->m;
  f->to[e] = v;
  f->cap[e] = cap;
  f->next[e] = f->head[u];
  f->head[u] = e;
  f->to[e + 1] = u;
  f->cap[e + 1] = 0;
  f->next[e + 1] = f->head[v];
  f->head[v] = e + 1;
  f->m += 2;
  return e;
}

static bool bfs(zeus__flow *f, int s, int t) {
  for (int v = 0; v < f->n; v++) f->level[v] = -1;
  int head = 0, tail = 0;
  f->level[s] = 0;
  f->queue[tail++] = s;
  while (head < tail) {
    int u = f->queue[head++];
    if (f->level[t] >= 0 && f->level[u] >= f->level[t]) break; /* deeper nodes cannot help */
    for (int e = f->head[u]; e >= 0; e = f->next[e]) {
      int v = f->to[e];
      if (f->level[v] < 0 && f->cap[e] > ZEUS__FLOW_EPS) {
        f->level[v] = f->level[u] + 1;
        f->queue[tail++] = v;
      }
    }
  }
  return f->level[t] >= 0;
}

/* Blocking flow: pushes as much as `limit` allows from u along level-increasing arcs, several
 * arcs per visit; an arc that cannot carry more is skipped for the rest of the phase. */
static double dfs(zeus__flow *f, int u, int t, double limit) {
  if (u == t) return limit;
  double pushed = 0;
  for (; f->it[u] >= 0; f->it[u] = f->next[f->it[u]]) {
    int e = f->it[u], v = f->to[e];
    if (f->cap[e] <= ZEUS__FLOW_EPS || f->level[v] != f->level[u] + 1) continue;
    double room = limit - pushed;
    double d = dfs(f, v, t, room < f->cap[e] ? room : f->cap[e]);
    if (d > 0) {
      f->cap[e] -= d;
      f->cap[e ^ 1] += d;
      pushed += d;
      if (limit - pushed <= ZEUS__FLOW_EPS) return pushed;
    }
  }
  return pushed;
}

double zeus__flow_max(zeus__flow *f, int s, int t) {
  double total = 0;
  while (bfs(f, s, t)) {
    for (int v = 0; v < f->n; v++) f->it[v] = f->head[v];
    double d;
    while ((d = dfs(f, s, t, INFINITY)) > 0) total += d;
  }
  return total;
}

void zeus__flow_reachable(zeus__flow *f, int s, unsigned char *mark) {
  memset(mark, 0, (size_t)f->n);
  int head = 0, tail = 0;
  mark[s] = 1;
  f->queue[tail++] = s;
  while (head < tail) {
    int u = f->queue[head++];
    for (int e = f->head[u]; e >= 0; e = f->next[e]) {
      int v = f->to[e];
      if (!mark[v] && f->cap[e] > ZEUS__FLOW_EPS) {
        mark[v] = 1;
        f->queue[tail++] = v;
      }
    }
  }
}

void zeus__flow_free(zeus__flow *f) {
  if (!f) return;
  free(f->head);
  free(f->next);
  free(f->to);
  free(f->cap);
  free(f->level);
  free(f->it);
  free(f->queue);
  free(f->d);
  memset(f, 0, sizeof *f);
}

/* The cut function with lower bounds, Σ ub over forward edges − Σ lb over backward edges,
 * equals Σ (ub − lb) over forward edges + Σ_v [v on the source side]·(lb out of v − lb into v).
 * Each node term becomes an edge v → t (a positive term) or s → v (a negative one, plus a
 * constant), so one maximum flow finds the minimum cut; no feasible flow is needed. */
int zeus__flow_min_cut_lb(zeus__flow *f, int n, const zeus__lbedge *e, int m, int s, int t,
                          double inf, unsigned char *side, double *value) {
  int rc;
  if ((rc = zeus__flow_reset(f, n))) return rc;
  if (n > f->dcap) {
    double *d = realloc(f->d, (size_t)n * sizeof *d);
    if (!d) return zeus__oom("computing a minimum cut");
    f->d = d;
    f->dcap = n;
  }
  double *d = f->d;
  for (int v = 0; v < n; v++) d[v] = 0;
  for (int i = 0; i < m; i++) {
    double lb = e[i].lb > 0 ? e[i].lb : 0;
    double cap = e[i].ub >= inf ? inf : e[i].ub - lb;
    if (cap < 0) cap = 0;
    if ((rc = zeus__flow_add(f, e[i].u, e[i].v, cap)) < 0) return rc;
    d[e[i].u] += lb;
    d[e[i].v] -= lb;
  }
  double konst = d[s];
  for (int v = 0; v < n; v++) {
    if (v == s || v == t || d[v] == 0) continue;
    if (d[v] > 0) rc = zeus__flow_add(f, v, t, d[v]);
    else {
      rc = zeus__flow_add(f, s, v, -d[v]);
      konst += d[v];
    }
    if (rc < 0) return rc;
  }
  double flow = zeus__flow_max(f, s, t);
  if (flow >= inf / 2) return 0;
  zeus__flow_reachable(f, s, side);
  *value = flow + konst;
  return 1;
}

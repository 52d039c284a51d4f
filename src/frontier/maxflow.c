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

static double dfs(zeus__flow *f, int u, int t, double pushed) {
  if (u == t) return pushed;
  for (; f->it[u] >= 0; f->it[u] = f->next[f->it[u]]) {
    int e = f->it[u], v = f->to[e];
    if (f->cap[e] <= ZEUS__FLOW_EPS || f->level[v] != f->level[u] + 1) continue;
    double d = dfs(f, v, t, pushed < f->cap[e] ? pushed : f->cap[e]);
    if (d > 0) {
      f->cap[e] -= d;
      f->cap[e ^ 1] += d;
      return d;
    }
  }
  return 0;
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
  memset(f, 0, sizeof *f);
}

int zeus__flow_min_cut_lb(zeus__flow *f, int n, const zeus__lbedge *e, int m, int s, int t,
                          double inf, unsigned char *side, double *value) {
  int S2 = n, T2 = n + 1, rc;
  if ((rc = zeus__flow_reset(f, n + 2))) return rc;
  double *excess = calloc((size_t)n, sizeof *excess);
  if (!excess) return zeus__oom("computing a minimum cut");
  for (int i = 0; i < m; i++) {
    double lb = e[i].lb > 0 ? e[i].lb : 0;
    double cap = e[i].ub >= inf ? inf : e[i].ub - lb;
    if (cap < 0) cap = 0;
    if ((rc = zeus__flow_add(f, e[i].u, e[i].v, cap)) < 0) goto done;
    excess[e[i].v] += lb;
    excess[e[i].u] -= lb;
  }
  int ts = zeus__flow_add(f, t, s, inf);
  if ((rc = ts) < 0) goto done;
  int first_aux = f->m;
  double need = 0;
  for (int v = 0; v < n; v++) {
    if (excess[v] > 0) {
      need += excess[v];
      if ((rc = zeus__flow_add(f, S2, v, excess[v])) < 0) goto done;
    } else if (excess[v] < 0) {
      if ((rc = zeus__flow_add(f, v, T2, -excess[v])) < 0) goto done;
    }
  }
  double got = zeus__flow_max(f, S2, T2);
  if (got < need - ZEUS__FLOW_EPS * (m + 1) - 1e-9 * need) {
    rc = zeus__error(ZEUS_EINTERNAL, "no feasible flow meets the lower bounds (%g of %g)", got, need);
    goto done;
  }
  double flow0 = f->cap[ts ^ 1];
  f->cap[ts] = f->cap[ts ^ 1] = 0;
  for (int k = first_aux; k < f->m; k++) f->cap[k] = 0;
  double total = flow0 + zeus__flow_max(f, s, t);
  if (total >= inf / 2) {
    rc = 0;
    goto done;
  }
  f->n = n; /* the auxiliary nodes are done with */
  zeus__flow_reachable(f, s, side);
  *value = total;
  rc = 1;
done:
  free(excess);
  return rc;
}

/* Minimum s–t cut of a network with lower and upper bounds, by one maximum flow (Dinic) that
 * starts from the previous call's flow.
 *
 * The cut function with lower bounds, Σ ub over forward edges − Σ lb over backward edges,
 * equals Σ (ub − lb) over forward edges + Σ_v [v on the source side]·(lb out of v − lb into v).
 * Each node term becomes an arc v → t (a positive term) or s → v (a negative one, plus a
 * constant), so one maximum flow on arcs of capacity ub − lb plus these node arcs finds the
 * minimum cut; no feasible flow of the bounded network is needed.
 *
 * Warm start: the solver's successive networks differ in a few capacities (the instructions
 * the last cut changed) and a few new edges, so the flow of each edge (named by a key that
 * stays the same from call to call) and of each node arc is kept. A call clamps the kept flows
 * to the new capacities, which leaves some nodes with more inflow than outflow or the reverse;
 * because nodes are numbered in a topological order, one pass up the order pushes every
 * deficit forwards to t and one pass down pushes every excess back to s (by lowering flows),
 * which gives a valid flow; Dinic then augments it to a maximum flow. The source side of the
 * residual graph of any maximum flow is the same set (the smallest minimum cut), so the warm
 * start changes the work, not the answer.
 *
 * Dinic: levels are distances to t in the residual graph (a breadth-first search backwards
 * from t that stops when it reaches s), so the blocking-flow search only enters nodes that lead
 * to t; it is iterative (no recursion, whatever the network's depth) and keeps a current arc
 * per node. A path of infinite arcs from s to t means every cut is infinite. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontier/frontier.h"

/* Capacity for `need` elements: the old one doubled as often as needed (64 at first). */
static int grown(int cap, int need) {
  int c = cap ? cap : 64;
  while (c < need) c *= 2;
  return c;
}

/* Reallocates *p from `old` to `cap` elements; new elements are zeroed when `zero`. */
#define ZEUS__REGROW(p, old, cap, zero)                                      \
  do {                                                                       \
    void *q_ = realloc((p), (size_t)(cap) * sizeof *(p));                    \
    if (!q_) return zeus__oom("growing the flow network");                   \
    (p) = q_;                                                                \
    if (zero) memset((p) + (old), 0, (size_t)((cap) - (old)) * sizeof *(p)); \
  } while (0)

static int reserve(zeus__mincut *c, int n, int narcs, int nkeys) {
  if (n + 1 > c->ncap) { /* every node array gets the same capacity, n + 1 for adj_off */
    int old = c->ncap, cap = grown(old, n + 1);
    ZEUS__REGROW(c->adj_off, old, cap, false);
    ZEUS__REGROW(c->dist, old, cap, false);
    ZEUS__REGROW(c->cur, old, cap, false);
    ZEUS__REGROW(c->queue, old, cap, false);
    ZEUS__REGROW(c->path, old, cap, false);
    ZEUS__REGROW(c->ex, old, cap, false);
    ZEUS__REGROW(c->sflow, old, cap, true);
    ZEUS__REGROW(c->tflow, old, cap, true);
    c->ncap = cap;
  }
  if (narcs > c->acap) {
    int old = c->acap, cap = grown(old, narcs);
    ZEUS__REGROW(c->to, old, cap, false);
    ZEUS__REGROW(c->res, old, cap, false);
    ZEUS__REGROW(c->adj, old, cap, false);
    ZEUS__REGROW(c->anode, old, cap, false);
    c->acap = cap;
  }
  if (nkeys > c->kcap) {
    int old = c->kcap, cap = grown(old, nkeys);
    ZEUS__REGROW(c->kflow, old, cap, true);
    c->kcap = cap;
  }
  return ZEUS_OK;
}

void zeus__mincut_free(zeus__mincut *c) {
  if (!c) return;
  free(c->kflow);
  free(c->sflow);
  free(c->tflow);
  free(c->to);
  free(c->res);
  free(c->adj);
  free(c->anode);
  free(c->adj_off);
  free(c->dist);
  free(c->cur);
  free(c->queue);
  free(c->path);
  free(c->ex);
  memset(c, 0, sizeof *c);
}

/* Arc a goes from to[a ^ 1] to to[a]; res[a] is its residual capacity. Even arcs are the
 * network's, odd ones their reverses (res of the reverse = the flow). */
static inline void add_arc(zeus__mincut *c, int a, int u, int v, double cap, double flow) {
  if (!(flow > 0)) flow = 0; /* also a NaN */
  if (flow > cap) flow = cap;
  c->to[a] = v;
  c->to[a + 1] = u;
  c->res[a] = cap - flow; /* infinite stays infinite */
  c->res[a + 1] = flow;
}

/* Turns the clamped flows into a valid flow: deficits forwards to t, excesses back to s. */
static void repair(zeus__mincut *c, int n, int s, int t) {
  double *ex = c->ex;
  for (int v = 0; v < n; v++) ex[v] = 0;
  for (int a = 0; a < c->na; a += 2) {
    double y = c->res[a + 1];
    ex[c->to[a]] += y;
    ex[c->to[a + 1]] -= y;
  }
  for (int v = 0; v < n; v++) { /* deficits (outflow > inflow) move to higher nodes */
    if (v == s || v == t || !(ex[v] < 0)) continue;
    double need = -ex[v];
    for (int k = c->adj_off[v]; k < c->adj_off[v + 1] && need > 0; k++) {
      int a = c->adj[k];
      if (a & 1) continue;
      double y = c->res[a + 1], d = y < need ? y : need;
      if (!(d > 0)) continue;
      c->res[a + 1] -= d;
      c->res[a] += d;
      ex[c->to[a]] -= d;
      need -= d;
    }
    ex[v] = 0;
  }
  for (int v = n - 1; v >= 0; v--) { /* excesses move to lower nodes */
    if (v == s || v == t || !(ex[v] > 0)) continue;
    double more = ex[v];
    for (int k = c->adj_off[v]; k < c->adj_off[v + 1] && more > 0; k++) {
      int a = c->adj[k]; /* odd: the reverse of an arc into v, res = its flow */
      if (!(a & 1)) continue;
      double y = c->res[a], d = y < more ? y : more;
      if (!(d > 0)) continue;
      c->res[a] -= d;
      c->res[a - 1] += d;
      ex[c->to[a]] += d;
      more -= d;
    }
    ex[v] = 0;
  }
}

/* Distances to t over residual arcs, up to s's. Returns whether s reaches t. */
static bool levels(zeus__mincut *c, int n, int s, int t) {
  int *dist = c->dist, *q = c->queue, head = 0, tail = 0;
  for (int v = 0; v < n; v++) dist[v] = -1;
  dist[t] = 0;
  q[tail++] = t;
  while (head < tail) {
    int x = q[head++];
    for (int k = c->adj_off[x]; k < c->adj_off[x + 1]; k++) {
      int a = c->adj[k], u = c->to[a]; /* the arc a ^ 1 goes u → x */
      if (dist[u] >= 0 || !(c->res[a ^ 1] > ZEUS__FLOW_EPS)) continue;
      dist[u] = dist[x] + 1;
      if (u == s) return true;
      q[tail++] = u;
    }
  }
  return false;
}

/* One blocking flow along arcs that step one level closer to t. Returns the flow pushed, or
 * INFINITY when a path of infinite arcs reaches t. */
static double blocking_flow(zeus__mincut *c, int n, int s, int t) {
  int *dist = c->dist, *cur = c->cur, *path = c->path, len = 0, u = s;
  for (int v = 0; v < n; v++) cur[v] = c->adj_off[v];
  double total = 0;
  for (;;) {
    if (u == t) {
      double b = INFINITY;
      for (int i = 0; i < len; i++)
        if (c->res[path[i]] < b) b = c->res[path[i]];
      if (isinf(b)) return INFINITY;
      int first = -1;
      for (int i = 0; i < len; i++) {
        int a = path[i];
        c->res[a] -= b;
        c->res[a ^ 1] += b;
        if (first < 0 && !(c->res[a] > ZEUS__FLOW_EPS)) first = i;
      }
      total += b;
      len = first; /* back to the tail of the first saturated arc */
      u = c->to[path[first] ^ 1];
      continue;
    }
    int k = cur[u], end = c->adj_off[u + 1];
    for (; k < end; k++) {
      int a = c->adj[k];
      if (c->res[a] > ZEUS__FLOW_EPS && dist[c->to[a]] == dist[u] - 1) break;
    }
    cur[u] = k;
    if (k < end) {
      int a = c->adj[k];
      path[len++] = a;
      u = c->to[a];
      continue;
    }
    dist[u] = -1; /* a dead end for the rest of the phase */
    if (u == s) return total;
    int a = path[--len];
    u = c->to[a ^ 1];
    cur[u]++;
  }
}

int zeus__mincut_lb(zeus__mincut *c, int n, const zeus__lbedge *e, int m, int s, int t,
                    unsigned char *side, double *value) {
  int nkeys = 0;
  for (int i = 0; i < m; i++) {
    if (e[i].u < 0 || e[i].v >= n || e[i].u >= e[i].v || e[i].key < 0)
      return zeus__error(ZEUS_EINTERNAL, "minimum cut: edge %d (%d -> %d, key %d) is not in topological order",
                         i, e[i].u, e[i].v, e[i].key);
    if (e[i].key >= nkeys) nkeys = e[i].key + 1;
  }
  if (s != 0 || t != n - 1) return zeus__error(ZEUS_EINTERNAL, "minimum cut: s %d and t %d are not the ends", s, t);
  int rc = reserve(c, n, 2 * (m + n), nkeys);
  if (rc) return rc;
  double *d = c->ex; /* node terms, before ex is needed */
  for (int v = 0; v < n; v++) d[v] = 0;
  int a = 0;
  for (int i = 0; i < m; i++, a += 2) {
    double lb = e[i].lb > 0 ? e[i].lb : 0, cap = e[i].ub - lb;
    if (!(cap > 0)) cap = 0;
    add_arc(c, a, e[i].u, e[i].v, cap, c->kflow[e[i].key]);
    c->anode[a] = -1;
    d[e[i].u] += lb;
    d[e[i].v] -= lb;
  }
  double konst = d[s];
  for (int v = 0; v < n; v++) {
    if (v == s || v == t || d[v] == 0) continue;
    if (d[v] > 0) {
      add_arc(c, a, v, t, d[v], c->tflow[v]);
    } else {
      add_arc(c, a, s, v, -d[v], c->sflow[v]);
      konst += d[v];
    }
    c->anode[a] = v;
    a += 2;
  }
  c->na = a;
  /* Adjacency (arcs out of each node, reverses included), by counting. */
  int *off = c->adj_off;
  for (int v = 0; v <= n; v++) off[v] = 0;
  for (int k = 0; k < a; k++) off[c->to[k ^ 1] + 1]++;
  for (int v = 0; v < n; v++) off[v + 1] += off[v];
  for (int k = 0; k < a; k++) c->adj[off[c->to[k ^ 1]]++] = k;
  for (int v = n; v > 0; v--) off[v] = off[v - 1];
  off[0] = 0;

  repair(c, n, s, t);
  while (levels(c, n, s, t))
    if (isinf(blocking_flow(c, n, s, t))) return 0;

  /* The flow's value, the source side, and the flows kept for the next call. */
  double flow = 0;
  for (int k = off[s]; k < off[s + 1]; k++)
    if (!(c->adj[k] & 1)) flow += c->res[c->adj[k] + 1];
  memset(side, 0, (size_t)n);
  int head = 0, tail = 0;
  side[s] = 1;
  c->queue[tail++] = s;
  while (head < tail) {
    int u = c->queue[head++];
    for (int k = off[u]; k < off[u + 1]; k++) {
      int b = c->adj[k], v = c->to[b];
      if (!side[v] && c->res[b] > ZEUS__FLOW_EPS) {
        side[v] = 1;
        c->queue[tail++] = v;
      }
    }
  }
  for (int i = 0; i < m; i++) c->kflow[e[i].key] = c->res[2 * i + 1];
  for (int k = 2 * m; k < a; k += 2) {
    int v = c->anode[k];
    if (c->to[k] == t) c->tflow[v] = c->res[k + 1];
    else c->sflow[v] = c->res[k + 1];
  }
  *value = flow + konst;
  return 1;
}

/* threads.c: a collective whose ranks are threads of one process.
 *
 * Each operation is two barriers: every rank publishes a pointer to its own buffer, waits until
 * all have, computes its result from the published buffers (read only), waits again so that no
 * rank overwrites its buffer while another still reads it, and only then writes its result. No
 * shared scratch memory, so any length works.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "zeus/collective.h"

struct zeus_thread_group {
  int n;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int arrived;
  unsigned long generation;
  const void **slot; /* per rank: its buffer during the current operation */
  struct member {
    zeus_thread_group *g;
    int rank;
  } *members;
};

static void barrier(zeus_thread_group *g) {
  pthread_mutex_lock(&g->mu);
  unsigned long gen = g->generation;
  if (++g->arrived == g->n) {
    g->arrived = 0;
    g->generation++;
    pthread_cond_broadcast(&g->cv);
  } else {
    while (gen == g->generation) pthread_cond_wait(&g->cv, &g->mu);
  }
  pthread_mutex_unlock(&g->mu);
}

static int tg_allreduce(void *ctx, double *values, size_t n, zeus_reduce_op op) {
  struct member *m = ctx;
  zeus_thread_group *g = m->g;
  double *acc = malloc((n ? n : 1) * sizeof *acc);
  /* Every rank must take part in both barriers even when out of memory, or the others hang. */
  g->slot[m->rank] = values;
  barrier(g);
  if (acc) {
    memcpy(acc, g->slot[0], n * sizeof *acc);
    for (int r = 1; r < g->n; r++) {
      const double *v = g->slot[r];
      for (size_t i = 0; i < n; i++) {
        if (op == ZEUS_REDUCE_SUM)
          acc[i] += v[i];
        else if (v[i] > acc[i])
          acc[i] = v[i];
      }
    }
  }
  barrier(g);
  if (!acc) return zeus__oom("a thread-group allreduce");
  memcpy(values, acc, n * sizeof *acc);
  free(acc);
  return ZEUS_OK;
}

static int tg_broadcast(void *ctx, void *buf, size_t len, int root) {
  struct member *m = ctx;
  zeus_thread_group *g = m->g;
  g->slot[m->rank] = buf;
  barrier(g);
  if (m->rank != root) memcpy(buf, g->slot[root], len);
  barrier(g);
  return ZEUS_OK;
}

int zeus_thread_group_open(zeus_thread_group **out, int world_size) {
  if (world_size < 1) return zeus__error(ZEUS_EINVAL, "thread group: world_size %d, expected >= 1", world_size);
  zeus_thread_group *g = calloc(1, sizeof *g);
  if (!g) return zeus__oom("a thread group");
  g->n = world_size;
  g->slot = calloc((size_t)world_size, sizeof *g->slot);
  g->members = calloc((size_t)world_size, sizeof *g->members);
  if (!g->slot || !g->members) {
    free(g->slot);
    free(g->members);
    free(g);
    return zeus__oom("a thread group");
  }
  for (int r = 0; r < world_size; r++) g->members[r] = (struct member){g, r};
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  *out = g;
  return ZEUS_OK;
}

void zeus_thread_group_close(zeus_thread_group *g) {
  if (!g) return;
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
  free(g->slot);
  free(g->members);
  free(g);
}

int zeus_thread_group_collective(zeus_thread_group *g, int rank, zeus_collective *out) {
  if (!g) return zeus__error(ZEUS_EINVAL, "thread group is NULL");
  if (rank < 0 || rank >= g->n)
    return zeus__error(ZEUS_EINVAL, "thread group: rank %d, expected 0 <= rank < %d", rank, g->n);
  *out = (zeus_collective){.ctx = &g->members[rank],
                           .rank = rank,
                           .world_size = g->n,
                           .allreduce = tg_allreduce,
                           .broadcast = tg_broadcast};
  return ZEUS_OK;
}

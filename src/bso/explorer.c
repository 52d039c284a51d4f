/* explorer.c: pruning exploration (the original's PruningExploreManager generator) as an
 * explicit state machine: rounds x {downwards from the default, upwards from above it}. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bso/bso_internal.h"

static int cmp_long(const void *a, const void *b) {
  long x = *(const long *)a, y = *(const long *)b;
  return (x > y) - (x < y);
}

/* Starts round e->round over e->cands from e->default_bs; ends exploration when no rounds are
 * left or nothing survived. */
static void start_round(zeus__explorer *e) {
  e->ngood = 0;
  e->best_cost = INFINITY;
  e->dir = 0;
  e->pos = 0;
  size_t c = e->ncands;
  for (size_t i = 0; i < e->ncands; i++)
    if (e->cands[i] == e->default_bs) c = i;
  if (e->round >= e->rounds || e->ncands == 0 || c == e->ncands) {
    /* The default is always a survivor when anything survived (it moves to the best one), so
     * c == ncands only when the list is empty. */
    e->round = e->rounds;
    e->expecting = 0;
    return;
  }
  e->center = c;
  e->expecting = e->cands[c];
}

static void end_round(zeus__explorer *e) {
  memcpy(e->cands, e->good, e->ngood * sizeof *e->cands);
  e->ncands = e->ngood;
  qsort(e->cands, e->ncands, sizeof *e->cands, cmp_long);
  e->round++;
  start_round(e);
}

/* Points e->expecting at the next batch size of the round, switching direction or ending the
 * round when the current direction has none left. */
static void settle(zeus__explorer *e) {
  if (e->dir == 0) {
    if (e->pos <= e->center) {
      e->expecting = e->cands[e->center - e->pos];
      return;
    }
    e->dir = 1;
    e->pos = 0;
  }
  if (e->center + 1 + e->pos < e->ncands) {
    e->expecting = e->cands[e->center + 1 + e->pos];
    return;
  }
  end_round(e);
}

int zeus__explorer_init(zeus__explorer *e, const long *sorted, size_t n, long default_bs, long rounds) {
  memset(e, 0, sizeof *e);
  e->cands = malloc((n ? n : 1) * sizeof *e->cands);
  e->good = malloc((n ? n : 1) * sizeof *e->good);
  if (!e->cands || !e->good) {
    zeus__explorer_free(e);
    return zeus__oom("starting pruning exploration");
  }
  memcpy(e->cands, sorted, n * sizeof *sorted);
  e->ncands = n;
  e->default_bs = default_bs;
  e->rounds = rounds;
  e->round = 0;
  start_round(e);
  return ZEUS_OK;
}

void zeus__explorer_free(zeus__explorer *e) {
  free(e->cands);
  free(e->good);
  e->cands = e->good = NULL;
}

int zeus__explorer_report(zeus__explorer *e, long bs, double cost, bool reached) {
  if (e->expecting == 0)
    return zeus__error(ZEUS_ESTATE, "pruning exploration is over; batch size %ld was not asked for", bs);
  if (bs != e->expecting)
    return zeus__error(ZEUS_ESTATE, "pruning exploration expected the result of batch size %ld, got %ld",
                       e->expecting, bs);
  if (reached) {
    if (cost < e->best_cost) {
      e->best_cost = cost;
      e->default_bs = bs;
    }
    e->good[e->ngood++] = bs;
    e->pos++;
    settle(e);
  } else if (e->dir == 0) {
    /* The downward direction ends here; go upwards. */
    e->dir = 1;
    e->pos = 0;
    settle(e);
  } else {
    end_round(e);
  }
  return ZEUS_OK;
}

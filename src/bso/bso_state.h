/* src/bso/bso_state.h: the batch-size optimizer's struct, shared by bso.c and bso_state.c. */
#ifndef ZEUS_BSO_STATE_H
#define ZEUS_BSO_STATE_H

#include "bso/bso_internal.h"

struct zeus_bso {
  long *bs;            /* every batch size of the job, sorted */
  size_t n;
  long default_bs;     /* the user's default */
  zeus_bso_opts o;
  zeus__explorer ex;
  zeus_gts *mab;       /* NULL while pruning */
  long *hist_bs;       /* observations, in order */
  double *hist_reward; /* -cost */
  size_t hist_n, hist_cap;
};

int zeus__bso_check_opts(const zeus_bso_opts *o);
/* Allocates and validates everything but the explorer. */
int zeus__bso_new(zeus_bso **out, const long *batch_sizes, size_t n, long default_bs, const zeus_bso_opts *o);
bool zeus__bso_has(const zeus_bso *b, long bs);
/* Appends one observation (batch size, reward) to the history. ZEUS_ENOMEM only. */
int zeus__bso_hist_append(zeus_bso *b, long bs, double reward);

#endif

/* src/bso/bso_internal.h: internals of the batch-size optimizer shared with the job driver and
 * the trace simulator (not API). */
#ifndef ZEUS_BSO_INTERNAL_H
#define ZEUS_BSO_INTERNAL_H

#include <jansson.h>

#include "core/core.h"
#include "zeus/bso.h"

/* ---- numbers ---- */
double zeus__det_log(double x);
void zeus__rng_shuffle(zeus_rng *r, size_t *idx, size_t n);

/* The Zeus cost eta * energy_j + (1 - eta) * max_power_w * time_s is zeus_cost() of zeus/plo.h
 * (one formula for both optimizers). */
#include "zeus/plo.h"

/* Population variance of n values (two passes); 0 for n < 2. */
double zeus__variance(const double *x, size_t n);

/* ---- the pruning explorer: the original's generator as an explicit state machine ---- */
typedef struct zeus__explorer {
  long *cands;        /* this round's candidates, sorted ascending */
  size_t ncands;
  long *good;         /* survivors of this round so far */
  size_t ngood;
  long default_bs;
  long rounds;        /* rounds in all */
  long round;         /* current round, 0-based; == rounds when done */
  size_t center;      /* index of the round's default in cands */
  int dir;            /* 0: downwards from center, 1: upwards from center + 1 */
  size_t pos;         /* steps taken in the current direction */
  double best_cost;   /* least cost among this round's survivors */
  long expecting;     /* batch size to explore next; 0 when done */
} zeus__explorer;

/* Starts pruning over n sorted candidates (copied) from default_bs (one of them). */
int zeus__explorer_init(zeus__explorer *e, const long *sorted, size_t n, long default_bs, long rounds);
void zeus__explorer_free(zeus__explorer *e);
static inline bool zeus__explorer_done(const zeus__explorer *e) { return e->expecting == 0; }
/* Reports the result for e->expecting and moves on. ZEUS_ESTATE for another batch size. */
int zeus__explorer_report(zeus__explorer *e, long bs, double cost, bool reached);

/* ---- Thompson sampling internals used to save and restore state ---- */
zeus_rng *zeus__gts_rng(zeus_gts *g);
const zeus_rng *zeus__gts_rng_const(const zeus_gts *g);
int zeus__gts_set_arm_state(zeus_gts *g, const zeus_gts_arm *a);
void zeus__gts_opts(const zeus_gts *g, zeus_gts_opts *out);
/* Refits one arm from the prior on m rewards (oldest first) with reward precision 1 / their
 * population variance (INFINITY when they do not vary): the one arm update of the batch-size
 * optimizer, shared by zeus_bso and the batch-size optimizer server. *prec_out (optional) gets the
 * reward precision used. */
int zeus__gts_refit(zeus_gts *g, long arm, const double *rewards, size_t m, double *prec_out);

/* ---- JSON of doubles that may be infinite ---- */
json_t *zeus__json_double(double v);
/* Reads a number or "inf"/"-inf"; ZEUS_EPARSE naming ctx and key. */
int zeus__json_get_double(const json_t *v, const char *ctx, const char *key, double *out);

#endif

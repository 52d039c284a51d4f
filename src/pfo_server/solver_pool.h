/* src/pfo_server/solver_pool.h: the Perseus server's solver threads (not API).
 *
 * Frontier solves take from milliseconds to seconds and must never run on an HTTP thread, nor
 * under the job table's lock: a scheduler queues one here and polls it at each round while the
 * ranks keep training on their last schedule. The pool has a fixed number of worker threads
 * and a bounded queue. A queued solve is a reference-counted task shared by the scheduler and
 * the pool: the scheduler may release it at any time (its job was removed) without waiting; a
 * released task still queued is dropped, one running is told to stop and freed by its worker.
 *
 * Thread safety: every function may be called from any thread. */
#ifndef ZEUS_PFO_SERVER_SOLVER_POOL_H
#define ZEUS_PFO_SERVER_SOLVER_POOL_H

#include "pfo/pfo_internal.h"
#include "zeus/frontier.h"

typedef struct zeus__solver_pool zeus__solver_pool;
typedef struct zeus__solve zeus__solve;

/* What a finished solve hands over (zeus__solve_take). */
typedef struct zeus__solve_result {
  int rc;                   /* ZEUS_OK, or the solve's error code */
  char errmsg[1024];        /* the error's message when rc != 0 */
  zeus_frontier *frontier;  /* the frontier (owned by the holder of the result) */
  char *csv;                /* frontier.csv text (zeus_free()) */
  char *svg;                /* frontier.svg text (free()), or NULL: artifact_error says why */
  char artifact_error[512]; /* making frontier.csv or frontier.svg failed; "" when not */
  double queued_s, solve_s; /* seconds spent waiting for a thread, and solving */
} zeus__solve_result;

typedef enum { ZEUS__SOLVE_QUEUED, ZEUS__SOLVE_RUNNING, ZEUS__SOLVE_DONE } zeus__solve_state;

/* threads: worker threads (1..16); max_queued: solves that may wait for a thread (>= 1). */
int zeus__solver_pool_open(zeus__solver_pool **out, int threads, size_t max_queued);
/* Joins the workers (a solve still running stops at its next point if its task was released)
 * and frees the pool. Every task must have been released before: a task uses
 * its pool's lock. NULL does nothing. */
void zeus__solver_pool_close(zeus__solver_pool *p);

/* Queues a solve of `profile` (ownership taken in every case) with `opts` (copied; its progress
 * fields are the pool's). Once solved, the worker also makes frontier.csv's and frontier.svg's
 * texts (it writes nothing where the caller's files go). max_seconds > 0 stops a solve that runs
 * longer (result ZEUS_ETIMEDOUT: a frontier cut short lacks the fast plans). `label` names the solve in logs.
 * ZEUS_ERANGE when the queue is full, ZEUS_ESTATE when the pool is closing, ZEUS_ENOMEM. */
int zeus__solver_pool_submit(zeus__solver_pool *p, zeus_frontier_profile *profile, const zeus_frontier_opts *opts,
                             double max_seconds, const char *label, zeus__solve **out);
/* Where a solve stands: its state, seconds since it was queued, and the points found so far
 * (0 while the solver cannot say). */
zeus__solve_state zeus__solve_poll(zeus__solve *t, double *elapsed_s, size_t *points);
/* Once the solve is done, moves its result into *out and returns true (once). */
bool zeus__solve_take(zeus__solve *t, zeus__solve_result *out);
/* Frees what a taken result holds. */
void zeus__solve_result_clear(zeus__solve_result *r);
/* The caller gives up the task: a queued solve is dropped, a running one stops at its next point
 * (the solver's progress callback) and its worker frees it. Never waits. NULL does nothing. */
void zeus__solve_release(zeus__solve *t);

#endif

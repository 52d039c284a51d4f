/* src/pfo_server/job_table.h: the job table, the transport-free core of the Perseus server
 * (not API).
 *
 * It holds every registered job, its ranks, its scheduler (sched.h) and the round each rank is
 * in, and answers the five routes as functions that fill a reply; the HTTP layer (server.c)
 * only moves bytes. Long polls are "waiters": an opaque pointer the transport parks and the
 * table completes later through a callback. */
#ifndef ZEUS_PFO_SERVER_JOB_TABLE_H
#define ZEUS_PFO_SERVER_JOB_TABLE_H

#include "pfo/pfo_internal.h"

typedef struct zeus__job_table zeus__job_table;

/* A reply: HTTP-like status and a JSON body (owned by the reply). */
typedef struct zeus__reply {
  int status;
  char *body;
  size_t len;
  const char *content_type; /* static; NULL: application/json */
  const char *allow;        /* static; the methods allowed, for a 405 */
} zeus__reply;

/* Called once for a waiting schedule request, from whichever thread completes it (under the
 * table's lock: do not call back into the table). Takes ownership of reply->body. */
typedef void (*zeus__waiter_fn)(void *waiter, zeus__reply *reply);

typedef struct zeus__job_table_opts {
  const char *scheduler;
  const char *scheduler_args; /* JSON object text or NULL */
  bool dump_data;
  const char *dump_dir;
  double max_job_idle_time_s;
  zeus__waiter_fn on_complete;
  /* Optional: called under the table's lock just before a waiter is parked, so the transport
   * can suspend the request before any thread may complete it. */
  void (*on_park)(void *waiter);
  /* Threads that solve frontiers for the schedulers that need them (Perseus); 0: 1. */
  int solver_threads;
} zeus__job_table_opts;

int zeus__job_table_open(zeus__job_table **out, const zeus__job_table_opts *opts);
/* Completes every waiter with 503 and frees everything. */
void zeus__job_table_close(zeus__job_table *t);

/* The operations behind the routes. Each fills `reply` (status 200 with the JSON answer, or an
 * error status with {"detail": message}); the return value is the HTTP status. */
int zeus__job_table_register_job(zeus__job_table *t, const char *body, size_t len, zeus__reply *reply);
int zeus__job_table_register_rank(zeus__job_table *t, const char *job_id, const char *body, size_t len,
                                  zeus__reply *reply);
/* Either answers now (returns the status, reply filled) or parks `waiter` and returns 0; the
 * waiter is later completed through opts.on_complete exactly once. */
int zeus__job_table_request_schedule(zeus__job_table *t, const char *job_id, const char *rank_text,
                                     void *waiter, zeus__reply *reply);
int zeus__job_table_post_result(zeus__job_table *t, const char *job_id, const char *body, size_t len,
                                zeus__reply *reply);
/* A scheduler's own route: GET or POST /perseus/{job_id}<path> (path "" or "/..."), answered by
 * the job's scheduler (zeus__sched_ops.route) under the table's lock. 404 for an unknown job or a
 * scheduler without routes, 409 before every rank has registered. */
int zeus__job_table_sched_route(zeus__job_table *t, const char *job_id, const char *method, const char *path,
                                const char *body, size_t len, zeus__reply *reply);
/* Forgets a parked waiter whose connection went away (no completion call follows). */
void zeus__job_table_cancel_waiter(zeus__job_table *t, void *waiter);
/* Removes jobs idle for longer than the limit at monotonic time `now_s`; returns how many. */
int zeus__job_table_reap(zeus__job_table *t, double now_s);
size_t zeus__job_table_njobs(zeus__job_table *t);
/* A consistent snapshot of the table for /metrics. */
typedef struct zeus__job_table_stats_t {
  size_t jobs, ranks;         /* registered now */
  size_t failed_jobs;         /* jobs whose scheduler failed (they answer errors until removed) */
  unsigned long rounds_done;  /* rounds completed since start, over every job */
  unsigned long dump_failures;
} zeus__job_table_stats_t;
void zeus__job_table_stats(zeus__job_table *t, zeus__job_table_stats_t *st);
/* How many dump writes failed so far, and the last failure's message ("" when none). */
void zeus__job_table_dump_status(zeus__job_table *t, unsigned long *failures, char *last, size_t len);
/* Completes every waiter with 503 (shutdown). */
void zeus__job_table_fail_all_waiters(zeus__job_table *t, const char *why);

/* Fills an error reply {"detail": msg}. Returns status. */
int zeus__reply_error(zeus__reply *reply, int status, const char *msg);
/* Maps a ZEUS_E code to an HTTP status (EINVAL/EPARSE/ERANGE 400, ENOENT 404, EEXIST/ESTATE 409,
 * EPERM 401, else 500). */
int zeus__http_status_of(int code);

#endif

/* src/pfo_server/job_table.h: the job table, the transport-free core of the Perseus server
 * (not API).
 *
 * It holds every registered job, its ranks, its scheduler (sched.h) and the round each rank is
 * in, and answers the routes as functions that fill a reply; the HTTP layer (server.c) only moves
 * bytes. Long polls are "waiters": an opaque pointer the transport parks and the table completes
 * later through a callback.
 *
 * Isolation: a job id ends in 26 random base32 characters (130 bits), so only a party the id was
 * given to can name the job; a rank that registered with a credential (a request's rank_token,
 * the X-Zeus-Rank-Token header) must present it on every later request about that rank. An
 * unknown job and a credential that does not match get the same answer (404, same words), so
 * nothing tells a guesser that a job exists. Bounds: at most max_jobs jobs, and an estimate of
 * the memory each job holds (its ranks, the round's results, its schedules) is kept under
 * max_job_bytes per job and max_total_bytes for all; a request that would pass one is refused
 * with 413 naming the bound. */
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

/* Defaults of the bounds (0 in the options). */
#define ZEUS__PFO_DEFAULT_MAX_JOBS 1024
#define ZEUS__PFO_DEFAULT_MAX_JOB_BYTES ((size_t)256 << 20)
#define ZEUS__PFO_DEFAULT_MAX_TOTAL_BYTES ((size_t)1 << 30)
/* A job whose ranks have not all registered is removed after this long without activity (or
 * after max_job_idle_time_s when that is shorter): ranks register within seconds of each other. */
#define ZEUS__PFO_PENDING_JOB_IDLE_S 600.0
/* A rank credential: 16..128 characters of [A-Za-z0-9_-]. */
#define ZEUS__PFO_RANK_TOKEN_MIN 16
#define ZEUS__PFO_RANK_TOKEN_MAX 128

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
  size_t max_jobs;        /* 0: ZEUS__PFO_DEFAULT_MAX_JOBS */
  size_t max_job_bytes;   /* 0: ZEUS__PFO_DEFAULT_MAX_JOB_BYTES */
  size_t max_total_bytes; /* 0: ZEUS__PFO_DEFAULT_MAX_TOTAL_BYTES */
  /* Refuse ranks that register without a credential (clients of the original system send
   * none; see docs/pfo-server.md). */
  bool require_rank_tokens;
  /* Threads that solve frontiers for the schedulers that need them (Perseus); 0: 1. */
  int solver_threads;
  /* Parse results with jansson only, as before the tree-free reader (for bench_pfo_server's
   * baseline column; the answers are the same either way). */
  bool tree_results;
  size_t max_jobs_per_client; /* jobs one client (zeus__job_table_register_job_for's owner) holds;
                                 0: a quarter of max_jobs */
  size_t reserved_jobs;   /* the last slots, only for a client that holds no job; 0: max_jobs / 16 */
} zeus__job_table_opts;

/* Opens the table. With dump_data, or a scheduler that writes files, the dump folder is opened
 * (created 0700 when missing) and must belong to this user and not be writable by others:
 * ZEUS_EPERM naming it otherwise. */
int zeus__job_table_open(zeus__job_table **out, const zeus__job_table_opts *opts);
/* Completes every waiter with 503 and frees everything. */
void zeus__job_table_close(zeus__job_table *t);

/* The operations behind the routes. Each fills `reply` (status 200 with the JSON answer, or an
 * error status with {"detail": message}); the return value is the HTTP status. `rank_token` is
 * the request's rank credential (NULL: none). */
int zeus__job_table_register_job(zeus__job_table *t, const char *body, size_t len, zeus__reply *reply);
/* The same for a client (owner: "uid 1000", "address 10.0.0.7"; NULL: counted against nobody):
 * at most max_jobs_per_client jobs each, and the last reserved_jobs slots only for a client that
 * holds none, so that one local user cannot take the table (503 naming the owner and the flag). */
int zeus__job_table_register_job_for(zeus__job_table *t, const char *owner, const char *body, size_t len,
                                     zeus__reply *reply);
int zeus__job_table_register_rank(zeus__job_table *t, const char *job_id, const char *rank_token, const char *body,
                                  size_t len, zeus__reply *reply);
/* Either answers now (returns the status, reply filled) or parks `waiter` and returns 0; the
 * waiter is later completed through opts.on_complete exactly once, unless cancelled. */
int zeus__job_table_request_schedule(zeus__job_table *t, const char *job_id, const char *rank_text,
                                     const char *rank_token, void *waiter, zeus__reply *reply);
int zeus__job_table_post_result(zeus__job_table *t, const char *job_id, const char *rank_token, const char *body,
                                size_t len, zeus__reply *reply);
/* POST /leave/{job_id} {"rank": N, "reason": "..."}: the rank drops out; every waiting rank is
 * answered at once with 410 saying which rank left and why, and so is every later request. */
int zeus__job_table_leave(zeus__job_table *t, const char *job_id, const char *rank_token, const char *body,
                          size_t len, zeus__reply *reply);
/* GET /presence/{job_id}?rank=N: a registered rank's connection held open for as long as it
 * lives. Answers now (an error: unknown job, bad rank, the job already failed or ended) or parks
 * `waiter` and returns 0 like a schedule request; it is completed when the job fails or ends (the
 * rank itself leaving included: 410) or is removed, or by a newer presence of the same rank (409).
 * Cancelled (its connection closed) while the job goes on, it fails the job with 410 naming the
 * rank, so that every other rank hears at once that it died. */
int zeus__job_table_presence(zeus__job_table *t, const char *job_id, const char *rank_text, const char *rank_token,
                             void *waiter, zeus__reply *reply);
/* A scheduler's own route: GET or POST /perseus/{job_id}<path> (path "" or "/..."), answered by
 * the job's scheduler (zeus__sched_ops.route) under the table's lock. 404 for an unknown job or a
 * scheduler without routes, 409 before every rank has registered. */
int zeus__job_table_sched_route(zeus__job_table *t, const char *job_id, const char *method, const char *path,
                                const char *body, size_t len, zeus__reply *reply);
/* Forgets a parked waiter whose connection went away (no completion call follows); a presence
 * fails its job (above). Returns whether it was still waiting (false: it was completed already,
 * or never parked). */
bool zeus__job_table_cancel_waiter(zeus__job_table *t, void *waiter);
/* Removes jobs idle for longer than the limit at monotonic time `now_s` (jobs still registering:
 * ZEUS__PFO_PENDING_JOB_IDLE_S); returns how many. Their memory is released outside the lock. */
int zeus__job_table_reap(zeus__job_table *t, double now_s);
size_t zeus__job_table_njobs(zeus__job_table *t);
/* The estimated bytes all jobs hold. */
size_t zeus__job_table_bytes(zeus__job_table *t);
/* A consistent snapshot of the table for /metrics. */
typedef struct zeus__job_table_stats_t {
  size_t jobs, ranks;         /* registered now */
  size_t failed_jobs;         /* jobs whose scheduler failed or a rank left on an error (they answer errors until removed) */
  size_t ended_jobs;          /* jobs a rank left because its training ended (LeaveRequest "closed": true) */
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

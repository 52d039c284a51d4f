/* src/pfo/pfo_internal.h: shared internals of the PFO module (not API). */
#ifndef ZEUS_PFO_INTERNAL_H
#define ZEUS_PFO_INTERNAL_H

#include <jansson.h>

#include "core/core.h"
#include "core/json.h"
#include "zeus/pfo.h"

/* ---- models <-> jansson values (models.c). `ctx` names the value in errors. ---- */
int zeus__pfo_job_info_from_jt(const json_t *v, const char *ctx, zeus_pfo_job_info *out);
int zeus__pfo_rank_info_from_jt(const json_t *v, const char *ctx, zeus_pfo_rank_info *out);
int zeus__pfo_schedule_from_jt(const json_t *v, const char *ctx, zeus_pfo_schedule *out);
int zeus__pfo_prof_result_from_jt(const json_t *v, const char *ctx, zeus_pfo_prof_result *out);
int zeus__pfo_offline_result_from_jt(const json_t *v, const char *ctx, zeus_pfo_offline_result *out);
json_t *zeus__pfo_job_info_to_jt(const zeus_pfo_job_info *v);
json_t *zeus__pfo_rank_info_to_jt(const zeus_pfo_rank_info *v);
json_t *zeus__pfo_schedule_to_jt(const zeus_pfo_schedule *v);
json_t *zeus__pfo_prof_result_to_jt(const zeus_pfo_prof_result *v);
json_t *zeus__pfo_offline_result_to_jt(const zeus_pfo_offline_result *v);
/* Serialises a schedule straight into a buffer (hot path of the server). */
int zeus__pfo_schedule_to_buf(const zeus_pfo_schedule *v, zeus__buf *b);

/* Deep copies (ZEUS_ENOMEM only). */
int zeus__pfo_rank_info_copy(const zeus_pfo_rank_info *src, zeus_pfo_rank_info *dst);
int zeus__pfo_schedule_copy(const zeus_pfo_schedule *src, zeus_pfo_schedule *dst);
int zeus__pfo_breakdown_copy(const zeus_pfo_breakdown *src, zeus_pfo_breakdown *dst);
void zeus__pfo_breakdown_clear(zeus_pfo_breakdown *b);
char *zeus__strdup(const char *s);
/* mkdir -p (mode 0755); errors name the path. */
int zeus__pfo_mkdirs(const char *path);

/* ---- schedulers ---- */
typedef enum { ZEUS__ARG_INT, ZEUS__ARG_NUMBER, ZEUS__ARG_STRING, ZEUS__ARG_BOOL } zeus__arg_type;
typedef struct zeus__sched_param {
  const char *name;
  zeus__arg_type type;
  bool required;
} zeus__sched_param;

/* What a scheduler sees of the job (borrowed for the duration of create). Ranks sorted by rank. */
typedef struct zeus__sched_ctx {
  const zeus_pfo_job_info *job;
  const zeus_pfo_rank_info *ranks;
  size_t n_ranks;
  const char *job_dump_dir; /* <dump_dir>/<job_id>; for files the scheduler writes */
  bool dump_data;
} zeus__sched_ctx;

/* A scheduler is an explicit state machine: `next` produces the schedule for the coming round
 * (one per rank of its view, caller-owned), `observe` ingests the results of that round and
 * returns 1 when the scheduler is finished (its last schedule is then served forever), 0 to go
 * on, or a negative error code with zeus__error() set (EINVAL/EPARSE/ERANGE: bad input). */
typedef struct zeus__sched_ops {
  const char *name;
  const zeus__sched_param *params; /* terminated by {NULL} */
  int (*check_args)(const json_t *args); /* optional, at server start-up */
  int (*create)(void **state, const zeus__sched_ctx *ctx, const json_t *args);
  int (*next)(void *state, zeus_pfo_schedule **out, size_t *n);
  int (*observe)(void *state, const zeus_pfo_prof_result *results, size_t n);
  void (*destroy)(void *state);
} zeus__sched_ops;

extern const zeus__sched_ops zeus__sched_point_solution;
extern const zeus__sched_ops zeus__sched_all_max;
extern const zeus__sched_ops zeus__sched_instruction_profiler;

/* Registry lookup: `name` or "<name>3D". */
int zeus__sched_lookup(const char *name, const zeus__sched_ops **ops, bool *wrap3d);
/* Checks args (a JSON object or NULL) against the parameters, then check_args. */
int zeus__sched_check(const zeus__sched_ops *ops, const json_t *args);

/* A running scheduler of one job (sched_registry.c drives it, sched_3d.c wraps it). */
typedef struct zeus__sched zeus__sched;
int zeus__sched_create(zeus__sched **out, const char *name, const json_t *args,
                       const zeus_pfo_job_info *job, const zeus_pfo_rank_info *ranks, size_t n,
                       const char *job_dump_dir, bool dump_data);
/* The schedule of the current round, one per rank of the job in rank order (borrowed). */
int zeus__sched_current(zeus__sched *s, const zeus_pfo_schedule **out, size_t *n);
/* Feeds the round's results (one per rank, any order) and advances to the next schedule. */
int zeus__sched_observe(zeus__sched *s, const zeus_pfo_prof_result *results, size_t n);
bool zeus__sched_finished(const zeus__sched *s);
void zeus__sched_destroy(zeus__sched *s);

/* 3D wrapper helpers (sched_3d.c). */
/* The pipeline view: dp = tp = 1, world = pp; one rank per stage (the dp0/tp0 rank), rank = pp_rank. */
int zeus__sched3d_view(const zeus_pfo_job_info *job, const zeus_pfo_rank_info *ranks, size_t n,
                       zeus_pfo_job_info *vjob, zeus_pfo_rank_info **vranks, size_t *vn);
/* Combines results of ranks sharing a stage: times max, energies sum. */
int zeus__sched3d_aggregate(const zeus_pfo_job_info *job, const zeus_pfo_rank_info *ranks, size_t n,
                            const zeus_pfo_prof_result *results, size_t nr,
                            zeus_pfo_prof_result **out, size_t *nout);
/* Copies each stage's schedule to every rank of that stage. */
int zeus__sched3d_expand(const zeus_pfo_rank_info *ranks, size_t n, const zeus_pfo_schedule *stage,
                         size_t nstage, zeus_pfo_schedule **out, size_t *nout);

/* The instruction order of one rank: its pipe_schedule, or synchronous 1F1B from
 * num_microbatches (<= 0: none given -> ZEUS_EINVAL). Strings borrowed from static storage or
 * from the rank; the array is caller-owned (free()). */
int zeus__pfo_instruction_order(const zeus_pfo_job_info *job, const zeus_pfo_rank_info *rank,
                                long num_microbatches, const char ***out, size_t *n);

/* ---- the job registry (registry.c): transport-free server core ---- */
typedef struct zeus__registry zeus__registry;

/* A reply: HTTP-like status and a JSON body (owned by the reply). */
typedef struct zeus__reply {
  int status;
  char *body;
  size_t len;
} zeus__reply;

/* Called once for a waiting schedule request, from whichever thread completes it (under the
 * registry lock: do not call back into the registry). Takes ownership of reply->body. */
typedef void (*zeus__waiter_fn)(void *waiter, zeus__reply *reply);

typedef struct zeus__registry_opts {
  const char *scheduler;
  const char *scheduler_args; /* JSON object text or NULL */
  bool dump_data;
  const char *dump_dir;
  double max_job_idle_time_s;
  zeus__waiter_fn on_complete;
  /* Optional: called under the registry lock just before a waiter is parked, so the transport
   * can suspend the request before any thread may complete it. */
  void (*on_park)(void *waiter);
} zeus__registry_opts;

int zeus__registry_open(zeus__registry **out, const zeus__registry_opts *opts);
/* Completes every waiter with 503 and frees everything. */
void zeus__registry_close(zeus__registry *r);

/* The operations behind the routes. Each fills `reply` (status 200 with the JSON answer, or an
 * error status with {"detail": message}); the return value is the HTTP status. */
int zeus__registry_register_job(zeus__registry *r, const char *body, size_t len, zeus__reply *reply);
int zeus__registry_register_rank(zeus__registry *r, const char *job_id, const char *body, size_t len,
                                 zeus__reply *reply);
/* Either answers now (returns the status, reply filled) or parks `waiter` and returns 0; the
 * waiter is later completed through opts.on_complete exactly once. */
int zeus__registry_request_schedule(zeus__registry *r, const char *job_id, const char *rank_text,
                                    void *waiter, zeus__reply *reply);
int zeus__registry_post_result(zeus__registry *r, const char *job_id, const char *body, size_t len,
                               zeus__reply *reply);
/* Forgets a parked waiter whose connection went away (no completion call follows). */
void zeus__registry_cancel_waiter(zeus__registry *r, void *waiter);
/* Removes jobs idle for longer than the limit at monotonic time `now_s`; returns how many. */
int zeus__registry_reap(zeus__registry *r, double now_s);
size_t zeus__registry_njobs(zeus__registry *r);
/* How many dump writes failed so far, and the last failure's message ("" when none). */
void zeus__registry_dump_status(zeus__registry *r, unsigned long *failures, char *last, size_t len);
/* Completes every waiter with 503 (shutdown). */
void zeus__registry_fail_all_waiters(zeus__registry *r, const char *why);

/* Fills an error reply {"detail": msg}. Returns status. */
int zeus__reply_error(zeus__reply *reply, int status, const char *msg);
/* Maps a ZEUS_E code to an HTTP status (EINVAL/EPARSE/ERANGE 400, ENOENT 404, EEXIST/ESTATE 409,
 * EPERM 401, else 500). */
int zeus__http_status_of(int code);

#endif

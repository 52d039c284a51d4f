/* src/pfo_server/sched.h: the Perseus schedulers (not API).
 *
 * A scheduler is an explicit state machine behind a const vtable (zeus__sched_ops); the
 * scheduler table (sched_table.c) finds one by name ("<name>3D" wraps it for 3D parallelism,
 * sched_3d.c) and zeus__sched drives one for one job: it caches the current schedule and serves
 * the last one forever once the scheduler says it is finished. Transport-free: the job table
 * (job_table.h) calls it under its lock. */
#ifndef ZEUS_PFO_SERVER_SCHED_H
#define ZEUS_PFO_SERVER_SCHED_H

#include "pfo/pfo_internal.h"

/* ---- one scheduler ---- */
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

/* ---- the scheduler table (sched_table.c) ---- */
/* Lookup: `name` or "<name>3D". */
int zeus__sched_lookup(const char *name, const zeus__sched_ops **ops, bool *wrap3d);
/* Checks args (a JSON object or NULL) against the parameters, then check_args. */
int zeus__sched_check(const zeus__sched_ops *ops, const json_t *args);

/* ---- a running scheduler of one job (sched_table.c drives it, sched_3d.c wraps it) ---- */
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

/* ---- 3D wrapper helpers (sched_3d.c) ---- */
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

/* The instruction order of one rank (sched_allmax.c): its pipe_schedule, or synchronous 1F1B
 * from num_microbatches (<= 0: none given -> ZEUS_EINVAL). Strings borrowed from static storage
 * or from the rank; the array is caller-owned (free()). */
int zeus__pfo_instruction_order(const zeus_pfo_job_info *job, const zeus_pfo_rank_info *rank,
                                long num_microbatches, const char ***out, size_t *n);

#endif

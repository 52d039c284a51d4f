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

struct zeus__solver_pool; /* solver_pool.h */

/* What a scheduler sees of the job (borrowed for the duration of create, except the pool, which
 * outlives the scheduler). Ranks sorted by rank. */
typedef struct zeus__sched_ctx {
  const zeus_pfo_job_info *job;
  const zeus_pfo_rank_info *ranks;
  size_t n_ranks;
  const char *job_dump_dir; /* <dump_dir>/<job_id>, for messages; NULL when nothing may be written */
  /* Where the scheduler writes files (zeus__pfo_dump_write(dump, "name", ...)): the job's folder
   * under the server's private dump folder, opened without following symlinks for every write.
   * Borrowed; valid for the scheduler's whole life. NULL: write nothing. Never build a path from
   * job_dump_dir to write to: only this is safe against other local users. */
  const zeus__pfo_dump_loc *dump;
  bool dump_data;
  const char *job_id;                 /* for logs; NULL when unknown */
  struct zeus__solver_pool *pool;     /* the server's solver threads; NULL when there are none */
} zeus__sched_ctx;

/* The answer of a scheduler's own route (GET/POST /perseus/{job_id}...). */
typedef struct zeus__sched_route_reply {
  int status;               /* HTTP status */
  char *body;               /* malloc()ed; the caller frees it */
  size_t len;
  const char *content_type; /* static; NULL: application/json */
  const char *allow;        /* static; the methods allowed, for a 405 */
} zeus__sched_route_reply;
/* Fills an error answer {"detail": message}; returns status. */
int zeus__sched_route_error(zeus__sched_route_reply *out, int status, const char *fmt, ...) ZEUS__PRINTF(3, 4);

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
  /* Optional: the scheduler's own routes under /perseus/{job_id}: `path` is what follows the
   * job id ("" or "/..."), method "GET" or "POST". Called under the job table's lock, so it
   * must answer from memory, quickly. Returns the HTTP status (out filled). */
  int (*route)(void *state, const char *method, const char *path, const char *body, size_t len,
               zeus__sched_route_reply *out);
  /* The scheduler handles data and tensor parallelism itself: there is no "<name>3D". */
  bool native_3d;
  /* Writes files into the job's dump folder even without dump_data (the server then opens and
   * checks the dump folder at start-up). */
  bool writes_files;
} zeus__sched_ops;

extern const zeus__sched_ops zeus__sched_point_solution;
extern const zeus__sched_ops zeus__sched_all_max;
extern const zeus__sched_ops zeus__sched_instruction_profiler;
extern const zeus__sched_ops zeus__sched_perseus;

/* ---- the scheduler table (sched_table.c) ---- */
/* Lookup: `name` or "<name>3D". */
int zeus__sched_lookup(const char *name, const zeus__sched_ops **ops, bool *wrap3d);
/* Checks args (a JSON object or NULL) against the parameters, then check_args. */
int zeus__sched_check(const zeus__sched_ops *ops, const json_t *args);

/* ---- a running scheduler of one job (sched_table.c drives it, sched_3d.c wraps it) ---- */
typedef struct zeus__sched zeus__sched;
int zeus__sched_create(zeus__sched **out, const char *name, const json_t *args,
                       const zeus_pfo_job_info *job, const zeus_pfo_rank_info *ranks, size_t n,
                       const zeus__pfo_dump_loc *dump /* may be NULL */, bool dump_data,
                       struct zeus__solver_pool *pool);
/* The schedule of the current round, one per rank of the job in rank order (borrowed). */
int zeus__sched_current(zeus__sched *s, const zeus_pfo_schedule **out, size_t *n);
/* Feeds the round's results (one per rank, any order) and advances to the next schedule. */
int zeus__sched_observe(zeus__sched *s, const zeus_pfo_prof_result *results, size_t n);
bool zeus__sched_finished(const zeus__sched *s);
/* The scheduler's own routes (zeus__sched_ops.route); 404 when it has none. */
int zeus__sched_route(zeus__sched *s, const char *method, const char *path, const char *body, size_t len,
                      zeus__sched_route_reply *out);
/* The scheduler's name (static). */
const char *zeus__sched_name(const zeus__sched *s);
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

/* ---- the clock-stepping profiler (profiling.c), shared by InstructionProfiler and Perseus ----
 * Units are ranks (InstructionProfiler) or pipeline stages (Perseus), each with its clocks (the
 * rank_info's available_frequencies; rank, dp/pp/tp ranks name it in results and errors).
 * Phase 0: one warm-up round at the highest clock; 1: each unit steps down one clock (>=
 * min_frequency) per round until its forward + backward energy has risen for `patience` clocks
 * in a row or its clocks run out; 2: done, every unit at its highest clock. */
typedef struct zeus__profiling zeus__profiling;
/* One unit's measurement of a round: mean time and energy of a forward ([0]) and a backward ([1]). */
typedef struct zeus__prof_sample {
  bool have[2];
  double time_s[2], energy_j[2];
} zeus__prof_sample;
int zeus__profiling_create(zeus__profiling **out, const char *who, const zeus_pfo_rank_info *units, size_t n,
                           long min_frequency, long patience);
void zeus__profiling_destroy(zeus__profiling *p);
int zeus__profiling_phase(const zeus__profiling *p);
/* The clock unit i runs at in the coming round. */
int zeus__profiling_frequency(const zeus__profiling *p, size_t i);
/* Ingests one sample per unit (ignored in the warm-up). ZEUS_EINVAL when a unit still stepping
 * has neither a forward nor a backward measurement (nothing is recorded then). */
int zeus__profiling_observe(zeus__profiling *p, const zeus__prof_sample *samples);
/* Ends profiling now (phase 2). */
void zeus__profiling_stop(zeus__profiling *p);
/* Clock steps measured so far and the most there can be. */
void zeus__profiling_progress(const zeus__profiling *p, size_t *done_steps, size_t *max_steps);
size_t zeus__profiling_units(const zeus__profiling *p);
/* What unit i measured so far (borrowed). */
const zeus_pfo_offline_result *zeus__profiling_unit(const zeus__profiling *p, size_t i);
/* Writes the instruction CSV of every unit as `name` in the job's dump folder (atomically, without
 * following symlinks). */
int zeus__profiling_write_csv(const zeus__profiling *p, const zeus__pfo_dump_loc *dump, const char *name);
/* Mean of a breakdown's values for `inst` over iterations [skip, n_iters) (all iterations when
 * there are no more than `skip`); false when the instruction is absent or has no values. */
bool zeus__pfo_breakdown_mean(const zeus_pfo_breakdown *bd, size_t nbd, const char *inst, long skip, double *out);

/* The instruction order of one rank (sched_allmax.c): its pipe_schedule, or synchronous 1F1B
 * from num_microbatches (<= 0: none given -> ZEUS_EINVAL). Strings borrowed from static storage
 * or from the rank; the array is caller-owned (free()). */
int zeus__pfo_instruction_order(const zeus_pfo_job_info *job, const zeus_pfo_rank_info *rank,
                                long num_microbatches, const char ***out, size_t *n);

#endif

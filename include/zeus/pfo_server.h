/* zeus/pfo_server.h: the Perseus server (`zeus pfo-server`): schedulers and the HTTP server.
 *
 * The server hands every rank of a pipeline-parallel job a per-instruction frequency schedule
 * each round and collects the ranks' profiling results, with the routes and JSON shapes of the
 * original (models in zeus/pfo.h): GET /info, POST /register_job, POST /register_rank/{job_id},
 * GET /schedule/{job_id}?rank=N (a long poll, answered once every rank has asked), POST
 * /result/{job_id}. Schedulers (PointSolution, AllMaxFrequency, InstructionProfiler and their
 * "3D" wrappers, and Perseus, which profiles, solves the frontier on a solver thread, deploys a
 * plan and follows stragglers) decide each round's schedules; docs/pfo-server.md describes them
 * and docs/perseus.md walks through Perseus, whose routes live under /perseus/{job_id}.
 *
 * Part of the optional component ZEUS_WITH_PFO_SERVER (libmicrohttpd). Thread-safe: one server
 * serves from its own threads; the functions below may be called from any thread.
 */
#ifndef ZEUS_PFO_SERVER_H
#define ZEUS_PFO_SERVER_H

#include "zeus/common.h"
#include "zeus/pfo.h"

ZEUS_BEGIN_DECLS

/* ---------------------------------------------------------------------------------------------
 * Schedulers
 * ------------------------------------------------------------------------------------------- */

/* Names of the schedulers the server knows, NULL-terminated (static storage). The 3D-parallel
 * variants ("<name>3D") are listed too. */
ZEUS_EXTERN const char *const *zeus_pfo_scheduler_names(void);
/* Checks a scheduler name and its arguments (a JSON object, NULL or "" for none) as the server
 * does at start-up. ZEUS_EINVAL naming the unknown scheduler, unknown or missing argument or
 * wrong type; scheduler-specific checks (PointSolution parses its plan file) may add more. */
ZEUS_EXTERN int zeus_pfo_check_scheduler(const char *name, const char *args_json);

/* ---------------------------------------------------------------------------------------------
 * The server
 * ------------------------------------------------------------------------------------------- */

/* Server settings. Zero-initialised (or NULL) means defaults. */
typedef struct zeus_pfo_server_opts {
  const char *host;          /* default "127.0.0.1" */
  int port;                  /* default 7787; -1: any free port (see zeus_pfo_server_port) */
  const char *scheduler;     /* default "PointSolution" */
  const char *scheduler_args;/* JSON object; default "{}" */
  const char *log_level;     /* informational (shown by /info); the caller sets the log level */
  bool dump_data;            /* default false */
  const char *dump_dir;      /* default "./dump" */
  int max_job_idle_time_s;   /* default 604800 (7 days); jobs idle longer are removed */
  const char *token;         /* bearer token; NULL or "": no authentication */
  size_t max_body_bytes;     /* default 16 MiB; larger bodies get 413 */
  int threads;               /* HTTP threads; default: online CPUs, at most 8 */
  int solver_threads;        /* threads that solve frontiers for the Perseus scheduler, 1..16;
                              * default 1 (never an HTTP thread) */
} zeus_pfo_server_opts;

typedef struct zeus_pfo_server zeus_pfo_server;

/* Fills *o with the defaults listed in the struct. Reads no environment. */
ZEUS_EXTERN void zeus_pfo_server_opts_init(zeus_pfo_server_opts *o /* out */);

/* Fills `opts` from the environment: ZEUS_PFO_SCHEDULER, ZEUS_PFO_SCHEDULER_ARGS,
 * ZEUS_PFO_LOG_LEVEL, ZEUS_PFO_DUMP_DATA, ZEUS_PFO_DUMP_DIR, ZEUS_PFO_MAX_JOB_IDLE_TIME,
 * ZEUS_PFO_TOKEN (each also read as PERSEUS_<NAME>; ZEUS_PFO_ wins). Unset variables leave the
 * field as it is. Strings point into the environment. ZEUS_EINVAL/ERANGE naming the variable. */
ZEUS_EXTERN int zeus_pfo_server_opts_from_env(zeus_pfo_server_opts *opts /* in, out */);

/* Validates the settings (scheduler and its arguments included), binds and starts serving on
 * background threads. ZEUS_EINVAL for bad settings, ZEUS_ENET when the address cannot be bound. */
ZEUS_EXTERN int zeus_pfo_server_open(zeus_pfo_server **out /* out */,
                                     const zeus_pfo_server_opts *opts);
/* The port actually bound. */
ZEUS_EXTERN int zeus_pfo_server_port(const zeus_pfo_server *srv);
/* Answers every waiting request with 503, stops serving, and frees everything. Dumps are written
 * synchronously as rounds complete, so nothing is lost. NULL does nothing. */
ZEUS_EXTERN void zeus_pfo_server_close(zeus_pfo_server *srv);

ZEUS_END_DECLS
#endif

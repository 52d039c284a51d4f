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

/* Server settings. Zero-initialised (or NULL) means defaults (zeus_pfo_server_opts_init fills them
 * in explicitly).
 *
 * Bounds: everything a client can make the server hold is bounded, and a request that would pass
 * a bound is refused with a status and a message naming it (docs/pfo-server.md, "Bounds"). At
 * open the server raises its soft descriptor limit (RLIMIT_NOFILE) to the hard one and keeps its
 * connections below it: from max_connections less a reserve on, a new connection gets 503 and is
 * closed, unless its request registers a job or a rank, or leaves a job. Connections whose request
 * trickles in cannot hold that reserve: request_timeout_s and max_slow_per_client cut them. */
typedef struct zeus_pfo_server_opts {
  const char *host;          /* default "127.0.0.1"; another address without a token: a warning */
  int port;                  /* default 7787; -1: any free port (see zeus_pfo_server_port) */
  const char *scheduler;     /* default "PointSolution" */
  const char *scheduler_args;/* JSON object; default "{}" */
  const char *log_level;     /* informational (shown by /info); the caller sets the log level */
  bool dump_data;            /* default false */
  const char *dump_dir;      /* default "./dump"; created 0700; refused when another user owns it
                                or it is writable by group or others */
  int max_job_idle_time_s;   /* default 604800 (7 days); jobs idle longer are removed (a job whose
                                ranks have not all registered: after 600 s, or this when shorter) */
  const char *token;         /* bearer token; NULL: none; "" is refused (ZEUS_EINVAL) */
  size_t max_body_bytes;     /* default 16 MiB; larger bodies get 413 */
  int threads;               /* HTTP threads; default: online CPUs, at most 8 */
  /* Appended fields (zero: default). */
  const char *token_file;    /* read the bearer token from this file's first line instead (a
                                regular file of at most 4 KiB; a warning when others may read it) */
  bool require_rank_tokens;  /* refuse ranks that register without X-Zeus-Rank-Token (clients of the
                                original system send none) */
  int max_connections;       /* default 32768, and at most the descriptor limit less a reserve */
  double idle_timeout_s;     /* a connection idle this long between requests is closed (default 60;
                                a waiting schedule request is not idle, and one whose client went
                                away is dropped within a second) */
  int max_jobs;              /* jobs held at once (default 1024); more get 503 */
  size_t max_job_memory_bytes; /* estimated memory one job may hold (default 256 MiB); 413 */
  size_t max_memory_bytes;   /* estimated memory of all jobs (default 1 GiB); 413 */
  size_t max_inflight_bytes; /* request bodies being received or parsed at once, with an estimate of
                                their parse (default 256 MiB); more get 503 (clients retry) */
  int solver_threads;        /* threads that solve frontiers for the Perseus scheduler, 1..16;
                              * default 1 (never an HTTP thread) */
  int max_jobs_per_client;   /* jobs one client holds at once (default: a quarter of max_jobs); a
                                client is a uid from loopback (all of 127.0.0.0/8), else an address */
  int reserved_jobs;         /* the last slots of max_jobs, only for clients that hold no job
                                (default max_jobs / 16), so that one user cannot lock others out */
  double request_timeout_s;  /* a whole request (headers and body) must arrive within this of the
                                connection's opening, or within idle_timeout_s plus this of the
                                previous reply; else the connection is closed (default 10) */
  int max_slow_per_client;   /* connections one client may hold that have no whole request after
                                slow_after_s although the server has read all they sent (default
                                64): past it the newest are cut and new ones refused (503), before
                                any header is read; root is exempt; a client as for
                                max_jobs_per_client */
  double slow_after_s;       /* see max_slow_per_client (default 1) */
} zeus_pfo_server_opts;

typedef struct zeus_pfo_server zeus_pfo_server;

/* Fills *o with the defaults listed in the struct. Reads no environment. */
ZEUS_EXTERN void zeus_pfo_server_opts_init(zeus_pfo_server_opts *o /* out */);

/* Fills `opts` from the environment: ZEUS_PFO_SCHEDULER, ZEUS_PFO_SCHEDULER_ARGS,
 * ZEUS_PFO_LOG_LEVEL, ZEUS_PFO_DUMP_DATA, ZEUS_PFO_DUMP_DIR, ZEUS_PFO_MAX_JOB_IDLE_TIME,
 * ZEUS_PFO_TOKEN, ZEUS_PFO_TOKEN_FILE, ZEUS_PFO_REQUIRE_RANK_TOKENS, ZEUS_PFO_MAX_CONNECTIONS,
 * ZEUS_PFO_IDLE_TIMEOUT, ZEUS_PFO_REQUEST_TIMEOUT, ZEUS_PFO_MAX_SLOW_PER_CLIENT, ZEUS_PFO_SLOW_AFTER,
 * ZEUS_PFO_MAX_JOBS, ZEUS_PFO_MAX_JOBS_PER_CLIENT, ZEUS_PFO_RESERVED_JOBS, ZEUS_PFO_MAX_JOB_MEMORY,
 * ZEUS_PFO_MAX_MEMORY (each also
 * read as PERSEUS_<NAME>; ZEUS_PFO_ wins). Unset variables leave the field as it is; a token
 * variable that is set but empty is ZEUS_EINVAL (it would silently disable authentication).
 * Strings point into the environment. ZEUS_EINVAL/ERANGE naming the variable. */
ZEUS_EXTERN int zeus_pfo_server_opts_from_env(zeus_pfo_server_opts *opts /* in, out */);

/* Validates the settings (scheduler and its arguments included), raises the process's soft
 * descriptor limit to its hard limit, opens and checks the dump folder, binds and starts serving
 * on background threads. ZEUS_EINVAL for bad settings (an empty token, token and token_file both,
 * an unreadable token file), ZEUS_EPERM for a dump folder others could write, ZEUS_ENET when the
 * address cannot be bound. */
ZEUS_EXTERN int zeus_pfo_server_open(zeus_pfo_server **out /* out */,
                                     const zeus_pfo_server_opts *opts);
/* The port actually bound. */
ZEUS_EXTERN int zeus_pfo_server_port(const zeus_pfo_server *srv);
/* Answers every waiting request with 503, stops serving, and frees everything. Dumps are written
 * synchronously as rounds complete, so nothing is lost. NULL does nothing. */
ZEUS_EXTERN void zeus_pfo_server_close(zeus_pfo_server *srv);

ZEUS_END_DECLS
#endif

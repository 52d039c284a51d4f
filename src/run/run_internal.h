/* src/run/run_internal.h: the recurring-job driver's internals (not API). */
#ifndef ZEUS_RUN_INTERNAL_H
#define ZEUS_RUN_INTERNAL_H

#include <signal.h>
#include <sqlite3.h>

#include "bso/bso_internal.h"
#include "zeus/run.h"

/* ---- an arena of allocations freed together ----
 * Two kinds: a list of separate allocations (zeroed struct; zeus__arena_free releases them), or
 * one caller-given block (`block`, `size`) carved up in order, which zeus__arena_free leaves
 * alone. Either way `used` counts the bytes handed out (aligned), so a list arena measures what
 * a block must hold. */
typedef struct zeus__arena {
  void **p;
  size_t n, cap;
  char *block;
  size_t size, used;
} zeus__arena;
/* size zeroed bytes, aligned for any type; NULL when out of memory or out of block. */
void *zeus__arena_alloc(zeus__arena *a, size_t size);
char *zeus__arena_strdup(zeus__arena *a, const char *s);
void zeus__arena_free(zeus__arena *a);

/* Caps of the files `zeus run` reads (core's bounded reader): a job spec and a trainee's result
 * file are a few hundred bytes; 1 MiB each leaves room for long commands and extra fields. */
#define ZEUS__RUN_SPEC_MAX ((size_t)1 << 20)
#define ZEUS__RUN_RESULT_MAX ((size_t)1 << 20)

/* Deep copy of a spec into the arena. */
int zeus__run_spec_copy(zeus__arena *a, const zeus_run_spec *in, zeus_run_spec *out);
/* Checks every field; ZEUS_EINVAL naming it. */
int zeus__run_spec_check(const zeus_run_spec *s);

/* The shortest decimal that reads back as v, written like Python's repr (2.0, 0.1, inf). */
void zeus__py_repr(double v, char *buf, size_t len);

/* Values of the command placeholders. */
typedef struct zeus__run_subst {
  char bs[32], lr[40], seed[32], epochs[32], slice[32], target[40];
} zeus__run_subst;
/* Expands one argument; ZEUS_EINVAL for an unknown placeholder or an unmatched brace. *uses_lr
 * is set when the argument mentions {lr} or {learning_rate}. */
int zeus__run_expand(const char *tmpl, const zeus__run_subst *v, zeus__buf *out, bool *uses_lr);

/* The learning rate of bs: the explicit table, else the optimizer's rule from default_lr. */
int zeus__run_lr(const zeus_run_spec *s, long bs, double *lr);

/* ---- a state kept in PostgreSQL (run_pg.c) ---- */
typedef struct zeus__run_pg zeus__run_pg;
/* Connects (migrating the shared schema), takes the job's advisory lock (ZEUS_EEXIST when another
 * driver holds it) and reads the state's SQLite image (*image NULL when there is none yet;
 * sqlite3_malloc'd, for sqlite3_deserialize). */
int zeus__run_pg_open(const char *url, const char *key, zeus__run_pg **out, unsigned char **image, size_t *len);
/* Writes the state's image (one statement: atomic). */
int zeus__run_pg_save(zeus__run_pg *p, const unsigned char *image, size_t len);
/* --reset-state: the old row renamed to <key>.reset-<stamp>, kept. */
int zeus__run_pg_set_aside(zeus__run_pg *p, const char *stamp);
void zeus__run_pg_close(zeus__run_pg *p);

struct zeus_runner {
  zeus_run_spec s;
  zeus__arena own;
  zeus_run_callbacks cb;
  char *logdir, *state_path, *lock_path;
  int lock_fd, id_lock_fd; /* the state's lock; the job identity's (default state only) */
  sqlite3 *db;
  zeus__run_pg *pg; /* --state postgresql://...: db is in memory, its image kept there */
  zeus_bso *bso;
  long next_rec, next_try;
  long long next_seed;
  double min_cost, cost_acc;
  double max_power_w;
  bool uses_lr;
  long cur_rec, cur_try; /* the try being run */
  volatile sig_atomic_t stop;
};

/* ---- state (run_state.c) ---- */
/* Finds or creates the job folder and the state, checks and loads it. */
int zeus__run_state_open(zeus_runner *r);
void zeus__run_state_close(zeus_runner *r);
/* Forgets what was not committed: the driver and the optimizer as the state has them. */
int zeus__run_state_reload(zeus_runner *r);
/* Records one try and the driver's state after it in one transaction (t NULL: the driver only). */
int zeus__run_state_commit(zeus_runner *r, const zeus_run_try *t);
/* Records in the state that the trainee of the current try runs as process group `pid` (with the
 * leader's start time, so that a reused id is not taken for it), and forgets it again. A later
 * run that finds the group of a recorded trainee alive refuses to start (an orphan of a driver
 * killed with SIGKILL would otherwise run beside the repeated try). Failures are logged. */
void zeus__run_state_trainee_started(zeus_runner *r, pid_t pid);
void zeus__run_state_trainee_ended(zeus_runner *r);
/* The history and state as JSON text. */
int zeus__run_state_json(zeus_runner *r, char **out);

/* ---- children (child.c) ---- */
typedef struct zeus__child_result {
  int exit_code;      /* 128 + signal when killed */
  int signal;         /* the signal that killed it, 0 when it exited */
  bool timed_out;
  bool stopped;       /* zeus_runner_request_stop */
} zeus__child_result;
/* Runs argv with env (NULL-terminated "K=V" lists) in workdir, streaming its output to the callback
 * and to log_path. */
int zeus__run_child(zeus_runner *r, char *const *argv, char *const *env, const char *log_path,
                    zeus__child_result *res);

#endif

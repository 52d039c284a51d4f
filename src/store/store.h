/* src/store/store.h: the SQL store that zeus bso-server and zeus run share (the component STORE;
 * internal, not API). One interface over two back ends: SQLite (store_sqlite.c, always built
 * with the store) and PostgreSQL through libpq (src/store_pg/, the optional component STORE_PG).
 * SQL is written once, with $1..$n parameters, in the dialect both accept.
 *
 * What is decided once, here, for every user of the store:
 *   - bounds and retries: zeus__store_opts and its defaults (zeus__store_defaults): PostgreSQL's
 *     connect, statement and keepalive timeouts (all derived from one timeout_s by
 *     zeus__store_pg_bounds), SQLite's busy timeout, how often a transaction is tried again;
 *   - the schema: the migrations of the shared database (zeus__store_schema) and the one runner
 *     that applies them (zeus__store_migrate);
 *   - the transaction loop (zeus__store_transact): BEGIN, the caller's work, COMMIT, run again
 *     with a short random backoff while the back end asks for it.
 *
 * Transactions: BEGIN IMMEDIATE on SQLite; on PostgreSQL READ COMMITTED with the rows a request
 * touches locked by the caller. A call that fails with STORE_RETRY (SQLite busy, PostgreSQL
 * serialization failure or deadlock) leaves the transaction to be rolled back and the whole
 * transaction to be run again; STORE_DOWN means the connection is gone (the caller opens it again
 * on its next use). Not thread safe: one connection per thread at a time. */
#ifndef ZEUS_STORE_H
#define ZEUS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { STORE_OK = 0, STORE_ERR = 1, STORE_RETRY = 2, STORE_DOWN = 3 };
enum { STORE_NULL = 0, STORE_INT, STORE_REAL, STORE_TEXT };

typedef struct zeus__store_val {
  int type;
  long long i;
  double d;
  const char *s; /* STORE_TEXT: borrowed in parameters, owned by the result in rows */
} zeus__store_val;

static inline zeus__store_val store_int(long long i) { return (zeus__store_val){.type = STORE_INT, .i = i}; }
static inline zeus__store_val store_real(double d) { return (zeus__store_val){.type = STORE_REAL, .d = d}; }
static inline zeus__store_val store_text(const char *s) {
  return (zeus__store_val){.type = s ? STORE_TEXT : STORE_NULL, .s = s};
}
static inline zeus__store_val store_null(void) { return (zeus__store_val){.type = STORE_NULL}; }

/* Rows of a query: cells[row * ncols + col]. */
typedef struct zeus__store_rows {
  size_t nrows, ncols;
  zeus__store_val *cells;
} zeus__store_rows;

void zeus__store_rows_free(zeus__store_rows *r);
long long zeus__store_rows_int(const zeus__store_rows *r, size_t row, size_t col);    /* 0 for NULL */
double zeus__store_rows_real(const zeus__store_rows *r, size_t row, size_t col);      /* NaN for NULL */
const char *zeus__store_rows_text(const zeus__store_rows *r, size_t row, size_t col); /* NULL for NULL */
int zeus__store_rows_is_null(const zeus__store_rows *r, size_t row, size_t col);

/* ---- the one place for bounds and retries ---- */

/* Zero-initialised fields take zeus__store_defaults' values. */
typedef struct zeus__store_opts {
  /* PostgreSQL: bounds each connection attempt (libpq's connect_timeout, 2 s at least) and each
   * statement (past it: STORE_DOWN, the connection unusable), and turns TCP keepalives on (see
   * zeus__store_pg_bounds). < 0: no bound (libpq's defaults). SQLite ignores it. */
  double timeout_s;
  /* SQLite: how long a statement waits for another connection's lock before STORE_RETRY. */
  int busy_timeout_ms;
  /* zeus__store_transact: attempts in all of a transaction the back end asks to retry. */
  int max_attempts;
  /* A pool of connections (zeus bso-server's): after a failed connection attempt, how long its
   * callers get that failure at once instead of each waiting out a connection attempt. */
  double reconnect_s;
} zeus__store_opts;

/* The defaults, every bound of the store in one table (zeus__store_defaults, store.c):
 * timeout_s 4 s: under the 5 s the original BSO client waits for an answer (httpx's default), so
 * that it gets zeus bso-server's 503 rather than its own timeout, far above any statement on a
 * sound database (a whole request's p99 under bench_bso_server's 64 clients is ~0.3 s on
 * PostgreSQL). */
#define ZEUS__STORE_TIMEOUT_S 4.0
#define ZEUS__STORE_BUSY_TIMEOUT_MS 10000
#define ZEUS__STORE_MAX_ATTEMPTS 50
#define ZEUS__STORE_RECONNECT_S 1.0
/* zeus run's own state file (src/run/run_state.c: one driver per file, under a file lock, so a
 * shorter busy wait than the shared store's; every commit synchronous). A macro here, with the
 * store's other bounds, so that src/run/ builds without the store (its fuzzer compiles it alone). */
#define ZEUS__STORE_RUN_STATE_BUSY_TIMEOUT_MS 5000
extern const zeus__store_opts zeus__store_defaults;

/* o with its zero fields filled from zeus__store_defaults (o NULL: the defaults). */
zeus__store_opts zeus__store_opts_resolve(const zeus__store_opts *o);

/* libpq connection parameters that bound a connection by timeout_s (> 0): connect_timeout,
 * keepalives, keepalives_idle, keepalives_interval, keepalives_count, tcp_user_timeout, in that
 * order; n is 0 when timeout_s <= 0 (no bound). The caller's URI comes after them, so its own
 * values of these parameters win. */
#define ZEUS__STORE_PG_NBOUNDS 6
typedef struct zeus__store_pg_bounds {
  int n;
  const char *keys[ZEUS__STORE_PG_NBOUNDS];
  char vals[ZEUS__STORE_PG_NBOUNDS][24];
} zeus__store_pg_bounds;
void zeus__store_pg_bounds_of(double timeout_s, zeus__store_pg_bounds *out);

/* ---- connections ---- */

typedef struct zeus__store zeus__store;

/* What a back end provides. err/errlen: a message naming what failed. */
typedef struct zeus__store_ops {
  const char *name; /* "sqlite", "postgresql": the first word of every message */
  int (*begin)(zeus__store *db, char *err, size_t errlen);
  int (*commit)(zeus__store *db, char *err, size_t errlen);
  void (*rollback)(zeus__store *db);
  /* Runs one statement sql with n parameters; rows (optional) gets the result. */
  int (*exec)(zeus__store *db, const char *sql, const zeus__store_val *p, int n, zeus__store_rows *rows, char *err,
              size_t errlen);
  /* Runs a script of statements without parameters (a migration). */
  int (*script)(zeus__store *db, const char *sql, char *err, size_t errlen);
  /* Run inside a migration's transaction before anything else, so that servers starting together
   * migrate one after another (NULL: the transaction's own lock suffices). */
  const char *migration_lock;
  void (*close)(zeus__store *db);
} zeus__store_ops;

struct zeus__store {
  const zeus__store_ops *ops;
  zeus__store_opts opts; /* resolved */
};

/* Opens a connection for url: "sqlite:///ABSOLUTE/PATH", "sqlite://RELATIVE/PATH", a plain path,
 * or "postgresql://..." / "postgres://..." (any libpq URI; STORE_ERR naming the component when
 * PostgreSQL support was not built). opts: NULL for the defaults. Brings the schema to
 * zeus__store_schema's latest version when migrate is set. */
int zeus__store_open(const char *url, const zeus__store_opts *opts, bool migrate, zeus__store **out, char *err,
                     size_t errlen);
/* The back ends (opts resolved). */
int zeus__store_open_sqlite(const char *path, const zeus__store_opts *opts, zeus__store **out, char *err,
                            size_t errlen);
int zeus__store_open_pg(const char *url, const zeus__store_opts *opts, zeus__store **out, char *err, size_t errlen);
/* For a back end: a zeroed connection of size bytes (its struct, which starts with a zeus__store)
 * with ops and the resolved opts set; NULL with err set when out of memory. */
void *zeus__store_alloc(size_t size, const zeus__store_ops *ops, const zeus__store_opts *opts, char *err,
                        size_t errlen);
/* Whether url names a PostgreSQL database. */
bool zeus__store_url_is_pg(const char *url);
void zeus__store_close(zeus__store *db);

/* Applies the migrations not yet applied, in order, in one transaction: migration i (1-based)
 * brings the schema to version i, and bso_schema_version gets one row per version applied. A
 * database whose version is newer than n is refused (STORE_ERR naming both versions). */
int zeus__store_migrate(zeus__store *db, const char *const *migrations, int n, char *err, size_t errlen);

/* Runs body as one transaction: begin, body, commit when body returned STORE_OK and left *commit
 * set (it starts set; clear it to roll back a transaction that decided to change nothing), else
 * rollback. While a step fails with STORE_RETRY, waits a short random time (1 ms up to 64 ms,
 * growing with the attempts) and runs the whole transaction again, db->opts.max_attempts times in
 * all; body must then start over from the state it had before its first attempt. *attempts (may
 * be NULL) gets how many were made. Returns the last step's STORE_* code. */
typedef int (*zeus__store_body)(zeus__store *db, void *arg, bool *commit, char *err, size_t errlen);
int zeus__store_transact(zeus__store *db, zeus__store_body body, void *arg, int *attempts, char *err, size_t errlen);

/* ---- the schema of the shared database ---- */

/* The bounds on a BSO report's numbers (src/bso_server/routes.c) and the rows outside them, a
 * condition written once for the query that finds them and the partial index that makes that
 * query cheap (migration 3): both SQLite and PostgreSQL use such an index only for a query that
 * repeats its condition. The numbers in BSO_TRIAL_UNSOUND are BSO_MAX_TIME_S and BSO_MAX_ENERGY_J
 * (literals: an index's condition cannot take parameters). */
#define BSO_MAX_TIME_S 1e9
#define BSO_MAX_ENERGY_J 1e18
#define BSO_TRIAL_UNSOUND \
  "status = 1 AND (time_s IS NULL OR energy_j IS NULL OR NOT (time_s >= 0 AND time_s <= 1e9 AND energy_j >= 0 AND " \
  "energy_j <= 1e18))"
/* Rows every request of a job looks at first: its dispatched trials (the lease) and unsound ones. */
#define BSO_TRIAL_ATTENTION "(status = 0 OR (" BSO_TRIAL_UNSOUND "))"

/* The schema of the database zeus bso-server and zeus run --state postgresql://... share:
 * migration i (1-based) brings it to version i (schema.c). */
extern const char *const zeus__store_schema[];
extern const int zeus__store_schema_n;

#endif

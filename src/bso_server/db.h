/* src/bso_server/db.h: the batch-size optimizer server's store, one interface over two backends
 * (SQLite: db_sqlite.c, always built with the server; PostgreSQL through libpq: src/bso_pg/, an
 * optional component). SQL is written once, with $1..$n parameters, in the dialect both accept.
 *
 * Every request of the server runs as one transaction (bso_db_begin .. bso_db_commit): BEGIN
 * IMMEDIATE on SQLite, SERIALIZABLE on PostgreSQL. A call that fails with BSO_DB_RETRY (SQLite
 * busy, PostgreSQL serialization failure or deadlock) leaves the transaction to be rolled back and
 * the whole request to be run again; BSO_DB_DOWN means the connection is gone (the server answers
 * 503 and the next use reconnects). Not thread safe: one connection per thread at a time. */
#ifndef ZEUS_BSO_DB_H
#define ZEUS_BSO_DB_H

#include <stddef.h>
#include <stdint.h>

enum { BSO_DB_OK = 0, BSO_DB_ERR = 1, BSO_DB_RETRY = 2, BSO_DB_DOWN = 3 };
enum { BSO_NULL = 0, BSO_INT, BSO_REAL, BSO_TEXT };

typedef struct bso_val {
  int type;
  long long i;
  double d;
  const char *s; /* BSO_TEXT: borrowed in parameters, owned by the result in rows */
} bso_val;

static inline bso_val bso_int(long long i) { return (bso_val){.type = BSO_INT, .i = i}; }
static inline bso_val bso_real(double d) { return (bso_val){.type = BSO_REAL, .d = d}; }
static inline bso_val bso_text(const char *s) { return (bso_val){.type = s ? BSO_TEXT : BSO_NULL, .s = s}; }
static inline bso_val bso_null(void) { return (bso_val){.type = BSO_NULL}; }

/* Rows of a query: cells[row * ncols + col]. */
typedef struct bso_rows {
  size_t nrows, ncols;
  bso_val *cells;
} bso_rows;

void bso_rows_free(bso_rows *r);
long long bso_rows_int(const bso_rows *r, size_t row, size_t col);    /* 0 for NULL */
double bso_rows_real(const bso_rows *r, size_t row, size_t col);      /* NaN for NULL */
const char *bso_rows_text(const bso_rows *r, size_t row, size_t col); /* NULL for NULL */
int bso_rows_is_null(const bso_rows *r, size_t row, size_t col);

typedef struct bso_db bso_db;

/* What a backend provides. err/errlen: a message naming what failed. */
typedef struct bso_db_ops {
  const char *name; /* "sqlite", "postgresql" */
  int (*begin)(bso_db *db, char *err, size_t errlen);
  int (*commit)(bso_db *db, char *err, size_t errlen);
  void (*rollback)(bso_db *db);
  /* Runs sql with n parameters; rows (optional) gets the result. */
  int (*exec)(bso_db *db, const char *sql, const bso_val *p, int n, bso_rows *rows, char *err, size_t errlen);
  /* Runs the schema migrations not yet applied (schema_version table), in one transaction. */
  int (*migrate)(bso_db *db, char *err, size_t errlen);
  void (*close)(bso_db *db);
} bso_db_ops;

struct bso_db {
  const bso_db_ops *ops;
};

/* Opens a connection for url: "sqlite:///ABSOLUTE/PATH", "sqlite://RELATIVE/PATH", a plain path,
 * or "postgresql://..." / "postgres://..." (any libpq URI; BSO_DB_ERR naming the component when
 * PostgreSQL support was not built). Migrates the schema when migrate is set. */
int bso_db_open(const char *url, int migrate, bso_db **out, char *err, size_t errlen);
/* The same with a bound on a database that stops answering: timeout_s > 0 bounds each
 * PostgreSQL connection attempt (libpq's connect_timeout, 2 s at least) and each statement (past
 * it: BSO_DB_DOWN, the connection unusable), and turns TCP keepalives on; <= 0: no bound (libpq's
 * defaults, as bso_db_open). SQLite ignores it (its busy wait is bounded by itself). */
int bso_db_open_opts(const char *url, int migrate, double timeout_s, bso_db **out, char *err, size_t errlen);
int bso_db_open_sqlite(const char *path, bso_db **out, char *err, size_t errlen);
int bso_db_open_pg(const char *url, double timeout_s, bso_db **out, char *err, size_t errlen);
/* Whether url names a PostgreSQL database. */
int bso_db_url_is_pg(const char *url);

/* The bounds on a report's numbers (routes.c) and the rows outside them, a condition written once
 * for the query that finds them and the partial index that makes that query cheap (migration 3):
 * both SQLite and PostgreSQL use such an index only for a query that repeats its condition. The
 * numbers in BSO_TRIAL_UNSOUND are BSO_MAX_TIME_S and BSO_MAX_ENERGY_J (literals: an index's
 * condition cannot take parameters). */
#define BSO_MAX_TIME_S 1e9
#define BSO_MAX_ENERGY_J 1e18
#define BSO_TRIAL_UNSOUND \
  "status = 1 AND (time_s IS NULL OR energy_j IS NULL OR NOT (time_s >= 0 AND time_s <= 1e9 AND energy_j >= 0 AND " \
  "energy_j <= 1e18))"
/* Rows every request of a job looks at first: its dispatched trials (the lease) and unsound ones. */
#define BSO_TRIAL_ATTENTION "(status = 0 OR (" BSO_TRIAL_UNSOUND "))"

/* The schema, shared by both backends: migration i (1-based) brings the schema to version i. */
extern const char *const bso_db_migrations[];
extern const int bso_db_nmigrations;

#endif

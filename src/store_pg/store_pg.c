/* store_pg.c: the store (src/store/store.h) on PostgreSQL through libpq: the optional component
 * ZEUS_WITH_STORE_PG, which extends ZEUS_WITH_STORE (and is empty without it).
 *
 * Transactions are READ COMMITTED with the job's row locked (SELECT ... FOR UPDATE) by every
 * request that touches the job, so that requests of one job run one after another while other
 * jobs' run in parallel; a serialization failure, deadlock or a unique-key race (two nodes
 * registering one new job id) asks the caller to retry the request. A lost connection (the
 * server restarting, the network) is STORE_DOWN: the server answers 503 and opens the
 * connection again on its next use.
 *
 * A server that stops answering (a network partition, a stopped host; issue 36) must not hold
 * requests without bound: with a timeout (zeus__store_opts.timeout_s), connecting is bounded by
 * libpq's connect_timeout and TCP keepalives let the kernel notice a dead peer of an idle
 * connection (the parameters: zeus__store_pg_bounds_of, in store.c), and every statement by a
 * deadline of our own here (the statement is sent and its answer awaited with poll(); a server
 * that does not answer cannot cancel anything, so a server-side statement_timeout would not help),
 * after which the connection counts as lost. The user's URI may set any of these libpq parameters
 * itself; its values win. */
#include "zeus/config.h"

#if ZEUS_HAVE_STORE
#include <errno.h>
#include <libpq-fe.h>
#include <math.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

#include "zeus/clock.h"

typedef struct pg_db {
  zeus__store base;
  PGconn *c;
  bool dead; /* a statement got no answer in time: the connection is not used again */
} pg_db;

/* Runs sql (with n text parameters when params is set) and returns its result, waiting at most the
 * store's timeout_s for the answer. NULL with *timed_out set when none came in time (the
 * connection is then dead); NULL otherwise when libpq failed (PQerrorMessage says why). */
static PGresult *pg_run(pg_db *db, const char *sql, int n, const char *const *params, bool with_params,
                        bool *timed_out) {
  *timed_out = false;
  if (db->dead) {
    *timed_out = true;
    return NULL;
  }
  if (!(db->base.opts.timeout_s > 0))
    return with_params ? PQexecParams(db->c, sql, n, NULL, params, NULL, NULL, 0) : PQexec(db->c, sql);
  int ok = with_params ? PQsendQueryParams(db->c, sql, n, NULL, params, NULL, NULL, 0) : PQsendQuery(db->c, sql);
  if (!ok) return NULL;
  double deadline = zeus_monotonic_s() + db->base.opts.timeout_s;
  PGresult *last = NULL;
  for (;;) {
    while (PQisBusy(db->c)) {
      double left = deadline - zeus_monotonic_s();
      int flushed = PQflush(db->c); /* 0: all sent; 1: more to send */
      if (flushed < 0) {
        PQclear(last);
        return NULL;
      }
      struct pollfd pfd = {.fd = PQsocket(db->c), .events = (short)(POLLIN | (flushed ? POLLOUT : 0))};
      int pr = left > 0 ? poll(&pfd, 1, (int)ceil(left * 1000)) : 0;
      if (pr < 0 && errno == EINTR) continue;
      if (pr == 0) {
        PQclear(last);
        db->dead = true;
        *timed_out = true;
        return NULL;
      }
      if (pr < 0 || !PQconsumeInput(db->c)) {
        PQclear(last);
        return NULL;
      }
    }
    PGresult *r = PQgetResult(db->c);
    if (!r) break;
    /* One statement, one result; keep an error over a later one. */
    if (last && PQresultStatus(last) == PGRES_FATAL_ERROR)
      PQclear(r);
    else {
      PQclear(last);
      last = r;
    }
  }
  return last;
}

static int pg_timed_out(pg_db *db, const char *what, char *err, size_t errlen) {
  snprintf(err, errlen,
           "postgresql: %s: no answer within %g s (--db-timeout); the connection is given up and opened again on the "
           "next request",
           what, db->base.opts.timeout_s);
  return STORE_DOWN;
}

/* The class of a failed result: retry, down, or another error. */
static int pg_fail(pg_db *db, PGresult *r, const char *what, char *err, size_t errlen) {
  const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
  const char *msg = r ? PQresultErrorMessage(r) : NULL;
  if (!msg || !*msg) msg = PQerrorMessage(db->c);
  snprintf(err, errlen, "postgresql: %s: %s", what, msg);
  size_t n = strlen(err);
  while (n && (err[n - 1] == '\n' || err[n - 1] == ' ')) err[--n] = '\0';
  /* No SQLSTATE: libpq's own failure (the server closed the connection, the network). */
  if (PQstatus(db->c) != CONNECTION_OK || !state) return STORE_DOWN;
  {
    if (!strcmp(state, "40001") || !strcmp(state, "40P01") || !strcmp(state, "23505") || !strcmp(state, "55P03"))
      return STORE_RETRY;
    if (!strncmp(state, "08", 2) || !strncmp(state, "57P", 3) || !strcmp(state, "53300")) return STORE_DOWN;
  }
  return STORE_ERR;
}

static int pg_exec(zeus__store *d, const char *sql, const zeus__store_val *p, int n, zeus__store_rows *rows, char *err,
                   size_t errlen) {
  pg_db *db = (pg_db *)d;
  if (rows) memset(rows, 0, sizeof *rows);
  char buf[16][40];
  const char *vals[16];
  if (n > 16) {
    snprintf(err, errlen, "postgresql: more than 16 parameters");
    return STORE_ERR;
  }
  for (int i = 0; i < n; i++) {
    switch (p[i].type) {
      case STORE_INT:
        snprintf(buf[i], sizeof buf[i], "%lld", p[i].i);
        vals[i] = buf[i];
        break;
      case STORE_REAL:
        if (isinf(p[i].d))
          snprintf(buf[i], sizeof buf[i], "%s", p[i].d > 0 ? "Infinity" : "-Infinity");
        else if (isnan(p[i].d))
          snprintf(buf[i], sizeof buf[i], "NaN");
        else
          snprintf(buf[i], sizeof buf[i], "%.17g", p[i].d);
        vals[i] = buf[i];
        break;
      case STORE_TEXT: vals[i] = p[i].s; break;
      default: vals[i] = NULL;
    }
  }
  bool timed_out;
  PGresult *r = pg_run(db, sql, n, vals, true, &timed_out);
  if (timed_out) return pg_timed_out(db, "running a statement", err, errlen);
  ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    int rc = pg_fail(db, r, "running a statement", err, errlen);
    PQclear(r);
    return rc;
  }
  if (rows && st == PGRES_TUPLES_OK) {
    size_t nr = (size_t)PQntuples(r), nc = (size_t)PQnfields(r);
    rows->cells = calloc(nr * nc > 0 ? nr * nc : 1, sizeof *rows->cells);
    if (!rows->cells) {
      PQclear(r);
      snprintf(err, errlen, "out of memory");
      return STORE_ERR;
    }
    rows->nrows = nr;
    rows->ncols = nc;
    for (size_t i = 0; i < nr; i++)
      for (size_t k = 0; k < nc; k++) {
        if (PQgetisnull(r, (int)i, (int)k)) continue;
        rows->cells[i * nc + k] = (zeus__store_val){.type = STORE_TEXT, .s = strdup(PQgetvalue(r, (int)i, (int)k))};
      }
  }
  PQclear(r);
  return STORE_OK;
}

static int pg_simple(pg_db *db, const char *sql, char *err, size_t errlen) {
  bool timed_out;
  PGresult *r = pg_run(db, sql, 0, NULL, false, &timed_out);
  if (timed_out) return pg_timed_out(db, sql, err, errlen);
  ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  int rc = STORE_OK;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) rc = pg_fail(db, r, sql, err, errlen);
  PQclear(r);
  return rc;
}

static int pg_script(zeus__store *d, const char *sql, char *err, size_t errlen) {
  return pg_simple((pg_db *)d, sql, err, errlen);
}
static int pg_begin(zeus__store *d, char *err, size_t errlen) { return pg_simple((pg_db *)d, "BEGIN", err, errlen); }
static int pg_commit(zeus__store *d, char *err, size_t errlen) { return pg_simple((pg_db *)d, "COMMIT", err, errlen); }
static void pg_rollback(zeus__store *d) {
  pg_db *db = (pg_db *)d;
  if (!db->dead && PQstatus(db->c) == CONNECTION_OK && PQtransactionStatus(db->c) != PQTRANS_IDLE) {
    bool timed_out;
    PGresult *r = pg_run(db, "ROLLBACK", 0, NULL, false, &timed_out);
    PQclear(r);
  }
}

static void pg_close(zeus__store *d) {
  pg_db *db = (pg_db *)d;
  if (!db) return;
  PQfinish(db->c);
  free(db);
}

/* Migrations: one migrating server at a time (a transaction-scoped advisory lock: released at
 * commit). */
static const zeus__store_ops pg_ops = {
    "postgresql", pg_begin, pg_commit, pg_rollback, pg_exec, pg_script, "SELECT pg_advisory_xact_lock(727274)",
    pg_close};

static void quiet(void *arg, const char *message) { (void)arg, (void)message; }

int zeus__store_open_pg(const char *url, const zeus__store_opts *opts, zeus__store **out, char *err, size_t errlen) {
  pg_db *db = zeus__store_alloc(sizeof *db, &pg_ops, opts, err, errlen);
  if (!db) return STORE_ERR;
  zeus__store_pg_bounds b;
  zeus__store_pg_bounds_of(db->base.opts.timeout_s, &b);
  if (b.n > 0) {
    /* Our bounds first, the user's URI last: libpq keeps the last value of a repeated keyword,
     * so the URI's own connect_timeout or keepalives_* win. */
    const char *keys[ZEUS__STORE_PG_NBOUNDS + 2], *vals[ZEUS__STORE_PG_NBOUNDS + 2];
    for (int i = 0; i < b.n; i++) {
      keys[i] = b.keys[i];
      vals[i] = b.vals[i];
    }
    keys[b.n] = "dbname";
    vals[b.n] = url;
    keys[b.n + 1] = vals[b.n + 1] = NULL;
    db->c = PQconnectdbParams(keys, vals, 1);
  } else {
    db->c = PQconnectdb(url);
  }
  if (!db->c || PQstatus(db->c) != CONNECTION_OK) {
    snprintf(err, errlen, "postgresql: cannot connect: %s", db->c ? PQerrorMessage(db->c) : "out of memory");
    size_t n = strlen(err);
    while (n && (err[n - 1] == '\n' || err[n - 1] == ' ')) err[--n] = '\0';
    pg_close(&db->base);
    return STORE_DOWN;
  }
  /* Quiet: NOTICEs (IF NOT EXISTS) would go to stderr. */
  PQsetNoticeProcessor(db->c, quiet, NULL);
  int rc = pg_simple(db, "SET client_min_messages = warning", err, errlen);
  if (rc) {
    pg_close(&db->base);
    return rc;
  }
  *out = &db->base;
  return STORE_OK;
}
#endif

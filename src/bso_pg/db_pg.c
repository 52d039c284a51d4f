/* db_pg.c: the batch-size optimizer server's store on PostgreSQL through libpq (the optional
 * component ZEUS_WITH_BSO_PG; it extends ZEUS_WITH_BSO_SERVER and is empty without it).
 *
 * Transactions are READ COMMITTED with the job's row locked (SELECT ... FOR UPDATE) by every
 * request that touches the job, so that requests of one job run one after another while other
 * jobs' run in parallel; a serialization failure, deadlock or a unique-key race (two nodes
 * registering one new job id) asks the caller to retry the request. A lost connection (the
 * server restarting, the network) is BSO_DB_DOWN: the server answers 503 and opens the
 * connection again on its next use.
 *
 * A server that stops answering (a network partition, a stopped host; issue 36) must not hold
 * requests without bound: with a timeout (bso_db_open_opts), connecting is bounded by libpq's
 * connect_timeout (2 s at least), every statement by a deadline of our own (the statement is sent
 * and its answer awaited with poll(); a server that does not answer cannot cancel anything, so a
 * server-side statement_timeout would not help), after which the connection counts as lost, and
 * TCP keepalives and tcp_user_timeout let the kernel notice a dead peer of an idle connection.
 * The user's URI may set any of these libpq parameters itself; its values win. */
#include "zeus/config.h"

#if ZEUS_HAVE_BSO_SERVER
#include <errno.h>
#include <libpq-fe.h>
#include <math.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bso_server/db.h"

#include "zeus/clock.h"

typedef struct pg_db {
  bso_db base;
  PGconn *c;
  double timeout_s; /* <= 0: libpq's blocking calls, no bound */
  bool dead;        /* a statement got no answer in time: the connection is not used again */
} pg_db;

/* Runs sql (with n text parameters when params is set) and returns its result, waiting at most
 * db->timeout_s for the answer. NULL with *timed_out set when none came in time (the connection is
 * then dead); NULL otherwise when libpq failed (PQerrorMessage says why). */
static PGresult *pg_run(pg_db *db, const char *sql, int n, const char *const *params, bool with_params,
                        bool *timed_out) {
  *timed_out = false;
  if (db->dead) {
    *timed_out = true;
    return NULL;
  }
  if (!(db->timeout_s > 0))
    return with_params ? PQexecParams(db->c, sql, n, NULL, params, NULL, NULL, 0) : PQexec(db->c, sql);
  int ok = with_params ? PQsendQueryParams(db->c, sql, n, NULL, params, NULL, NULL, 0) : PQsendQuery(db->c, sql);
  if (!ok) return NULL;
  double deadline = zeus_monotonic_s() + db->timeout_s;
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
           what, db->timeout_s);
  return BSO_DB_DOWN;
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
  if (PQstatus(db->c) != CONNECTION_OK || !state) return BSO_DB_DOWN;
  {
    if (!strcmp(state, "40001") || !strcmp(state, "40P01") || !strcmp(state, "23505") || !strcmp(state, "55P03"))
      return BSO_DB_RETRY;
    if (!strncmp(state, "08", 2) || !strncmp(state, "57P", 3) || !strcmp(state, "53300")) return BSO_DB_DOWN;
  }
  return BSO_DB_ERR;
}

static int pg_exec(bso_db *d, const char *sql, const bso_val *p, int n, bso_rows *rows, char *err, size_t errlen) {
  pg_db *db = (pg_db *)d;
  if (rows) memset(rows, 0, sizeof *rows);
  char buf[16][40];
  const char *vals[16];
  if (n > 16) {
    snprintf(err, errlen, "postgresql: more than 16 parameters");
    return BSO_DB_ERR;
  }
  for (int i = 0; i < n; i++) {
    switch (p[i].type) {
      case BSO_INT:
        snprintf(buf[i], sizeof buf[i], "%lld", p[i].i);
        vals[i] = buf[i];
        break;
      case BSO_REAL:
        if (isinf(p[i].d))
          snprintf(buf[i], sizeof buf[i], "%s", p[i].d > 0 ? "Infinity" : "-Infinity");
        else if (isnan(p[i].d))
          snprintf(buf[i], sizeof buf[i], "NaN");
        else
          snprintf(buf[i], sizeof buf[i], "%.17g", p[i].d);
        vals[i] = buf[i];
        break;
      case BSO_TEXT: vals[i] = p[i].s; break;
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
      return BSO_DB_ERR;
    }
    rows->nrows = nr;
    rows->ncols = nc;
    for (size_t i = 0; i < nr; i++)
      for (size_t k = 0; k < nc; k++) {
        if (PQgetisnull(r, (int)i, (int)k)) continue;
        rows->cells[i * nc + k] = (bso_val){.type = BSO_TEXT, .s = strdup(PQgetvalue(r, (int)i, (int)k))};
      }
  }
  PQclear(r);
  return BSO_DB_OK;
}

static int pg_simple(pg_db *db, const char *sql, char *err, size_t errlen) {
  bool timed_out;
  PGresult *r = pg_run(db, sql, 0, NULL, false, &timed_out);
  if (timed_out) return pg_timed_out(db, sql, err, errlen);
  ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  int rc = BSO_DB_OK;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) rc = pg_fail(db, r, sql, err, errlen);
  PQclear(r);
  return rc;
}

static int pg_begin(bso_db *d, char *err, size_t errlen) { return pg_simple((pg_db *)d, "BEGIN", err, errlen); }
static int pg_commit(bso_db *d, char *err, size_t errlen) { return pg_simple((pg_db *)d, "COMMIT", err, errlen); }
static void pg_rollback(bso_db *d) {
  pg_db *db = (pg_db *)d;
  if (!db->dead && PQstatus(db->c) == CONNECTION_OK && PQtransactionStatus(db->c) != PQTRANS_IDLE) {
    bool timed_out;
    PGresult *r = pg_run(db, "ROLLBACK", 0, NULL, false, &timed_out);
    PQclear(r);
  }
}

static int pg_migrate(bso_db *d, char *err, size_t errlen) {
  pg_db *db = (pg_db *)d;
  int rc = pg_simple(db, "BEGIN", err, errlen);
  /* One migrating server at a time (a transaction-scoped advisory lock: released at commit). */
  if (!rc) rc = pg_simple(db, "SELECT pg_advisory_xact_lock(727274)", err, errlen);
  if (!rc) rc = pg_simple(db, "CREATE TABLE IF NOT EXISTS bso_schema_version (version INTEGER NOT NULL)", err, errlen);
  bso_rows r = {0};
  if (!rc) rc = pg_exec(d, "SELECT max(version) FROM bso_schema_version", NULL, 0, &r, err, errlen);
  int have = rc ? 0 : (int)bso_rows_int(&r, 0, 0);
  bso_rows_free(&r);
  if (!rc && have > bso_db_nmigrations) {
    snprintf(err, errlen,
             "postgresql: the database's schema is version %d, newer than this zeus knows (%d): use a "
             "newer zeus",
             have, bso_db_nmigrations);
    rc = BSO_DB_ERR;
  }
  for (int v = have + 1; !rc && v <= bso_db_nmigrations; v++) {
    rc = pg_simple(db, bso_db_migrations[v - 1], err, errlen);
    bso_val p = bso_int(v);
    if (!rc) rc = pg_exec(d, "INSERT INTO bso_schema_version (version) VALUES ($1)", &p, 1, NULL, err, errlen);
  }
  if (!rc) rc = pg_simple(db, "COMMIT", err, errlen);
  if (rc) pg_rollback(d);
  return rc;
}

static void pg_close(bso_db *d) {
  pg_db *db = (pg_db *)d;
  if (!db) return;
  PQfinish(db->c);
  free(db);
}

static const bso_db_ops pg_ops = {"postgresql", pg_begin, pg_commit, pg_rollback, pg_exec, pg_migrate, pg_close};

static void quiet(void *arg, const char *message) { (void)arg, (void)message; }

int bso_db_open_pg(const char *url, double timeout_s, bso_db **out, char *err, size_t errlen) {
  pg_db *db = calloc(1, sizeof *db);
  if (!db) {
    snprintf(err, errlen, "out of memory");
    return BSO_DB_ERR;
  }
  db->base.ops = &pg_ops;
  db->timeout_s = timeout_s;
  if (timeout_s > 0) {
    /* Our bounds first, the user's URI last: libpq keeps the last value of a repeated keyword,
     * so the URI's own connect_timeout or keepalives_* win. */
    char ct[32], idle[32], intv[32], user_to[32];
    double whole = ceil(timeout_s);
    snprintf(ct, sizeof ct, "%.0f", whole < 2 ? 2 : whole); /* libpq's least */
    snprintf(idle, sizeof idle, "%.0f", whole < 1 ? 1 : whole);
    snprintf(intv, sizeof intv, "%.0f", ceil(timeout_s / 3) < 1 ? 1 : ceil(timeout_s / 3));
    snprintf(user_to, sizeof user_to, "%.0f", ceil(timeout_s * 1000));
    const char *const keys[] = {"connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
                                "keepalives_count", "tcp_user_timeout", "dbname", NULL};
    const char *const vals[] = {ct, "1", idle, intv, "3", user_to, url, NULL};
    db->c = PQconnectdbParams(keys, vals, 1);
  } else {
    db->c = PQconnectdb(url);
  }
  if (!db->c || PQstatus(db->c) != CONNECTION_OK) {
    snprintf(err, errlen, "postgresql: cannot connect: %s", db->c ? PQerrorMessage(db->c) : "out of memory");
    size_t n = strlen(err);
    while (n && (err[n - 1] == '\n' || err[n - 1] == ' ')) err[--n] = '\0';
    pg_close(&db->base);
    return BSO_DB_DOWN;
  }
  /* Quiet: NOTICEs (IF NOT EXISTS) would go to stderr. */
  PQsetNoticeProcessor(db->c, quiet, NULL);
  int rc = pg_simple(db, "SET client_min_messages = warning", err, errlen);
  if (rc) {
    pg_close(&db->base);
    return rc;
  }
  *out = &db->base;
  return BSO_DB_OK;
}
#endif

/* store.c: the store's parts both back ends share: result rows, the bounds and retries (one table
 * of defaults), opening by URL, the migration runner and the transaction loop. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store.h"
#include "zeus/config.h"

void zeus__store_rows_free(zeus__store_rows *r) {
  if (!r || !r->cells) return;
  for (size_t i = 0; i < r->nrows * r->ncols; i++)
    if (r->cells[i].type == STORE_TEXT) free((char *)r->cells[i].s);
  free(r->cells);
  r->cells = NULL;
  r->nrows = r->ncols = 0;
}

static const zeus__store_val *cell(const zeus__store_rows *r, size_t row, size_t col) {
  static const zeus__store_val none = {.type = STORE_NULL};
  if (row >= r->nrows || col >= r->ncols) return &none;
  return &r->cells[row * r->ncols + col];
}

long long zeus__store_rows_int(const zeus__store_rows *r, size_t row, size_t col) {
  const zeus__store_val *v = cell(r, row, col);
  if (v->type == STORE_INT) return v->i;
  if (v->type == STORE_REAL) return (long long)v->d;
  if (v->type == STORE_TEXT) return strtoll(v->s, NULL, 10);
  return 0;
}

double zeus__store_rows_real(const zeus__store_rows *r, size_t row, size_t col) {
  const zeus__store_val *v = cell(r, row, col);
  if (v->type == STORE_REAL) return v->d;
  if (v->type == STORE_INT) return (double)v->i;
  if (v->type == STORE_TEXT) return strtod(v->s, NULL); /* PostgreSQL: exact shortest text, "Infinity" */
  return NAN;
}

const char *zeus__store_rows_text(const zeus__store_rows *r, size_t row, size_t col) {
  const zeus__store_val *v = cell(r, row, col);
  return v->type == STORE_TEXT ? v->s : NULL;
}

int zeus__store_rows_is_null(const zeus__store_rows *r, size_t row, size_t col) {
  return cell(r, row, col)->type == STORE_NULL;
}

/* ---- bounds and retries ---- */

const zeus__store_opts zeus__store_defaults = {.timeout_s = ZEUS__STORE_TIMEOUT_S,
                                               .busy_timeout_ms = ZEUS__STORE_BUSY_TIMEOUT_MS,
                                               .max_attempts = ZEUS__STORE_MAX_ATTEMPTS,
                                               .reconnect_s = ZEUS__STORE_RECONNECT_S};

zeus__store_opts zeus__store_opts_resolve(const zeus__store_opts *o) {
  zeus__store_opts r = o ? *o : zeus__store_defaults;
  if (r.timeout_s == 0 || isnan(r.timeout_s)) r.timeout_s = zeus__store_defaults.timeout_s;
  if (r.busy_timeout_ms <= 0) r.busy_timeout_ms = zeus__store_defaults.busy_timeout_ms;
  if (r.max_attempts <= 0) r.max_attempts = zeus__store_defaults.max_attempts;
  if (!(r.reconnect_s > 0)) r.reconnect_s = zeus__store_defaults.reconnect_s;
  return r;
}

/* A database that stops answering (a network partition, a stopped host; issue 36) must not hold a
 * caller without bound: connecting is bounded by libpq's connect_timeout (whole seconds, 2 at
 * least: libpq's least), and TCP keepalives (idle for the timeout, probes a third of it apart,
 * three of them) and tcp_user_timeout let the kernel notice a dead peer of an idle connection.
 * Statements are bounded by the back end itself (store_pg.c). */
void zeus__store_pg_bounds_of(double timeout_s, zeus__store_pg_bounds *out) {
  memset(out, 0, sizeof *out);
  if (!(timeout_s > 0)) return;
  static const char *const keys[ZEUS__STORE_PG_NBOUNDS] = {"connect_timeout",  "keepalives",
                                                           "keepalives_idle",  "keepalives_interval",
                                                           "keepalives_count", "tcp_user_timeout"};
  double whole = ceil(timeout_s), third = ceil(timeout_s / 3);
  const double vals[ZEUS__STORE_PG_NBOUNDS] = {whole < 2 ? 2 : whole, 1, whole < 1 ? 1 : whole,
                                               third < 1 ? 1 : third, 3, ceil(timeout_s * 1000)};
  for (int i = 0; i < ZEUS__STORE_PG_NBOUNDS; i++) {
    out->keys[i] = keys[i];
    snprintf(out->vals[i], sizeof out->vals[i], "%.0f", vals[i]);
  }
  out->n = ZEUS__STORE_PG_NBOUNDS;
}

/* ---- connections ---- */

bool zeus__store_url_is_pg(const char *url) {
  return strncmp(url, "postgresql://", 13) == 0 || strncmp(url, "postgres://", 11) == 0;
}

#if !ZEUS_HAVE_STORE_PG
int zeus__store_open_pg(const char *url, const zeus__store_opts *opts, zeus__store **out, char *err, size_t errlen) {
  (void)url, (void)opts;
  *out = NULL;
  snprintf(err, errlen,
           "this zeus was built without PostgreSQL support (ZEUS_WITH_STORE_PG=OFF, needs libpq); "
           "use a sqlite:///PATH database");
  return STORE_ERR;
}
#endif

void *zeus__store_alloc(size_t size, const zeus__store_ops *ops, const zeus__store_opts *opts, char *err,
                        size_t errlen) {
  zeus__store *db = calloc(1, size);
  if (!db) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  db->ops = ops;
  db->opts = zeus__store_opts_resolve(opts);
  return db;
}

void zeus__store_close(zeus__store *db) {
  if (db) db->ops->close(db);
}

int zeus__store_open(const char *url, const zeus__store_opts *opts, bool migrate, zeus__store **out, char *err,
                     size_t errlen) {
  int rc;
  *out = NULL;
  if (!url || !*url) {
    snprintf(err, errlen, "database: empty URL, expected sqlite:///PATH or postgresql://...");
    return STORE_ERR;
  }
  zeus__store_opts o = zeus__store_opts_resolve(opts);
  if (zeus__store_url_is_pg(url)) {
    rc = zeus__store_open_pg(url, &o, out, err, errlen);
  } else {
    const char *path = url;
    if (strncmp(url, "sqlite://", 9) == 0)
      path = url + 9;
    else if (strstr(url, "://")) {
      snprintf(err, errlen, "database '%s': unknown scheme, expected sqlite:///PATH or postgresql://...", url);
      return STORE_ERR;
    }
    if (!*path) {
      snprintf(err, errlen, "database '%s': no file path after sqlite://", url);
      return STORE_ERR;
    }
    rc = zeus__store_open_sqlite(path, &o, out, err, errlen);
  }
  if (rc == STORE_OK && migrate) {
    rc = zeus__store_migrate(*out, zeus__store_schema, zeus__store_schema_n, err, errlen);
    if (rc != STORE_OK) {
      zeus__store_close(*out);
      *out = NULL;
    }
  }
  return rc;
}

/* ---- migrations ---- */

int zeus__store_migrate(zeus__store *db, const char *const *migrations, int n, char *err, size_t errlen) {
  const zeus__store_ops *ops = db->ops;
  int rc = ops->begin(db, err, errlen);
  if (!rc && ops->migration_lock) rc = ops->script(db, ops->migration_lock, err, errlen);
  if (!rc)
    rc = ops->script(db, "CREATE TABLE IF NOT EXISTS bso_schema_version (version INTEGER NOT NULL)", err, errlen);
  zeus__store_rows r = {0};
  if (!rc) rc = ops->exec(db, "SELECT max(version) FROM bso_schema_version", NULL, 0, &r, err, errlen);
  int have = rc ? 0 : (int)zeus__store_rows_int(&r, 0, 0);
  zeus__store_rows_free(&r);
  if (!rc && have > n) {
    snprintf(err, errlen, "%s: the database's schema is version %d, newer than this zeus knows (%d): use a newer zeus",
             ops->name, have, n);
    rc = STORE_ERR;
  }
  for (int v = have + 1; !rc && v <= n; v++) {
    rc = ops->script(db, migrations[v - 1], err, errlen);
    zeus__store_val p = store_int(v);
    if (!rc) rc = ops->exec(db, "INSERT INTO bso_schema_version (version) VALUES ($1)", &p, 1, NULL, err, errlen);
  }
  if (!rc) rc = ops->commit(db, err, errlen);
  if (rc) ops->rollback(db);
  return rc;
}

/* ---- transactions ---- */

int zeus__store_transact(zeus__store *db, zeus__store_body body, void *arg, int *attempts, char *err, size_t errlen) {
  int rc = STORE_OK, attempt = 0;
  while (attempt < db->opts.max_attempts) {
    if (attempt > 0) {
      /* Contention: a random wait that grows (1..2 ms, .. up to 1..64 ms) spreads the retries. */
      struct timespec ts = {0, (long)(1000000L * (1 + rand() % (attempt - 1 < 10 ? 2 << (attempt - 1) / 2 : 64)))};
      nanosleep(&ts, NULL);
    }
    attempt++;
    bool commit = true;
    rc = db->ops->begin(db, err, errlen);
    if (!rc) rc = body(db, arg, &commit, err, errlen);
    if (!rc && commit) rc = db->ops->commit(db, err, errlen);
    if (rc || !commit) db->ops->rollback(db);
    if (rc != STORE_RETRY) break;
  }
  if (attempts) *attempts = attempt;
  return rc;
}

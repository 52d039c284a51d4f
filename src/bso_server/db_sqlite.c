/* db_sqlite.c: the store on one SQLite file (WAL journal; BEGIN IMMEDIATE transactions, so that
 * writers queue on the file's lock instead of failing late; busy waits bounded by a timeout). */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bso_server/db.h"

#define STMT_CACHE 32

typedef struct sq_db {
  bso_db base;
  sqlite3 *h;
  /* Prepared statements kept by their text: the server runs a handful of statements again and
   * again (about a tenth more pairs per second here than preparing each time). */
  struct {
    char *sql;
    sqlite3_stmt *st;
  } cache[STMT_CACHE];
  unsigned next; /* round-robin slot to replace when the cache is full */
} sq_db;

/* The prepared statement for sql, from the cache or prepared now (and cached). */
static int sq_prepare(sq_db *db, const char *sql, sqlite3_stmt **out) {
  for (int i = 0; i < STMT_CACHE; i++)
    if (db->cache[i].sql && strcmp(db->cache[i].sql, sql) == 0) {
      *out = db->cache[i].st;
      return SQLITE_OK;
    }
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v3(db->h, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
  if (rc != SQLITE_OK) return rc;
  char *copy = strdup(sql);
  if (!copy) {
    sqlite3_finalize(st);
    return SQLITE_NOMEM;
  }
  unsigned k = db->next++ % STMT_CACHE;
  free(db->cache[k].sql);
  sqlite3_finalize(db->cache[k].st);
  db->cache[k].sql = copy;
  db->cache[k].st = st;
  *out = st;
  return SQLITE_OK;
}

static int sq_code(sqlite3 *h, int rc, const char *what, char *err, size_t errlen) {
  int prim = rc & 0xff;
  snprintf(err, errlen, "sqlite: %s: %s", what, sqlite3_errmsg(h));
  if (prim == SQLITE_BUSY || prim == SQLITE_LOCKED) return BSO_DB_RETRY;
  if (prim == SQLITE_IOERR || prim == SQLITE_CANTOPEN || prim == SQLITE_FULL || prim == SQLITE_READONLY)
    return BSO_DB_DOWN;
  return BSO_DB_ERR;
}

static int sq_exec(bso_db *d, const char *sql, const bso_val *p, int n, bso_rows *rows, char *err, size_t errlen) {
  sq_db *db = (sq_db *)d;
  if (rows) memset(rows, 0, sizeof *rows);
  sqlite3_stmt *st = NULL;
  int rc = sq_prepare(db, sql, &st);
  if (rc != SQLITE_OK) return sq_code(db->h, rc, "preparing a statement", err, errlen);
  for (int i = 0; i < n; i++) {
    char name[16];
    snprintf(name, sizeof name, "$%d", i + 1);
    int k = sqlite3_bind_parameter_index(st, name);
    if (k == 0) continue;
    switch (p[i].type) {
      case BSO_INT: sqlite3_bind_int64(st, k, p[i].i); break;
      case BSO_REAL: sqlite3_bind_double(st, k, p[i].d); break;
      case BSO_TEXT: sqlite3_bind_text(st, k, p[i].s, -1, SQLITE_STATIC); break;
      default: sqlite3_bind_null(st, k);
    }
  }
  size_t cap = 0;
  int ret = BSO_DB_OK;
  for (;;) {
    rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      ret = sq_code(db->h, rc, "running a statement", err, errlen);
      break;
    }
    if (!rows) continue;
    size_t nc = (size_t)sqlite3_column_count(st);
    rows->ncols = nc;
    if ((rows->nrows + 1) * nc > cap) {
      size_t ncap = cap ? cap * 2 : 16 * nc;
      bso_val *c = realloc(rows->cells, ncap * sizeof *c);
      if (!c) {
        ret = BSO_DB_ERR;
        snprintf(err, errlen, "out of memory");
        break;
      }
      rows->cells = c;
      cap = ncap;
    }
    bso_val *out = rows->cells + rows->nrows * nc;
    for (size_t c = 0; c < nc; c++) {
      switch (sqlite3_column_type(st, (int)c)) {
        case SQLITE_INTEGER: out[c] = bso_int(sqlite3_column_int64(st, (int)c)); break;
        case SQLITE_FLOAT: out[c] = bso_real(sqlite3_column_double(st, (int)c)); break;
        case SQLITE_NULL: out[c] = bso_null(); break;
        default: {
          const char *t = (const char *)sqlite3_column_text(st, (int)c);
          out[c] = (bso_val){.type = BSO_TEXT, .s = strdup(t ? t : "")};
        }
      }
    }
    rows->nrows++;
  }
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (ret != BSO_DB_OK && rows) bso_rows_free(rows);
  return ret;
}

static int sq_simple(sq_db *db, const char *sql, char *err, size_t errlen) {
  char *msg = NULL;
  int rc = sqlite3_exec(db->h, sql, NULL, NULL, &msg);
  if (rc == SQLITE_OK) return BSO_DB_OK;
  int prim = rc & 0xff;
  snprintf(err, errlen, "sqlite: %s", msg ? msg : sqlite3_errstr(rc));
  sqlite3_free(msg);
  if (prim == SQLITE_BUSY || prim == SQLITE_LOCKED) return BSO_DB_RETRY;
  if (prim == SQLITE_IOERR || prim == SQLITE_CANTOPEN || prim == SQLITE_FULL || prim == SQLITE_READONLY)
    return BSO_DB_DOWN;
  return BSO_DB_ERR;
}

static int sq_begin(bso_db *d, char *err, size_t errlen) {
  return sq_simple((sq_db *)d, "BEGIN IMMEDIATE", err, errlen);
}
static int sq_commit(bso_db *d, char *err, size_t errlen) { return sq_simple((sq_db *)d, "COMMIT", err, errlen); }
static void sq_rollback(bso_db *d) {
  sq_db *db = (sq_db *)d;
  if (!sqlite3_get_autocommit(db->h)) sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
}

static int sq_migrate(bso_db *d, char *err, size_t errlen) {
  sq_db *db = (sq_db *)d;
  int rc = sq_simple(db, "BEGIN IMMEDIATE", err, errlen);
  if (rc) return rc;
  rc = sq_simple(db, "CREATE TABLE IF NOT EXISTS bso_schema_version (version INTEGER NOT NULL)", err, errlen);
  bso_rows r = {0};
  if (!rc) rc = sq_exec(d, "SELECT max(version) FROM bso_schema_version", NULL, 0, &r, err, errlen);
  int have = rc ? 0 : (int)bso_rows_int(&r, 0, 0);
  bso_rows_free(&r);
  if (!rc && have > bso_db_nmigrations) {
    snprintf(err, errlen,
             "sqlite: the database's schema is version %d, newer than this zeus knows (%d): use a newer zeus", have,
             bso_db_nmigrations);
    rc = BSO_DB_ERR;
  }
  for (int v = have + 1; !rc && v <= bso_db_nmigrations; v++) {
    rc = sq_simple(db, bso_db_migrations[v - 1], err, errlen);
    bso_val p = bso_int(v);
    if (!rc) rc = sq_exec(d, "INSERT INTO bso_schema_version (version) VALUES ($1)", &p, 1, NULL, err, errlen);
  }
  if (!rc) rc = sq_simple(db, "COMMIT", err, errlen);
  if (rc) sq_rollback(d);
  return rc;
}

static void sq_close(bso_db *d) {
  sq_db *db = (sq_db *)d;
  if (!db) return;
  for (int i = 0; i < STMT_CACHE; i++) {
    free(db->cache[i].sql);
    sqlite3_finalize(db->cache[i].st);
  }
  sqlite3_close(db->h);
  free(db);
}

static const bso_db_ops sq_ops = {"sqlite", sq_begin, sq_commit, sq_rollback, sq_exec, sq_migrate, sq_close};

int bso_db_open_sqlite(const char *path, bso_db **out, char *err, size_t errlen) {
  sq_db *db = calloc(1, sizeof *db);
  if (!db) {
    snprintf(err, errlen, "out of memory");
    return BSO_DB_ERR;
  }
  db->base.ops = &sq_ops;
  int rc = sqlite3_open_v2(path, &db->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
  if (rc != SQLITE_OK) {
    snprintf(err, errlen, "sqlite database '%s': cannot open it: %s", path,
             db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc));
    sq_close(&db->base);
    return BSO_DB_DOWN;
  }
  sqlite3_busy_timeout(db->h, 10000);
  /* WAL: readers never wait for the writer; NORMAL sync: durable at checkpoints, never corrupt. */
  rc = sq_simple(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL", err, errlen);
  if (rc) {
    sq_close(&db->base);
    return rc;
  }
  *out = &db->base;
  return BSO_DB_OK;
}

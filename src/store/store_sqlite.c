/* store_sqlite.c: the store on one SQLite file (WAL journal; BEGIN IMMEDIATE transactions, so that
 * writers queue on the file's lock instead of failing late; busy waits bounded by the store's
 * busy_timeout_ms). */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

#define STMT_CACHE 32

typedef struct sq_db {
  zeus__store base;
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

/* The class of an SQLite result code: another connection's lock (retry), the file gone or
 * unwritable (down), or another error. */
static int sq_class(int rc) {
  int prim = rc & 0xff;
  if (prim == SQLITE_BUSY || prim == SQLITE_LOCKED) return STORE_RETRY;
  if (prim == SQLITE_IOERR || prim == SQLITE_CANTOPEN || prim == SQLITE_FULL || prim == SQLITE_READONLY)
    return STORE_DOWN;
  return STORE_ERR;
}

static int sq_code(sqlite3 *h, int rc, const char *what, char *err, size_t errlen) {
  snprintf(err, errlen, "sqlite: %s: %s", what, sqlite3_errmsg(h));
  return sq_class(rc);
}

static int sq_exec(zeus__store *d, const char *sql, const zeus__store_val *p, int n, zeus__store_rows *rows, char *err,
                   size_t errlen) {
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
      case STORE_INT: sqlite3_bind_int64(st, k, p[i].i); break;
      case STORE_REAL: sqlite3_bind_double(st, k, p[i].d); break;
      case STORE_TEXT: sqlite3_bind_text(st, k, p[i].s, -1, SQLITE_STATIC); break;
      default: sqlite3_bind_null(st, k);
    }
  }
  size_t cap = 0;
  int ret = STORE_OK;
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
      zeus__store_val *c = realloc(rows->cells, ncap * sizeof *c);
      if (!c) {
        ret = STORE_ERR;
        snprintf(err, errlen, "out of memory");
        break;
      }
      rows->cells = c;
      cap = ncap;
    }
    zeus__store_val *out = rows->cells + rows->nrows * nc;
    for (size_t c = 0; c < nc; c++) {
      switch (sqlite3_column_type(st, (int)c)) {
        case SQLITE_INTEGER: out[c] = store_int(sqlite3_column_int64(st, (int)c)); break;
        case SQLITE_FLOAT: out[c] = store_real(sqlite3_column_double(st, (int)c)); break;
        case SQLITE_NULL: out[c] = store_null(); break;
        default: {
          const char *t = (const char *)sqlite3_column_text(st, (int)c);
          out[c] = (zeus__store_val){.type = STORE_TEXT, .s = strdup(t ? t : "")};
        }
      }
    }
    rows->nrows++;
  }
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (ret != STORE_OK && rows) zeus__store_rows_free(rows);
  return ret;
}

static int sq_simple(sq_db *db, const char *sql, char *err, size_t errlen) {
  char *msg = NULL;
  int rc = sqlite3_exec(db->h, sql, NULL, NULL, &msg);
  if (rc == SQLITE_OK) return STORE_OK;
  snprintf(err, errlen, "sqlite: %s", msg ? msg : sqlite3_errstr(rc));
  sqlite3_free(msg);
  return sq_class(rc);
}

static int sq_script(zeus__store *d, const char *sql, char *err, size_t errlen) {
  return sq_simple((sq_db *)d, sql, err, errlen);
}
static int sq_begin(zeus__store *d, char *err, size_t errlen) {
  return sq_simple((sq_db *)d, "BEGIN IMMEDIATE", err, errlen);
}
static int sq_commit(zeus__store *d, char *err, size_t errlen) { return sq_simple((sq_db *)d, "COMMIT", err, errlen); }
static void sq_rollback(zeus__store *d) {
  sq_db *db = (sq_db *)d;
  if (!sqlite3_get_autocommit(db->h)) sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
}

static void sq_close(zeus__store *d) {
  sq_db *db = (sq_db *)d;
  if (!db) return;
  for (int i = 0; i < STMT_CACHE; i++) {
    free(db->cache[i].sql);
    sqlite3_finalize(db->cache[i].st);
  }
  sqlite3_close(db->h);
  free(db);
}

/* Migrations need no lock of their own: BEGIN IMMEDIATE holds the file's write lock. */
static const zeus__store_ops sq_ops = {"sqlite", sq_begin, sq_commit, sq_rollback, sq_exec, sq_script, NULL, sq_close};

int zeus__store_open_sqlite(const char *path, const zeus__store_opts *opts, zeus__store **out, char *err,
                            size_t errlen) {
  sq_db *db = zeus__store_alloc(sizeof *db, &sq_ops, opts, err, errlen);
  if (!db) return STORE_ERR;
  int rc = sqlite3_open_v2(path, &db->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
  if (rc != SQLITE_OK) {
    snprintf(err, errlen, "sqlite database '%s': cannot open it: %s", path,
             db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc));
    sq_close(&db->base);
    return STORE_DOWN;
  }
  sqlite3_busy_timeout(db->h, db->base.opts.busy_timeout_ms);
  /* WAL: readers never wait for the writer; NORMAL sync: durable at checkpoints, never corrupt. */
  rc = sq_simple(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL", err, errlen);
  if (rc) {
    sq_close(&db->base);
    return rc;
  }
  *out = &db->base;
  return STORE_OK;
}

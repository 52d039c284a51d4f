/* db.c: the store's shared parts: result rows, the schema's migrations, opening by URL. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bso_server/db.h"
#include "zeus/config.h"

void bso_rows_free(bso_rows *r) {
  if (!r || !r->cells) return;
  for (size_t i = 0; i < r->nrows * r->ncols; i++)
    if (r->cells[i].type == BSO_TEXT) free((char *)r->cells[i].s);
  free(r->cells);
  r->cells = NULL;
  r->nrows = r->ncols = 0;
}

static const bso_val *cell(const bso_rows *r, size_t row, size_t col) {
  static const bso_val none = {.type = BSO_NULL};
  if (row >= r->nrows || col >= r->ncols) return &none;
  return &r->cells[row * r->ncols + col];
}

long long bso_rows_int(const bso_rows *r, size_t row, size_t col) {
  const bso_val *v = cell(r, row, col);
  if (v->type == BSO_INT) return v->i;
  if (v->type == BSO_REAL) return (long long)v->d;
  if (v->type == BSO_TEXT) return strtoll(v->s, NULL, 10);
  return 0;
}

double bso_rows_real(const bso_rows *r, size_t row, size_t col) {
  const bso_val *v = cell(r, row, col);
  if (v->type == BSO_REAL) return v->d;
  if (v->type == BSO_INT) return (double)v->i;
  if (v->type == BSO_TEXT) return strtod(v->s, NULL); /* PostgreSQL: exact shortest text, "Infinity" */
  return NAN;
}

const char *bso_rows_text(const bso_rows *r, size_t row, size_t col) {
  const bso_val *v = cell(r, row, col);
  return v->type == BSO_TEXT ? v->s : NULL;
}

int bso_rows_is_null(const bso_rows *r, size_t row, size_t col) { return cell(r, row, col)->type == BSO_NULL; }

/* The schema. Types both SQLite and PostgreSQL accept; doubles may be infinite. Trials are
 * deleted with their job by the server (no reliance on foreign-key enforcement, off by default
 * in SQLite). Version 2 is the recurring-job state of `zeus run --state postgresql://...`. */
const char *const bso_db_migrations[] = {
    /* 1: jobs and trials of the batch-size optimizer server */
    "CREATE TABLE bso_job ("
    " job_id TEXT PRIMARY KEY,"
    " spec TEXT NOT NULL,"        /* the registered JobSpecFromClient, normalised JSON */
    " seed BIGINT NOT NULL,"      /* mab_seed, or a random one when none was given */
    " stage INTEGER NOT NULL,"    /* 0 pruning, 1 Thompson sampling */
    " min_cost DOUBLE PRECISION," /* least cost reported so far */
    " min_cost_bs BIGINT,"
    " mab TEXT," /* the bandit: arms and generator, JSON */
    " created_s DOUBLE PRECISION NOT NULL);"
    "CREATE TABLE bso_trial ("
    " job_id TEXT NOT NULL,"
    " trial_number BIGINT NOT NULL,"
    " batch_size BIGINT NOT NULL,"
    " type INTEGER NOT NULL,"   /* 0 exploration, 1 concurrent, 2 Thompson sampling */
    " status INTEGER NOT NULL," /* 0 dispatched, 1 succeeded, 2 failed */
    " time_s DOUBLE PRECISION,"
    " energy_j DOUBLE PRECISION,"
    " converged INTEGER,"
    " start_s DOUBLE PRECISION NOT NULL,"
    " end_s DOUBLE PRECISION,"
    " PRIMARY KEY (job_id, trial_number));"
    "CREATE INDEX bso_trial_by_bs ON bso_trial (job_id, batch_size, status, trial_number);",
    /* 2: zeus run --state postgresql://...: each job identity's state (an SQLite image) */
    "CREATE TABLE run_state (job_key TEXT PRIMARY KEY, image BYTEA NOT NULL, updated_s DOUBLE PRECISION NOT NULL);",
    /* 3: the trial lease: a dispatched trial's last sign of life (its latest report; NULL: its
     * start), from which --trial-lease counts */
    "ALTER TABLE bso_trial ADD COLUMN seen_s DOUBLE PRECISION;"
    /* every request of a job looks at its dispatched trials (the lease) and its unsound rows
     * (reports outside the bounds): few, found without reading the job's whole history */
    "CREATE INDEX bso_trial_attention ON bso_trial (job_id) WHERE " BSO_TRIAL_ATTENTION ";",
};
const int bso_db_nmigrations = (int)(sizeof bso_db_migrations / sizeof *bso_db_migrations);

int bso_db_url_is_pg(const char *url) {
  return strncmp(url, "postgresql://", 13) == 0 || strncmp(url, "postgres://", 11) == 0;
}

#if !ZEUS_HAVE_BSO_PG
int bso_db_open_pg(const char *url, double timeout_s, bso_db **out, char *err, size_t errlen) {
  (void)url, (void)timeout_s;
  *out = NULL;
  snprintf(err, errlen,
           "this zeus was built without PostgreSQL support (ZEUS_WITH_BSO_PG=OFF, needs libpq); "
           "use a sqlite:///PATH database");
  return BSO_DB_ERR;
}
#endif

int bso_db_open(const char *url, int migrate, bso_db **out, char *err, size_t errlen) {
  return bso_db_open_opts(url, migrate, 0, out, err, errlen);
}

int bso_db_open_opts(const char *url, int migrate, double timeout_s, bso_db **out, char *err, size_t errlen) {
  int rc;
  *out = NULL;
  if (!url || !*url) {
    snprintf(err, errlen, "database: empty URL, expected sqlite:///PATH or postgresql://...");
    return BSO_DB_ERR;
  }
  if (bso_db_url_is_pg(url)) {
    rc = bso_db_open_pg(url, timeout_s, out, err, errlen);
  } else {
    const char *path = url;
    if (strncmp(url, "sqlite://", 9) == 0)
      path = url + 9;
    else if (strstr(url, "://")) {
      snprintf(err, errlen, "database '%s': unknown scheme, expected sqlite:///PATH or postgresql://...", url);
      return BSO_DB_ERR;
    }
    if (!*path) {
      snprintf(err, errlen, "database '%s': no file path after sqlite://", url);
      return BSO_DB_ERR;
    }
    rc = bso_db_open_sqlite(path, out, err, errlen);
  }
  if (rc == BSO_DB_OK && migrate) {
    rc = (*out)->ops->migrate(*out, err, errlen);
    if (rc != BSO_DB_OK) {
      (*out)->ops->close(*out);
      *out = NULL;
    }
  }
  return rc;
}

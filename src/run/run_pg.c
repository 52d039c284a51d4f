/* run_pg.c: `zeus run --state postgresql://...`: the recurring job's state kept in the same
 * PostgreSQL database as zeus bso-server's (one store, src/store/, two front ends), in a table of
 * its own, run_state (schema migration 2 of src/store/schema.c): one row per job identity holding
 * the SQLite image of the state zeus run works on in memory, written back after every change. A
 * session advisory lock on the job identity, held while zeus run runs, keeps a second driver of
 * the same job off on every node. Needs ZEUS_WITH_STORE_PG. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "run/run_internal.h"
/* Built outside the library (the zeus run state fuzzer compiles src/run/ alone): no config.h,
 * no PostgreSQL. */
#if defined(__has_include)
#if __has_include("zeus/config.h")
#include "zeus/config.h"
#endif
#endif

#if defined(ZEUS_HAVE_STORE_PG) && ZEUS_HAVE_STORE_PG
#include "store/store.h"
#include "zeus/clock.h"

struct zeus__run_pg {
  zeus__store *db;
  char *key;
};

static int fail(const char *what, const char *err) {
  return zeus__error(ZEUS_EIO, "postgresql state: %s: %s", what, err);
}

int zeus__run_pg_open(const char *url, const char *key, zeus__run_pg **out, unsigned char **image, size_t *len) {
  char err[512];
  *out = NULL;
  *image = NULL;
  *len = 0;
  zeus__run_pg *p = calloc(1, sizeof *p);
  if (!p || !(p->key = zeus__strdup(key))) {
    free(p);
    return zeus__oom("opening the state");
  }
  /* No bound on statements: zeus run holds its connection for the whole job and no client waits on
   * an answer; a driver waits for PostgreSQL as long as it takes (libpq's own defaults). */
  if (zeus__store_open(url, &(zeus__store_opts){.timeout_s = -1}, true, &p->db, err, sizeof err)) {
    zeus__run_pg_close(p);
    return fail("cannot open it", err);
  }
  zeus__store_val k = store_text(key);
  zeus__store_rows rows;
  if (p->db->ops->exec(p->db, "SELECT pg_try_advisory_lock(727275, hashtext($1))", &k, 1, &rows, err, sizeof err)) {
    zeus__run_pg_close(p);
    return fail("locking the job", err);
  }
  const char *got = zeus__store_rows_text(&rows, 0, 0);
  bool locked = got && got[0] == 't';
  zeus__store_rows_free(&rows);
  if (!locked) {
    zeus__run_pg_close(p);
    return zeus__error(ZEUS_EEXIST,
                       "another zeus run (on this or another node) is running the job %s on the shared "
                       "postgresql state",
                       key);
  }
  if (p->db->ops->exec(p->db, "SELECT image FROM run_state WHERE job_key = $1", &k, 1, &rows, err, sizeof err)) {
    zeus__run_pg_close(p);
    return fail("reading", err);
  }
  const char *hex = zeus__store_rows_text(&rows, 0, 0);
  if (hex && strncmp(hex, "\\x", 2) == 0) {
    size_t n = (strlen(hex) - 2) / 2;
    unsigned char *b = sqlite3_malloc64(n ? n : 1);
    for (size_t i = 0; b && i < n; i++) {
      unsigned v;
      sscanf(hex + 2 + 2 * i, "%2x", &v);
      b[i] = (unsigned char)v;
    }
    if (!b) {
      zeus__store_rows_free(&rows);
      zeus__run_pg_close(p);
      return zeus__oom("reading the state");
    }
    *image = b;
    *len = n;
  }
  zeus__store_rows_free(&rows);
  *out = p;
  return ZEUS_OK;
}

int zeus__run_pg_save(zeus__run_pg *p, const unsigned char *image, size_t len) {
  char err[512];
  char *hex = malloc(2 * len + 3);
  if (!hex) return zeus__oom("writing the state");
  memcpy(hex, "\\x", 2);
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < len; i++) {
    hex[2 + 2 * i] = digits[image[i] >> 4];
    hex[3 + 2 * i] = digits[image[i] & 15];
  }
  hex[2 + 2 * len] = '\0';
  zeus__store_val v[3] = {store_text(p->key), store_text(hex), store_real(zeus_wall_s())};
  int rc = p->db->ops->exec(
      p->db,
      "INSERT INTO run_state (job_key, image, updated_s) VALUES ($1, $2, $3) "
      "ON CONFLICT (job_key) DO UPDATE SET image = EXCLUDED.image, updated_s = EXCLUDED.updated_s",
      v, 3, NULL, err, sizeof err);
  free(hex);
  return rc ? fail("writing", err) : ZEUS_OK;
}

int zeus__run_pg_set_aside(zeus__run_pg *p, const char *stamp) {
  char err[512], key[1024];
  snprintf(key, sizeof key, "%s.reset-%s", p->key, stamp);
  zeus__store_val v[2] = {store_text(key), store_text(p->key)};
  if (p->db->ops->exec(p->db, "UPDATE run_state SET job_key = $1 WHERE job_key = $2", v, 2, NULL, err, sizeof err))
    return fail("--reset-state", err);
  zeus__log(ZEUS_LOG_WARN, "run", "--reset-state: the old state is kept as the run_state row '%s'; starting over", key);
  return ZEUS_OK;
}

void zeus__run_pg_close(zeus__run_pg *p) {
  if (!p) return;
  zeus__store_close(p->db); /* ends the session: releases the advisory lock */
  free(p->key);
  free(p);
}
#else
int zeus__run_pg_open(const char *url, const char *key, zeus__run_pg **out, unsigned char **image, size_t *len) {
  (void)url, (void)key, (void)image, (void)len;
  *out = NULL;
  return zeus__error(ZEUS_EINVAL,
                     "--state postgresql://...: this zeus was built without PostgreSQL support "
                     "(ZEUS_WITH_STORE_PG, libpq)");
}
int zeus__run_pg_save(zeus__run_pg *p, const unsigned char *image, size_t len) {
  (void)p, (void)image, (void)len;
  return ZEUS_EINVAL;
}
int zeus__run_pg_set_aside(zeus__run_pg *p, const char *stamp) {
  (void)p, (void)stamp;
  return ZEUS_EINVAL;
}
void zeus__run_pg_close(zeus__run_pg *p) { (void)p; }
#endif

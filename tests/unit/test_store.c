/* store (src/store/): the one place for what both back ends and both front ends share: the
 * migration runner, the bounds and retries (defaults reaching SQLite and the PostgreSQL
 * connection parameters), the transaction loop, opening by URL. */
#include <stdio.h>
#include <string.h>

#include "test_util.h"

#include "store/store.h"
#include "zeus/config.h"

typedef struct fixture {
  char dir[256];
  char path[320];
  zeus__store *db;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  zeus_test_tmpdir(f->dir, sizeof f->dir);
  snprintf(f->path, sizeof f->path, "sqlite://%s/store.db", f->dir);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  zeus__store_close(f->db);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
  if (system(cmd) != 0) return -1;
  free(f);
  return 0;
}

/* One integer the query returns (its first cell). */
static long long query_int(zeus__store *db, const char *sql) {
  char err[512] = "";
  zeus__store_rows r = {0};
  int rc = db->ops->exec(db, sql, NULL, 0, &r, err, sizeof err);
  if (rc) fail_msg("%s: %s", sql, err);
  long long v = zeus__store_rows_int(&r, 0, 0);
  zeus__store_rows_free(&r);
  return v;
}

static void store_migrations_apply_in_order_once_and_a_newer_database_is_refused(void **state) {
  fixture *f = *state;
  char err[512] = "";
  assert_int_equal(zeus__store_open(f->path, NULL, false, &f->db, err, sizeof err), STORE_OK);
  /* Each version appends its number: the order they ran in is the table's order. */
  static const char *const m[] = {"CREATE TABLE t (v INTEGER NOT NULL);", "INSERT INTO t (v) VALUES (2);",
                                  "INSERT INTO t (v) VALUES (3);"};
  assert_int_equal(zeus__store_migrate(f->db, m, 2, err, sizeof err), STORE_OK);
  assert_int_equal(query_int(f->db, "SELECT max(version) FROM bso_schema_version"), 2);
  assert_int_equal(zeus__store_migrate(f->db, m, 2, err, sizeof err), STORE_OK); /* again: nothing to do */
  assert_int_equal(query_int(f->db, "SELECT count(*) FROM t"), 1);
  assert_int_equal(zeus__store_migrate(f->db, m, 3, err, sizeof err), STORE_OK);
  assert_int_equal(query_int(f->db, "SELECT group_concat(v, '') FROM (SELECT v FROM t ORDER BY rowid)"), 23);
  assert_int_equal(query_int(f->db, "SELECT count(*) FROM bso_schema_version"), 3);
  assert_int_equal(query_int(f->db, "SELECT sum(version) FROM bso_schema_version"), 1 + 2 + 3);
  /* A zeus that knows fewer versions than the database has refuses it, naming both. */
  assert_int_equal(zeus__store_migrate(f->db, m, 2, err, sizeof err), STORE_ERR);
  assert_non_null(strstr(err, "sqlite: the database's schema is version 3, newer than this zeus knows (2)"));
  assert_int_equal(query_int(f->db, "SELECT count(*) FROM t"), 2);
}

static void store_failed_migration_leaves_the_database_as_it_was(void **state) {
  fixture *f = *state;
  char err[512] = "";
  assert_int_equal(zeus__store_open(f->path, NULL, false, &f->db, err, sizeof err), STORE_OK);
  static const char *const m[] = {"CREATE TABLE t (v INTEGER);", "INSERT INTO t (v) VALUES (1);",
                                  "INSERT INTO no_such_table VALUES (1);"};
  assert_int_equal(zeus__store_migrate(f->db, m, 1, err, sizeof err), STORE_OK);
  assert_int_equal(zeus__store_migrate(f->db, m, 3, err, sizeof err), STORE_ERR);
  assert_non_null(strstr(err, "no_such_table"));
  /* Versions 2 and 3 ran in one transaction: neither is kept. */
  assert_int_equal(query_int(f->db, "SELECT max(version) FROM bso_schema_version"), 1);
  assert_int_equal(query_int(f->db, "SELECT count(*) FROM t"), 0);
}

static void store_open_migrates_to_the_shared_schema(void **state) {
  fixture *f = *state;
  char err[512] = "";
  assert_int_equal(zeus__store_open(f->path, NULL, true, &f->db, err, sizeof err), STORE_OK);
  assert_int_equal(query_int(f->db, "SELECT max(version) FROM bso_schema_version"), zeus__store_schema_n);
  assert_int_equal(query_int(f->db, "SELECT count(*) FROM bso_schema_version"), zeus__store_schema_n);
  assert_int_equal(query_int(f->db,
                             "SELECT count(*) FROM sqlite_master WHERE name IN ('bso_job', 'bso_trial', "
                             "'run_state', 'bso_trial_attention')"),
                   4);
  zeus__store_close(f->db);
  f->db = NULL;
  assert_int_equal(zeus__store_open(f->path, NULL, true, &f->db, err, sizeof err), STORE_OK); /* once */
  assert_int_equal(query_int(f->db, "SELECT count(*) FROM bso_schema_version"), zeus__store_schema_n);
}

static void store_defaults_reach_sqlite_and_the_postgresql_parameters(void **state) {
  fixture *f = *state;
  char err[512] = "";
  zeus__store_opts d = zeus__store_opts_resolve(NULL);
  assert_true(d.timeout_s == zeus__store_defaults.timeout_s && d.timeout_s > 0);
  assert_int_equal(d.busy_timeout_ms, zeus__store_defaults.busy_timeout_ms);
  assert_int_equal(d.max_attempts, zeus__store_defaults.max_attempts);
  assert_true(d.reconnect_s == zeus__store_defaults.reconnect_s && d.reconnect_s > 0);
  /* Zero fields take the defaults; a negative timeout stays: no bound. */
  zeus__store_opts some = zeus__store_opts_resolve(&(zeus__store_opts){.timeout_s = -1, .max_attempts = 7});
  assert_true(some.timeout_s < 0);
  assert_int_equal(some.busy_timeout_ms, zeus__store_defaults.busy_timeout_ms);
  assert_int_equal(some.max_attempts, 7);

  /* SQLite: the busy timeout the connection really has. */
  assert_int_equal(zeus__store_open(f->path, NULL, false, &f->db, err, sizeof err), STORE_OK);
  assert_int_equal(query_int(f->db, "PRAGMA busy_timeout"), zeus__store_defaults.busy_timeout_ms);
  assert_true(f->db->opts.timeout_s == zeus__store_defaults.timeout_s);
  zeus__store_close(f->db);
  f->db = NULL;
  assert_int_equal(
      zeus__store_open(f->path, &(zeus__store_opts){.busy_timeout_ms = 1234}, false, &f->db, err, sizeof err),
      STORE_OK);
  assert_int_equal(query_int(f->db, "PRAGMA busy_timeout"), 1234);

  /* PostgreSQL: the libpq parameters that the default timeout gives. */
  zeus__store_pg_bounds b;
  zeus__store_pg_bounds_of(zeus__store_defaults.timeout_s, &b);
  static const char *const keys[] = {"connect_timeout",     "keepalives",       "keepalives_idle",
                                     "keepalives_interval", "keepalives_count", "tcp_user_timeout"};
  static const char *const want4[] = {"4", "1", "4", "2", "3", "4000"};
  assert_int_equal(b.n, 6);
  for (int i = 0; i < b.n; i++) {
    assert_string_equal(b.keys[i], keys[i]);
    assert_string_equal(b.vals[i], want4[i]);
  }
  /* Under libpq's least connect_timeout (2 s) and keepalive granularity (1 s). */
  zeus__store_pg_bounds_of(0.5, &b);
  static const char *const want_half[] = {"2", "1", "1", "1", "3", "500"};
  for (int i = 0; i < b.n; i++) assert_string_equal(b.vals[i], want_half[i]);
  zeus__store_pg_bounds_of(-1, &b);
  assert_int_equal(b.n, 0);
}

typedef struct counted {
  int calls, retries_left;
  bool keep;
} counted;

static int insert_body(zeus__store *db, void *arg, bool *commit, char *err, size_t errlen) {
  counted *c = arg;
  c->calls++;
  *commit = c->keep;
  zeus__store_val v = store_int(c->calls);
  int rc = db->ops->exec(db, "INSERT INTO t (v) VALUES ($1)", &v, 1, NULL, err, errlen);
  if (!rc && c->retries_left > 0) {
    c->retries_left--;
    snprintf(err, errlen, "busy (by the test)");
    return STORE_RETRY;
  }
  return rc;
}

static void store_transact_retries_then_commits_once_and_gives_up_after_max_attempts(void **state) {
  fixture *f = *state;
  char err[512] = "";
  assert_int_equal(zeus__store_open(f->path, &(zeus__store_opts){.max_attempts = 4}, false, &f->db, err, sizeof err),
                   STORE_OK);
  assert_int_equal(f->db->ops->script(f->db, "CREATE TABLE t (v INTEGER)", err, sizeof err), STORE_OK);
  int attempts = 0;
  counted c = {.retries_left = 2, .keep = true};
  assert_int_equal(zeus__store_transact(f->db, insert_body, &c, &attempts, err, sizeof err), STORE_OK);
  assert_int_equal(attempts, 3);
  /* The two attempts asked to retry were rolled back: only the third's row is kept. */
  assert_int_equal(query_int(f->db, "SELECT count(*) FROM t"), 1);
  assert_int_equal(query_int(f->db, "SELECT v FROM t"), 3);

  c = (counted){.retries_left = 100, .keep = true};
  assert_int_equal(zeus__store_transact(f->db, insert_body, &c, &attempts, err, sizeof err), STORE_RETRY);
  assert_int_equal(attempts, 4);
  assert_int_equal(c.calls, 4);
  assert_int_equal(query_int(f->db, "SELECT count(*) FROM t"), 1);

  /* A body that decides to change nothing is rolled back. */
  c = (counted){.keep = false};
  assert_int_equal(zeus__store_transact(f->db, insert_body, &c, &attempts, err, sizeof err), STORE_OK);
  assert_int_equal(attempts, 1);
  assert_int_equal(query_int(f->db, "SELECT count(*) FROM t"), 1);
}

static void store_open_names_a_bad_url_and_a_missing_back_end(void **state) {
  fixture *f = *state;
  char err[512] = "";
  assert_int_equal(zeus__store_open("mysql://x/y", NULL, false, &f->db, err, sizeof err), STORE_ERR);
  assert_null(f->db);
  assert_non_null(strstr(err, "database 'mysql://x/y': unknown scheme, expected sqlite:///PATH or postgresql://"));
  assert_int_equal(zeus__store_open("sqlite://", NULL, false, &f->db, err, sizeof err), STORE_ERR);
  assert_non_null(strstr(err, "no file path after sqlite://"));
  assert_int_equal(zeus__store_open("", NULL, false, &f->db, err, sizeof err), STORE_ERR);
  assert_non_null(strstr(err, "empty URL"));
  assert_true(zeus__store_url_is_pg("postgres://h/db") && zeus__store_url_is_pg("postgresql:///db"));
  assert_false(zeus__store_url_is_pg("sqlite:///x"));
#if !ZEUS_HAVE_STORE_PG
  assert_int_equal(zeus__store_open("postgresql:///db", NULL, false, &f->db, err, sizeof err), STORE_ERR);
  assert_non_null(strstr(err, "built without PostgreSQL support (ZEUS_WITH_STORE_PG=OFF, needs libpq)"));
#endif
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(store_migrations_apply_in_order_once_and_a_newer_database_is_refused, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(store_failed_migration_leaves_the_database_as_it_was, setup, teardown),
      cmocka_unit_test_setup_teardown(store_open_migrates_to_the_shared_schema, setup, teardown),
      cmocka_unit_test_setup_teardown(store_defaults_reach_sqlite_and_the_postgresql_parameters, setup, teardown),
      cmocka_unit_test_setup_teardown(store_transact_retries_then_commits_once_and_gives_up_after_max_attempts, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(store_open_names_a_bad_url_and_a_missing_back_end, setup, teardown),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

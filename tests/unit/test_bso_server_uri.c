/* bso_server: the request target's check (uri_check.c: UTF-8 without NUL after decoding, naming
 * the part) and the refusal log's rate (at most once per client a period, over a fixed table). */
#include <string.h>

#include "test_util.h"

#include "bso_server/bso_server_internal.h"

static void expect_problem(const char *uri, const char *needle) {
  char msg[256] = "";
  int bad = bso_uri_problem(uri, msg, sizeof msg);
  if (!bad || !strstr(msg, needle)) fail_msg("target '%s': got %d '%s', expected a problem with '%s'", uri, bad, msg, needle);
}

static void expect_sound(const char *uri) {
  char msg[256] = "";
  if (bso_uri_problem(uri, msg, sizeof msg)) fail_msg("target '%s' refused: %s", uri, msg);
}

static void uri_nul_and_bad_utf8_are_refused_naming_the_part(void **state) {
  (void)state;
  expect_problem("/jobs?job_id=j1%00x", "query parameter 'job_id' holds a NUL byte");
  expect_problem("/jobs?a=1&job_id=%ff", "query parameter 'job_id' is not UTF-8");
  expect_problem("/jobs?job%00id=j1", "name holds a NUL byte");
  expect_problem("/jobs%00x", "path holds a NUL byte");
  expect_problem("/jobs%C3", "path is not UTF-8");
  expect_problem("/jobs?job_id=%C0%AF", "not UTF-8");        /* overlong '/' */
  expect_problem("/jobs?job_id=%E0%80%AF", "not UTF-8");     /* overlong, 3 bytes */
  expect_problem("/jobs?job_id=%ED%A0%80", "not UTF-8");     /* a surrogate */
  expect_problem("/jobs?job_id=%F4%90%80%80", "not UTF-8");  /* above U+10FFFF */
  expect_problem("/jobs?job_id=%E2%82", "not UTF-8");        /* cut short */
  expect_problem("/jobs?job_id=\xfe", "not UTF-8");          /* a raw byte */
}

static void uri_sound_targets_pass(void **state) {
  (void)state;
  expect_sound("/jobs");
  expect_sound("/jobs?job_id=mnist-1");
  expect_sound("/jobs/batch_size?job_id=q-%C3%A9&x=%E2%82%AC&y=%F0%9F%98%80"); /* é, €, an emoji */
  expect_sound("/jobs?job_id=a%zzb&flag");                                     /* not an escape; no '=' */
  expect_sound("/jobs?job_id=%2");                                             /* a cut escape stays text */
  expect_sound("/jobs?");
}

static void ratelog_once_per_client_a_minute(void **state) {
  (void)state;
  bso_ratelog rl;
  bso_ratelog_init(&rl);
  unsigned long more = 99;
  assert_true(bso_ratelog_allow(&rl, "10.0.0.1", 1000.0, &more));
  assert_int_equal(more, 0);
  for (int i = 0; i < 5; i++) assert_false(bso_ratelog_allow(&rl, "10.0.0.1", 1000.0 + 10 * i, &more));
  /* Another client is its own. */
  assert_true(bso_ratelog_allow(&rl, "10.0.0.2", 1001.0, &more));
  assert_false(bso_ratelog_allow(&rl, "10.0.0.1", 1059.9, &more));
  /* A minute after its last line, the client logs again, counting what was not logged. */
  assert_true(bso_ratelog_allow(&rl, "10.0.0.1", 1060.0, &more));
  assert_int_equal(more, 6);
  assert_false(bso_ratelog_allow(&rl, "10.0.0.1", 1061.0, &more));
  bso_ratelog_destroy(&rl);
}

static void ratelog_full_table_never_logs_a_client_twice_a_minute(void **state) {
  (void)state;
  bso_ratelog rl;
  bso_ratelog_init(&rl);
  unsigned long more;
  char who[32];
  for (int i = 0; i < BSO_RATELOG_CLIENTS; i++) {
    snprintf(who, sizeof who, "10.1.%d.%d", i / 256, i % 256);
    assert_true(bso_ratelog_allow(&rl, who, 2000.0, &more));
  }
  /* Every slot logged within the minute: a new client is not logged (it could push out one that
   * would then log twice), and the first client is still held to its minute. */
  assert_false(bso_ratelog_allow(&rl, "10.9.9.9", 2030.0, &more));
  assert_int_equal(rl.dropped, 1);
  assert_false(bso_ratelog_allow(&rl, "10.1.0.0", 2030.0, &more));
  /* A minute later the slots are free again. */
  assert_true(bso_ratelog_allow(&rl, "10.9.9.9", 2060.0, &more));
  bso_ratelog_destroy(&rl);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(uri_nul_and_bad_utf8_are_refused_naming_the_part),
      cmocka_unit_test(uri_sound_targets_pass),
      cmocka_unit_test(ratelog_once_per_client_a_minute),
      cmocka_unit_test(ratelog_full_table_never_logs_a_client_twice_a_minute),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

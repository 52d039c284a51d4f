/* core: errors, logging, settings, CSV, JSON, atomic files. */
#include "test_util.h"

#include <zeus.h>

#include "core/core.h"
#include "core/csv.h"
#include "core/json.h"

static void errors_have_names_and_messages(void **state) {
  (void)state;
  assert_string_equal(zeus_strerror(ZEUS_ENOTSUP), "not supported");
  assert_string_equal(zeus_errname(ZEUS_EPERM), "ZEUS_EPERM");
  assert_string_equal(zeus_strerror(-999), "unknown error");
  assert_int_equal(zeus__error(ZEUS_EINVAL, "bad %s %d", "thing", 3), ZEUS_EINVAL);
  assert_string_equal(zeus_errmsg(), "bad thing 3");
  assert_int_equal(zeus_errcode(), ZEUS_EINVAL);
  zeus__error_ctx(ZEUS_EIO, "while loading '%s'", "x.json");
  assert_string_equal(zeus_errmsg(), "while loading 'x.json': bad thing 3");
  assert_int_equal(zeus_errcode(), ZEUS_EIO);
}

static int log_calls;
static char log_last[256];
static void capture(int level, const char *module, const char *msg, void *ud) {
  (void)ud;
  log_calls++;
  snprintf(log_last, sizeof log_last, "%d|%s|%s", level, module, msg);
}

static void logging_filters_by_level_before_formatting(void **state) {
  (void)state;
  zeus_set_log_callback(capture, NULL);
  zeus_set_log_level(ZEUS_LOG_WARN);
  log_calls = 0;
  zeus__log(ZEUS_LOG_DEBUG, "test", "hidden %d", 1);
  assert_int_equal(log_calls, 0);
  zeus__log(ZEUS_LOG_WARN, "test", "shown %d", 2);
  assert_int_equal(log_calls, 1);
  assert_string_equal(log_last, "1|test|shown 2");
  int lvl;
  assert_zeus_ok(zeus_log_level_parse("DEBUG", &lvl));
  assert_int_equal(lvl, ZEUS_LOG_DEBUG);
  assert_zeus_err(zeus_log_level_parse("loud", &lvl), ZEUS_EINVAL, "loud");
  setenv("ZEUS_TEST_LOG", "chatty", 1);
  assert_zeus_err(zeus_log_init_stderr("ZEUS_TEST_LOG"), ZEUS_EINVAL, "ZEUS_TEST_LOG");
  zeus_set_log_callback(NULL, NULL);
}

static void settings_are_validated_with_the_variable_named(void **state) {
  (void)state;
  long v;
  double d;
  bool b;
  unsetenv("ZEUS_T_X");
  assert_zeus_ok(zeus__env_long("ZEUS_T_X", 0, 10, 7, &v));
  assert_int_equal(v, 7);
  setenv("ZEUS_T_X", "12", 1);
  assert_zeus_err(zeus__env_long("ZEUS_T_X", 0, 10, 7, &v), ZEUS_ERANGE, "ZEUS_T_X");
  setenv("ZEUS_T_X", "4x", 1);
  assert_zeus_err(zeus__env_long("ZEUS_T_X", 0, 10, 7, &v), ZEUS_EINVAL, "'4x'");
  setenv("ZEUS_T_X", " 0.25 ", 1);
  assert_zeus_ok(zeus__env_double("ZEUS_T_X", 0, 1, 0.5, &d));
  assert_true(d == 0.25);
  setenv("ZEUS_T_X", "nan", 1);
  assert_zeus_err(zeus__env_double("ZEUS_T_X", 0, 1, 0.5, &d), ZEUS_EINVAL, "ZEUS_T_X");
  setenv("ZEUS_T_X", "yes", 1);
  assert_zeus_ok(zeus__env_bool("ZEUS_T_X", false, &b));
  assert_true(b);
  setenv("ZEUS_T_X", "maybe", 1);
  assert_zeus_err(zeus__env_bool("ZEUS_T_X", false, &b), ZEUS_EINVAL, "maybe");
  static const char *const ch[] = {"nvml", "sim", "none", NULL};
  int idx;
  setenv("ZEUS_T_X", "SIM", 1);
  assert_zeus_ok(zeus__env_choice("ZEUS_T_X", ch, 0, &idx));
  assert_int_equal(idx, 1);
  setenv("ZEUS_T_X", "amd", 1);
  assert_zeus_err(zeus__env_choice("ZEUS_T_X", ch, 0, &idx), ZEUS_EINVAL, "nvml, sim, none");
}

/* Every CSV reader (traces, power-limit profiles, frontier profiles) skips a UTF-8 byte-order
 * mark before the header; one elsewhere stays data. */
static void csv_skips_a_utf8_byte_order_mark(void **state) {
  (void)state;
  const char text[] = "\xEF\xBB\xBF" "a,b\n1,\xEF\xBB\xBFx\n";
  zeus__csv *c;
  assert_zeus_ok(zeus__csv_parse(text, strlen(text), "bom.csv", &c));
  size_t col = 9;
  assert_zeus_ok(zeus__csv_require_col(c, "a", &col));
  assert_int_equal(col, 0);
  assert_string_equal(zeus__csv_header(c, 0), "a");
  assert_string_equal(zeus__csv_cell(c, 0, 1), "\xEF\xBB\xBFx");
  assert_int_equal(zeus__csv_line(c, 0), 2);
  zeus__csv_free(c);
}

static void csv_parses_quotes_and_reports_lines(void **state) {
  (void)state;
  const char *text = "a,b,c\r\n1,\"x,y\",3\n\n4,\"say \"\"hi\"\"\",6\n";
  zeus__csv *c;
  assert_zeus_ok(zeus__csv_parse(text, strlen(text), "t.csv", &c));
  assert_int_equal(zeus__csv_ncols(c), 3);
  assert_int_equal(zeus__csv_nrows(c), 2);
  assert_string_equal(zeus__csv_cell(c, 0, 1), "x,y");
  assert_string_equal(zeus__csv_cell(c, 1, 1), "say \"hi\"");
  assert_int_equal(zeus__csv_line(c, 1), 4);
  size_t col;
  assert_zeus_ok(zeus__csv_require_col(c, "c", &col));
  assert_int_equal(col, 2);
  assert_zeus_err(zeus__csv_require_col(c, "zz", &col), ZEUS_EPARSE, "missing column 'zz'");
  double d;
  assert_zeus_ok(zeus__csv_double(c, 1, 2, &d));
  assert_true(d == 6.0);
  assert_zeus_err(zeus__csv_double(c, 0, 1, &d), ZEUS_EPARSE, "t.csv:2:2: column 'b'");
  zeus__csv_free(c);
  const char *bad = "a,b\n1,2\n3\n";
  assert_zeus_err(zeus__csv_parse(bad, strlen(bad), "bad.csv", &c), ZEUS_EPARSE, "bad.csv:3");
  assert_zeus_err(zeus__csv_parse("", 0, "e.csv", &c), ZEUS_EPARSE, "empty");
  zeus__buf b = {0};
  assert_zeus_ok(zeus__csv_put_field(&b, "p,q\"r"));
  assert_string_equal(b.data, "\"p,q\"\"r\"");
  zeus__buf_free(&b);
}

static void json_errors_name_line_and_field(void **state) {
  (void)state;
  json_t *j;
  const char *bad = "{\n \"a\": 1,\n \"b\": }";
  assert_zeus_err(zeus__json_parse(bad, strlen(bad), "body", &j), ZEUS_EPARSE, "body:3:");
  const char *good = "{\"a\": 1.5, \"s\": \"x\", \"l\": [1]}";
  assert_zeus_ok(zeus__json_parse(good, strlen(good), "body", &j));
  double d;
  const char *s;
  assert_zeus_ok(zeus__json_req_number(j, "a", "obj", &d));
  assert_true(d == 1.5);
  assert_zeus_err(zeus__json_req_number(j, "s", "obj", &d), ZEUS_EINVAL, "field 's' must be a number");
  assert_zeus_err(zeus__json_req_string(j, "zz", "obj", &s), ZEUS_EINVAL, "missing field 'zz'");
  json_decref(j);
}

static void atomic_write_replaces_whole_file(void **state) {
  (void)state;
  char dir[256], path[512];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/out.json", dir);
  zeus_test_write_file(path, "old");
  json_t *j = json_pack("{s:f}", "x", 2.5);
  assert_zeus_ok(zeus__json_write_file_atomic(path, j, 0));
  json_decref(j);
  char *data;
  size_t len;
  assert_zeus_ok(zeus__read_file(path, &data, &len));
  assert_string_equal(data, "{\"x\":2.5}\n");
  free(data);
  assert_zeus_err(zeus__read_file("/nonexistent/zzz", &data, &len), ZEUS_ENOENT, "/nonexistent/zzz");
  snprintf(path, sizeof path, "%s/nodir/out.json", dir);
  assert_zeus_err(zeus__write_file_atomic(path, "x", 1), ZEUS_EIO, "nodir");
}

static void version_matches_header(void **state) {
  (void)state;
  assert_int_equal(zeus_version_hex(), ZEUS_VERSION_HEX);
  char want[32];
  snprintf(want, sizeof want, "%d.%d.%d", ZEUS_VERSION_MAJOR, ZEUS_VERSION_MINOR, ZEUS_VERSION_PATCH);
  assert_string_equal(zeus_version(), want);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(errors_have_names_and_messages),
      cmocka_unit_test(logging_filters_by_level_before_formatting),
      cmocka_unit_test(settings_are_validated_with_the_variable_named),
      cmocka_unit_test(csv_parses_quotes_and_reports_lines),
      cmocka_unit_test(csv_skips_a_utf8_byte_order_mark),
      cmocka_unit_test(json_errors_name_line_and_field),
      cmocka_unit_test(atomic_write_replaces_whole_file),
      cmocka_unit_test(version_matches_header),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

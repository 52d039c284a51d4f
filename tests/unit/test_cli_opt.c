/* The CLI's option layer (cli/opt.c) and the output convention of zeus/format.h: both spellings
 * of a value, "did you mean", ranges and overflow, required options, operands, the generated help;
 * shortest round-trip reals and a JSON writer that escapes what jansson would. */
#include <float.h>
#include <jansson.h>
#include <math.h>

#include "test_util.h"
#include "zeus.h"
#include "../cli/opt.h"

/* Runs cli_parse with stderr captured into `err` (NUL-terminated). */
static int parse_capture(const cli_command *c, char **argv, char ***rest, int *nrest, char *err, size_t errlen) {
  int argc = 0;
  while (argv[argc]) argc++;
  fflush(stderr);
  FILE *tmp = tmpfile();
  assert_non_null(tmp);
  int saved = dup(STDERR_FILENO);
  dup2(fileno(tmp), STDERR_FILENO);
  int rc = cli_parse(c, argc, argv, rest, nrest);
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  rewind(tmp);
  size_t n = fread(err, 1, errlen - 1, tmp);
  err[n] = '\0';
  fclose(tmp);
  return rc;
}

static bool flag;
static const char *path;
static int count, mode;
static long big;
static double ratio;
static const char *const modes[] = {"reclaim", "keep", NULL};

static const cli_opt opts[] = {
    {"json", 0, CLI_OPT_FLAG, &flag, NULL, "print JSON"},
    {"output", 'o', CLI_OPT_STRING, &path, "FILE", "write the report to FILE"},
    {"interval-ms", 0, CLI_OPT_INT, &count, "N", "sampling period", "100", 1, 60000},
    {"bytes", 0, CLI_OPT_LONG, &big, "N", "a size"},
    {"ratio", 0, CLI_OPT_DOUBLE, &ratio, "F", "a factor", "0.5", 0, 1},
    {"slack", 0, CLI_OPT_CHOICE, &mode, NULL, "what to do with slack", "reclaim", .choices = modes},
    {0},
};

static const cli_command cmd = {
    .name = "test", .usage = "zeus test [OPTIONS] FILE...", .about = "A test command.", .opts = opts,
    .more = "Environment: NONE\n", .args = CLI_ARGS_ANY, .min_args = 0, .max_args = 3, .args_name = "FILE"};

static void reset(void) {
  flag = false;
  path = NULL;
  count = mode = 0;
  big = 0;
  ratio = 0;
}

static void cli_opt_equals_and_space_spellings_agree(void **state) {
  (void)state;
  char err[512];
  char *a1[] = {"test", "--interval-ms=250", "--output", "x.json", "--ratio=0.25", "--slack", "KEEP", NULL};
  reset();
  assert_int_equal(parse_capture(&cmd, a1, NULL, NULL, err, sizeof err), CLI_CONTINUE);
  assert_int_equal(count, 250);
  assert_string_equal(path, "x.json");
  assert_near(ratio, 0.25, 0);
  assert_int_equal(mode, 1);
  char *a2[] = {"test", "--interval-ms", "250", "-ox.json", "--ratio", "0.25", "--slack=keep", NULL};
  reset();
  assert_int_equal(parse_capture(&cmd, a2, NULL, NULL, err, sizeof err), CLI_CONTINUE);
  assert_int_equal(count, 250);
  assert_string_equal(path, "x.json");
  assert_int_equal(mode, 1);
  char *a3[] = {"test", "-o", "y", "--json", NULL};
  reset();
  assert_int_equal(parse_capture(&cmd, a3, NULL, NULL, err, sizeof err), CLI_CONTINUE);
  assert_string_equal(path, "y");
  assert_true(flag);
  assert_string_equal(err, "");
}

static void cli_opt_unknown_option_suggests_nearest(void **state) {
  (void)state;
  char err[512];
  char *a1[] = {"test", "--interval=5", NULL};
  assert_int_equal(parse_capture(&cmd, a1, NULL, NULL, err, sizeof err), 2);
  assert_non_null(strstr(err, "unknown option '--interval' (did you mean '--interval-ms'?)"));
  char *a2[] = {"test", "--jsno", NULL};
  assert_int_equal(parse_capture(&cmd, a2, NULL, NULL, err, sizeof err), 2);
  assert_non_null(strstr(err, "did you mean '--json'"));
  char *a3[] = {"test", "--zzzzzzzzzz", NULL};
  assert_int_equal(parse_capture(&cmd, a3, NULL, NULL, err, sizeof err), 2);
  assert_null(strstr(err, "did you mean"));
  assert_non_null(strstr(err, "zeus test --help"));
  char *a4[] = {"test", "-q", NULL};
  assert_int_equal(parse_capture(&cmd, a4, NULL, NULL, err, sizeof err), 2);
  assert_non_null(strstr(err, "unknown option '-q'"));
}

static void cli_opt_numbers_checked_for_range_and_overflow(void **state) {
  (void)state;
  char err[512];
  char *a1[] = {"test", "--interval-ms=0", NULL};
  assert_int_equal(parse_capture(&cmd, a1, NULL, NULL, err, sizeof err), 2);
  assert_non_null(strstr(err, "--interval-ms: 0 is outside [1, 60000]"));
  char *a2[] = {"test", "--bytes", "99999999999999999999", NULL};
  assert_int_equal(parse_capture(&cmd, a2, NULL, NULL, err, sizeof err), 2);
  assert_non_null(strstr(err, "--bytes: 99999999999999999999 is outside"));
  char *a3[] = {"test", "--ratio", "nan", NULL};
  assert_int_equal(parse_capture(&cmd, a3, NULL, NULL, err, sizeof err), 2);
  assert_non_null(strstr(err, "--ratio: expected a number, got 'nan'"));
  char *a4[] = {"test", "--interval-ms", "12abc", NULL};
  assert_int_equal(parse_capture(&cmd, a4, NULL, NULL, err, sizeof err), 2);
  assert_non_null(strstr(err, "expected an integer, got '12abc'"));
  char *a5[] = {"test", "--ratio", "1e999", NULL};
  assert_int_equal(parse_capture(&cmd, a5, NULL, NULL, err, sizeof err), 2);
  char *a6[] = {"test", "--interval-ms", NULL};
  assert_int_equal(parse_capture(&cmd, a6, NULL, NULL, err, sizeof err), 2);
  assert_non_null(strstr(err, "--interval-ms needs a value (N)"));
  char *a7[] = {"test", "--json=yes", NULL};
  assert_int_equal(parse_capture(&cmd, a7, NULL, NULL, err, sizeof err), 2);
  assert_non_null(strstr(err, "--json takes no value"));
  char *a8[] = {"test", "--slack", "drop", NULL};
  assert_int_equal(parse_capture(&cmd, a8, NULL, NULL, err, sizeof err), 2);
  assert_non_null(strstr(err, "--slack: expected one of reclaim|keep, got 'drop'"));
}

static void cli_opt_operands_and_commands(void **state) {
  (void)state;
  char err[512];
  char **rest;
  int n;
  char *a1[] = {"test", "a", "--json", "b", "--", "--c", NULL};
  reset();
  assert_int_equal(parse_capture(&cmd, a1, &rest, &n, err, sizeof err), CLI_CONTINUE);
  assert_int_equal(n, 3);
  assert_string_equal(rest[0], "a");
  assert_string_equal(rest[1], "b");
  assert_string_equal(rest[2], "--c");
  assert_null(rest[3]);
  assert_true(flag);
  char *a2[] = {"test", "a", "b", "c", "d", NULL};
  assert_int_equal(parse_capture(&cmd, a2, &rest, &n, err, sizeof err), 2);
  assert_non_null(strstr(err, "unexpected argument 'd' (at most 3 FILE)"));

  static const cli_command run = {.name = "run", .usage = "zeus run [OPTIONS] -- CMD", .opts = opts,
                                  .args = CLI_ARGS_COMMAND};
  char *a3[] = {"run", "--json", "--", "sh", "-c", "echo --json", NULL};
  reset();
  assert_int_equal(parse_capture(&run, a3, &rest, &n, err, sizeof err), CLI_CONTINUE);
  assert_int_equal(n, 3);
  assert_string_equal(rest[0], "sh");
  assert_null(rest[3]);
  char *a4[] = {"run", "-o", "f", "sleep", "--json", NULL};
  reset();
  assert_int_equal(parse_capture(&run, a4, &rest, &n, err, sizeof err), CLI_CONTINUE);
  assert_int_equal(n, 2);
  assert_string_equal(rest[0], "sleep");
  assert_false(flag); /* options end at the command */

  static const cli_command none = {.name = "none", .usage = "zeus none", .opts = opts, .args = CLI_ARGS_NONE};
  char *a5[] = {"none", "stray", NULL};
  assert_int_equal(parse_capture(&none, a5, NULL, NULL, err, sizeof err), 2);
  assert_non_null(strstr(err, "unexpected argument 'stray'"));
}

static void cli_opt_required_option_named_when_missing(void **state) {
  (void)state;
  static const cli_opt req[] = {{"profile", 0, CLI_OPT_STRING, &path, "CSV", "the profile", .required = true}, {0}};
  static const cli_command c = {.name = "frontier", .usage = "zeus frontier", .opts = req};
  char err[512];
  char *a1[] = {"frontier", NULL};
  assert_int_equal(parse_capture(&c, a1, NULL, NULL, err, sizeof err), 2);
  assert_non_null(strstr(err, "zeus frontier: --profile is required"));
}

static void cli_opt_help_generated_from_the_table(void **state) {
  (void)state;
  FILE *f = tmpfile();
  cli_help(&cmd, f);
  rewind(f);
  char text[4096];
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  assert_non_null(strstr(text, "usage: zeus test [OPTIONS] FILE..."));
  for (const cli_opt *o = opts; o->name; o++) {
    char want[64];
    snprintf(want, sizeof want, "--%s", o->name);
    if (!strstr(text, want)) fail_msg("help lacks %s:\n%s", want, text);
  }
  assert_non_null(strstr(text, "-o, --output FILE"));
  assert_non_null(strstr(text, "--slack reclaim|keep"));
  assert_non_null(strstr(text, "(default: 100)"));
  assert_non_null(strstr(text, "-h, --help"));
  assert_non_null(strstr(text, "Environment: NONE"));
  assert_int_equal(cli_edit_distance("kitten", "sitting"), 3);
}

/* Headings group options in the help; help text is wrapped so that no line passes 100 columns;
 * a CHOICE with its own metavar still lists its choices when a value is refused. */
static void cli_opt_help_groups_and_wraps_at_100_columns(void **state) {
  (void)state;
  static const char *const sel[] = {"energy", "time", NULL};
  static int s_choice;
  static double s_x;
  static const cli_opt grouped[] = {
      {"selector", 0, CLI_OPT_CHOICE, &s_choice, "NAME", "which one", .choices = sel, .heading = "Knobs:"},
      {"x", 0, CLI_OPT_DOUBLE, &s_x, "X",
       "a long explanation of what this option does, long enough to need more than one line of help "
       "text when printed after the option's name and metavariable",
       "a default that is long as well", .heading = "Other:"},
      {0},
  };
  static const cli_command c = {.name = "grouped", .usage = "zeus grouped", .opts = grouped};
  FILE *f = tmpfile();
  cli_help(&c, f);
  rewind(f);
  char text[4096];
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  assert_non_null(strstr(text, "Options:\nKnobs:\n      --selector NAME"));
  assert_non_null(strstr(text, "\n\nOther:\n      --x X"));
  assert_non_null(strstr(text, "(default: a default that is long as well)"));
  int lines = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), lines++)
    if (strlen(line) > 100) fail_msg("help line of %zu columns: %s", strlen(line), line);
  assert_true(lines >= 8);
  char err[512];
  char *a1[] = {"grouped", "--selector", "fast", NULL};
  assert_int_equal(parse_capture(&c, a1, NULL, NULL, err, sizeof err), 2);
  assert_non_null(strstr(err, "--selector: expected one of energy|time, got 'fast'"));
}

/* Subcommands and modes: the exact name, a suggestion for a near miss, the list otherwise; an
 * example program's errors carry its own name. */
static void cli_pick_names_subcommands_and_programs_name_themselves(void **state) {
  (void)state;
  static const char *const mon_modes[] = {"energy", "power", NULL};
  char err[512];
  fflush(stderr);
  FILE *tmp = tmpfile();
  int saved = dup(STDERR_FILENO);
  dup2(fileno(tmp), STDERR_FILENO);
  int exact = cli_pick("monitor", "mode", "power", mon_modes);
  int near = cli_pick("monitor", "mode", "enrgy", mon_modes);
  int far = cli_pick("monitor", "mode", "volume", mon_modes);
  int none = cli_pick("monitor", "mode", NULL, mon_modes);
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  rewind(tmp);
  size_t n = fread(err, 1, sizeof err - 1, tmp);
  err[n] = '\0';
  fclose(tmp);
  assert_int_equal(exact, 1);
  assert_int_equal(near, -1);
  assert_int_equal(far, -1);
  assert_int_equal(none, -1);
  assert_non_null(strstr(err, "zeus monitor: unknown mode 'enrgy' (did you mean 'energy'?; expected energy or power)"));
  assert_non_null(strstr(err, "zeus monitor: unknown mode 'volume' (expected energy or power)"));
  assert_non_null(strstr(err, "zeus monitor: missing mode (expected energy or power)"));
  static const cli_command prog = {.name = "pipeline_sim", .program = "pipeline_sim", .usage = "pipeline_sim",
                                   .opts = opts};
  char *a1[] = {"pipeline_sim", "--jsn", NULL};
  assert_int_equal(parse_capture(&prog, a1, NULL, NULL, err, sizeof err), 2);
  assert_non_null(strstr(err, "pipeline_sim: unknown option '--jsn' (did you mean '--json'?)\n"
                              "(see 'pipeline_sim --help')"));
  assert_null(strstr(err, "zeus"));
}

static void format_double_is_shortest_round_trip(void **state) {
  (void)state;
  char b[ZEUS_FORMAT_DOUBLE_MAX];
  struct { double v; const char *s; } cases[] = {
      {0.1, "0.1"}, {175, "175"}, {1e20, "1e+20"}, {-3.25e-7, "-3.25e-07"}, {0, "0"},
      {1.0 / 3, "0.3333333333333333"}, {NAN, "NaN"}, {INFINITY, "+Inf"}, {-INFINITY, "-Inf"},
      {DBL_MAX, "1.7976931348623157e+308"}, {5e-324, "5e-324"}, {300, "300"}, {-1200, "-1200"},
      {0.0001, "0.0001"}, {0.00001, "1e-05"}, {1e15, "1000000000000000"}, {1e16, "1e+16"},
      {123456.5, "123456.5"}, {0.000123, "0.000123"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    assert_int_equal(zeus_format_double(cases[i].v, b, sizeof b), (int)strlen(cases[i].s));
    assert_string_equal(b, cases[i].s);
  }
  /* Round trip on a deterministic spread of awkward values. */
  unsigned long long x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 20000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double v;
    memcpy(&v, &x, sizeof v);
    if (!isfinite(v)) continue;
    assert_true(zeus_format_double(v, b, sizeof b) > 0);
    assert_true(strtod(b, NULL) == v);
  }
  assert_int_equal(zeus_format_double(1.0 / 3, b, 4), ZEUS_ERANGE);
}

static void format_rounds_to_decimals_and_digits(void **state) {
  (void)state;
  char b[ZEUS_FORMAT_DOUBLE_MAX];
  struct { double v; int n; const char *s; } dec[] = {
      {0.049999999999999996, 3, "0.05"}, {0.051 + 0.05, 3, "0.101"}, {0.10099999999999999, 6, "0.101"},
      {0.0020724700000016583, 9, "0.00207247"}, {1.0005, 0, "1"}, {2.5, 0, "2"}, {-0.0001, 3, "0"},
      {123.456789, 2, "123.46"}, {1e300, 3, "1e+300"}, {9007199254740993.0, 0, "9007199254740992"},
      {0.1 + 0.2, 17, "0.30000000000000004"}, {0.1 + 0.2, 99, "0.30000000000000004"},
      {0.1 + 0.2, -4, "0"}};
  for (size_t i = 0; i < sizeof dec / sizeof dec[0]; i++) {
    zeus_format_double(zeus_round_decimals(dec[i].v, dec[i].n), b, sizeof b);
    assert_string_equal(b, dec[i].s);
  }
  struct { double v; int n; const char *s; } sig[] = {
      {1234.5678, 3, "1230"}, {0.00123456, 3, "0.00123"}, {2.0 / 3, 6, "0.666667"},
      {-1e-30 / 3, 2, "-3.3e-31"}, {0.0, 5, "0"}, {-0.0, 5, "0"}, {1.0 / 3, 0, "0.3"},
      {1.0 / 3, 40, "0.3333333333333333"}, {DBL_MAX, 17, "1.7976931348623157e+308"}};
  for (size_t i = 0; i < sizeof sig / sizeof sig[0]; i++) {
    zeus_format_double(zeus_round_significant(sig[i].v, sig[i].n), b, sizeof b);
    assert_string_equal(b, sig[i].s);
  }
  /* The fast path agrees with the exact decimal rounding (printf, then strtod) everywhere,
   * halfway cases and values near them included. */
  unsigned long long x = 0x2545F4914F6CDD1Dull;
  for (int i = 0; i < 200000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    int d = (int)(x % 12);
    double v = (double)(int64_t)(x >> 11) / (double)(1ull << (x % 60));
    if (i % 4 == 0) v = (double)(int64_t)(x % 2000001 - 1000000) / 1000.0 + (i % 8 ? 0.0005 : 0.00050000000000001);
    char want[400];
    snprintf(want, sizeof want, "%.*f", d, v);
    double w = strtod(want, NULL);
    if (fabs(v) >= 9007199254740992.0 / pow(10, d)) w = v;
    assert_true(zeus_round_decimals(v, d) == (w == 0 ? 0.0 : w));
  }
  assert_true(isnan(zeus_round_decimals(NAN, 3)));
  assert_true(isinf(zeus_round_significant(-INFINITY, 3)));
  /* Integer counts: 50 mJ is 0.05 J, whatever the counters' size before the subtraction. */
  uint64_t before = 123456789012ull, after = before + 50;
  zeus_format_double(zeus_joules_from_mj((int64_t)(after - before)), b, sizeof b);
  assert_string_equal(b, "0.05");
  zeus_format_double(after / 1000.0 - before / 1000.0, b, sizeof b);
  assert_string_not_equal(b, "0.05"); /* what subtracting joules gives instead */
  zeus_format_double(zeus_joules_from_uj(1234567), b, sizeof b);
  assert_string_equal(b, "1.234567");
  zeus_format_double(zeus_seconds_from_ns(2072470), b, sizeof b);
  assert_string_equal(b, "0.00207247");
  zeus_format_double(zeus_joules_from_mj(-7), b, sizeof b);
  assert_string_equal(b, "-0.007");
  /* Every count of mJ up to a large counter prints with at most three decimals. */
  for (int64_t mj = 0; mj < 200000; mj += 7) {
    zeus_format_double(zeus_joules_from_mj(mj + 9000000000000ll), b, sizeof b);
    const char *dot = strchr(b, '.');
    assert_true(!dot || strlen(dot + 1) <= 3);
  }
}

static void json_round_by_unit_follows_the_key(void **state) {
  (void)state;
  json_t *v = json_pack("{s:f,s:f,s:f,s:[f,f],s:f,s:f,s:{s:f},s:i,s:f}", "time_s", 0.0020724700000016583, "energy_j",
                        0.10099999999999999, "power_w", 29.999319377784303, "clocks_mhz", 1740.5, 1.25, "temp_c", 40.25,
                        "agreement_pct", 0.0004391152116340231, "nested", "eval_energy_j", 326.2950426007552, "n", 7,
                        "ratio", 2.0 / 3);
  zeus_json_round_by_unit(v);
  zeus_json_round_by_unit(NULL);
  char *s = zeus_json_dumps(v, JSON_COMPACT);
  assert_string_equal(s, "{\"time_s\":0.00207247,\"energy_j\":0.101,\"power_w\":29.999,\"clocks_mhz\":[1740.5,1.25],"
                         "\"temp_c\":40.25,\"agreement_pct\":0.000439115,\"nested\":{\"eval_energy_j\":326.295},"
                         "\"n\":7,\"ratio\":0.666667}");
  zeus_free(s);
  json_decref(v);
}

static void json_dumps_escapes_and_keeps_reals_short(void **state) {
  (void)state;
  json_t *v = json_pack("{s:s,s:f,s:f,s:i,s:o,s:[f,b,n]}", "path", "out/we\"ird\\dir\n\x01é", "a", 0.1, "b", 175.0,
                        "n", 42, "none", json_null(), "list", 1e20, 1, NULL);
  char *s = zeus_json_dumps(v, JSON_COMPACT);
  assert_non_null(s);
  assert_string_equal(s, "{\"path\":\"out/we\\\"ird\\\\dir\\n\\u0001é\",\"a\":0.1,\"b\":175.0,\"n\":42,"
                         "\"none\":null,\"list\":[1e+20,true,null]}");
  json_error_t e;
  json_t *back = json_loads(s, 0, &e);
  assert_non_null(back);
  assert_true(json_equal(back, v));
  json_decref(back);
  zeus_free(s);
  s = zeus_json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS);
  assert_non_null(s);
  assert_non_null(strstr(s, "{\n  \"a\": 0.1,\n  \"b\": 175.0,"));
  zeus_free(s);
  json_decref(v);
  json_t *empty = json_pack("{s:{},s:[]}", "o", "a");
  s = zeus_json_dumps(empty, 0);
  assert_string_equal(s, "{\"o\": {}, \"a\": []}");
  zeus_free(s);
  json_decref(empty);
  assert_null(zeus_json_dumps(NULL, 0));
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(cli_opt_equals_and_space_spellings_agree),
      cmocka_unit_test(cli_opt_unknown_option_suggests_nearest),
      cmocka_unit_test(cli_opt_numbers_checked_for_range_and_overflow),
      cmocka_unit_test(cli_opt_operands_and_commands),
      cmocka_unit_test(cli_opt_required_option_named_when_missing),
      cmocka_unit_test(cli_opt_help_generated_from_the_table),
      cmocka_unit_test(cli_opt_help_groups_and_wraps_at_100_columns),
      cmocka_unit_test(cli_pick_names_subcommands_and_programs_name_themselves),
      cmocka_unit_test(format_double_is_shortest_round_trip),
      cmocka_unit_test(format_rounds_to_decimals_and_digits),
      cmocka_unit_test(json_round_by_unit_follows_the_key),
      cmocka_unit_test(json_dumps_escapes_and_keeps_reals_short),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

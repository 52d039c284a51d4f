/* zeusd's GPU command overrides: the file's format and checks, and running commands (their
 * words, placeholders, exit codes, error_pattern, timeouts, output in the error). */
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

#include "daemon/daemon_internal.h"

static zeus__overrides *parse_ok(const char *text) {
  zeus__overrides *o = NULL;
  assert_zeus_ok(zeus__overrides_parse(text, strlen(text), "test file", &o));
  assert_non_null(o);
  return o;
}

static void parse_fails(const char *text, const char *needle, const char *needle2) {
  zeus__overrides *o = (zeus__overrides *)1;
  assert_zeus_err(zeus__overrides_parse(text, strlen(text), "test file", &o), ZEUS_EPARSE, needle);
  if (needle2 && !strstr(zeus_errmsg(), needle2)) fail_msg("'%s' lacks '%s'", zeus_errmsg(), needle2);
  assert_null(o);
}

static void every_operation_and_field_loads(void **state) {
  (void)state;
  zeus__overrides *o = parse_ok("# overrides\n"
                                "[set_persistence_mode]\n"
                                "commands = [\"control --gpu={gpu_id} --enabled={enabled}\"]\n"
                                "error_pattern = \"(?i)error\"\n"
                                "timeout_s = 1\n"
                                "\n"
                                "[set_power_limit]  # watts\n"
                                "commands = [\"control {gpu_id} {power_limit_mw} {power_limit_w}\"]\n"
                                "[set_gpu_locked_clocks]\n"
                                "commands = [\n"
                                "  \"a {gpu_id} {min_clock_mhz}\",  # first\n"
                                "  'b {max_clock_mhz}',\n"
                                "]\n"
                                "timeout_s = 3_0\n"
                                "[reset_gpu_locked_clocks]\ncommands = [\"control {gpu_id}\"]\n"
                                "[set_mem_locked_clocks]\ncommands = [\"c {min_clock_mhz} {max_clock_mhz}\"]\n"
                                "[reset_mem_locked_clocks]\ncommands = [\"control {gpu_id}\"]\n"
                                "[\"reset_locked_clocks\"]\r\ncommands = [\"control\"]\r\n");
  assert_int_equal(zeus__overrides_count(o), ZEUS__OP_COUNT);
  char names[512];
  zeus__overrides_names(o, names, sizeof names);
  assert_string_equal(names, "set_persistence_mode, set_power_limit, set_gpu_locked_clocks, reset_gpu_locked_clocks, "
                             "set_mem_locked_clocks, reset_mem_locked_clocks, reset_locked_clocks");
  zeus__overrides_free(o);
  o = parse_ok("[set_power_limit]\ncommands = ['nvidia-smi -i {gpu_id} -pl {power_limit_w}']\n");
  assert_true(zeus__overrides_has(o, ZEUS__OP_SET_POWER_LIMIT));
  assert_false(zeus__overrides_has(o, ZEUS__OP_SET_GPU_LOCK));
  assert_int_equal(zeus__overrides_count(o), 1);
  zeus__overrides_free(o);
  o = parse_ok("");
  assert_int_equal(zeus__overrides_count(o), 0);
  zeus__overrides_free(o);
}

static void bad_files_say_what_and_where(void **state) {
  (void)state;
  parse_fails("[set_fan_speed]\ncommands = [\"control {gpu_id}\"]\n", "unknown operation 'set_fan_speed'", "line 1");
  parse_fails("[set_power_limit]\ncommands = [\"control\"]\nworking_dir = \"/tmp\"\n", "unknown field 'working_dir'",
              "line 3");
  parse_fails("[set_power_limit]\ncommands = []\n", "empty commands array", "set_power_limit");
  parse_fails("[set_power_limit]\ntimeout_s = 5\n", "has no 'commands'", NULL);
  parse_fails("[set_power_limit]\ncommands = [\"control\"]\nerror_pattern = \"[\"\n", "invalid error_pattern",
              "set_power_limit");
  parse_fails("[set_power_limit]\ncommands = [\"control\"]\nerror_pattern = \"(?s)x\"\n", "inline flag", NULL);
  parse_fails("[set_power_limit]\ncommands = [\"control --value={max_clock_mhz}\"]\n",
              "unknown placeholder '{max_clock_mhz}'", "--value={max_clock_mhz}");
  parse_fails("[reset_locked_clocks]\ncommands = [\"control value}\"]\n", "invalid placeholder", "value}");
  parse_fails("[reset_locked_clocks]\ncommands = [\"control {gpu_id\"]\n", "invalid placeholder", "{gpu_id");
  parse_fails("[reset_locked_clocks]\ncommands = [\"control {{gpu_id}\"]\n", "invalid placeholder", "{{gpu_id}");
  parse_fails("[reset_locked_clocks]\ncommands = [\"control {}\"]\n", "invalid placeholder", NULL);
  parse_fails("[reset_locked_clocks]\ncommands = [\"control '\"]\n", "cannot be split", "single quote");
  parse_fails("[reset_locked_clocks]\ncommands = [\"control \\\"a\"]\n", "cannot be split", "double quote");
  parse_fails("[reset_locked_clocks]\ncommands = [\"\"]\n", "zero words", NULL);
  parse_fails("[reset_locked_clocks]\ncommands = [\"  # only a comment\"]\n", "zero words", NULL);
  parse_fails("[set_power_limit]\ncommands = [\"control\"]\ntimeout_s = 0\n", "timeout_s = 0", NULL);
  parse_fails("[set_power_limit]\ncommands = [\"control\"]\ntimeout_s = -3\n", "timeout_s = -3", NULL);
  parse_fails("[set_power_limit]\ncommands = [\"control\"]\ntimeout_s = 1.5\n", "decimal integer", "line 3");
  parse_fails("[set_power_limit]\ncommands = \"control\"\n", "array of strings", NULL);
  parse_fails("[set_power_limit]\ncommands = [\"a\", 3]\n", "expected a string", NULL);
  parse_fails("[set_power_limit]\ncommands = [\"a\"\n", "not closed", NULL);
  parse_fails("[set_power_limit]\ncommands = [\"a\"] x\n", "after a value", NULL);
  parse_fails("[set_power_limit]\ncommands = [\"a\"]\ncommands = [\"b\"]\n", "given twice", "line 3");
  parse_fails("[set_power_limit]\ncommands = [\"a\"]\n[set_power_limit]\ncommands = [\"b\"]\n", "given twice", NULL);
  parse_fails("commands = [\"a\"]\n", "before any [operation]", NULL);
  parse_fails("[[set_power_limit]]\ncommands = [\"a\"]\n", "arrays of tables", NULL);
  parse_fails("[set_power_limit]\ncommands = [\"\"\"a\"\"\"]\n", "multi-line", NULL);
  parse_fails("[set_power_limit]\ncommands = [\"a\\qb\"]\n", "unknown escape", NULL);
  parse_fails("[set_power_limit]\ncommands = [\"a\\u0000\"]\n", "NUL", NULL);
  parse_fails("[set_power_limit]\nset_power_limit.commands = [\"a\"]\n", "dotted keys", NULL);
}

/* A file with `text` and `mode` in `dir`; its path in `path`. */
static void write_mode(const char *dir, const char *name, const char *text, mode_t mode, char *path, size_t len) {
  snprintf(path, len, "%s/%s", dir, name);
  zeus_test_write_file(path, text);
  assert_int_equal(chmod(path, mode), 0);
}

static void the_file_must_be_ours_and_not_writable_by_others(void **state) {
  (void)state;
  char dir[256], path[512], link[512];
  zeus_test_tmpdir(dir, sizeof dir);
  const char *text = "[reset_locked_clocks]\ncommands = [\"control\"]\n";
  zeus__overrides *o = NULL;
  write_mode(dir, "world.toml", text, 0666, path, sizeof path);
  assert_zeus_err(zeus__overrides_load(path, &o), ZEUS_EPERM, "world-writable (mode 666)");
  assert_null(o);
  write_mode(dir, "group.toml", text, 0664, path, sizeof path);
  assert_zeus_ok(zeus__overrides_load(path, &o)); /* group-writable: a warning only, as zeusd */
  assert_int_equal(zeus__overrides_count(o), 1);
  zeus__overrides_free(o);
  o = NULL;
  snprintf(link, sizeof link, "%s/link.toml", dir);
  assert_int_equal(symlink(path, link), 0);
  assert_zeus_err(zeus__overrides_load(link, &o), ZEUS_EPERM, "symbolic link");
  snprintf(path, sizeof path, "%s/missing.toml", dir);
  assert_zeus_err(zeus__overrides_load(path, &o), ZEUS_ENOENT, "missing.toml");
  write_mode(dir, "bad.toml", "[nope]\n", 0644, path, sizeof path);
  assert_zeus_err(zeus__overrides_load(path, &o), ZEUS_EPARSE, "bad.toml', line 1: unknown operation 'nope'");
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* Runs `op` of a file whose commands are `body` (a TOML table body) with `v`. */
static int run_with(const char *table, const char *body, zeus__gpu_op op, const zeus__override_values *v) {
  char text[2048];
  snprintf(text, sizeof text, "[%s]\n%s", table, body);
  zeus__overrides *o = parse_ok(text);
  int rc = zeus__overrides_run(o, op, v);
  zeus__overrides_free(o);
  return rc;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return strdup("");
  static char buf[4096];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return strdup(buf);
}

static void commands_get_their_words_and_values(void **state) {
  (void)state;
  char dir[256], body[1024], rec[512];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(rec, sizeof rec, "%s/record", dir);
  /* printf's words as the command got them, one per line: quotes, escapes and placeholders. */
  zeus__override_values v = {.gpu = 3, .power_limit_mw = 253999};
  snprintf(body, sizeof body,
           "commands = [\"sh -c 'printf \\\"%%s|\\\" \\\"$@\\\" >>%s; echo >>%s' sh {gpu_id} "
           "--pl={power_limit_mw}:{power_limit_w} \\\"two words\\\" 'it''s' a\\\\ b ''\",\n"
           "            \"sh -c 'echo second >>%s'\"]\n",
           rec, rec, rec);
  assert_zeus_ok(run_with("set_power_limit", body, ZEUS__OP_SET_POWER_LIMIT, &v));
  char *got = slurp(rec);
  assert_string_equal(got, "3|--pl=253999:253|two words|its|a b||\nsecond\n");
  free(got);
  unlink(rec);
  v = (zeus__override_values){.gpu = 4, .min_clock_mhz = 500, .max_clock_mhz = 1700};
  snprintf(body, sizeof body, "commands = [\"sh -c 'echo $1:$2:$3 >%s' sh {gpu_id} {min_clock_mhz} {max_clock_mhz}\"]\n",
           rec);
  assert_zeus_ok(run_with("set_mem_locked_clocks", body, ZEUS__OP_SET_MEM_LOCK, &v));
  got = slurp(rec);
  assert_string_equal(got, "4:500:1700\n");
  free(got);
  v = (zeus__override_values){.gpu = 5, .enabled = true};
  snprintf(body, sizeof body, "commands = [\"sh -c 'echo $1 >%s' sh {enabled}\"]\n", rec);
  assert_zeus_ok(run_with("set_persistence_mode", body, ZEUS__OP_SET_PERSISTENCE, &v));
  got = slurp(rec);
  assert_string_equal(got, "1\n");
  free(got);
  v.enabled = false;
  assert_zeus_ok(run_with("set_persistence_mode", body, ZEUS__OP_SET_PERSISTENCE, &v));
  got = slurp(rec);
  assert_string_equal(got, "0\n");
  free(got);
  /* An operation the file does not name: ZEUS_ENOENT, and nothing ran. */
  unlink(rec);
  assert_int_equal(run_with("set_persistence_mode", body, ZEUS__OP_SET_POWER_LIMIT, &v), ZEUS_ENOENT);
  assert_int_equal(access(rec, F_OK), -1);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

static void failures_carry_the_command_and_its_output(void **state) {
  (void)state;
  char dir[256], body[1024], rec[512];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(rec, sizeof rec, "%s/record", dir);
  zeus__override_values v = {.gpu = 1};
  /* A non-zero exit: its code, stdout and stderr; the next command does not run. */
  snprintf(body, sizeof body,
           "commands = [\"sh -c 'echo standard-output; echo standard-error >&2; exit 7'\", \"touch %s\"]\n", rec);
  assert_zeus_err(run_with("reset_locked_clocks", body, ZEUS__OP_RESET_LOCKS, &v), ZEUS_EDEVICE, "exited with code 7");
  const char *m = zeus_errmsg();
  assert_non_null(strstr(m, "GPU 1: reset_locked_clocks override: command 'sh -c"));
  assert_non_null(strstr(m, "stdout: standard-output; stderr: standard-error"));
  assert_int_equal(access(rec, F_OK), -1);
  /* A zero exit whose output matches error_pattern (case-insensitively with (?i)). */
  assert_zeus_err(run_with("reset_locked_clocks",
                           "commands = [\"sh -c 'echo Failed to set clocks >&2'\"]\nerror_pattern = \"(?i)error|fail\"\n",
                           ZEUS__OP_RESET_LOCKS, &v),
                  ZEUS_EDEVICE, "matched error_pattern '(?i)error|fail'");
  assert_non_null(strstr(zeus_errmsg(), "stderr: Failed to set clocks"));
  /* Without (?i) the case counts. */
  assert_zeus_ok(run_with("reset_locked_clocks",
                          "commands = [\"sh -c 'echo Failed to set clocks'\"]\nerror_pattern = \"error|fail\"\n",
                          ZEUS__OP_RESET_LOCKS, &v));
  /* Not on PATH; a file that cannot be executed. */
  assert_zeus_err(run_with("reset_locked_clocks", "commands = [\"no-such-command-zeus-test\"]\n", ZEUS__OP_RESET_LOCKS, &v),
                  ZEUS_EDEVICE, "could not be spawned: 'no-such-command-zeus-test' is not on PATH");
  snprintf(body, sizeof body, "commands = [\"%s\"]\n", dir);
  assert_zeus_err(run_with("reset_locked_clocks", body, ZEUS__OP_RESET_LOCKS, &v), ZEUS_EDEVICE, "could not be spawned");
  /* Killed by a signal. */
  assert_zeus_err(run_with("reset_locked_clocks", "commands = [\"sh -c 'kill -9 $$'\"]\n", ZEUS__OP_RESET_LOCKS, &v),
                  ZEUS_EDEVICE, "killed by signal 9");
  /* Much output: 2 KiB kept, the rest counted. */
  assert_zeus_err(run_with("reset_locked_clocks", "commands = [\"sh -c 'seq 100000; exit 1'\"]\n", ZEUS__OP_RESET_LOCKS, &v),
                  ZEUS_EDEVICE, "more bytes]");
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void a_command_past_its_timeout_is_killed_with_its_children(void **state) {
  (void)state;
  char dir[256], body[1024], pidf[512];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(pidf, sizeof pidf, "%s/child.pid", dir);
  /* The command starts a child that would outlive it, then hangs. */
  snprintf(body, sizeof body,
           "commands = [\"sh -c 'sleep 30 & echo $! >%s; echo started; sleep 30'\"]\ntimeout_s = 1\n", pidf);
  zeus__override_values v = {.gpu = 0};
  double t0 = now_s();
  assert_zeus_err(run_with("reset_gpu_locked_clocks", body, ZEUS__OP_RESET_GPU_LOCK, &v), ZEUS_ETIMEDOUT,
                  "timed out after 1 s and was killed");
  double took = now_s() - t0;
  assert_non_null(strstr(zeus_errmsg(), "stdout: started"));
  if (took < 0.9 || took > 5.0) fail_msg("the timeout took %.2f s (expected about 1 s)", took);
  char *pid = slurp(pidf);
  pid_t child = (pid_t)atoi(pid);
  free(pid);
  assert_true(child > 0);
  /* Its child went with its process group (it is a zombie of init at most for a moment). */
  bool gone = false;
  for (int i = 0; i < 100 && !gone; i++) {
    char st[64], line[256] = "";
    snprintf(st, sizeof st, "/proc/%d/stat", (int)child);
    FILE *f = fopen(st, "r");
    if (!f) gone = true;
    else {
      if (fgets(line, sizeof line, f) && strstr(line, ") Z ")) gone = true;
      fclose(f);
    }
    if (!gone) usleep(20000);
  }
  assert_true(gone);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_operation_and_field_loads),
      cmocka_unit_test(bad_files_say_what_and_where),
      cmocka_unit_test(the_file_must_be_ours_and_not_writable_by_others),
      cmocka_unit_test(commands_get_their_words_and_values),
      cmocka_unit_test(failures_carry_the_command_and_its_output),
      cmocka_unit_test(a_command_past_its_timeout_is_killed_with_its_children),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

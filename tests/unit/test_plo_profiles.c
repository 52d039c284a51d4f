/* The power-limit optimizer's profile files: saved and loaded exactly, bad files named with
 * their problem, a corrupt file left alone, an unsaveable one still gives the optimum. */
#include "plo_testutil.h"

static void profile_save_then_load_round_trips_exactly(void **state) {
  (void)state;
  scratch s;
  scratch_init(&s);
  const zeus_plo_measurement m[] = {{300, 2924.4619999974966, 10.554417284205556}, {275, 2758.486, 10.3122528},
                                    {100, 0.1, 1e-9}};
  assert_zeus_ok(zeus_plo_profile_save(s.profile, m, 3));
  zeus_plo_measurement *back;
  size_t n;
  assert_zeus_ok(zeus_plo_profile_load(s.profile, &back, &n));
  assert_int_equal(n, 3);
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(back[i].power_limit_w, m[i].power_limit_w);
    assert_true(back[i].energy_j == m[i].energy_j && back[i].time_s == m[i].time_s); /* bit for bit */
  }
  free(back);
  /* The original's shape, readable by the original. */
  FILE *fp = fopen(s.profile, "r");
  char buf[2048] = {0};
  assert_true(fread(buf, 1, sizeof buf - 1, fp) > 0);
  fclose(fp);
  assert_non_null(strstr(buf, "\"measurements\""));
  assert_non_null(strstr(buf, "\"power_limit\": 300"));
  assert_non_null(strstr(buf, "\"energy\": 2924.4619999974966"));
  /* No temporary file left behind. */
  DIR *dir = opendir(s.dir);
  struct dirent *e;
  int files = 0;
  while ((e = readdir(dir)))
    if (e->d_name[0] != '.') files++;
  closedir(dir);
  assert_int_equal(files, 1);
  /* A profile written by the original (extra fields ignored, integer energy accepted). */
  zeus_test_write_file(s.profile,
                       "{\n    \"measurements\": [\n        {\"power_limit\": 250, \"energy\": 100, \"time\": 2.5, "
                       "\"note\": 1}\n    ],\n    \"optimal\": 250\n}\n");
  assert_zeus_ok(zeus_plo_profile_load(s.profile, &back, &n));
  assert_int_equal(n, 1);
  assert_int_equal(back[0].power_limit_w, 250);
  assert_near(back[0].energy_j, 100, 0);
  free(back);
  assert_zeus_err(zeus_plo_profile_save(s.profile, m, 0), ZEUS_EINVAL, "nothing to save");
  char nodir[700];
  snprintf(nodir, sizeof nodir, "%s/no/such/dir/p.json", s.dir);
  assert_zeus_err(zeus_plo_profile_save(nodir, m, 3), ZEUS_EIO, nodir);
  scratch_free(&s);
}

static void profile_bad_files_are_eparse_naming_the_file_and_the_problem(void **state) {
  (void)state;
  scratch s;
  scratch_init(&s);
  static const struct { const char *text; const char *needle;
  } bad[] = {
      {"", "is empty"},
      {"  \n\t\n", "is empty"},
      {"{\"measurements\": [", "invalid JSON"},
      {"not json", "invalid JSON"},
      {"[1, 2]", "expected an object"},
      {"{}", "missing the field 'measurements'"},
      {"{\"measurements\": {}}", "'measurements' must be a list, got an object"},
      {"{\"measurements\": []}", "'measurements' is empty"},
      {"{\"measurements\": [3]}", "measurements[0] must be an object, got an integer"},
      {"{\"measurements\": [{\"power_limit\": 300, \"time\": 1}]}", "measurements[0] lacks the field 'energy'"},
      {"{\"measurements\": [{\"power_limit\": 300, \"energy\": 1, \"time\": 1}, {\"energy\": 1, \"time\": 1}]}",
       "measurements[1] lacks the field 'power_limit'"},
      {"{\"measurements\": [{\"power_limit\": 300, \"energy\": 1}]}", "lacks the field 'time'"},
      {"{\"measurements\": [{\"power_limit\": \"300\", \"energy\": 1, \"time\": 1}]}",
       "measurements[0].power_limit must be a number, got a string"},
      {"{\"measurements\": [{\"power_limit\": 300, \"energy\": -1, \"time\": 1}]}",
       "measurements[0].energy is -1, expected a number >= 0"},
      {"{\"measurements\": [{\"power_limit\": 300, \"energy\": 1, \"time\": 0}]}",
       "measurements[0].time is 0, expected a number > 0"},
      {"{\"measurements\": [{\"power_limit\": 0, \"energy\": 1, \"time\": 1}]}",
       "power_limit is 0, expected a number > 0"},
      {"{\"measurements\": [{\"power_limit\": 250.5, \"energy\": 1, \"time\": 1}]}", "whole number of watts"},
      {"{\"measurements\": [{\"power_limit\": 250, \"energy\": 1, \"time\": 1}, {\"power_limit\": 250, \"energy\": 2, "
       "\"time\": 1}]}",
       "power limit 250 W appears twice"},
      {"{\"measurements\": [], \"measurements\": []}", "invalid JSON"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    zeus_test_write_file(s.profile, bad[i].text);
    zeus_plo_measurement *m = (zeus_plo_measurement *)1;
    size_t n = 99;
    int rc = zeus_plo_profile_load(s.profile, &m, &n);
    if (rc != ZEUS_EPARSE || !strstr(zeus_errmsg(), bad[i].needle) || !strstr(zeus_errmsg(), s.profile))
      fail_msg("case %zu (%s): rc %d, message '%s', expected EPARSE naming the file and '%s'", i, bad[i].text, rc,
               zeus_errmsg(), bad[i].needle);
    assert_ptr_equal(m, (zeus_plo_measurement *)1); /* untouched */
  }
  char missing[700];
  snprintf(missing, sizeof missing, "%s/missing.json", s.dir);
  zeus_plo_measurement *m;
  size_t n;
  assert_zeus_err(zeus_plo_profile_load(missing, &m, &n), ZEUS_ENOENT, missing);
  scratch_free(&s);
}

/* A corrupt profile file makes open fail, changes no GPU and is never overwritten. */
static void plo_corrupt_profile_fails_open_and_is_left_alone(void **state) {
  (void)state;
  scratch s;
  scratch_init(&s);
  const char *text = "{\"measurements\": [{\"power_limit\": 300, \"energy\": 1}]}";
  zeus_test_write_file(s.profile, text);
  zeus_devices *d = open_sim_dvfs(1);
  zeus_monitor *m = open_monitor(d);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  o.profile_path = s.profile;
  zeus_plo *p = NULL;
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EPARSE, "lacks the field 'time'");
  assert_non_null(strstr(zeus_errmsg(), s.profile));
  assert_null(p);
  bool pm = true;
  assert_zeus_ok(zeus_gpu_get_persistence_mode(d, 0, &pm));
  assert_false(pm);
  /* A profile whose optimum is outside the GPUs' range. */
  zeus_test_write_file(s.profile, "{\"measurements\": [{\"power_limit\": 350, \"energy\": 1, \"time\": 1}]}");
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_ERANGE, "350 W is outside the GPUs' power-limit range");
  assert_non_null(strstr(zeus_errmsg(), s.profile));
  zeus_test_write_file(s.profile, text);
  zeus_monitor_close(m);
  zeus_devices_close(d);
  char buf[256] = {0};
  FILE *fp = fopen(s.profile, "r");
  assert_true(fread(buf, 1, sizeof buf - 1, fp) > 0);
  fclose(fp);
  assert_string_equal(buf, text);
  scratch_free(&s);
}

/* A profile that cannot be saved: the optimizer still applies the optimum, and says why. */
static void plo_unsaveable_profile_still_applies_the_optimum(void **state) {
  (void)state;
  scratch s;
  scratch_init(&s);
  char path[700];
  snprintf(path, sizeof path, "%s/no-such-dir/profile.json", s.dir);
  zeus_devices *d = open_sim_dvfs(1);
  zeus_monitor *m = open_monitor(d);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  o.profile_path = path;
  o.wait_steps = 0;
  o.warmup_steps = 0;
  o.profile_steps = 1;
  o.pl_step_w = 100;
  zeus_plo *p;
  assert_zeus_ok(zeus_plo_open(&p, m, &o));
  zeus_sim_node *node = zeus_devices_sim_node(d);
  int rc = ZEUS_OK;
  for (int i = 0; i < 4; i++) {
    rc = zeus_plo_on_step_begin(p);
    if (rc) break;
    assert_zeus_ok(zeus_sim_work(node, 0, 1, NULL));
  }
  assert_int_equal(rc, ZEUS_EIO);
  assert_non_null(strstr(zeus_errmsg(), path));
  assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_DONE);
  assert_true(zeus_plo_optimal_power_limit_w(p) > 0);
  assert_zeus_ok(zeus_plo_on_step_begin(p));
  zeus_plo_close(p);
  zeus_monitor_close(m);
  zeus_devices_close(d);
  scratch_free(&s);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(profile_save_then_load_round_trips_exactly),
      cmocka_unit_test(profile_bad_files_are_eparse_naming_the_file_and_the_problem),
      cmocka_unit_test(plo_corrupt_profile_fails_open_and_is_left_alone),
      cmocka_unit_test(plo_unsaveable_profile_still_applies_the_optimum),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The public conventions of zeus.h: every options struct has an _init that fills the documented
 * defaults (and reads no environment), and what the library allocates for the caller is released
 * with zeus_free() (the sanitizer build checks that nothing leaks or is freed twice). */
#include "test_util.h"

#include <math.h>

#include <zeus.h>
#include <zeus/config.h>

static void opts_init_fills_the_documented_defaults(void **state) {
  (void)state;
  zeus_devices_opts d;
  memset(&d, 0x5a, sizeof d);
  zeus_devices_opts_init(&d);
  assert_null(d.backend);
  assert_null(d.visible_devices);
  assert_false(d.all_devices);

  zeus_monitor_opts m;
  memset(&m, 0x5a, sizeof m);
  zeus_monitor_opts_init(&m);
  assert_null(m.devices);
  assert_null(m.gpu_indices);
  assert_null(m.log_file);
  assert_near(m.poll_interval_s, 0.05, 0);

  zeus_frontier_opts f;
  memset(&f, 0x5a, sizeof f);
  zeus_frontier_opts_init(&f);
  assert_int_equal(f.stages, 0);
  assert_int_equal(f.microbatches, 0);
  assert_near(f.unit_time_s, 0.001, 0);
  assert_near(f.noise_factor, 0.95, 0);
  assert_int_equal(f.cost_model, ZEUS_FRONTIER_COST_EXPONENTIAL);

  zeus_frontier_write_opts w;
  memset(&w, 0x5a, sizeof w);
  zeus_frontier_write_opts_init(&w);
  assert_int_equal(w.every, 0);
  assert_int_equal(w.sample, 0);

  zeus_job_opts j;
  memset(&j, 0x5a, sizeof j);
  zeus_job_opts_init(&j);
  assert_int_equal(j.batch_size, 0);
  assert_int_equal(j.pl_step_w, 25);
  assert_null(j.monitor);
  assert_false(j.no_signal_handlers);

#if ZEUS_HAVE_PFO_SERVER
  /* _init reads no environment; _from_env does. */
  setenv("ZEUS_PFO_SCHEDULER", "AllMaxFrequency", 1);
  zeus_pfo_server_opts so;
  memset(&so, 0x5a, sizeof so);
  zeus_pfo_server_opts_init(&so);
  assert_string_equal(so.host, "127.0.0.1");
  assert_int_equal(so.port, 7787);
  assert_string_equal(so.scheduler, "PointSolution");
  assert_string_equal(so.dump_dir, "./dump");
  assert_int_equal(so.max_job_idle_time_s, 7 * 24 * 3600);
  assert_int_equal(so.max_body_bytes, 16u << 20);
  assert_null(so.token);
  assert_zeus_ok(zeus_pfo_server_opts_from_env(&so));
  assert_string_equal(so.scheduler, "AllMaxFrequency");
  unsetenv("ZEUS_PFO_SCHEDULER");
#endif

#if ZEUS_HAVE_PFO_CLIENT
  zeus_pfo_controller_opts co;
  memset(&co, 0x5a, sizeof co);
  zeus_pfo_controller_opts_init(&co);
  assert_false(co.no_signal_handlers);
  assert_near(co.poll_interval_s, 0.0005, 0);
#endif
}

/* A monitor opened with zeus_monitor_opts_init's options measures what a NULL-options monitor
 * measures: the same GPUs. */
static void monitor_opts_init_means_the_same_as_null(void **state) {
  (void)state;
  zeus_sim_config cfg = {.num_gpus = 3, .clock = ZEUS_SIM_CLOCK_VIRTUAL};
  zeus_devices_opts dopts;
  zeus_devices_opts_init(&dopts);
  dopts.backend = "sim";
  dopts.sim = &cfg;
  dopts.all_devices = true;
  zeus_devices *dev;
  assert_zeus_ok(zeus_devices_open(&dev, &dopts));
  zeus_monitor_opts mo;
  zeus_monitor_opts_init(&mo);
  mo.devices = dev;
  static const unsigned none[1] = {0};
  mo.cpu_indices = none;
  zeus_monitor *m;
  assert_zeus_ok(zeus_monitor_open(&m, &mo));
  assert_int_equal(zeus_monitor_num_gpus(m), 3);
  assert_int_equal(zeus_monitor_gpu_index(m, 2), 2);
  zeus_monitor_close(m);
  zeus_devices_close(dev);
}

/* Strings and arrays the library hands out go back through zeus_free(). */
static void zeus_free_releases_what_the_library_allocates(void **state) {
  (void)state;
  zeus_frontier_profile *p;
  assert_zeus_ok(zeus_frontier_profile_new(&p, "conventions"));
  for (int s = 0; s < 2; s++)
    for (int k = 0; k < 2; k++) {
      assert_zeus_ok(zeus_frontier_profile_add(p, s, (zeus_frontier_instr)k, 1000, 0.02, 3.0));
      assert_zeus_ok(zeus_frontier_profile_add(p, s, (zeus_frontier_instr)k, 1400, 0.015, 3.5));
    }
  zeus_frontier_opts fo;
  zeus_frontier_opts_init(&fo);
  fo.stages = 2;
  fo.microbatches = 2;
  fo.blocking_power_w = 50;
  zeus_frontier *f;
  assert_zeus_ok(zeus_frontier_solve(&f, p, &fo));
  char *csv = NULL, *plan = NULL;
  assert_zeus_ok(zeus_frontier_csv(f, NULL, &csv));
  assert_non_null(strstr(csv, "iteration,time_s"));
  assert_zeus_ok(zeus_frontier_plan_text(f, 0, &plan));
  assert_non_null(strstr(plan, "forward"));
  zeus_free(csv);
  zeus_free(plan);
  zeus_frontier_free(f);
  zeus_frontier_profile_free(p);

  zeus_pfo_job_info job = {.job_id = "", .pp_degree = 2, .dp_degree = 1, .tp_degree = 1, .world_size = 2};
  char *text = NULL, *id = NULL;
  assert_zeus_ok(zeus_pfo_job_info_to_json(&job, &text));
  assert_non_null(strstr(text, "\"pp_degree\":2"));
  assert_zeus_ok(zeus_pfo_make_job_id(&job, "AllMaxFrequency", 0, &id));
  assert_non_null(strstr(id, "+dp1+pp2+tp1+AllMaxFrequency"));
  zeus_free(text);
  zeus_free(id);

  char dir[256], path[300];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/plo.json", dir);
  zeus_plo_measurement m[2] = {{300, 10.0, 1.0}, {250, 9.0, 1.1}};
  assert_zeus_ok(zeus_plo_profile_save(path, m, 2));
  zeus_plo_measurement *back = NULL;
  size_t n = 0;
  assert_zeus_ok(zeus_plo_profile_load(path, &back, &n));
  assert_int_equal(n, 2);
  assert_int_equal(back[1].power_limit_w, 250);
  zeus_free(back);
  unlink(path);
  rmdir(dir);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(opts_init_fills_the_documented_defaults),
      cmocka_unit_test(monitor_opts_init_means_the_same_as_null),
      cmocka_unit_test(zeus_free_releases_what_the_library_allocates),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

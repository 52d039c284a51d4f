/* The Perseus client's hooks, its state machine: instructions must follow the schedule (too
 * many, too few, a wrong name), a schedule the GPU cannot run is refused, the synchronisation
 * callback runs before every instruction, and a GPU without an energy counter is measured. */
#define PFO_CLIENT_TESTUTIL_SERVER
#include "pfo_client_testutil.h"

static void client_schedule_too_long_names_its_length(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_server *s;
  zeus_devices *d;
  zeus_pfo_optimizer *opt = one_rank(&s, &d);
  assert_zeus_ok(zeus_pfo_on_step_begin(opt));
  assert_zeus_ok(zeus_pfo_on_instruction_begin(opt, "forward"));
  assert_zeus_ok(zeus_pfo_on_instruction_end(opt, "forward"));
  assert_zeus_ok(zeus_pfo_on_instruction_begin(opt, "backward"));
  assert_zeus_ok(zeus_pfo_on_instruction_end(opt, "backward"));
  assert_zeus_err(zeus_pfo_on_instruction_begin(opt, "forward"), ZEUS_ESTATE, "has 2 instructions per iteration");
  assert_zeus_ok(zeus_pfo_on_step_end(opt)); /* the failed iteration is not measured */
  /* The next iteration starts over. */
  assert_zeus_ok(zeus_pfo_on_step_begin(opt));
  assert_zeus_ok(zeus_pfo_on_instruction_begin(opt, "forward"));
  assert_zeus_ok(zeus_pfo_on_instruction_end(opt, "forward"));
  assert_zeus_ok(zeus_pfo_on_instruction_begin(opt, "backward"));
  assert_zeus_ok(zeus_pfo_on_instruction_end(opt, "backward"));
  assert_zeus_ok(zeus_pfo_on_step_end(opt));
  zeus_pfo_optimizer_close(opt);
  assert_unlocked(d);
  zeus_pfo_server_close(s);
  zeus_devices_close(d);
}

static void client_schedule_too_short_names_the_next_expected(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_server *s;
  zeus_devices *d;
  zeus_pfo_optimizer *opt = one_rank(&s, &d);
  assert_zeus_ok(zeus_pfo_on_step_begin(opt));
  assert_zeus_ok(zeus_pfo_on_instruction_begin(opt, "forward"));
  assert_zeus_ok(zeus_pfo_on_instruction_end(opt, "forward"));
  assert_zeus_err(zeus_pfo_on_step_end(opt), ZEUS_ESTATE, "next expected is 'backward' (instruction 2 of 2)");
  /* Hooks out of place. */
  assert_zeus_err(zeus_pfo_on_instruction_begin(opt, "forward"), ZEUS_ESTATE, "outside an iteration");
  assert_zeus_err(zeus_pfo_on_step_end(opt), ZEUS_ESTATE, "no iteration is running");
  assert_zeus_ok(zeus_pfo_on_step_begin(opt));
  assert_zeus_err(zeus_pfo_on_step_begin(opt), ZEUS_ESTATE, "has not ended");
  zeus_pfo_optimizer_close(opt);
  zeus_pfo_server_close(s);
  zeus_devices_close(d);
}

static void client_instruction_name_mismatch_names_both(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_server *s;
  zeus_devices *d;
  zeus_pfo_optimizer *opt = one_rank(&s, &d);
  assert_zeus_ok(zeus_pfo_on_step_begin(opt));
  assert_zeus_err(zeus_pfo_on_instruction_begin(opt, "backward"), ZEUS_EINVAL,
                  "on_instruction_begin('backward'): rank 0's schedule expects 'forward' as instruction 1 of 2");
  assert_zeus_ok(zeus_pfo_on_step_end(opt));
  assert_zeus_ok(zeus_pfo_on_step_begin(opt));
  assert_zeus_ok(zeus_pfo_on_instruction_begin(opt, "forward"));
  assert_zeus_err(zeus_pfo_on_instruction_end(opt, "backward"), ZEUS_EINVAL, "the instruction running is 'forward'");
  assert_zeus_ok(zeus_pfo_on_step_end(opt));
  zeus_pfo_optimizer_close(opt);
  zeus_pfo_server_close(s);
  zeus_devices_close(d);
}

typedef struct sync_state {
  int calls;
  int fail_at;
} sync_state;

static int count_sync(void *ctx) {
  sync_state *st = ctx;
  if (++st->calls == st->fail_at) return zeus_set_errmsg(ZEUS_EDEVICE, "cudaDeviceSynchronize: device lost");
  return ZEUS_OK;
}

static void client_sync_callback_runs_before_each_instruction(void **state) {
  (void)state;
  fresh_dir();
  char url[64];
  zeus_pfo_server *s = start_plan_server("[[(\"forward\", 1740), (\"backward\", 1500)]]\n", url, sizeof url);
  zeus_devices *d = open_sim();
  sync_state st = {.fail_at = 4};
  zeus_pfo_optimizer_opts o;
  solo_opts(&o, url, 100, d);
  o.sync = count_sync;
  o.sync_ctx = &st;
  zeus_pfo_optimizer *opt;
  assert_zeus_ok(zeus_pfo_optimizer_open(&opt, &o));
  assert_zeus_ok(one_iteration(opt));
  assert_int_equal(st.calls, 2);
  assert_zeus_ok(zeus_pfo_on_step_begin(opt));
  assert_zeus_ok(zeus_pfo_on_instruction_begin(opt, "forward"));
  assert_zeus_ok(zeus_pfo_on_instruction_end(opt, "forward"));
  assert_zeus_err(zeus_pfo_on_instruction_begin(opt, "backward"), ZEUS_EDEVICE,
                  "the synchronisation callback failed: cudaDeviceSynchronize: device lost");
  zeus_pfo_optimizer_close(opt);
  zeus_pfo_server_close(s);
  zeus_devices_close(d);
}

static void client_measures_a_gpu_without_energy_counter_through_the_monitor(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_server *s = start_server("AllMaxFrequency", "{\"num_microbatches\": 1}", -1, NULL);
  char url[64];
  url_of(zeus_pfo_server_port(s), url, sizeof url);
  zeus_sim_gpu_config g = {.no_energy_counter = true};
  zeus_sim_config cfg = {.num_gpus = 1, .gpus = &g, .clock = ZEUS_SIM_CLOCK_VIRTUAL};
  zeus_devices_opts dopts = {.backend = "sim", .sim = &cfg, .all_devices = true};
  zeus_devices *d;
  assert_zeus_ok(zeus_devices_open(&d, &dopts));
  zeus_pfo_optimizer_opts o;
  solo_opts(&o, url, 1, d);
  zeus_pfo_optimizer *opt;
  assert_zeus_ok(zeus_pfo_optimizer_open(&opt, &o));
  static const char *const seq[] = {"forward", "backward"};
  assert_zeus_ok(zeus_pfo_on_step_begin(opt));
  for (int k = 0; k < 2; k++) {
    assert_zeus_ok(zeus_pfo_on_instruction_begin(opt, seq[k]));
    assert_zeus_ok(zeus_sim_work(zeus_devices_sim_node(d), 0, 1, NULL));
    assert_zeus_ok(zeus_pfo_on_instruction_end(opt, seq[k]));
  }
  assert_zeus_ok(zeus_pfo_on_step_end(opt));
  zeus_pfo_round_stats st;
  zeus_pfo_last_round(opt, &st);
  assert_int_equal(st.round, 0);
  assert_near(st.iter_time_s, 0.1, 1e-9); /* two units at 1740 MHz */
  /* Polled power: the window bounds sample it; the figure is an estimate, but it is there. */
  assert_true(st.iter_energy_j > 0);
  /* The posted breakdown has both instructions. */
  char dir[700];
  snprintf(dir, sizeof dir, "%s/dump/%s", g_dir, zeus_pfo_job_id(opt));
  zeus_pfo_prof_result *pr;
  size_t n;
  assert_zeus_ok(zeus_pfo_load_prof(dir, 0, &pr, &n));
  assert_int_equal(pr[0].n_time_breakdown, 2);
  assert_near(pr[0].time_breakdown[0].values[0], 0.05, 1e-9);
  zeus_pfo_prof_results_free(pr, n);
  zeus_pfo_optimizer_close(opt);
  zeus_pfo_server_close(s);
  zeus_devices_close(d);
}

static void client_schedule_with_an_unsupported_frequency_is_refused(void **state) {
  (void)state;
  fresh_dir();
  char url[64];
  zeus_pfo_server *s = start_plan_server("[[(\"forward\", 1741)]]\n", url, sizeof url);
  zeus_devices *d = open_sim();
  zeus_pfo_optimizer_opts o;
  solo_opts(&o, url, 1, d);
  zeus_pfo_optimizer *opt = NULL;
  /* PointSolution checks the plan against the registered frequencies: its 400 reaches the client. */
  assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), ZEUS_EHTTP, "answered 400");
  assert_non_null(strstr(zeus_errmsg(), "asks for 1741 MHz"));
  zeus_pfo_server_close(s);
  zeus_devices_close(d);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(client_schedule_too_long_names_its_length),
      cmocka_unit_test(client_schedule_too_short_names_the_next_expected),
      cmocka_unit_test(client_instruction_name_mismatch_names_both),
      cmocka_unit_test(client_schedule_with_an_unsupported_frequency_is_refused),
      cmocka_unit_test(client_sync_callback_runs_before_each_instruction),
      cmocka_unit_test(client_measures_a_gpu_without_energy_counter_through_the_monitor),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

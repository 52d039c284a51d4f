/* The Perseus client's options: defaults, the ZEUS_PFO_* / PERSEUS_* settings, and bad options
 * named in the error. */
#define PFO_CLIENT_TESTUTIL_SERVER
#include "pfo_client_testutil.h"

static void client_options_come_from_the_environment_with_perseus_aliases(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_optimizer_opts o;
  setenv("PERSEUS_ITERS_PER_ROUND", "7", 1);
  setenv("PERSEUS_RETRIES", "3", 1);
  setenv("ZEUS_PFO_RETRIES", "4", 1);
  setenv("ZEUS_PFO_SERVER_URL", "http://example:1", 1);
  zeus_pfo_optimizer_opts_init(&o); /* the defaults only: _init reads no environment */
  assert_int_equal(o.iters_per_round, 10);
  assert_int_equal(o.retries, 5);
  assert_null(o.server_url);
  assert_zeus_ok(zeus_pfo_optimizer_opts_from_env(&o));
  assert_int_equal(o.iters_per_round, 7);
  assert_int_equal(o.retries, 4); /* ZEUS_PFO_ wins */
  assert_string_equal(o.server_url, "http://example:1");
  assert_near(o.schedule_timeout_s, 1800, 0);
  setenv("PERSEUS_ITERS_PER_ROUND", "0", 1);
  assert_zeus_err(zeus_pfo_optimizer_opts_from_env(&o), ZEUS_ERANGE, "PERSEUS_ITERS_PER_ROUND");
  setenv("PERSEUS_ITERS_PER_ROUND", "ten", 1);
  assert_zeus_err(zeus_pfo_optimizer_opts_from_env(&o), ZEUS_EINVAL, "PERSEUS_ITERS_PER_ROUND");
  unsetenv("PERSEUS_ITERS_PER_ROUND");
  setenv("ZEUS_PFO_SCHEDULE_TIMEOUT", "-1", 1);
  assert_zeus_err(zeus_pfo_optimizer_opts_from_env(&o), ZEUS_ERANGE, "ZEUS_PFO_SCHEDULE_TIMEOUT");
  unsetenv("ZEUS_PFO_SCHEDULE_TIMEOUT");
}

static void client_bad_options_are_named(void **state) {
  (void)state;
  fresh_dir();
  zeus_devices *d = open_sim();
  zeus_pfo_optimizer_opts o;
  zeus_pfo_optimizer *opt = NULL;
  fast_opts(&o, "http://127.0.0.1:1", 1);
  o.devices = d;
  assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), ZEUS_EINVAL, "dp_degree is 0");
  o.pp_degree = 2, o.dp_degree = 1, o.tp_degree = 1, o.world_size = 3;
  assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), ZEUS_EINVAL, "world_size is 3, but dp_degree x pp_degree");
  o.world_size = 2;
  o.pp_rank = 2;
  assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), ZEUS_EINVAL, "pp_rank is 2, expected 0..1");
  o.pp_rank = 0;
  assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), ZEUS_EINVAL, "give a collective");
  o.pp_degree = o.world_size = 1;
  o.server_url = "127.0.0.1:7787";
  assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), ZEUS_EINVAL, "must start with http://");
  o.server_url = "http://127.0.0.1:1";
  o.device_id = 3;
  assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), ZEUS_ENOENT, "device_id 3 does not exist");
  assert_null(opt);
  zeus_devices_close(d);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(client_options_come_from_the_environment_with_perseus_aliases),
      cmocka_unit_test(client_bad_options_are_named),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

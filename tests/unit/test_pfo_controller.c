/* The Perseus frequency controller alone: it applies the latest wish and puts everything back,
 * finds wishes by polling and wakes from parking, and SIGINT/SIGTERM reset the locked clocks. */
#include "pfo_client_testutil.h"

static void controller_applies_changes_and_puts_everything_back(void **state) {
  (void)state;
  zeus_devices *d = open_sim();
  zeus_sim_node *n = zeus_devices_sim_node(d);
  assert_zeus_ok(zeus_gpu_set_power_limit(d, 0, 200000)); /* not the default */
  zeus_pfo_controller *c;
  zeus_pfo_controller_opts co = {.no_signal_handlers = true};
  assert_zeus_ok(zeus_pfo_controller_open(&c, d, 0, &co));
  unsigned lo, hi, mlo, mhi, mw;
  assert_zeus_ok(zeus_sim_gpu_get_locked_clocks(n, 0, &lo, &hi, &mlo, &mhi));
  assert_true(lo == 1740 && hi == 1740 && mlo == 7251 && mhi == 7251);
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 0, &mw));
  assert_int_equal(mw, 300000); /* back to the default */
  const unsigned *f;
  assert_int_equal(zeus_pfo_controller_frequencies(c, &f), 103);
  assert_int_equal(f[0], 1740);
  assert_int_equal(f[102], 210);
  assert_zeus_ok(zeus_pfo_controller_set_frequency(c, 1200));
  assert_zeus_ok(zeus_pfo_controller_wait(c, 10));
  assert_zeus_ok(zeus_sim_gpu_get_locked_clocks(n, 0, &lo, &hi, NULL, NULL));
  assert_true(lo == 1200 && hi == 1200);
  assert_int_equal(zeus_pfo_controller_current_mhz(c), 1200);
  assert_zeus_ok(zeus_pfo_controller_set_frequency(c, 1200)); /* the same: nothing to do */
  assert_zeus_ok(zeus_pfo_controller_set_frequency(c, 0));    /* 0: leave as is */
  assert_zeus_ok(zeus_pfo_controller_wait(c, 10));
  assert_int_equal(zeus_pfo_controller_changes(c), 1);
  for (unsigned k = 0; k < 50; k++) assert_zeus_ok(zeus_pfo_controller_set_frequency(c, 1005 + 15 * (k % 5)));
  assert_zeus_ok(zeus_pfo_controller_wait(c, 10));
  assert_int_equal(zeus_pfo_controller_current_mhz(c), 1005 + 15 * 4); /* the latest wish wins */
  assert_zeus_err(zeus_pfo_controller_set_frequency(c, 1001), ZEUS_EINVAL, "1001 MHz is not a supported SM clock");
  zeus_pfo_controller_close(c);
  assert_unlocked(d);
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 0, &mw));
  assert_int_equal(mw, 200000); /* as it was */
  zeus_devices_close(d);
}

/* Waits (up to 5 s) for the controller to have put `mhz` in place by itself. */
static bool applied_within(zeus_pfo_controller *c, unsigned mhz, double *took) {
  double t0 = zeus_monotonic_s();
  while (zeus_monotonic_s() - t0 < 5) {
    if (zeus_pfo_controller_current_mhz(c) == mhz) {
      *took = zeus_monotonic_s() - t0;
      return true;
    }
    usleep(100);
  }
  return false;
}

static void controller_finds_wishes_by_polling_and_wakes_from_parking(void **state) {
  (void)state;
  zeus_devices *d = open_sim();
  for (int poll = 0; poll < 2; poll++) {
    zeus_pfo_controller *c;
    zeus_pfo_controller_opts co = {.no_signal_handlers = true, .poll_interval_s = poll ? 0.002 : -1};
    assert_zeus_ok(zeus_pfo_controller_open(&c, d, 0, &co));
    double took;
    /* Parked (no polling, or 50 ms without a wish): the wish must wake the thread. */
    usleep(80 * 1000);
    assert_zeus_ok(zeus_pfo_controller_set_frequency(c, 1500));
    if (!applied_within(c, 1500, &took)) fail_msg("poll %d: a parked controller missed the wish", poll);
    /* Active: wishes in a row, no zeus_pfo_controller_wait. */
    for (unsigned k = 0; k < 20; k++) {
      unsigned f = k % 2 ? 1500 : 1455;
      assert_zeus_ok(zeus_pfo_controller_set_frequency(c, f));
      if (!applied_within(c, f, &took)) fail_msg("poll %d: wish %u (%u MHz) was never applied", poll, k, f);
      assert_true(took < 1.0);
    }
    assert_int_equal(zeus_pfo_controller_changes(c), 21);
    zeus_pfo_controller_close(c);
    assert_unlocked(d);
  }
  zeus_devices_close(d);
}

/* Forks a child that starts a controller on the fake NVML, changes the clock and waits for SIGTERM;
 * returns the log of GPU 0 once the child has died. */
static void signal_child(int sig, bool handlers, gpu_log *lg) {
  fresh_dir();
  char log[512];
  snprintf(log, sizeof log, "%s/nvml.log", g_dir);
  setenv("FAKE_NVML_LOG", log, 1);
  setenv("ZEUS_SIM_CLOCK", "virtual", 1);
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    zeus_devices_opts o = {.backend = "nvml", .nvml_library = FAKE_NVML_PATH, .keep_settings_on_close = true};
    zeus_devices *d;
    zeus_pfo_controller *c;
    zeus_pfo_controller_opts co = {.no_signal_handlers = !handlers};
    if (zeus_devices_open(&d, &o) || zeus_pfo_controller_open(&c, d, 0, &co) ||
        zeus_pfo_controller_set_frequency(c, 1305) || zeus_pfo_controller_wait(c, 10))
      _exit(3);
    if (write(fds[1], "r", 1) != 1) _exit(4);
    for (;;) pause();
  }
  close(fds[1]);
  char ch;
  assert_int_equal(read(fds[0], &ch, 1), 1);
  close(fds[0]);
  assert_int_equal(kill(pid, sig), 0);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFSIGNALED(st)); /* the handler hands the signal on: the process still dies of it */
  assert_int_equal(WTERMSIG(st), sig);
  read_log(0, lg);
  unsetenv("FAKE_NVML_LOG");
}

static void controller_sigterm_and_sigint_reset_locked_clocks(void **state) {
  (void)state;
  static const int sigs[] = {SIGTERM, SIGINT};
  for (int i = 0; i < 2; i++) {
    gpu_log lg;
    signal_child(sigs[i], true, &lg);
    assert_int_equal(lg.nsets, 2);
    assert_int_equal(lg.sets[1], 1305);
    assert_true(lg.reset_after_last_set);
    assert_true(lg.mem_reset);
  }
}

static void controller_sigterm_without_handlers_leaves_clocks_locked(void **state) {
  (void)state;
  gpu_log lg;
  signal_child(SIGTERM, false, &lg);
  assert_int_equal(lg.nsets, 2);
  assert_false(lg.reset_after_last_set);
  assert_false(lg.mem_reset);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(controller_applies_changes_and_puts_everything_back),
      cmocka_unit_test(controller_finds_wishes_by_polling_and_wakes_from_parking),
      cmocka_unit_test(controller_sigterm_and_sigint_reset_locked_clocks),
      cmocka_unit_test(controller_sigterm_without_handlers_leaves_clocks_locked),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The power-limit optimizer and SIGINT/SIGTERM (and SIGHUP/SIGQUIT/SIGUSR1 while they have the
 * default action): handlers installed unless told not to (an ignored
 * signal stays ignored), every GPU restored by a signal while profiling, then the previous
 * handler runs. */
#include <sys/resource.h>

#include "plo_testutil.h"

static bool is_our_handler(int sig) {
  struct sigaction cur;
  sigaction(sig, NULL, &cur);
  return (cur.sa_flags & SA_SIGINFO) != 0;
}

static void own_usr1(int sig) { (void)sig; }

static void plo_installs_signal_handlers_unless_told_not_to(void **state) {
  (void)state;
  struct sigaction dfl = {.sa_handler = SIG_DFL}, ign = {.sa_handler = SIG_IGN}, cur;
  sigaction(SIGINT, &dfl, NULL);
  sigaction(SIGTERM, &dfl, NULL);
  zeus_devices *d = open_sim_dvfs(1);
  zeus_monitor *m = open_monitor(d);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  o.no_signal_handlers = true;
  zeus_plo *p1, *p2;
  assert_zeus_ok(zeus_plo_open(&p1, m, &o));
  assert_false(is_our_handler(SIGINT));
  assert_false(is_our_handler(SIGTERM));
  zeus_plo_close(p1);
  o.no_signal_handlers = false;
  assert_zeus_ok(zeus_plo_open(&p1, m, &o));
  assert_true(is_our_handler(SIGINT));
  assert_true(is_our_handler(SIGTERM));
  assert_zeus_ok(zeus_plo_open(&p2, m, &o));
  zeus_plo_close(p1);
  assert_true(is_our_handler(SIGTERM)); /* p2 still needs them */
  zeus_plo_close(p2);
  sigaction(SIGTERM, NULL, &cur);
  assert_true(!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL);
  /* An ignored signal stays ignored. */
  sigaction(SIGINT, &ign, NULL);
  assert_zeus_ok(zeus_plo_open(&p1, m, &o));
  sigaction(SIGINT, NULL, &cur);
  assert_true(cur.sa_handler == SIG_IGN);
  assert_true(is_our_handler(SIGTERM));
  zeus_plo_close(p1);
  sigaction(SIGINT, &dfl, NULL);
  /* SIGHUP with the default action (it ends the process) is handled; a SIGUSR1 the program handles
   * itself (its process goes on after it) is left alone. */
  struct sigaction own = {.sa_handler = own_usr1};
  sigaction(SIGHUP, &dfl, NULL);
  sigaction(SIGUSR1, &own, NULL);
  assert_zeus_ok(zeus_plo_open(&p1, m, &o));
  assert_true(is_our_handler(SIGHUP));
  sigaction(SIGUSR1, NULL, &cur);
  assert_true(cur.sa_handler == own_usr1);
  zeus_plo_close(p1);
  sigaction(SIGHUP, NULL, &cur);
  assert_true(!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL);
  sigaction(SIGUSR1, &dfl, NULL);
  zeus_monitor_close(m);
  zeus_devices_close(d);
}

/* The child of the signal tests: 2 fake-NVML GPUs preset to 200 W and 225 W, an optimizer
 * profiling, stopped at 250 W; it tells the parent through `ready_fd` and waits for the signal.
 * With `chain`, a previous handler reports GPU 0's limit at the time it runs and exits 42.
 * Exit codes other than by the signal mean a setup failure. */
static fake child_fake;
static int child_report_fd = -1;

static void previous_handler(int sig) {
  (void)sig;
  nvmlDevice_t h;
  unsigned mw = 0;
  child_fake.GetHandleByIndex(0, &h);
  child_fake.GetPowerManagementLimit(h, &mw);
  if (write(child_report_fd, &mw, sizeof mw) != (ssize_t)sizeof mw) _exit(43);
  _exit(42);
}

static void signal_child(int ready_fd, bool chain) {
  memset(&child_fake, 0, sizeof child_fake);
  child_fake.lib = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!child_fake.lib) _exit(10);
  *(void **)&child_fake.Init = dlsym(child_fake.lib, "nvmlInit_v2");
  *(void **)&child_fake.GetHandleByIndex = dlsym(child_fake.lib, "nvmlDeviceGetHandleByIndex_v2");
  *(void **)&child_fake.SetPowerManagementLimit = dlsym(child_fake.lib, "nvmlDeviceSetPowerManagementLimit");
  *(void **)&child_fake.GetPowerManagementLimit = dlsym(child_fake.lib, "nvmlDeviceGetPowerManagementLimit");
  *(void **)&child_fake.RunWorkAll = dlsym(child_fake.lib, "fakeNvmlRunWorkAll");
  if (!child_fake.Init || !child_fake.GetHandleByIndex || !child_fake.SetPowerManagementLimit ||
      !child_fake.GetPowerManagementLimit || !child_fake.RunWorkAll || child_fake.Init() != NVML_SUCCESS)
    _exit(11);
  nvmlDevice_t h;
  for (unsigned g = 0; g < 2; g++)
    if (child_fake.GetHandleByIndex(g, &h) || child_fake.SetPowerManagementLimit(h, 200000 + 25000 * g)) _exit(12);
  if (chain) {
    child_report_fd = ready_fd;
    struct sigaction sa = {.sa_handler = previous_handler};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
  }
  zeus_devices_opts dopts = {.backend = "nvml", .nvml_library = FAKE_NVML_PATH};
  zeus_devices *d;
  if (zeus_devices_open(&d, &dopts)) _exit(13);
  static const unsigned no_cpu[1];
  zeus_monitor_opts mo = {.devices = d, .cpu_indices = no_cpu};
  zeus_monitor *m;
  if (zeus_monitor_open(&m, &mo)) _exit(14);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  o.warmup_steps = 1;
  o.profile_steps = 2;
  zeus_plo *p;
  if (zeus_plo_open(&p, m, &o)) _exit(15);
  double units[2] = {1, 1};
  /* 300 W (already there), 275 W, then 250 W: stop once its window is open. */
  for (int i = 0; i < 100; i++) {
    if (zeus_plo_on_step_begin(p)) _exit(16);
    if (zeus_plo_get_state(p) == ZEUS_PLO_PROFILING && zeus_plo_current_power_limit_w(p) == 250) break;
    child_fake.RunWorkAll(units);
  }
  if (zeus_plo_current_power_limit_w(p) != 250 || zeus_plo_get_state(p) != ZEUS_PLO_PROFILING) _exit(19);
  if (!chain && write(ready_fd, "r", 1) != 1) _exit(20);
  if (chain) {
    unsigned ready = 1;
    if (write(ready_fd, &ready, sizeof ready) != (ssize_t)sizeof ready) _exit(20);
  }
  for (;;) pause();
}

static void killed_while_profiling_restores_every_gpu(int sig, bool chain) {
  fake f;
  fake_load(&f); /* only to check that the library is there */
  fake_unload(&f);
  scratch s;
  scratch_init(&s);
  reset_env();
  setenv("ZEUS_SIM_GPUS", "2", 1);
  setenv("FAKE_NVML_LOG", s.log, 1);
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    signal_child(fds[1], chain);
    _exit(99);
  }
  close(fds[1]);
  struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
  if (poll(&pfd, 1, 60000) != 1) {
    kill(pid, SIGKILL);
    fail_msg("the child did not reach profiling at 250 W");
  }
  unsigned msg = 0;
  ssize_t got = read(fds[0], &msg, chain ? sizeof msg : 1);
  if (got <= 0) {
    int st;
    waitpid(pid, &st, 0);
    fail_msg("the child failed before profiling (exit %d)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  }
  /* The optimizer really was at 250 W on both GPUs. */
  assert_int_equal(last_logged(s.log, "nvmlDeviceSetPowerManagementLimit", 0), 250000);
  assert_int_equal(last_logged(s.log, "nvmlDeviceSetPowerManagementLimit", 1), 250000);
  assert_int_equal(kill(pid, sig), 0);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  if (chain) {
    /* The previous handler ran, after the GPUs were restored. */
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 42)
      fail_msg("child status %#x, expected exit 42 from the previous handler", st);
    unsigned mw = 0;
    assert_int_equal(read(fds[0], &mw, sizeof mw), (ssize_t)sizeof mw);
    assert_int_equal(mw, 200000);
  } else {
    /* The default action happened: the process died of the signal. */
    if (!WIFSIGNALED(st) || WTERMSIG(st) != sig) fail_msg("child status %#x, expected death by signal %d", st, sig);
  }
  close(fds[0]);
  /* Every GPU is back at its limit from before the optimizer, persistence mode off again. */
  assert_int_equal(last_logged(s.log, "nvmlDeviceSetPowerManagementLimit", 0), 200000);
  assert_int_equal(last_logged(s.log, "nvmlDeviceSetPowerManagementLimit", 1), 225000);
  assert_int_equal(last_logged(s.log, "nvmlDeviceSetPersistenceMode", 0), 0);
  assert_int_equal(last_logged(s.log, "nvmlDeviceSetPersistenceMode", 1), 0);
  scratch_free(&s);
}

static void plo_sigterm_while_profiling_restores_every_gpu(void **state) {
  (void)state;
  killed_while_profiling_restores_every_gpu(SIGTERM, false);
}

static void plo_sigint_while_profiling_restores_every_gpu(void **state) {
  (void)state;
  killed_while_profiling_restores_every_gpu(SIGINT, false);
}

/* Issue 19: an SSH disconnect (SIGHUP), SIGQUIT and SIGUSR1 once left 100 W and persistence on. */
static void plo_sighup_while_profiling_restores_every_gpu(void **state) {
  (void)state;
  killed_while_profiling_restores_every_gpu(SIGHUP, false);
}

static void plo_sigquit_while_profiling_restores_every_gpu(void **state) {
  (void)state;
  struct rlimit none = {0, 0}, old;
  getrlimit(RLIMIT_CORE, &old);
  setrlimit(RLIMIT_CORE, &none); /* no core file from the child */
  killed_while_profiling_restores_every_gpu(SIGQUIT, false);
  setrlimit(RLIMIT_CORE, &old);
}

static void plo_sigusr1_while_profiling_restores_every_gpu(void **state) {
  (void)state;
  killed_while_profiling_restores_every_gpu(SIGUSR1, false);
}

static void plo_signal_chains_to_the_previous_handler_after_restoring(void **state) {
  (void)state;
  killed_while_profiling_restores_every_gpu(SIGTERM, true);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(plo_installs_signal_handlers_unless_told_not_to),
      cmocka_unit_test(plo_sigterm_while_profiling_restores_every_gpu),
      cmocka_unit_test(plo_sigint_while_profiling_restores_every_gpu),
      cmocka_unit_test(plo_signal_chains_to_the_previous_handler_after_restoring),
      cmocka_unit_test(plo_sighup_while_profiling_restores_every_gpu),
      cmocka_unit_test(plo_sigquit_while_profiling_restores_every_gpu),
      cmocka_unit_test(plo_sigusr1_while_profiling_restores_every_gpu),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

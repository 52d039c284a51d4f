/* A libzeus client for the zeus daemon end-to-end tests (tests/e2e/daemon_*.sh). Every GPU call
 * goes through the device layer, which finds the daemon in ZEUSD_SOCK_PATH / ZEUSD_HOST_PORT.
 *
 *   daemon_test_client hold GPU MW   set the power limit, print "held", wait to be killed
 *   daemon_test_client set GPU MW    set the power limit and exit (1 with the error on stderr);
 *                                    ZEUS_TEST_OVERRIDE=1 takes over a held setting
 *   daemon_test_client plo           the power-limit optimizer over every visible GPU (1 warm-up and
 *                                    2 profiled steps of 2 ms per limit); prints "optimal <W>"
 *   daemon_test_client cpu           the CPU packages the monitor sees, and their energy in mJ
 *   daemon_test_client lock GPU MHZ MW   set the power limit and lock the SM clock at MHZ, then
 *                                    close the handle (which gives both back) and print "locked"
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zeus.h>

static int fail(const char *what) {
  fprintf(stderr, "daemon_test_client: %s: %s\n", what, zeus_errmsg());
  return 1;
}

static zeus_devices *open_devices(void) {
  const char *ov = getenv("ZEUS_TEST_OVERRIDE");
  zeus_devices_opts o = {.daemon_override = ov && !strcmp(ov, "1")};
  zeus_devices *d;
  if (zeus_devices_open(&d, &o)) return NULL;
  return d;
}

static int run_plo(void) {
  zeus_devices *d = open_devices();
  if (!d) return fail("opening the GPUs");
  zeus_monitor_opts mo = {.devices = d};
  zeus_monitor *m;
  if (zeus_monitor_open(&m, &mo)) return fail("opening the monitor");
  zeus_plo_opts po;
  zeus_plo_opts_init(&po);
  po.warmup_steps = 1;
  po.profile_steps = 2;
  po.wait_steps = 0;
  zeus_plo *p;
  if (zeus_plo_open(&p, m, &po)) return fail("opening the power-limit optimizer");
  struct timespec step = {0, 2 * 1000 * 1000};
  for (int epoch = 0; epoch < 3; epoch++) {
    zeus_plo_on_epoch_begin(p);
    for (int s = 0; s < 40; s++) {
      if (zeus_plo_on_step_begin(p)) return fail("on_step_begin");
      nanosleep(&step, NULL);
      if (zeus_plo_on_step_end(p)) return fail("on_step_end");
    }
    if (zeus_plo_on_epoch_end(p)) return fail("on_epoch_end");
  }
  if (zeus_plo_get_state(p) != ZEUS_PLO_DONE) {
    fprintf(stderr, "daemon_test_client: the optimizer did not finish profiling\n");
    return 1;
  }
  printf("optimal %u\n", zeus_plo_optimal_power_limit_w(p));
  fflush(stdout);
  zeus_plo_close(p);
  zeus_monitor_close(m);
  zeus_devices_close(d);
  return 0;
}

int main(int argc, char **argv) {
  zeus_log_init_stderr(NULL);
  if (argc >= 2 && !strcmp(argv[1], "plo")) return run_plo();
  if (argc >= 2 && !strcmp(argv[1], "cpu")) {
    unsigned n = zeus_cpu_count();
    printf("cpus %u\n", n);
    for (unsigned c = 0; c < n; c++) {
      uint64_t e, de = 0;
      bool dram = false;
      if (zeus_cpu_energy(c, &e, &dram, &de)) return fail("reading CPU energy");
      printf("cpu %u energy_mj %llu dram %s\n", c, (unsigned long long)e, dram ? "yes" : "no");
    }
    /* A monitor measuring the CPU packages only. */
    static const unsigned none[1];
    zeus_monitor_opts mo = {.gpu_indices = none, .num_gpu_indices = 0};
    zeus_monitor *m;
    if (zeus_monitor_open(&m, &mo)) return fail("opening a CPU monitor");
    zeus_measurement r;
    if (zeus_monitor_begin_window(m, "w", false) || zeus_monitor_end_window(m, "w", false, &r))
      return fail("measuring a window");
    printf("window cpus %u\n", r.num_cpus);
    zeus_monitor_close(m);
    return 0;
  }
  if (argc == 5 && !strcmp(argv[1], "lock")) {
    zeus_devices *d = open_devices();
    if (!d) return fail("opening the GPUs");
    unsigned gpu = (unsigned)atoi(argv[2]), mhz = (unsigned)atoi(argv[3]), mw = (unsigned)atoi(argv[4]);
    if (zeus_gpu_set_power_limit(d, gpu, mw)) return fail("setting the power limit");
    if (zeus_gpu_set_locked_clocks(d, gpu, mhz, mhz)) return fail("locking the SM clock");
    zeus_devices_close(d);
    printf("locked\n");
    return 0;
  }
  if (argc != 4 || (strcmp(argv[1], "hold") && strcmp(argv[1], "set"))) {
    fprintf(stderr, "usage: daemon_test_client hold|set GPU MW | lock GPU MHZ MW | plo | cpu\n");
    return 2;
  }
  zeus_devices *d = open_devices();
  if (!d) return fail("opening the GPUs");
  unsigned gpu = (unsigned)atoi(argv[2]), mw = (unsigned)atoi(argv[3]);
  if (zeus_gpu_set_power_limit(d, gpu, mw)) return fail("setting the power limit");
  if (!strcmp(argv[1], "set")) {
    printf("set\n");
    return 0; /* exits without closing: the daemon gives the change back when it sees the exit */
  }
  printf("held\n");
  fflush(stdout);
  for (;;) pause();
}

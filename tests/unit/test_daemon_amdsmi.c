/* AMD GPUs through zeus daemon ("amdsmi+zeusd", the original's ZeusdAMDGPU): an in-process daemon
 * serves the GPUs of one fake libamd_smi.so, a client reads through a copy of it (a second,
 * independent instance, so that the two may number the GPUs differently, as HIP here and the
 * daemon there may) and sends its settings to the daemon, which matches them by PCI address. The
 * daemon's fake logs every setter it was asked for; the client's must log none. */
#include <dlfcn.h>

#include "test_util.h"

#include "core/core.h"
#include "zeus.h"
#include "zeus/config.h"

static char g_dir[256], g_sock[300], g_spec[320], g_lib[300], g_dlog[300], g_clog[300];

static void reset_env(void) {
  static const char *const vars[] = {
      "ZEUS_GPU_BACKEND",      "ZEUSD_SOCK_PATH",     "ZEUSD_HOST_PORT",       "CUDA_VISIBLE_DEVICES",
      "HIP_VISIBLE_DEVICES",   "FAKE_AMDSMI_KFD_NODES", "FAKE_AMDSMI_BDFS",    "FAKE_AMDSMI_HIP_IDS",
      "FAKE_AMDSMI_ENUMERATION", "FAKE_AMDSMI_INJECT", "FAKE_AMDSMI_STATE",   "ZEUS_NVML_LIBRARY",
  };
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
  setenv("ZEUS_SIM_GPUS", "3", 1);
  setenv("ZEUS_SIM_HARDWARE", "mi300x", 1);
  setenv("ZEUS_SIM_CLOCK", "wall", 1);
  setenv("ZEUS_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
}

/* A copy of the fake at another path: dlopen gives it its own globals. */
static void copy_fake(void) {
  char *data;
  size_t n;
  assert_zeus_ok(zeus__read_file(FAKE_AMDSMI_PATH, &data, &n));
  FILE *f = fopen(g_lib, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
  free(data);
}

static int setup(void **state) {
  (void)state;
  zeus_test_tmpdir(g_dir, sizeof g_dir);
  snprintf(g_sock, sizeof g_sock, "%s/zeusd.sock", g_dir);
  snprintf(g_spec, sizeof g_spec, "unix:%s", g_sock);
  snprintf(g_lib, sizeof g_lib, "%s/libamd_smi-client.so", g_dir);
  snprintf(g_dlog, sizeof g_dlog, "%s/daemon-amdsmi.log", g_dir);
  snprintf(g_clog, sizeof g_clog, "%s/client-amdsmi.log", g_dir);
  copy_fake();
  return 0;
}

/* The client's environment: its own fake instance and log, HIP order by these KFD node ids. */
static void client_env(const char *kfd_nodes) {
  setenv("ZEUS_AMDSMI_LIBRARY", g_lib, 1);
  setenv("FAKE_AMDSMI_LOG", g_clog, 1);
  unlink(g_clog);
  if (kfd_nodes) setenv("FAKE_AMDSMI_KFD_NODES", kfd_nodes, 1);
  else unsetenv("FAKE_AMDSMI_KFD_NODES");
}

/* Where each test starts: the daemon on the fake's GPUs in amd-smi's order (bus i + 1 unless bdfs
 * says otherwise), serving these API groups (0: all), and the client's environment (client_env:
 * HIP order by kfd_nodes). */
static zeus_daemon *serve(const char *bdfs, unsigned groups, const char *kfd_nodes) {
  reset_env();
  if (bdfs) setenv("FAKE_AMDSMI_BDFS", bdfs, 1);
  setenv("ZEUS_AMDSMI_LIBRARY", FAKE_AMDSMI_PATH, 1);
  setenv("FAKE_AMDSMI_LOG", g_dlog, 1);
  unlink(g_dlog);
  zeus_devices_opts dev = {.backend = "amdsmi"};
  zeus_daemon_opts o;
  zeus_daemon_opts_init(&o);
  o.socket_path = g_sock;
  o.devices = &dev;
  o.skip_privilege_check = true;
  o.groups = groups;
  zeus_daemon *srv;
  assert_zeus_ok(zeus_daemon_open(&srv, &o));
  unsetenv("FAKE_AMDSMI_BDFS");
  client_env(kfd_nodes);
  return srv;
}

/* The client's handle on the amdsmi backend with the test's daemon: the hybrid, "amdsmi+zeusd". */
static zeus_devices *open_hybrid(void) {
  zeus_devices_opts o = {.backend = "amdsmi", .daemon = g_spec};
  zeus_devices *d;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  assert_string_equal(zeus_devices_backend(d), "amdsmi+zeusd");
  return d;
}

static char *read_log(const char *path) {
  char *data;
  size_t n;
  if (zeus__read_file(path, &data, &n)) return strdup("");
  return data;
}

static void assert_log(const char *path, const char *expected) {
  char *got = read_log(path);
  if (strcmp(got, expected) != 0) fail_msg("%s:\n%s\nexpected:\n%s", path, got, expected);
  free(got);
}

/* Where a test ends: the client's amdsmi was asked for no setting (all went to the daemon), and
 * the daemon goes. */
static void finish(zeus_daemon *srv) {
  assert_log(g_clog, "");
  zeus_daemon_close(srv);
}

/* HIP numbers the client's GPUs by KFD node (HIP 0 = amd-smi's 1, 1 = 2, 2 = 0), the daemon in
 * amd-smi's order: each setting lands on the daemon's GPU at the client GPU's PCI address, readings
 * stay local, and closing the handle has the daemon put everything back on those same GPUs. */
static void amdsmi_hybrid_sends_settings_to_the_daemon_gpu_at_the_same_pci_address(void **state) {
  (void)state;
  zeus_daemon *srv = serve(NULL, 0, "7,3,5");
  zeus_devices *d = open_hybrid();
  assert_int_equal(zeus_gpu_count(d), 3);
  char pci[32];
  assert_zeus_ok(zeus_gpu_pci_address(d, 0, pci, sizeof pci));
  assert_string_equal(pci, "0000:02:00.0");
  assert_zeus_ok(zeus_gpu_set_power_limit(d, 0, 500000));
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 1, 1000, 1200));
  assert_zeus_ok(zeus_gpu_set_memory_locked_clocks(d, 2, 900, 900));
  unsigned mw;
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 0, &mw));
  assert_int_equal(mw, 500000);
  zeus_clock_lock l;
  assert_zeus_ok(zeus_gpu_get_locked_clocks(d, 1, false, &l));
  assert_int_equal(l.state, ZEUS_CLOCK_LOCKED);
  assert_int_equal(l.min_mhz, 1000);
  /* Readings need no daemon. */
  uint64_t mj;
  unsigned c;
  assert_zeus_ok(zeus_gpu_total_energy(d, 0, &mj));
  assert_zeus_ok(zeus_gpu_temperature(d, 0, &c));
  assert_zeus_ok(zeus_gpu_reset_locked_clocks(d, 1));
  zeus_devices_close(d);
  assert_log(g_dlog,
             "amdsmi_set_power_cap 1 0 500000000 -> 0\n"
             "amdsmi_set_gpu_clk_range 2 1000 1200 0 -> 0\n"
             "amdsmi_set_gpu_clk_range 0 900 900 4 -> 0\n"
             "amdsmi_set_gpu_perf_level 2 0 -> 0\n"   /* the reset */
             "amdsmi_set_gpu_perf_level 0 0 -> 0\n"   /* what the close gives back */
             "amdsmi_set_power_cap 1 0 750000000 -> 0\n");
  finish(srv);
}

/* As the original's ZeusdAMDGPU: a GPU whose address the daemon lacks, or has twice, fails the open
 * naming the address and the daemon's GPUs; a GPU left out by HIP_VISIBLE_DEVICES need not match. */
static void amdsmi_hybrid_fails_naming_the_address_when_the_daemon_has_none_or_two(void **state) {
  (void)state;
  zeus_devices_opts o = {.backend = "amdsmi", .daemon = g_spec};
  zeus_devices *d = NULL;
  zeus_daemon *srv = serve("0000:01:00.0,0000:02:00.0,0000:41:00.0", 0, NULL); /* no 03, where the client has it */
  assert_zeus_err(zeus_devices_open(&d, &o), ZEUS_ENOENT, "HIP GPU 2 has PCI address 0000:03:00.0, which is not present");
  assert_non_null(strstr(zeus_errmsg(), "[(0, '0000:01:00.0'), (1, '0000:02:00.0'), (2, '0000:41:00.0')]"));
  assert_non_null(strstr(zeus_errmsg(), g_sock));
  setenv("HIP_VISIBLE_DEVICES", "0,1", 1);
  assert_zeus_ok(zeus_devices_open(&d, &o));
  assert_string_equal(zeus_devices_backend(d), "amdsmi+zeusd");
  assert_int_equal(zeus_gpu_count(d), 2);
  assert_zeus_ok(zeus_gpu_set_power_limit(d, 1, 600000));
  zeus_devices_close(d);
  assert_log(g_dlog, "amdsmi_set_power_cap 1 0 600000000 -> 0\namdsmi_set_power_cap 1 0 750000000 -> 0\n");
  unsetenv("HIP_VISIBLE_DEVICES");
  zeus_daemon_close(srv);
  srv = serve("0000:01:00.0,0000:01:00.0,0000:03:00.0", 0, NULL); /* two GPUs at one address */
  assert_zeus_err(zeus_devices_open(&d, &o), ZEUS_ESTATE,
                  "HIP GPU 0 has PCI address 0000:01:00.0, which matches more than one GPU");
  assert_non_null(strstr(zeus_errmsg(), "[(0, '0000:01:00.0'), (1, '0000:01:00.0'), (2, '0000:03:00.0')]"));
  finish(srv);
}

/* The original's ZeusdAMDGPU skips a cap equal to the one amdsmi reads. Here the request still goes
 * to the daemon, on purpose: under the handle's lease it holds that cap against other clients
 * (a second handle's different cap is refused) until the handle goes; the daemon's amdsmi writes
 * nothing, as its GPU has that cap already, and the client's amdsmi writes nothing either. */
static void amdsmi_hybrid_power_cap_equal_to_the_current_one_is_held_without_a_write(void **state) {
  (void)state;
  zeus_daemon *srv = serve(NULL, 0, NULL);
  zeus_devices *d = open_hybrid(), *other = open_hybrid();
  assert_zeus_ok(zeus_gpu_set_power_limit(d, 0, 750000)); /* the MI300X's cap now */
  assert_log(g_dlog, "");
  assert_zeus_err(zeus_gpu_set_power_limit(other, 0, 600000), ZEUS_EBUSY, "held by");
  zeus_devices_close(d);
  assert_log(g_dlog, "");
  assert_zeus_ok(zeus_gpu_set_power_limit(other, 0, 600000)); /* given back with the handle */
  zeus_devices_close(other);
  assert_log(g_dlog, "amdsmi_set_power_cap 0 0 600000000 -> 0\namdsmi_set_power_cap 0 0 750000000 -> 0\n");
  finish(srv);
}

/* Resetting one clock domain is not refused (the original refuses it: AMD resets both at once);
 * the daemon does what the amdsmi backend does locally: performance level auto, then the other
 * domain's lock again. Resetting that one too leaves both free. All of it in the daemon's amdsmi,
 * on the GPU at the client GPU's PCI address (HIP 0 here is amd-smi's GPU 1 there); none in the
 * client's. */
static void amdsmi_hybrid_clock_resets_one_domain_and_then_all_go_to_the_daemon(void **state) {
  (void)state;
  zeus_daemon *srv = serve(NULL, 0, "7,3,5");
  zeus_devices *d = open_hybrid();
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 0, 1000, 1200));
  assert_zeus_ok(zeus_gpu_set_memory_locked_clocks(d, 0, 900, 900));
  assert_zeus_ok(zeus_gpu_reset_locked_clocks(d, 0));
  zeus_clock_lock l;
  assert_zeus_ok(zeus_gpu_get_locked_clocks(d, 0, false, &l));
  assert_int_equal(l.state, ZEUS_CLOCK_UNLOCKED);
  assert_zeus_ok(zeus_gpu_get_locked_clocks(d, 0, true, &l));
  assert_int_equal(l.state, ZEUS_CLOCK_LOCKED);
  assert_string_equal(l.source, "daemon");
  assert_zeus_ok(zeus_gpu_reset_memory_locked_clocks(d, 0));
  assert_zeus_ok(zeus_gpu_get_locked_clocks(d, 0, true, &l));
  assert_int_equal(l.state, ZEUS_CLOCK_UNLOCKED);
  assert_log(g_dlog,
             "amdsmi_set_gpu_clk_range 1 1000 1200 0 -> 0\n"
             "amdsmi_set_gpu_clk_range 1 900 900 4 -> 0\n"
             "amdsmi_set_gpu_perf_level 1 0 -> 0\n"
             "amdsmi_set_gpu_clk_range 1 900 900 4 -> 0\n"
             "amdsmi_set_gpu_perf_level 1 0 -> 0\n");
  zeus_devices_close(d); /* nothing left to give back */
  finish(srv);
}

/* zeus_gpu_reset_all_clocks through the daemon (POST /gpu/reset_locked_clocks): the daemon's amdsmi
 * makes the one performance-level reset that frees both domains (not three calls: auto, the memory
 * lock again, auto), and both locks read back unlocked. The daemon's records of both are what the
 * two one-domain resets leave: the client holds "unlocked" in each, so a second client's lock of
 * either is a 409 naming it (the handle, which forgot both locks, keeps its lease until the process
 * exits). A client that overrides locks both, and when it goes the daemon gives both back to
 * "unlocked" in one reset. */
static void amdsmi_daemon_reset_all_clocks_is_one_perf_level_call_recorded_as_both_resets(void **state) {
  (void)state;
  zeus_daemon *srv = serve(NULL, 0, "7,3,5");
  zeus_devices *d = open_hybrid(), *other = open_hybrid();
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 0, 1000, 1200));
  assert_zeus_ok(zeus_gpu_set_memory_locked_clocks(d, 0, 900, 900));
  assert_zeus_ok(zeus_gpu_reset_all_clocks(d, 0));
  assert_log(g_dlog,
             "amdsmi_set_gpu_clk_range 1 1000 1200 0 -> 0\n"
             "amdsmi_set_gpu_clk_range 1 900 900 4 -> 0\n"
             "amdsmi_set_gpu_perf_level 1 0 -> 0\n");
  zeus_clock_lock l;
  assert_zeus_ok(zeus_gpu_get_locked_clocks(d, 0, false, &l));
  assert_int_equal(l.state, ZEUS_CLOCK_UNLOCKED);
  assert_zeus_ok(zeus_gpu_get_locked_clocks(d, 0, true, &l));
  assert_int_equal(l.state, ZEUS_CLOCK_UNLOCKED);
  assert_zeus_ok(zeus_gpu_get_locked_clocks(other, 0, true, &l));
  assert_int_equal(l.state, ZEUS_CLOCK_UNLOCKED);
  assert_zeus_err(zeus_gpu_set_locked_clocks(other, 0, 800, 1000), ZEUS_EBUSY, "gpu_locked_clocks (unlocked) is held");
  assert_zeus_err(zeus_gpu_set_memory_locked_clocks(other, 0, 900, 900), ZEUS_EBUSY,
                  "mem_locked_clocks (unlocked) is held");
  zeus_devices_close(other);
  zeus_devices_opts o = {.backend = "amdsmi", .daemon = g_spec, .daemon_override = true};
  assert_zeus_ok(zeus_devices_open(&other, &o));
  assert_zeus_ok(zeus_gpu_set_locked_clocks(other, 0, 800, 1000));
  assert_zeus_ok(zeus_gpu_set_memory_locked_clocks(other, 0, 900, 900));
  zeus_devices_close(other);
  zeus_devices_close(d);
  assert_log(g_dlog,
             "amdsmi_set_gpu_clk_range 1 1000 1200 0 -> 0\n"
             "amdsmi_set_gpu_clk_range 1 900 900 4 -> 0\n"
             "amdsmi_set_gpu_perf_level 1 0 -> 0\n"
             "amdsmi_set_gpu_clk_range 1 800 1000 0 -> 0\n"
             "amdsmi_set_gpu_clk_range 1 900 900 4 -> 0\n"
             "amdsmi_set_gpu_perf_level 1 0 -> 0\n"); /* both of other's locks given back in one reset */
  finish(srv);
}

/* Another client holds the memory lock: the reset of both is refused (409) as a whole, before
 * anything changes: the SM lock of the client that asked stays set, and its record too (a third
 * client's SM lock is still refused). */
static void amdsmi_daemon_reset_all_clocks_conflict_on_memory_changes_nothing(void **state) {
  (void)state;
  zeus_daemon *srv = serve(NULL, 0, "7,3,5");
  zeus_devices *d = open_hybrid(), *other = open_hybrid(), *third = open_hybrid();
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 0, 1000, 1200));
  assert_zeus_ok(zeus_gpu_set_memory_locked_clocks(other, 0, 900, 900));
  assert_zeus_err(zeus_gpu_reset_all_clocks(d, 0), ZEUS_EBUSY, "mem_locked_clocks");
  assert_log(g_dlog,
             "amdsmi_set_gpu_clk_range 1 1000 1200 0 -> 0\n"
             "amdsmi_set_gpu_clk_range 1 900 900 4 -> 0\n"); /* no reset */
  zeus_clock_lock l;
  assert_zeus_ok(zeus_gpu_get_locked_clocks(third, 0, false, &l));
  assert_int_equal(l.state, ZEUS_CLOCK_LOCKED);
  assert_int_equal(l.min_mhz, 1000);
  assert_int_equal(l.max_mhz, 1200);
  assert_zeus_ok(zeus_gpu_get_locked_clocks(third, 0, true, &l));
  assert_int_equal(l.state, ZEUS_CLOCK_LOCKED);
  assert_zeus_err(zeus_gpu_set_locked_clocks(third, 0, 800, 1000), ZEUS_EBUSY, "gpu_locked_clocks");
  zeus_devices_close(third);
  zeus_devices_close(other);
  zeus_devices_close(d);
  finish(srv);
}

/* A daemon that stops gives back what its clients still hold: both clock locks of a GPU that go
 * back to unlocked are one performance-level reset (not auto, the memory lock again, auto). */
static void amdsmi_daemon_stopping_gives_both_locks_back_in_one_reset(void **state) {
  (void)state;
  zeus_daemon *srv = serve(NULL, 0, "7,3,5");
  zeus_devices *d = open_hybrid();
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 0, 1000, 1200));
  assert_zeus_ok(zeus_gpu_set_memory_locked_clocks(d, 0, 900, 900));
  assert_log(g_clog, "");
  zeus_daemon_close(srv);
  assert_log(g_dlog,
             "amdsmi_set_gpu_clk_range 1 1000 1200 0 -> 0\n"
             "amdsmi_set_gpu_clk_range 1 900 900 4 -> 0\n"
             "amdsmi_set_gpu_perf_level 1 0 -> 0\n");
  zeus_devices_close(d); /* the daemon is gone: its release fails, with a warning */
}

/* As the original's ZeusdAMDGPU, which asks the daemon only for gpu-control: with a daemon that
 * serves no gpu-read, the hybrid opens, reads everything here (the current cap too: the client's
 * fake is an engine of its own, so it still reads 750 W where the daemon's GPU has 500 W), and
 * the settings, and their giving back, are made by the daemon. */
static void amdsmi_hybrid_works_with_a_control_only_daemon(void **state) {
  (void)state;
  zeus_daemon *srv = serve(NULL, ZEUS_DAEMON_GPU_CONTROL, NULL);
  zeus_devices *d = open_hybrid();
  uint64_t mj;
  unsigned mw, c;
  assert_zeus_ok(zeus_gpu_total_energy(d, 0, &mj));
  assert_zeus_ok(zeus_gpu_temperature(d, 0, &c));
  assert_zeus_ok(zeus_gpu_set_power_limit(d, 0, 500000));
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 0, &mw));
  assert_int_equal(mw, 750000);
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 1, 1000, 1200));
  zeus_clock_lock l;
  assert_zeus_ok(zeus_gpu_get_locked_clocks(d, 1, false, &l)); /* what this handle did */
  assert_int_equal(l.state, ZEUS_CLOCK_LOCKED);
  assert_string_equal(l.source, "handle");
  zeus_devices_close(d);
  assert_log(g_dlog,
             "amdsmi_set_power_cap 0 0 500000000 -> 0\n"
             "amdsmi_set_gpu_clk_range 1 1000 1200 0 -> 0\n"
             "amdsmi_set_power_cap 0 0 750000000 -> 0\n"
             "amdsmi_set_gpu_perf_level 1 0 -> 0\n");
  finish(srv);
}

/* With a daemon configured and no NVIDIA library, amdsmi (when it lists GPUs) is chosen and wrapped;
 * without amdsmi either, the daemon's GPUs are read remotely as before. */
static void amdsmi_with_a_daemon_is_chosen_as_the_hybrid_by_itself(void **state) {
  (void)state;
  zeus_daemon *srv = serve(NULL, 0, NULL);
  zeus_devices_opts o = {.daemon = g_spec};
  zeus_devices *d;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  assert_string_equal(zeus_devices_backend(d), "amdsmi+zeusd");
  zeus_devices_close(d);
  setenv("ZEUS_AMDSMI_LIBRARY", "/nonexistent/libamd_smi.so", 1);
  assert_zeus_ok(zeus_devices_open(&d, &o));
  assert_string_equal(zeus_devices_backend(d), "zeusd");
  assert_int_equal(zeus_gpu_count(d), 3);
  zeus_devices_close(d);
  zeus_daemon_close(srv);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(amdsmi_hybrid_sends_settings_to_the_daemon_gpu_at_the_same_pci_address),
      cmocka_unit_test(amdsmi_hybrid_fails_naming_the_address_when_the_daemon_has_none_or_two),
      cmocka_unit_test(amdsmi_with_a_daemon_is_chosen_as_the_hybrid_by_itself),
      cmocka_unit_test(amdsmi_hybrid_power_cap_equal_to_the_current_one_is_held_without_a_write),
      cmocka_unit_test(amdsmi_hybrid_clock_resets_one_domain_and_then_all_go_to_the_daemon),
      cmocka_unit_test(amdsmi_hybrid_works_with_a_control_only_daemon),
      cmocka_unit_test(amdsmi_daemon_reset_all_clocks_is_one_perf_level_call_recorded_as_both_resets),
      cmocka_unit_test(amdsmi_daemon_reset_all_clocks_conflict_on_memory_changes_nothing),
      cmocka_unit_test(amdsmi_daemon_stopping_gives_both_locks_back_in_one_reset),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, setup, NULL);
}

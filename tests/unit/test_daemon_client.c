/* libzeus as a client of zeus daemon: the device layer sends settings to an in-process daemon over
 * the fake NVML (whose setter log shows what the daemon did), with a lease per handle. */
#include <sys/stat.h>
#include <time.h>

#include "test_util.h"

#include "core/core.h"
#include "zeus.h"
#include "zeus/config.h"

static char g_dir[256], g_sock[300], g_log[300], g_spec[320];

static int setup(void **state) {
  (void)state;
  zeus_test_tmpdir(g_dir, sizeof g_dir);
  snprintf(g_sock, sizeof g_sock, "%s/zeusd.sock", g_dir);
  snprintf(g_log, sizeof g_log, "%s/nvml.log", g_dir);
  snprintf(g_spec, sizeof g_spec, "unix:%s", g_sock);
  setenv("ZEUS_NVML_LIBRARY", FAKE_NVML_PATH, 1);
  setenv("FAKE_NVML_LOG", g_log, 1);
  setenv("ZEUS_SIM_GPUS", "2", 1);
  setenv("ZEUS_SIM_CLOCK", "wall", 1);
  unsetenv("ZEUS_GPU_BACKEND");
  unsetenv("ZEUSD_SOCK_PATH");
  unsetenv("ZEUSD_HOST_PORT");
  unsetenv("ZEUSD_TOKEN");
  unsetenv("CUDA_VISIBLE_DEVICES");
  return 0;
}

static zeus_daemon *start(void) {
  zeus_devices_opts dev = {.backend = "nvml"};
  zeus_daemon_opts o;
  zeus_daemon_opts_init(&o);
  o.socket_path = g_sock;
  o.devices = &dev;
  zeus_daemon *d;
  assert_zeus_ok(zeus_daemon_open(&d, &o));
  unlink(g_log);
  return d;
}

static zeus_devices *client(const char *backend, bool override, bool keep) {
  zeus_devices_opts o = {
      .backend = backend, .daemon = g_spec, .daemon_override = override, .keep_settings_on_close = keep};
  zeus_devices *d;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  return d;
}

/* The setter log of the fake NVML (the daemon's calls), "" when none. */
static char *nvml_log(void) {
  char *data;
  size_t n;
  if (zeus__read_file(g_log, &data, &n)) return strdup("");
  return data;
}

static void hybrid_sends_settings_to_the_daemon_and_restore_gives_them_back(void **state) {
  (void)state;
  zeus_daemon *srv = start();
  zeus_devices *d = client(NULL, false, false);
  assert_string_equal(zeus_devices_backend(d), "nvml+zeusd");
  assert_int_equal(zeus_gpu_count(d), 2);
  assert_zeus_ok(zeus_gpu_set_power_limit(d, 1, 200000));
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 0, 900, 1200));
  unsigned mw;
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 1, &mw));
  assert_int_equal(mw, 200000);
  /* Out of range: refused before anything is sent. */
  assert_zeus_err(zeus_gpu_set_power_limit(d, 1, 5), ZEUS_ERANGE, "outside the allowed range");
  assert_zeus_ok(zeus_devices_restore(d));
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 1, &mw));
  assert_int_equal(mw, 300000);
  char *log = nvml_log();
  assert_string_equal(log,
                      "nvmlDeviceSetPowerManagementLimit 1 200000 -> 0\n"
                      "nvmlDeviceSetGpuLockedClocks 0 900 1200 -> 0\n"
                      "nvmlDeviceResetGpuLockedClocks 0 -> 0\n"
                      "nvmlDeviceSetPowerManagementLimit 1 300000 -> 0\n");
  free(log);
  /* Readings stay local: energy and temperature need no daemon. */
  uint64_t mj;
  unsigned c;
  assert_zeus_ok(zeus_gpu_total_energy(d, 0, &mj));
  assert_zeus_ok(zeus_gpu_temperature(d, 0, &c));
  zeus_devices_close(d);
  zeus_daemon_close(srv);
}

static void second_handle_gets_busy_naming_the_holder_until_it_overrides(void **state) {
  (void)state;
  zeus_daemon *srv = start();
  zeus_devices *a = client(NULL, false, false), *b = client(NULL, false, false), *c = client(NULL, true, false);
  assert_zeus_ok(zeus_gpu_set_power_limit(a, 0, 200000));
  char pid[32];
  snprintf(pid, sizeof pid, "pid %ld", (long)getpid());
  assert_zeus_err(zeus_gpu_set_power_limit(b, 0, 150000), ZEUS_EBUSY, "is held by L");
  assert_non_null(strstr(zeus_errmsg(), pid));
  assert_non_null(strstr(zeus_errmsg(), "override=true"));
  assert_zeus_ok(zeus_gpu_set_power_limit(b, 1, 150000)); /* another GPU is free */
  assert_zeus_ok(zeus_gpu_set_power_limit(c, 0, 120000));
  unsigned mw;
  zeus_devices_close(c); /* c's change goes: a's value comes back */
  assert_zeus_ok(zeus_gpu_get_power_limit(a, 0, &mw));
  assert_int_equal(mw, 200000);
  zeus_devices_close(a);
  assert_zeus_ok(zeus_gpu_get_power_limit(b, 0, &mw));
  assert_int_equal(mw, 300000);
  assert_zeus_ok(zeus_gpu_set_power_limit(b, 0, 250000)); /* now free */
  zeus_devices_close(b);
  char *log = nvml_log();
  assert_string_equal(log,
                      "nvmlDeviceSetPowerManagementLimit 0 200000 -> 0\n"
                      "nvmlDeviceSetPowerManagementLimit 1 150000 -> 0\n"
                      "nvmlDeviceSetPowerManagementLimit 0 120000 -> 0\n"
                      "nvmlDeviceSetPowerManagementLimit 0 200000 -> 0\n"
                      "nvmlDeviceSetPowerManagementLimit 0 300000 -> 0\n"
                      "nvmlDeviceSetPowerManagementLimit 0 250000 -> 0\n"
                      "nvmlDeviceSetPowerManagementLimit 0 300000 -> 0\n"
                      "nvmlDeviceSetPowerManagementLimit 1 300000 -> 0\n");
  free(log);
  zeus_daemon_close(srv);
}

static void remote_backend_reads_everything_from_the_daemon(void **state) {
  (void)state;
  zeus_daemon *srv = start();
  zeus_devices *d = client("zeusd", false, false);
  assert_string_equal(zeus_devices_backend(d), "zeusd");
  assert_int_equal(zeus_gpu_count(d), 2);
  char buf[ZEUS_NAME_LEN];
  assert_zeus_ok(zeus_gpu_uuid(d, 1, buf, sizeof buf));
  assert_string_equal(buf, "GPU-5a1a0000-0000-4000-8000-000000000001");
  unsigned lo, hi, def, mw;
  assert_zeus_ok(zeus_gpu_power_limit_constraints(d, 0, &lo, &hi, &def));
  assert_int_equal(lo, 100000);
  assert_int_equal(hi, 300000);
  assert_int_equal(def, 300000);
  bool ok, pm;
  assert_zeus_ok(zeus_gpu_energy_counter_supported(d, 0, &ok));
  assert_true(ok);
  uint64_t e1, e2;
  assert_zeus_ok(zeus_gpu_total_energy(d, 0, &e1));
  usleep(20 * 1000);
  assert_zeus_ok(zeus_gpu_total_energy(d, 0, &e2));
  assert_true(e2 > e1); /* the daemon's simulated GPU idles on the wall clock */
  assert_zeus_ok(zeus_gpu_instant_power(d, 0, &mw));
  assert_true(mw > 0);
  assert_zeus_err(zeus_gpu_power(d, 0, ZEUS_POWER_AVERAGE, &mw), ZEUS_ENOTSUP, "instant power only");
  assert_zeus_err(zeus_gpu_temperature(d, 0, &mw), ZEUS_ENOTSUP, "not in the daemon's API");
  assert_zeus_ok(zeus_gpu_set_persistence_mode(d, 1, true));
  assert_zeus_ok(zeus_gpu_get_persistence_mode(d, 1, &pm));
  assert_true(pm);
  zeus_devices_close(d); /* gives it back */
  d = client("zeusd", false, false);
  assert_zeus_ok(zeus_gpu_get_persistence_mode(d, 1, &pm));
  assert_false(pm);
  zeus_devices_close(d);
  zeus_daemon_close(srv);
}

static void kept_settings_are_permanent_and_held_by_nobody(void **state) {
  (void)state;
  zeus_daemon *srv = start();
  zeus_devices *holder = client(NULL, false, false);
  assert_zeus_ok(zeus_gpu_set_power_limit(holder, 0, 150000));
  /* zeus gpus reset is refused over a live holder, then forced. */
  zeus_devices *reset = client(NULL, false, true);
  assert_zeus_err(zeus_gpu_set_power_limit(reset, 0, 300000), ZEUS_EBUSY, "held by");
  zeus_devices_close(reset);
  reset = client(NULL, true, true);
  assert_zeus_ok(zeus_gpu_set_power_limit(reset, 1, 250000));
  assert_zeus_ok(zeus_gpu_set_power_limit(reset, 0, 300000));
  zeus_devices_close(reset);
  zeus_devices_close(holder); /* holder's record was dropped by the permanent change: nothing to give back */
  zeus_devices *d = client(NULL, false, false);
  unsigned mw;
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 1, &mw));
  assert_int_equal(mw, 250000);
  zeus_devices_close(d);
  char *log = nvml_log();
  assert_string_equal(log,
                      "nvmlDeviceSetPowerManagementLimit 0 150000 -> 0\n"
                      "nvmlDeviceSetPowerManagementLimit 1 250000 -> 0\n"
                      "nvmlDeviceSetPowerManagementLimit 0 300000 -> 0\n");
  free(log);
  zeus_daemon_close(srv);
}

static void client_reconnects_after_the_daemon_restarts(void **state) {
  (void)state;
  zeus_daemon *srv = start();
  zeus_devices *d = client("zeusd", false, false);
  unsigned mw;
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 0, &mw));
  zeus_daemon_close(srv);
  assert_zeus_err(zeus_gpu_get_power_limit(d, 0, &mw), ZEUS_ENET, g_sock);
  srv = start();
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 0, &mw)); /* a new connection, transparently */
  assert_int_equal(mw, 300000);
  zeus_devices_close(d);
  zeus_daemon_close(srv);
}

/* The Perseus frequency controller in an unprivileged rank: its clock changes go to the daemon from
 * the controller's own thread, and closing it hands everything back. */
static void perseus_controller_changes_clocks_through_the_daemon(void **state) {
  (void)state;
#if !ZEUS_HAVE_PFO_CLIENT
  print_message("SKIPPED: this build has no Perseus client (ZEUS_WITH_PFO_CLIENT=OFF)\n");
  skip();
#else
  zeus_daemon *srv = start();
  zeus_devices *d = client(NULL, false, false);
  zeus_pfo_controller_opts co = {.no_signal_handlers = true};
  zeus_pfo_controller *c;
  assert_zeus_ok(zeus_pfo_controller_open(&c, d, 1, &co));
  const unsigned *f;
  size_t n = zeus_pfo_controller_frequencies(c, &f);
  assert_true(n > 2);
  assert_zeus_ok(zeus_pfo_controller_set_frequency(c, f[2]));
  assert_zeus_ok(zeus_pfo_controller_wait(c, 5));
  assert_int_equal(zeus_pfo_controller_current_mhz(c), f[2]);
  char want[96];
  snprintf(want, sizeof want, "nvmlDeviceSetGpuLockedClocks 1 %u %u -> 0\n", f[2], f[2]);
  char *log = nvml_log();
  assert_non_null(strstr(log, want));
  free(log);
  /* Another client cannot move the clock the controller holds. */
  zeus_devices *other = client(NULL, false, false);
  assert_zeus_err(zeus_gpu_set_locked_clocks(other, 1, f[0], f[0]), ZEUS_EBUSY, "gpu_locked_clocks");
  zeus_devices_close(other);
  zeus_pfo_controller_close(c);
  zeus_devices_close(d);
  log = nvml_log();
  const char *last = strstr(log, "nvmlDeviceResetGpuLockedClocks 1 -> 0\n");
  assert_non_null(last);
  free(log);
  zeus_daemon_close(srv);
#endif
}

/* Over NVML nobody can read a lock back, but the daemon knows those made through it: any of its
 * clients (remote or hybrid) sees them, and sees them go when they are given back. */
static void clients_see_the_locks_made_through_the_daemon(void **state) {
  (void)state;
  zeus_daemon *srv = start();
  zeus_devices *a = client("zeusd", false, false);
  zeus_devices *b = client(NULL, false, false); /* nvml+zeusd */
  assert_string_equal(zeus_devices_backend(b), "nvml+zeusd");
  assert_clock_lock(a, 1, false, ZEUS_CLOCK_LOCK_UNKNOWN, 0, 0, "");
  assert_clock_lock(b, 1, false, ZEUS_CLOCK_LOCK_UNKNOWN, 0, 0, "");
  assert_zeus_ok(zeus_gpu_set_locked_clocks(a, 1, 500, 1200));
  assert_clock_lock(b, 1, false, ZEUS_CLOCK_LOCKED, 500, 1200, "daemon");
  assert_clock_lock(a, 1, false, ZEUS_CLOCK_LOCKED, 500, 1200, "daemon");
  assert_clock_lock(b, 0, false, ZEUS_CLOCK_LOCK_UNKNOWN, 0, 0, "");
  zeus_devices_close(a); /* the daemon gives the lock back: reset */
  assert_clock_lock(b, 1, false, ZEUS_CLOCK_UNLOCKED, 0, 0, "daemon");
  char *log = nvml_log();
  assert_non_null(strstr(log, "nvmlDeviceSetGpuLockedClocks 1 500 1200 -> 0\nnvmlDeviceResetGpuLockedClocks 1 -> 0\n"));
  free(log);
  zeus_devices_close(b);
  zeus_daemon_close(srv);
}

typedef struct route_count {
  const char *route;
  unsigned long long n;
} route_count;

static void count_route(const char *route, int status, unsigned long long count, void *u) {
  (void)status;
  route_count *c = u;
  if (strcmp(route, c->route) == 0) c->n += count;
}

static unsigned long long requests(zeus_daemon *srv, const char *route) {
  route_count c = {route, 0};
  zeus_daemon_counters(srv, count_route, &c);
  return c.n;
}

/* zeus_gpu_reset_all_clocks through a daemon is one request, /gpu/reset_locked_clocks, not one per
 * clock: the daemon resets both on its NVML, and every client sees both locks gone. */
static void hybrid_reset_all_clocks_is_one_daemon_request(void **state) {
  (void)state;
  zeus_daemon *srv = start();
  zeus_devices *d = client(NULL, false, false);
  assert_string_equal(zeus_devices_backend(d), "nvml+zeusd");
  unsigned mem[16];
  size_t nm = 16;
  assert_zeus_ok(zeus_gpu_supported_memory_clocks(d, 1, mem, &nm));
  assert_true(nm >= 1);
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 1, 500, 1200));
  assert_zeus_ok(zeus_gpu_set_memory_locked_clocks(d, 1, mem[nm - 1], mem[nm - 1]));
  assert_clock_lock(d, 1, true, ZEUS_CLOCK_LOCKED, mem[nm - 1], mem[nm - 1], "daemon");
  assert_zeus_ok(zeus_gpu_reset_all_clocks(d, 1));
  assert_int_equal(requests(srv, "/gpu/reset_locked_clocks"), 1);
  assert_int_equal(requests(srv, "/gpu/reset_gpu_locked_clocks"), 0);
  assert_int_equal(requests(srv, "/gpu/reset_mem_locked_clocks"), 0);
  assert_clock_lock(d, 1, false, ZEUS_CLOCK_UNLOCKED, 0, 0, "daemon");
  assert_clock_lock(d, 1, true, ZEUS_CLOCK_UNLOCKED, 0, 0, "daemon");
  zeus_devices_close(d); /* nothing left to give back */
  char *log = nvml_log();
  char want[256];
  snprintf(want, sizeof want,
           "nvmlDeviceSetGpuLockedClocks 1 500 1200 -> 0\n"
           "nvmlDeviceSetMemoryLockedClocks 1 %u %u -> 0\n"
           "nvmlDeviceResetGpuLockedClocks 1 -> 0\n"
           "nvmlDeviceResetMemoryLockedClocks 1 -> 0\n",
           mem[nm - 1], mem[nm - 1]);
  assert_string_equal(log, want);
  free(log);
  zeus_daemon_close(srv);
}

/* On NVML the daemon's reset of both locks is its two resets, made only after both domains are
 * checked: while another client holds the memory lock the request is refused (409) and nothing is
 * reset, the SM lock stays; once that client is gone both resets happen, with no 409. */
static void daemon_reset_all_clocks_on_nvml_is_refused_whole_then_resets_both(void **state) {
  (void)state;
  zeus_daemon *srv = start();
  zeus_devices *d = client(NULL, false, false), *other = client(NULL, false, false);
  unsigned mem[16];
  size_t nm = 16;
  assert_zeus_ok(zeus_gpu_supported_memory_clocks(d, 1, mem, &nm));
  assert_true(nm >= 1);
  unsigned m = mem[nm - 1];
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 1, 500, 1200));
  assert_zeus_ok(zeus_gpu_set_memory_locked_clocks(other, 1, m, m));
  assert_zeus_err(zeus_gpu_reset_all_clocks(d, 1), ZEUS_EBUSY, "mem_locked_clocks");
  assert_clock_lock(d, 1, false, ZEUS_CLOCK_LOCKED, 500, 1200, "daemon");
  assert_clock_lock(d, 1, true, ZEUS_CLOCK_LOCKED, m, m, "daemon");
  char *log = nvml_log();
  char want[512];
  snprintf(want, sizeof want,
           "nvmlDeviceSetGpuLockedClocks 1 500 1200 -> 0\n"
           "nvmlDeviceSetMemoryLockedClocks 1 %u %u -> 0\n",
           m, m);
  assert_string_equal(log, want); /* nothing reset */
  free(log);
  zeus_devices_close(other); /* gives its memory lock back */
  assert_zeus_ok(zeus_gpu_reset_all_clocks(d, 1));
  assert_clock_lock(d, 1, false, ZEUS_CLOCK_UNLOCKED, 0, 0, "daemon");
  assert_clock_lock(d, 1, true, ZEUS_CLOCK_UNLOCKED, 0, 0, "daemon");
  zeus_devices_close(d); /* nothing left to give back */
  log = nvml_log();
  snprintf(want, sizeof want,
           "nvmlDeviceSetGpuLockedClocks 1 500 1200 -> 0\n"
           "nvmlDeviceSetMemoryLockedClocks 1 %u %u -> 0\n"
           "nvmlDeviceResetMemoryLockedClocks 1 -> 0\n"
           "nvmlDeviceResetGpuLockedClocks 1 -> 0\n"
           "nvmlDeviceResetMemoryLockedClocks 1 -> 0\n",
           m, m);
  assert_string_equal(log, want);
  free(log);
  zeus_daemon_close(srv);
}

/* A handle whose clock lock was reset (nothing left set) still releases its lease at close: the
 * daemon's record of the reset lock would otherwise hold the clock against other clients until
 * this process exits. */
static void a_handle_with_its_lock_reset_releases_its_lease_at_close(void **state) {
  (void)state;
  zeus_daemon *srv = start();
  zeus_devices *d = client(NULL, false, false), *other = client(NULL, false, false);
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 0, 500, 1200));
  assert_zeus_ok(zeus_gpu_reset_locked_clocks(d, 0));
  assert_zeus_err(zeus_gpu_set_locked_clocks(other, 0, 600, 1300), ZEUS_EBUSY, "gpu_locked_clocks");
  zeus_devices_close(d);
  assert_zeus_ok(zeus_gpu_set_locked_clocks(other, 0, 600, 1300));
  zeus_devices_close(other);
  zeus_daemon_close(srv);
}

/* A daemon that requires tokens (signed with a key in g_dir). */
static zeus_daemon *start_with_tokens(char *key, size_t len) {
  static const char bytes[] = "daemon-client-test-signing-key-0123456789";
  snprintf(key, len, "%s/signing.key", g_dir);
  FILE *f = fopen(key, "w");
  assert_non_null(f);
  fwrite(bytes, 1, sizeof bytes - 1, f);
  fclose(f);
  chmod(key, 0600);
  zeus_devices_opts dev = {.backend = "nvml"};
  zeus_daemon_opts o;
  zeus_daemon_opts_init(&o);
  o.socket_path = g_sock;
  o.signing_key_path = key;
  o.devices = &dev;
  zeus_daemon *d;
  assert_zeus_ok(zeus_daemon_open(&d, &o));
  unlink(g_log);
  return d;
}

static int set_cap_with_token(const char *token) {
  zeus_devices_opts o = {.daemon = g_spec, .daemon_token = token};
  zeus_devices *d;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  assert_string_equal(zeus_devices_backend(d), "nvml+zeusd");
  int rc = zeus_gpu_set_power_limit(d, 0, 200000);
  zeus_devices_close(d);
  return rc;
}

/* opts->daemon_token is the token sent, whatever ZEUSD_TOKEN holds (a zeusc ZeusdClient with a token
 * of its own acts under its identity); "" sends none; NULL takes ZEUSD_TOKEN. No token is ever in an
 * error message. */
static void daemon_token_option_overrides_zeusd_token(void **state) {
  (void)state;
  char key[320];
  zeus_daemon *srv = start_with_tokens(key, sizeof key);
  char *control, *reader;
  assert_zeus_ok(zeus_daemon_token_issue(key, "carol", ZEUS_DAEMON_GPU_CONTROL | ZEUS_DAEMON_GPU_READ, 0, &control));
  assert_zeus_ok(zeus_daemon_token_issue(key, "dave", ZEUS_DAEMON_GPU_READ, 0, &reader));
  /* The environment's token lacks gpu-control; the option's has it and wins. */
  setenv("ZEUSD_TOKEN", reader, 1);
  assert_zeus_ok(set_cap_with_token(control));
  /* NULL: the environment's token, refused for its scope. */
  assert_zeus_err(set_cap_with_token(NULL), ZEUS_EPERM, "gpu-control");
  assert_null(strstr(zeus_errmsg(), reader));
  /* "": no token, even with a good one in the environment. */
  setenv("ZEUSD_TOKEN", control, 1);
  assert_zeus_ok(set_cap_with_token(NULL));
  assert_zeus_err(set_cap_with_token(""), ZEUS_EPERM, "Authentication required");
  /* No ZEUSD_TOKEN at all: the option's token alone. */
  unsetenv("ZEUSD_TOKEN");
  assert_zeus_ok(set_cap_with_token(control));
  assert_zeus_err(set_cap_with_token(reader), ZEUS_EPERM, "gpu-control");
  assert_null(strstr(zeus_errmsg(), reader));
  /* A line break would end the header line (or add one): refused at open, the token not shown. */
  zeus_devices_opts bad = {.daemon = g_spec, .daemon_token = "s3cret\r\nX-Zeus-Lease: x"};
  zeus_devices *d;
  assert_zeus_err(zeus_devices_open(&d, &bad), ZEUS_EINVAL, "daemon_token");
  assert_null(strstr(zeus_errmsg(), "s3cret"));
  char *log = nvml_log();
  assert_string_equal(log,
                      "nvmlDeviceSetPowerManagementLimit 0 200000 -> 0\n"
                      "nvmlDeviceSetPowerManagementLimit 0 300000 -> 0\n"
                      "nvmlDeviceSetPowerManagementLimit 0 200000 -> 0\n"
                      "nvmlDeviceSetPowerManagementLimit 0 300000 -> 0\n"
                      "nvmlDeviceSetPowerManagementLimit 0 200000 -> 0\n"
                      "nvmlDeviceSetPowerManagementLimit 0 300000 -> 0\n");
  free(log);
  zeus_free(control);
  zeus_free(reader);
  zeus_daemon_close(srv);
}

static void no_daemon_configured_means_no_daemon(void **state) {
  (void)state;
  zeus_devices_opts o = {.daemon = ""};
  zeus_devices *d;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  assert_string_equal(zeus_devices_backend(d), "nvml");
  zeus_devices_close(d);
  o.backend = "zeusd";
  assert_zeus_err(zeus_devices_open(&d, &o), ZEUS_ENOLIB, "ZEUSD_SOCK_PATH");
  o.daemon = "tcp:127.0.0.1:notaport";
  assert_zeus_err(zeus_devices_open(&d, &o), ZEUS_EINVAL, "daemon port");
  /* Nothing listening: a clear network error naming the socket. */
  char spec[400];
  snprintf(spec, sizeof spec, "unix:%s/nobody-here.sock", g_dir);
  o.daemon = spec;
  assert_zeus_err(zeus_devices_open(&d, &o), ZEUS_ENET, "nobody-here.sock");
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hybrid_sends_settings_to_the_daemon_and_restore_gives_them_back),
      cmocka_unit_test(second_handle_gets_busy_naming_the_holder_until_it_overrides),
      cmocka_unit_test(remote_backend_reads_everything_from_the_daemon),
      cmocka_unit_test(kept_settings_are_permanent_and_held_by_nobody),
      cmocka_unit_test(client_reconnects_after_the_daemon_restarts),
      cmocka_unit_test(perseus_controller_changes_clocks_through_the_daemon),
      cmocka_unit_test(clients_see_the_locks_made_through_the_daemon),
      cmocka_unit_test(hybrid_reset_all_clocks_is_one_daemon_request),
      cmocka_unit_test(daemon_reset_all_clocks_on_nvml_is_refused_whole_then_resets_both),
      cmocka_unit_test(daemon_token_option_overrides_zeusd_token),
      cmocka_unit_test(a_handle_with_its_lock_reset_releases_its_lease_at_close),
      cmocka_unit_test(no_daemon_configured_means_no_daemon),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, setup, NULL);
}
